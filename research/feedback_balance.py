"""Experiment (issues 16 and 20, not part of the product): a balance layer that costs a
tracker step - Lee, Park, Kwon and Lee 2014's data-driven feedback on the reference.

The tracker (engine.control.tracking) plays the clip with no residual; before each decision
the reference is edited from the centre of mass's error against the reference's own centre
of mass (position d and velocity v, horizontal, in the pelvis's heading frame):

    swing hip  pitch, roll  += -(c_d d + c_v v)   (forward, sideways)   SIMBICON's foot placement
    stance ankle pitch, roll += +(a_d d + a_v v)   (forward, sideways)   an ankle strategy
    spine pitch, roll        += -(s_d d + s_v v)   (forward, sideways)                        (optional) trunk lean against it

Which foot swings is read from the reference (the higher foot; blended over 2 cm). Pelvis
frame conventions: the rig's joint frames are world-aligned at rest, x the character's left,
-y forward; +pitch at the hip swings the leg back, +roll swings it to the character's right;
+pitch at the ankle points the toe down (with the foot planted: the shank back), +roll (planted)
tilts the shank to the right; +pitch of the spine leans forward, +roll to the left. Reports the time to fall (or the take's end) and the
mean joint error. Run from the repository root:

    OPENBLAS_NUM_THREADS=1 .venv/bin/python research/feedback_balance.py --seconds 10 \
        --grid c_v=0,0.1,0.2,0.4 c_d=0,0.5,1
"""
import argparse
import itertools
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from engine.control.tracking import TrackingParams  # noqa: E402
from engine.fatigue import FatigueParams  # noqa: E402
from engine.rig import load_rig  # noqa: E402
from engine.take import simulate  # noqa: E402

MOTION = REPO.parent / "shared" / "reference" / "mass" / "motion"
GAINS = dict(c_d=0.0, c_v=0.0, c_dx=None, c_vx=None, a_d=0.0, a_v=0.0, s_d=0.0, s_v=0.0, lim=0.4)


class Feedback:
    """The feedback offsets of the module docstring for one controller (its rig, its model's
    data at the physics state, its plan's reference model)."""

    gains = dict(GAINS)

    def __init__(self, ctl):
        rig = ctl.rig
        dof = lambda b, k: int(rig.dof_start[rig.body_index(b)]) + k  # noqa: E731
        self.hip = {s: (dof("Femur" + s, 0), dof("Femur" + s, 1)) for s in "RL"}
        self.ankle = {s: (dof("Talus" + s, 0), dof("Talus" + s, 1)) for s in "RL"}
        self.spine = (dof("Spine", 0), dof("Spine", 1))
        self.talus = {s: rig.body_index("Talus" + s) + 1 for s in "RL"}
        self._rm = ctl.plan.space.model
        self._rd = mujoco.MjData(self._rm)
        self._jc = np.zeros((3, self._rm.nv))
        self.nv = rig.num_dofs

    def _com(self, m, d, qvel):
        mujoco.mj_jacSubtreeCom(m, d, self._jc, 1)
        return d.subtree_com[1].copy(), self._jc @ qvel

    def __call__(self, ctl, q_ref, v_ref) -> np.ndarray:
        g = self.gains
        rd = self._rd
        rd.qpos[:] = q_ref
        mujoco.mj_kinematics(self._rm, rd)
        mujoco.mj_comPos(self._rm, rd)
        c_ref, cv_ref = self._com(self._rm, rd, v_ref)
        zR, zL = rd.xpos[self.talus["R"], 2], rd.xpos[self.talus["L"], 2]
        m, d = ctl.model, ctl.data
        c, cv = self._com(m, d, d.qvel)
        # heading frame of the simulated pelvis: forward = -y of its yaw-only frame
        R = d.xmat[1].reshape(3, 3)
        fwd = -R[:2, 1] / max(np.linalg.norm(R[:2, 1]), 1e-9)
        left = np.array([-fwd[1], fwd[0]])
        e, ev = (c - c_ref)[:2], (cv - cv_ref)[:2]
        d_f, d_l, v_f, v_l = e @ fwd, e @ left, ev @ fwd, ev @ left
        cdx = g["c_d"] if g["c_dx"] is None else g["c_dx"]
        cvx = g["c_v"] if g["c_vx"] is None else g["c_vx"]
        wR = 1.0 / (1.0 + np.exp(-(zR - zL) / 0.01))  # right foot higher: right swing
        dv = np.zeros(self.nv)
        hip_p, hip_r = -(g["c_d"] * d_f + g["c_v"] * v_f), -(cdx * d_l + cvx * v_l)
        ank_p, ank_r = g["a_d"] * d_f + g["a_v"] * v_f, g["a_d"] * d_l + g["a_v"] * v_l
        lim = g["lim"]
        for s, w_swing in (("R", wR), ("L", 1 - wR)):
            dv[self.hip[s][0]] = w_swing * np.clip(hip_p, -lim, lim)
            dv[self.hip[s][1]] = w_swing * np.clip(hip_r, -lim, lim)
            dv[self.ankle[s][0]] = (1 - w_swing) * np.clip(ank_p, -lim, lim)
            dv[self.ankle[s][1]] = (1 - w_swing) * np.clip(ank_r, -lim, lim)
        dv[self.spine[0]] = np.clip(-(g["s_d"] * d_f + g["s_v"] * v_f), -lim, lim)
        dv[self.spine[1]] = np.clip(-(g["s_d"] * d_l + g["s_v"] * v_l), -lim, lim)
        return dv


