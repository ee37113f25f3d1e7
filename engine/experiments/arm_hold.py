"""The arm-holding experiment of MuscleVAE sec. 5.2, Fig. 9-10.

The pelvis and trunk are pinned; every muscle's PD target is its T-pose length (action 0),
so the arms are held out at horizontal abduction. After `hold` seconds the arm muscles
relax (their PD targets are set far beyond reach, so they ask for no force) for `rest`
seconds, then hold again for `rehold` seconds. Fatigue lowers the shoulder muscles'
reachable activation during the hold and the arms sink; rest lets M_F decay and the
re-hold lifts them again.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import fatigue as fat
from .. import kinematics as kin
from ..errors import ParameterError
from ..rig import GROUPS, Rig
from ..simulation import Simulation

PINNED = ("Pelvis", "Spine", "Torso")
RELAXED_ACTION = 1.0  # target = 2 x T-pose length: out of reach, so the PD asks for nothing
RECORD_HZ = 10


@dataclass(frozen=True)
class ArmHoldSetup:
    hold: float = 120.0
    rest: float = 60.0
    rehold: float = 60.0
    fatigue_scale: float = 1.0
    backend: str = "mujoco"

    def validate(self) -> "ArmHoldSetup":
        for name in ("hold", "rest", "rehold", "fatigue_scale"):
            v = getattr(self, name)
            if not np.isfinite(v) or v < 0:
                raise ParameterError(name, f"must be a finite number >= 0, got {v!r}")
        if self.hold <= 0:
            raise ParameterError("hold", "must be > 0 seconds")
        return self


def muscle_sets(rig: Rig) -> dict[str, np.ndarray]:
    """Muscle indices by the arm joint they span (a moment arm above 2 mm at rest):
    shoulder (the glenohumeral ball joint), upper arm (the elbow), forearm (the wrist),
    both sides together. `arm` is every muscle of the two arm groups."""
    root_pos, local_rot = kin.q_to_pose(rig, kin.rest_q(rig))
    A = np.abs(kin.moment_arms(rig, root_pos, local_rot))

    def spanning(body):
        cols = [slice(rig.dof_start[b], rig.dof_start[b + 1]) for b in
                (rig.body_index(body + "R"), rig.body_index(body + "L"))]
        return np.flatnonzero(np.max(np.concatenate([A[:, c] for c in cols], axis=1), axis=1) > 0.002)

    arm_groups = [GROUPS.index("right_arm"), GROUPS.index("left_arm")]
    return dict(shoulder=spanning("Arm"), upper_arm=spanning("ForeArm"), forearm=spanning("Hand"),
                arm=np.flatnonzero(np.isin(rig.muscle_group, arm_groups)))


class ArmHoldController:
    """Action 0 (hold the T-pose lengths) for every muscle; the arm muscles relax while resting."""

    period = 1

    def __init__(self, rig: Rig, setup: ArmHoldSetup):
        self.setup = setup
        self.hold = np.zeros(rig.num_muscles)
        self.rest = self.hold.copy()
        self.rest[muscle_sets(rig)["arm"]] = RELAXED_ACTION

    def act(self, sim, state):
        t = sim.time
        resting = self.setup.hold <= t < self.setup.hold + self.setup.rest
        return self.rest if resting else self.hold


def arm_elevation_deg(rig: Rig, body_rot: np.ndarray) -> np.ndarray:
    """Elevation of each upper arm (shoulder -> elbow) above the horizontal, degrees (right, left)."""
    out = []
    for side in "RL":
        a, f = rig.body_index("Arm" + side), rig.body_index("ForeArm" + side)
        d0 = rig.joint_pos[f] - rig.joint_pos[a]
        d = body_rot[..., a, :, :] @ rig.body_rest_rot[a].T @ (d0 / np.linalg.norm(d0))
        out.append(np.degrees(np.arcsin(np.clip(d[..., 2], -1, 1))))
    return np.stack(out, axis=-1)


def run_arm_hold(rig: Rig, setup: ArmHoldSetup, stop=None) -> dict:
    """Run the experiment; returns the time series and summary figures (JSON-ready).
    `stop` (engine.interrupt.StopFlag) ends it early: the series then run to where it
    stopped, the summary has partial = True and None for the phases it did not reach."""
    setup.validate()
    sim = Simulation(rig, setup.backend, fatigue=fat.FatigueParams.arm_hold(setup.fatigue_scale),
                     pinned=PINNED, ground=False)
    sets = muscle_sets(rig)
    f0 = rig.muscle_f0

    def probe(sim, res):
        out = dict(elevation=arm_elevation_deg(rig, sim.state.rot))
        for name in ("shoulder", "upper_arm", "forearm"):
            idx = sets[name]
            w = f0[idx] / f0[idx].sum()
            out[f"{name}_MA"] = w @ res.fatigue.MA[idx]
            out[f"{name}_MF"] = w @ res.fatigue.MF[idx]
        return out

    total = setup.hold + setup.rest + setup.rehold
    rec = sim.run(ArmHoldController(rig, setup), total, record_every=int(120 / RECORD_HZ), probe=probe,
                  label="arm-hold", stop=stop)
    t = rec.times
    elev = rec["elevation"].mean(axis=1)
    partial = sim.time < total - 0.5 * sim.dt

    def at(time):
        return int(np.clip(np.searchsorted(t, time), 0, len(t) - 1))

    def reached(series, time, i):  # a value at a phase the run got to, else None
        return float(series[i]) if t[-1] >= time - 1e-9 else None

    start = at(2.0)  # after the arms have settled into the hold
    end_hold = at(setup.hold) - 1
    end_rest = at(setup.hold + setup.rest) - 1
    rehold = at(setup.hold + setup.rest + min(5.0, setup.rehold))  # "early in the re-hold"
    summary = dict(
        backend=setup.backend,
        fatigue_scale=setup.fatigue_scale,
        elevation_start_deg=reached(elev, min(2.0, total), start),
        elevation_end_hold_deg=reached(elev, setup.hold, end_hold),
        elevation_rehold_deg=reached(elev, setup.hold + setup.rest + min(5.0, setup.rehold), rehold) if setup.rehold > 0 else None,
        elevation_min_deg=float(elev.min()),
        shoulder_MF_end_hold=reached(rec["shoulder_MF"], setup.hold, end_hold),
        shoulder_MF_end_rest=reached(rec["shoulder_MF"], setup.hold + setup.rest, end_rest) if setup.rest > 0 else None,
        shoulder_muscles=int(len(sets["shoulder"])),
        partial=bool(partial), simulated_seconds=round(sim.time, 4),
    )
    series = dict(time_s=t.tolist(), elevation_right_deg=rec["elevation"][:, 0].tolist(),
                  elevation_left_deg=rec["elevation"][:, 1].tolist())
    for k in ("shoulder_MA", "shoulder_MF", "upper_arm_MA", "upper_arm_MF", "forearm_MA", "forearm_MF"):
        series[k] = rec[k].tolist()
    return dict(summary=summary, setup=setup.__dict__, series=series)
