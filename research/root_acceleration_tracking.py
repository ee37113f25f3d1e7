"""Experiment (issue 16, not part of the product): residual-free tracking with the root's
accelerations as unknowns, on the walk or on a pose held from one of its frames.

The tracker's torque-space solve meets the root's six rows with contact forces alone when the
residual is 0; here the solve may also change the root's acceleration by da (columns
-M[:, :6], cost w_da per (m/s^2)^2), so the joint torques it picks belong to the root motion
it plans. `--com W` adds a centre-of-mass task on the ground force: sum of horizontal
contact forces = m (kp (c* - c) + kd (v*_c - v_c)) (ankle strategy), with c* by `--com-target`:
`reference`, the reference's COM offset from its feet in contact carried to the character's
feet in contact; `support`, the centroid of MuJoCo's contact points; `clipped`, the first
clipped into the contact points' bounding box less 1 cm. `--dz` lowers the
reference (metres). See docs/research/balance.md for what it measured. Run from the repository root, e.g.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python research/root_acceleration_tracking.py --clip hold:52 --seconds 10
    OPENBLAS_NUM_THREADS=1 .venv/bin/python research/root_acceleration_tracking.py --clip walk --w-da 1 --log
"""
import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MOTION = ROOT.parent / "shared" / "reference" / "mass" / "motion"

from engine import fatigue as fat  # noqa: E402
from engine.control import tracking as tr  # noqa: E402
from engine.control.coordination import BIG, bounded_lsq  # noqa: E402
from engine.simulation import MuscleCommand  # noqa: E402


def held_pose_bvh(frame: int, folder: Path) -> Path:
    """The walk's frame `frame` held for 2 s (tests/clips.hold), as a BVH file in `folder`."""
    from engine.motion import write_bvh
    from tests.clips import bundled, hold

    path = folder / f"hold{frame}.bvh"
    write_bvh(path, hold(bundled("walk"), frame))
    return path


def simulate_with(controller, clips, params, fatigue_scale):
    """engine.take.simulate with `controller` (a TrackingController subclass) in place of the
    product's tracking controller."""
    from engine import take as take_mod
    from engine.rig import load_rig

    from engine.control import factory

    orig = factory.tracking_controller
    factory.tracking_controller = controller  # in place of the product's choice (tracker or stand controller)
    try:
        return take_mod.simulate(load_rig(), clips, params=params, fatigue=fat.FatigueParams(scale=fatigue_scale),
                                 progress=lambda f: None)
    finally:
        factory.tracking_controller = orig


class RootAcceleration(tr.TrackingController):
    w_da, dz, log, w_com, kp_com, kd_com, com_target = 1.0, 0.0, False, 0.0, 20.0, 9.0, "reference"

    def wanted_acceleration(self, q, qd, step):
        q_ref, v_ref, a_ref = self.reference(step)
        q_ref = q_ref.copy()
        q_ref[2] -= self.dz
        self._v_ref = v_ref
        p = self.params
        return a_ref + p.kp * self.plan.space.diff(q, q_ref) + p.kd * (v_ref - qd), q_ref

    def act(self, sim, state):
        if not self.w_da:  # the product's solve (the root's rows met by the ground alone)
            return super().act(sim, state)
        rig = self.rig
        d = self.prepare(sim, state)
        q, q_ref, Mm, Jc, lb, ub = d.q, d.q_ref, d.M, d.Jc, d.lb, d.ub
        self._last_jc = Jc
        n_m, nc = len(lb), len(Jc)
        G = -d.A.T * (rig.muscle_f0 * d.flfv)[None, :]
        rhs = d.tau + d.A.T @ (rig.muscle_f0 * d.fpe)
        w = self.params.weights
        smooth = w.smooth if self._warm is not None else 0.0
        reg = np.concatenate([np.full(n_m, w.activation + smooth), np.full(nc, w.contact), np.full(6, self.w_da)])
        pull = np.concatenate([smooth * self._warm if self._warm is not None else np.zeros(n_m), np.zeros(nc + 6)])
        lo = np.concatenate([lb, np.zeros(nc), np.full(6, -BIG)])
        hi = np.concatenate([np.maximum(ub, lb), np.full(nc, BIG), np.full(6, BIG)])
        rows = np.hstack([G, Jc.T, -Mm[:, :6]])
        com = self.com_task(sim, q_ref, n_m, nc) if self.w_com and nc else None
        if com is not None:
            rows, rhs = np.vstack([rows, com[0]]), np.concatenate([rhs, com[1]])
        z, status, act = bounded_lsq(rows, rhs, reg, lo, hi, "daqp", None, pull, self._active, n_m)
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