PLAIN_STEER = {}  # controller class -> its steer() before run() adds the feedback


def feedback_steer(base):
    """A controller class's steer() with the feedback added after its own offsets."""
    def steer(self, q_ref, step):
        q = base(self, q_ref, step)
        fb = self.__dict__.get("_feedback")
        if fb is None:
            fb = self._feedback = Feedback(self)
        dv = fb(self, q, self.reference(step)[1])
        return self.plan.space.add(q, dv) if np.any(dv) else q
    return steer


def run(rig, clip, seconds, gains, scale=1.0, pushes=(), candidates=0, seed=0):
    """A take with the feedback: the tracker alone (candidates 0) or under the balance planner
    with that many candidates (its shadows steer with the same feedback)."""
    from engine.control import balance as bal
    from engine.control.tracking import TrackingController

    Feedback.gains = dict(GAINS, **gains)
    if not PLAIN_STEER:  # both classes' own steer() kept before either is replaced
        PLAIN_STEER.update({cls: cls.steer for cls in (TrackingController, bal.OffsetTracker)})
        for cls, steer in PLAIN_STEER.items():
            cls.steer = feedback_steer(steer)
    planner = bal.BalanceParams(candidates=candidates, workers=bal.default_workers()) if candidates else None
    take = simulate(rig, [(clip, seconds)], fatigue=FatigueParams(scale=scale), seed=seed,
                    params=TrackingParams(residual=0.0, balance=planner), pushes=pushes, progress=lambda f: None)
    s = take.meta["summary"]
    t_end = s["stopped_at_s"] if s["fell"] else seconds
    b = take.meta.get("balance") or {}
    per_step = b.get("rollout_steps", 0) / max(round(t_end * 120), 1)
    return t_end, s["fell"], s["joint_err_deg_mean"], (s.get("fall") or {}).get("direction", ""), per_step


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--clip", default=str(MOTION / "walk.bvh"))
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--push", action="append", default=[])
    ap.add_argument("--candidates", type=int, default=0, help="plan with the balance planner, this many candidates")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--grid", nargs="*", default=[], help="name=v1,v2,... for each gain to scan")
    a = ap.parse_args()
    rig = load_rig()
    names = [g.split("=")[0] for g in a.grid]
    values = [[float(v) for v in g.split("=")[1].split(",")] for g in a.grid]
    for combo, seed in itertools.product(list(itertools.product(*values)), [int(x) for x in a.seeds.split(",")]):
        gains = dict(zip(names, combo))
        t0 = time.perf_counter()
        t_end, fell, err, way, per_step = run(rig, Path(a.clip), a.seconds, gains, a.scale, tuple(a.push), a.candidates, seed)
        print(f"{gains} seed {seed}  {'fell at' if fell else 'walked'} {t_end:.2f} s {way}  {err:.2f} deg  "
              f"({per_step:.0f} rollout steps a step, {time.perf_counter() - t0:.0f} s wall)", flush=True)


if __name__ == "__main__":
    main()
