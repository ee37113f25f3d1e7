"""The run-walk fatigue experiment of MuscleVAE sec. 5.2, Fig. 11.

Fatigue scale 50: run for `run` seconds, then walk for `walk` seconds (optionally run
again for `rerun` seconds to show the recovery). The legs' f0-weighted mean M_F should
rise while running and fall while walking; the late run should differ from the early run
(knee flexion range, stride length, root height, tracking error) and the difference
should shrink after the walk.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import fatigue as fat
from ..errors import ParameterError
from ..gait import knee_flexion_deg
from ..rig import GROUPS, Rig

WINDOW_S = 5.0  # seconds averaged for "early" / "late" metrics


@dataclass(frozen=True)
class RunWalkSetup:
    run_clip: str                  # the run and the walk, e.g. MASS's run.bvh and walk.bvh
    walk_clip: str
    run: float = 60.0
    walk: float = 20.0
    rerun: float = 0.0
    fatigue_scale: float = 50.0
    residual: float = 1.0
    backend: str = "mujoco"
    fps: int = 30

    def validate(self) -> "RunWalkSetup":
        for name in ("run", "walk", "rerun", "fatigue_scale", "residual"):
            v = getattr(self, name)
            if not np.isfinite(v) or v < 0:
                raise ParameterError(name, f"must be a finite number >= 0, got {v!r}")
        if self.run <= 0 or self.walk <= 0:
            raise ParameterError("run", "run and walk must both last > 0 seconds")
        return self


def window_metrics(rig: Rig, take, t0: float, t1: float) -> dict:
    """Gait figures over [t0, t1): knee flexion range (deg, mean of both legs), root height
    (m, mean), stride (m: root distance per stride period, from the knee-angle period),
    speed (m/s), joint and root tracking error."""
    sel = (take.times >= t0) & (take.times < t1)
    if sel.sum() < 3:
        return {}
    q = take.q[sel]
    knee = knee_flexion_deg(rig, q)
    t = take.times[sel]
    speed = float(np.linalg.norm(q[-1, :2] - q[0, :2]) / max(t[-1] - t[0], 1e-9))
    return dict(
        knee_range_deg=float(np.mean(knee.max(0) - knee.min(0))),
        knee_peak_flexion_deg=float(np.mean(np.abs(knee).max(0))),
        root_height_m=float(q[:, 2].mean()),
        speed_mps=speed,
        joint_err_deg=float(take.joint_err_deg[sel].mean()),
        root_err_cm=float(take.root_err_cm[sel].mean()),
    )


def run_run_walk(rig: Rig, setup: RunWalkSetup):
    """Simulate the take; returns (take, result dict with the summary figures and series)."""
    from ..control import TrackingParams
    from ..take import simulate

    setup.validate()
    clips = [(setup.run_clip, setup.run), (setup.walk_clip, setup.walk)]
    if setup.rerun > 0:
        clips.append((setup.run_clip, setup.rerun))
    take = simulate(rig, clips, fatigue=fat.FatigueParams(scale=setup.fatigue_scale), backend=setup.backend,
                    fps=setup.fps, params=TrackingParams(residual=setup.residual), label="run-walk")
    mf = take.group_mean("MF", rig)
    legs = mf[:, [GROUPS.index("right_leg"), GROUPS.index("left_leg")]].mean(1)
    t = take.times

    def at(time):
        return float(np.interp(time, t, legs))

    end = float(t[-1])
    r0, r1, w1 = 0.0, setup.run, setup.run + setup.walk
    w = min(WINDOW_S, setup.run / 3)
    early = window_metrics(rig, take, r0 + 1.0, r0 + 1.0 + w)
    late = window_metrics(rig, take, r1 - w, r1)
    summary = dict(
        fatigue_scale=setup.fatigue_scale, residual=setup.residual,
        seconds=take.meta["summary"]["seconds"], fell=take.meta["fell"], diverged=take.meta["diverged"],
        legs_MF_start=at(0.0), legs_MF_end_run=at(min(r1, end)), legs_MF_end_walk=at(min(w1, end)),
        early_run=early, late_run=late,
    )
    if setup.rerun > 0 and end > w1 + 1.0:
        summary["rerun"] = window_metrics(rig, take, w1 + 1.0, min(w1 + 1.0 + w, end))
    summary["take"] = take.meta["summary"]
    series = dict(time_s=t.tolist(), legs_MF=legs.tolist())
    return take, dict(summary=summary, setup=setup.__dict__, series=series)
