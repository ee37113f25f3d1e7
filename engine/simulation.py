"""The simulation loop (DESIGN.md "One physics step"): body state -> muscles -> physics.

    sim = Simulation(rig, backend="mujoco", fatigue=FatigueParams())
    rec = sim.run(controller, seconds=10.0, record_every=4)

A controller decides the muscle-space PD action (eq. 11) every `period` physics steps and
the action is held in between (a 20 Hz policy at 120 Hz holds it for 6 steps, MuscleVAE
sec. 5.1). A recorder keeps chosen quantities after chosen steps (every few, or a take's
frames) and may end the run (a fall). A step that produces NaN or a body faster than
`max_speed` stops the run with SimulationDiverged, which carries what was recorded before it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from . import fatigue as fat
from .errors import ParameterError, SinewError
from .interrupt import StopFlag
from .muscle_step import MuscleStep, MuscleSystem, PDGains
from .physics import BodyState, make_backend
from .progress import Progress
from .rig import Rig

PHYSICS_HZ = 120.0


class Controller(Protocol):
    """Decides the muscle action (per muscle, eq. 11) from the current state. Its
    `advance_pace(sim)`, where it has one (engine.control.controller.Controller), is called
    every step before the decision."""

    period: int  # physics steps between decisions; the action is held in between

    def act(self, sim: "Simulation", state: BodyState) -> np.ndarray: ...


@dataclass
class MuscleCommand:
    """What a controller may return instead of a PD action: activations it wants (clipped
    to the 3CC-r bounds like a PD activation) and an optional residual wrench on the root
    body (world frame, force at its centre of mass and torque), both held until the next
    decision. The residual is the OpenSim-style 'hand of god' a tracking controller may use
    for balance; it is reported, never hidden."""

    activation: np.ndarray
    residual_force: np.ndarray | None = None  # (3,) on body 0
    residual_torque: np.ndarray | None = None  # (3,)


class SimulationDiverged(SinewError):
    """The physics produced NaN or an impossible speed; `recording` holds the run before the
    step that diverged, `reason` says where and why (the message adds what was kept)."""

    def __init__(self, reason: str, recording: "Recording"):
        super().__init__(f"{reason}; kept {len(recording.times)} samples")
        self.reason, self.recording = reason, recording


@dataclass
class Recording:
    """Per-sample arrays, stacked along the first axis by `finish()`; and how the run that
    made it ended and where its time went (Simulation.run)."""

    times: list = field(default_factory=list)
    data: dict = field(default_factory=dict)
    stop_reason: str = ""  # why the run ended before its length ("": it ran it all)
    interrupted: bool = False  # ended by the stop flag (else by the recorder, e.g. a fall)
    controller_s: float = 0.0  # seconds in the controller's decisions
    step_s: float = 0.0  # seconds in the muscle and physics steps (before_step included)

    def add(self, t: float, values: dict) -> None:
        self.times.append(t)
        for k, v in values.items():
            self.data.setdefault(k, []).append(np.array(v, copy=True))

    def finish(self) -> "Recording":
        if isinstance(self.times, list):
            self.times = np.asarray(self.times)
            self.data = {k: np.stack(v) for k, v in self.data.items()}
        return self

    def __getitem__(self, key: str) -> np.ndarray:
        return self.data[key]


Probe = Callable[["Simulation", MuscleStep], dict]


def default_probe(sim: "Simulation", res: MuscleStep) -> dict:
    """Body poses, activations, forces and the fatigue compartments."""
    s = sim.state
    return dict(body_pos=s.pos, body_rot=s.rot, activation=res.activation, force=res.force,
                MA=res.fatigue.MA, MR=res.fatigue.MR, MF=res.fatigue.MF)


class Recorder(Protocol):
    """What a run keeps (Simulation.run)."""

    def after_step(self, sim: "Simulation", res: MuscleStep) -> str | None:
        """After each sound physics step; a reason returned ends the run there."""

    def finish(self, sim: "Simulation | None" = None, res: MuscleStep | None = None) -> Recording:
        """What the run returns; given its last step (`sim` unchanged since) unless it diverged."""


class Sampler:
    """Keeps probe(sim, step_result) after a run's first step, every `every`-th after it and
    its last; or, given `at`, after exactly those physics steps (sim.steps, increasing), or
    those for which `at(sim.steps)` is true.
    `ends(sim, sample)`, after each sample kept, may return a reason to end the run (a fall)."""

    def __init__(self, probe: Probe = default_probe, every: int = 1, at=None, ends=None):
        self.recording = Recording()
        self.probe, self.every, self.ends = probe, int(every), ends
        self.at = at if at is None or callable(at) else [int(k) for k in at]
        self._seen = self._next = 0
        self._kept_last = False

    def after_step(self, sim: "Simulation", res: MuscleStep) -> str | None:
        if self.at is None:
            due = self._seen % self.every == 0
            self._seen += 1
        elif callable(self.at):
            due = bool(self.at(sim.steps))
        else:
            due = self._next < len(self.at) and sim.steps == self.at[self._next]
            self._next += due
        self._kept_last = due
        return self._keep(sim, res) if due else None

    def _keep(self, sim, res) -> str | None:
        sample = self.probe(sim, res)
        self.recording.add(sim.time, sample)
        return self.ends(sim, sample) if self.ends is not None else None

    def finish(self, sim=None, res=None) -> Recording:
        if res is not None and self.at is None and not self._kept_last:
            self._keep(sim, res)
        return self.recording.finish()


class Simulation:
    """A character: its rig, a physics backend, its muscles and their fatigue state.

    compiled: the muscle step's implementation (MuscleSystem; None: the compiled one when
    it loads). backend_options: further keyword arguments for the backend (make_backend).
    """

    def __init__(self, rig: Rig, backend: str = "mujoco", fatigue: fat.FatigueParams | None = None,
                 gains: PDGains | None = None, dt: float = 1.0 / PHYSICS_HZ,
                 joint_damping: float = 10.0, pinned=(), ground: bool = True,
                 max_speed: float = 50.0, compiled: bool | None = None, backend_options: dict | None = None):
        if not (np.isfinite(max_speed) and max_speed > 0):
            raise ParameterError("max_speed", f"{max_speed!r}: expected a positive speed in m/s")
        self.rig = rig
        self.dt = float(dt)
        self.physics = make_backend(backend, rig, dt=self.dt, joint_damping=joint_damping,
                                    pinned=pinned, ground=ground, **(backend_options or {}))
        if ground and not self.physics.pinned[0]:
            self.place_on_ground()
        self.muscles = MuscleSystem(rig, fatigue, self.dt, gains, compiled)
        self.fatigue = fat.FatigueState.fresh(rig.num_muscles)
        self.max_speed = float(max_speed)
        self.steps = 0
        self.state = self.physics.body_state()
        self.residual_force = np.zeros(3)  # root residual of the last step (MuscleCommand)
        self.residual_torque = np.zeros(3)

    def place_on_ground(self, clearance: float = 0.001) -> None:
        """Lift (or lower) the character so its lowest box corner is `clearance` above z = 0.

        The rest pose's foot boxes reach 4 cm below the soles; starting there, the ground
        would kick the character up on the first step."""
        s = self.physics.body_state()
        s.pos = s.pos + [0.0, 0.0, clearance - self.physics.lowest_point()]
        self.physics.set_body_state(s)
        self.state = self.physics.body_state()

    def start_at(self, q, qdot) -> np.ndarray:
        """Put the character at (q, qdot), lifted to 1 mm above the floor where the pose dips
        below it (a reference's feet dip a few mm); returns the q it was put at. Unlike
        place_on_ground, a pose clear of the floor stays where it is (a clip may start in the air)."""
        self.physics.set_q(q, qdot)
        low = self.physics.lowest_point()
        if low < 0:
            q = np.array(q, dtype=float)
            q[2] += 0.001 - low
            self.physics.set_q(q, qdot)
        self.state = self.physics.body_state()
        return q

    @property
    def time(self) -> float:
        return self.steps * self.dt

    def snapshot(self) -> dict:
        """The simulation's whole state (the physics', the 3CC-r compartments, the step count
        and the last residual) for `restore`: a rollout, a perturbed step or a training episode
        starts from one and the take goes on as if it had not happened."""
        return dict(physics=self.physics.snapshot(), fatigue=self.fatigue.copy(), steps=self.steps,
                    residual=(self.residual_force.copy(), self.residual_torque.copy()))

    def restore(self, snap: dict) -> None:
        """Back to a `snapshot` (which stays usable: restoring copies from it)."""
        self.physics.restore(snap["physics"])
        self.fatigue = snap["fatigue"].copy()
        self.steps = snap["steps"]
        self.residual_force, self.residual_torque = (v.copy() for v in snap["residual"])
        self.state = self.physics.body_state()

    def step(self, action) -> MuscleStep:
        """One physics step under a held muscle action (PD action array, eq. 11) or a
        MuscleCommand (wanted activations and a root residual wrench)."""
        s = self.state
        if isinstance(action, MuscleCommand):
            res = self.muscles.step_activation(s.rot, s.pos, s.linvel, s.angvel, action.activation,
                                               self.fatigue)
            force, torque = res.body_force, res.body_torque
            rf, rt = action.residual_force, action.residual_torque
            if rf is not None or rt is not None:
                force, torque = force.copy(), torque.copy()
                self.residual_force = np.zeros(3) if rf is None else np.asarray(rf, dtype=float)
                self.residual_torque = np.zeros(3) if rt is None else np.asarray(rt, dtype=float)
                force[0] += self.residual_force
                torque[0] += self.residual_torque
            else:
                self.residual_force, self.residual_torque = np.zeros(3), np.zeros(3)
            self.physics.apply_wrench(force, torque)
        else:
            res = self.muscles.step(s.rot, s.pos, s.linvel, s.angvel, action, self.fatigue)
            self.physics.apply_wrench(res.body_force, res.body_torque)
        self.physics.step()
        self.fatigue = res.fatigue
        self.steps += 1
        self.state = self.physics.body_state()
        return res

    def diverged_body(self) -> int | None:
        """The first body whose position is not finite or whose speed is NaN or above
        max_speed (the physics has diverged); None while every body is sound."""
        s = self.state
        speed = np.linalg.norm(s.linvel, axis=1)
        bad = ~np.isfinite(s.pos).all(1) | ~np.isfinite(speed) | (speed > self.max_speed)
        return int(np.flatnonzero(bad)[0]) if bad.any() else None

    def divergence(self) -> str | None:
        """Why the physics has diverged, or None while it is sound: the engine reset a state
        it found unsound (what follows is not this run), or a body is not finite or too fast."""
        if self.physics.fault:
            what = self.physics.fault
        else:
            b = self.diverged_body()
            if b is None:
                return None
            speed = float(np.linalg.norm(self.state.linvel[b]))
            what = f"body '{self.rig.body_names[b]}' " + (
                "NaN" if not np.isfinite(speed) else f"speed {speed:.1f} m/s > {self.max_speed:g}")
        return f"simulation diverged at t = {self.time:.3f} s (step {self.steps}): {what}"

    def run(self, controller: Controller, seconds: float, record_every: int = 1,
            probe: Probe = default_probe, label: str = "simulating", stop=None, *,
            recorder: Recorder | None = None, before_decision=None, before_step=None,
            progress=None, until=None) -> Recording:
        """Run for `seconds`, recording `probe(sim, step_result)` every `record_every` steps
        and after the last, or what `recorder` keeps (a Sampler; it may end the run).

        Each step: the controller's advance_pace(sim) if it has one; at a decision
        `before_decision(sim)` (a heading goal), then controller.act; `before_step(sim)` (the
        pushes); the step; the divergence check (SimulationDiverged); the recorder.
        `stop` (engine.interrupt.StopFlag) is read once before each step: once requested, the
        run ends there. `progress(fraction)`, when given, is called about 100 times and
        replaces the terminal bar. `until(sim)`, when given, is read after every step: the
        simulation step count at which the run ends, if later than `seconds` from its start (a
        take that runs on: Controller.take_steps). The Recording says how the run ended and
        its timing."""
        if not (np.isfinite(seconds) and seconds >= 0):
            raise ParameterError("seconds", f"{seconds!r}: expected a duration >= 0")
        period = int(getattr(controller, "period", 1))
        if period < 1:
            raise ParameterError("period", f"controller period {period} must be >= 1 step")
        recorder = recorder or Sampler(probe, record_every)
        pace = getattr(controller, "advance_pace", None)
        stop = stop or StopFlag()
        n = int(round(seconds / self.dt))
        first = self.steps
        every = max(n // 100, 1)
        clock = time.perf_counter
        t_ctrl = t_step = 0.0
        action = res = None
        ended, interrupted = "", False
        with Progress(label, n) as bar:
            bar.enabled = bar.enabled and progress is None
            i = 0
            while i < n:
                if stop.requested:  # one attribute read per step (engine.interrupt)
                    ended, interrupted = f"{stop.reason} at t = {self.time:.2f} s", True
                    break
                if pace is not None:
                    pace(self)
                if action is None or self.steps % period == 0:
                    if before_decision is not None:
                        before_decision(self)
                    t0 = clock()
                    action = controller.act(self, self.state)
                    if not isinstance(action, MuscleCommand):
                        action = np.asarray(action, dtype=float)
                    t_ctrl += clock() - t0
                t0 = clock()
                if before_step is not None:
                    before_step(self)
                res = self.step(action)
                t_step += clock() - t0
                why = self.divergence()
                if why is not None:
                    rec = recorder.finish()
                    rec.controller_s, rec.step_s = t_ctrl, t_step
                    raise SimulationDiverged(why, rec)
                ended = recorder.after_step(self, res) or ""
                if ended:
                    break
                bar.update(i)
                if progress is not None and i % every == 0:
                    progress(min(i / n, 1.0))
                i += 1
                if until is not None:
                    n = max(n, until(self) - first)
        rec = recorder.finish(self, res)
        rec.stop_reason, rec.interrupted, rec.controller_s, rec.step_s = ended, interrupted, t_ctrl, t_step
        return rec
