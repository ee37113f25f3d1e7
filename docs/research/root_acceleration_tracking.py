"""Experiment (issue 16, not part of the product): residual-free tracking with the root's
accelerations as unknowns, on the walk or on a pose held from one of its frames.

The tracker's torque-space solve meets the root's six rows with contact forces alone when the
residual is 0; here the solve may also change the root's acceleration by da (columns
-M[:, :6], cost w_da per (m/s^2)^2), so the joint torques it picks belong to the root motion
it plans. `--dz` lowers the reference (metres). See docs/research/balance.md for what it
measured. Run from the repository root, e.g.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python docs/research/root_acceleration_tracking.py --clip hold:52 --seconds 10
    OPENBLAS_NUM_THREADS=1 .venv/bin/python docs/research/root_acceleration_tracking.py --clip walk --w-da 1 --log
"""
import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
MOTION = ROOT.parent / "shared" / "reference" / "mass" / "motion"

from engine import fatigue as fat  # noqa: E402
from engine.control import tracking as tr  # noqa: E402
from engine.control.coordination import BIG, _bounded_lsq  # noqa: E402
from engine.simulation import MuscleCommand  # noqa: E402


def held_pose_bvh(frame: int, folder: Path) -> Path:
    """The walk's frame `frame` held for 2 s (tests/clips.hold), as a BVH file in `folder`."""
    from engine.motion import write_bvh
    from tests.clips import bundled, hold

    path = folder / f"hold{frame}.bvh"
    write_bvh(path, hold(bundled("walk"), frame))
    return path


class RootAcceleration(tr.TrackingController):
    w_da, dz, log = 1.0, 0.0, False

    def wanted_acceleration(self, q, qd, step):
        q_ref, v_ref, a_ref = self.reference(step)
        q_ref = q_ref.copy()
        q_ref[2] -= self.dz
        p = self.params
        return a_ref + p.kp * self.plan.space.diff(q, q_ref) + p.kd * (v_ref - qd), q_ref

    def act(self, sim, state):
        if not self.w_da:  # the product's solve (the root's rows met by the ground alone)
            return super().act(sim, state)
        rig = self.rig
        d = self.prepare(sim, state)
        q, q_ref, Mm, Jc, lb, ub = d.q, d.q_ref, d.M, d.Jc, d.lb, d.ub
        n_m, nc = len(lb), len(Jc)
        G = -d.A.T * (rig.muscle_f0 * d.flfv)[None, :]
        rhs = d.tau + d.A.T @ (rig.muscle_f0 * d.fpe)
        w = self.params.weights
        smooth = w.smooth if self._warm is not None else 0.0
        reg = np.concatenate([np.full(n_m, w.activation + smooth), np.full(nc, w.contact), np.full(6, self.w_da)])
        pull = np.concatenate([smooth * self._warm if self._warm is not None else np.zeros(n_m), np.zeros(nc + 6)])
        lo = np.concatenate([lb, np.zeros(nc), np.full(6, -BIG)])
        hi = np.concatenate([np.maximum(ub, lb), np.full(nc, BIG), np.full(6, BIG)])
        z, status, act = _bounded_lsq(np.hstack([G, Jc.T, -Mm[:, :6]]), rhs, reg, lo, hi, "daqp", None, pull,
                                      self._active, n_m)
        x, beta, da = z[:n_m], z[n_m:n_m + nc], z[n_m + nc:]
        self._warm, self._active = x, act
        self._planned_ground = (Jc.T @ beta)[:3]
        self.last = dict(q_ref=q_ref, contact_rows=nc, residual=np.zeros(6), activation=x, status=status)
        self.stats["decisions"] += 1
        if self.log and sim.steps % 12 == 0:
            e = self.plan.space.diff(q, q_ref)
            print(f"t={sim.time:5.2f} root rotation error {np.degrees(e[3:6]).round(1)} deg, height {100 * e[2]:+.1f} cm, "
                  f"joints {np.degrees(np.abs(e[6:])).mean():4.1f} deg, root deviation planned {np.round(da, 1)}")
        return MuscleCommand(x, None, None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clip", default="walk", help="walk, run, or hold:FRAME (a frame of the walk held)")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--w-da", type=float, default=1.0, help="cost of root acceleration deviation; 0 = the product's tracker (no such unknowns)")
    ap.add_argument("--dz", type=float, default=0.0, help="lower the reference by this much (m)")
    ap.add_argument("--fatigue-scale", type=float, default=1.0)
    ap.add_argument("--log", action="store_true")
    a = ap.parse_args()
    from engine import take as take_mod
    from engine.rig import load_rig

    RootAcceleration.w_da, RootAcceleration.dz, RootAcceleration.log = a.w_da, a.dz, a.log
    with tempfile.TemporaryDirectory() as tmp:
        clip = held_pose_bvh(int(a.clip[5:]), Path(tmp)) if a.clip.startswith("hold:") else MOTION / f"{a.clip}.bvh"
        orig = tr.TrackingController
        tr.TrackingController = RootAcceleration
        try:
            take = take_mod.simulate(load_rig(), [(clip, a.seconds)], params=tr.TrackingParams(residual=0.0),
                                     fatigue=fat.FatigueParams(scale=a.fatigue_scale), progress=lambda f: None)
        finally:
            tr.TrackingController = orig
    s = take.meta["summary"]
    print(f"{a.clip}: {'fell at %.2f s' % s['stopped_at_s'] if s['fell'] else 'stood'}, joint error "
          f"{s['joint_err_deg_mean']:.2f} deg, ground force gap {s['ground_force_gap_body_weights']} body weights")


if __name__ == "__main__":
    main()