def com_task(self, sim, q_ref, n_m, nc):
    """Rows (2, n_m + nc + 6) and targets of the centre-of-mass task (see the docstring)."""
    import mujoco

    rig, m, d = self.rig, self.model, self.data
    touching = sim.physics.contacts()
    feet = [s for s in "RL" if touching[[rig.body_index(f"{n}{s}") for n in ("Talus", "FootThumb", "FootPinky")]].any()]
    if not feet:
        return None
    if not hasattr(self, "_ref_data"):
        self._ref_data = mujoco.MjData(self.plan.space.model)
    rm, rd = self.plan.space.model, self._ref_data
    rd.qpos[:] = q_ref
    mujoco.mj_kinematics(rm, rd)
    mujoco.mj_comPos(rm, rd)
    talus = [rig.body_index("Talus" + s) + 1 for s in feet]
    target = d.xipos[talus, :2].mean(0) + rd.subtree_com[1, :2] - rd.xipos[talus, :2].mean(0)
    points = np.array([d.contact[i].pos[:2] for i in range(d.ncon) if d.contact[i].dist < 0.002]).reshape(-1, 2)
    if self.com_target == "support" and len(points):
        target = points.mean(0)
    elif self.com_target == "clipped" and len(points):
        lo, hi = points.min(0) + 0.01, points.max(0) - 0.01
        target = np.clip(target, np.minimum(lo, hi), np.maximum(lo, hi))
    J, Jr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
    mujoco.mj_jacSubtreeCom(m, d, J, 1)
    mujoco.mj_jacSubtreeCom(rm, rd, Jr, 1)
    v, v_ref = (J @ sim.physics.get_q()[1])[:2], (Jr @ self._v_ref)[:2]
    a = self.kp_com * (target - d.subtree_com[1, :2]) + self.kd_com * (v_ref - v)
    rows = np.zeros((2, n_m + nc + 6))
    rows[:, n_m:n_m + nc] = self._last_jc.T[:2]
    w = np.sqrt(self.w_com)
    return w * rows, w * rig.mass_kg * a


RootAcceleration.com_task = com_task


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clip", default="walk", help="walk, run, or hold:FRAME (a frame of the walk held)")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--w-da", type=float, default=1.0, help="cost of root acceleration deviation; 0 = the product's tracker (no such unknowns)")
    ap.add_argument("--dz", type=float, default=0.0, help="lower the reference by this much (m)")
    ap.add_argument("--com", type=float, default=0.0, help="weight of the centre-of-mass task (0 = none)")
    ap.add_argument("--com-target", choices=("reference", "support", "clipped"), default="reference")
    ap.add_argument("--fatigue-scale", type=float, default=1.0)
    ap.add_argument("--log", action="store_true")
    a = ap.parse_args()
    RootAcceleration.w_da, RootAcceleration.dz, RootAcceleration.log = a.w_da, a.dz, a.log
    RootAcceleration.w_com, RootAcceleration.com_target = a.com, a.com_target
    with tempfile.TemporaryDirectory() as tmp:
        clip = held_pose_bvh(int(a.clip[5:]), Path(tmp)) if a.clip.startswith("hold:") else MOTION / f"{a.clip}.bvh"
        take = simulate_with(RootAcceleration, [(clip, a.seconds)], tr.TrackingParams(residual=0.0), a.fatigue_scale)
    s = take.meta["summary"]
    print(f"{a.clip}: {'fell at %.2f s' % s['stopped_at_s'] if s['fell'] else 'stood'}, joint error "
          f"{s['joint_err_deg_mean']:.2f} deg, ground force gap {s['ground_force_gap_body_weights']} body weights")


if __name__ == "__main__":
    main()
