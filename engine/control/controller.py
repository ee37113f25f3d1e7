"""What every controller of a take offers: engine.take plays the tracker, the stand
controller, the balance planner and a policy alike through these methods, and the planner's
rollouts, DAgger and the training collector put a controller back with snapshot / restore
(Simulation.snapshot keeps the rest).

A controller decides every `period` physics steps (`act`), the command held in between. The
defaults here are a controller's that has nothing to do at that point.
"""
from __future__ import annotations

from types import MappingProxyType


class Controller:
    """The interface; engine.control.factory.make_controller builds the one a take asks for."""

    period: int = 1  # physics steps between decisions
    plan = None  # the MotionPlan it plays, if any (engine.control.plan)
    # what its decisions cost (the tracker's: prepare_s, solve_s, decisions, solver_steps,
    # solver_fallbacks), for the take's timing; none here
    stats = MappingProxyType({})

    def act(self, sim, state):
        """The command for the coming `period` steps: a PD action (eq. 11) or a MuscleCommand."""
        raise NotImplementedError

    def start(self, sim) -> None:
        """Before the take's first step (the stand controller settles into its balanced pose)."""

    def close(self) -> None:
        """Release what it holds (the balance planner's worker processes); called once a take ends."""

    def advance_pace(self, sim) -> None:
        """Called every physics step, whether or not it decides (the tracker's pace governor)."""

    def take_steps(self, sim) -> int:
        """How many physics steps the take runs, as it stands at the simulation's step: the
        plan's (the tracker's runs on while a clip its pace held back has not played to its end)."""
        return self.plan.total_steps

    def reference_now(self, sim):
        """(q, qdot, qddot) of the reference at the simulation's step as this controller plays
        it: the plan's own timing unless the controller changes it (the pace governor)."""
        return self.plan.sample(sim.steps)

    def snapshot(self) -> dict:
        """Its own state a decision reads, for `restore` (copies)."""
        return {}

    def restore(self, snap: dict) -> None:
        """Back to a `snapshot`."""

    def report(self) -> dict:
        """What the take's metadata keeps of it, by key (engine.take: ground_force_gap_N,
        pace, stand, balance); the keys it does not give are None there."""
        return {}
