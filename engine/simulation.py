"""The simulation loop (DESIGN.md "One physics step"): body state -> muscles -> physics.

    sim = Simulation(rig, backend="mujoco", fatigue=FatigueParams())
    rec = sim.run(controller, seconds=10.0, record_every=4)

A controller decides the muscle-space PD action (eq. 11) every `period` physics steps and
the action is held in between (a 20 Hz policy at 120 Hz holds it for 6 steps, MuscleVAE
sec. 5.1). A recorder keeps chosen quantities every few steps. A step that produces NaN
or a body faster than `max_speed` stops the run with SimulationDiverged, which carries
what was recorded until then.
"""
from __future__ import annotations

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
    """Decides the muscle action (per muscle, eq. 11) from the current state."""

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
    """The physics produced NaN or an impossible speed; `recording` holds the run so far."""

    def __init__(self, message: str, recording: "Recording"):
        super().__init__(message)
        self.recording = recording


@dataclass
class Recording:
    """Per-sample arrays, stacked along the first axis by `finish()`."""

    times: list = field(default_factory=list)
    data: dict = field(default_factory=dict)

    def add(self, t: float, values: dict) -> None:
        self.times.append(t)
        for k, v in values.items():
            self.data.setdefault(k, []).append(np.array(v, copy=True))

    def finish(self) -> "Recording":
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

    def _check(self, recording: Recording) -> None:
        if self.physics.fault:  # the engine reset a state it found unsound: what follows is not this take
            raise SimulationDiverged(f"simulation diverged at t = {self.time:.3f} s (step {self.steps}): "
                                     f"{self.physics.fault}; kept {len(recording.times)} samples", recording.finish())
        b = self.diverged_body()
        if b is not None:
            speed = float(np.linalg.norm(self.state.linvel[b]))
            what = "NaN" if not np.isfinite(speed) else f"speed {speed:.1f} m/s > {self.max_speed:g}"
            raise SimulationDiverged(
                f"simulation diverged at t = {self.time:.3f} s (step {self.steps}): body "
                f"'{self.rig.body_names[b]}' {what}; kept {len(recording.times)} samples",
                recording.finish())

    def run(self, controller: Controller, seconds: float, record_every: int = 1,
            probe: Probe = default_probe, label: str = "simulating", stop=None) -> Recording:
        """Run for `seconds`, recording `probe(sim, step_result)` every `record_every` steps.
        `stop` (engine.interrupt.StopFlag) is read once per step: once requested, the run ends
        there and returns what it recorded (the last step is always recorded)."""
        if not (np.isfinite(seconds) and seconds >= 0):
            raise ParameterError("seconds", f"{seconds!r}: expected a duration >= 0")
        period = int(getattr(controller, "period", 1))
        if period < 1:
            raise ParameterError("period", f"controller period {period} must be >= 1 step")
        rec = Recording()
        n = int(round(seconds / self.dt))
        action = None
        stop = stop or StopFlag()
        with Progress(label, n) as bar:
            for i in range(n):
                last = i == n - 1 or stop.requested
                if action is None or self.steps % period == 0:
                    action = controller.act(self, self.state)
                    if not isinstance(action, MuscleCommand):
                        action = np.asarray(action, dtype=float)
                res = self.step(action)
                if i % record_every == 0 or last:
                    rec.add(self.time, probe(self, res))
                self._check(rec)
                bar.update(i)
                if last:
                    break
        return rec.finish()
