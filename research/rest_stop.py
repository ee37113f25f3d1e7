"""Prototype (twelfth session, not in the product): a walk that stops to rest and walks on.

    python research/rest_stop.py [--seconds 12] [--fatigue-scale 1] [--walk 3]
                                      [--resume-at 0.05] [--settle-speed 0.1] [--out rest.npy]

The balance planner walks the bundled walk for --walk s, then the reference brakes evenly
over 1 s to the next double-support frame (54 or 108 of the 132-frame cycle) and blends over
1 s into that frame's balanced pose (engine.control.stand.balanced_pose). Once the pelvis
moves slower than --settle-speed (or 3 s after the halt), the stand controller's LQR takes
over where the character is (StandController.take_over: designed about the balanced pose at
its position, without moving it there as StandController.start does) and holds until the legs' mean M_F is down
to --resume-at; then the planner walks on, the reference accelerating from the halt frame
over 1 s. Measured (balance.md, twelfth session): the planner brakes the walk to ~0.1 m/s,
but the LQR handed a body still swaying falls within ~1 s, and a walk restarted from it
lunged and fell. Kept as the starting point for a stopping controller.
"""
import argparse
import os
import sys
import time
from dataclasses import fields
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from engine.control.balance import BalanceParams, BalancePlanner  # noqa: E402
from engine.control.plan import MotionPlan, load_clip  # noqa: E402
from engine.control.stand import StandController  # noqa: E402
from engine.control.tracking import TrackingParams  # noqa: E402
from engine.fatigue import FatigueParams  # noqa: E402
from engine.motion.reference import Reference  # noqa: E402
from engine.rig import GROUPS, load_rig  # noqa: E402
from engine.simulation import Simulation  # noqa: E402
from engine.take import simulate  # noqa: E402

# a Reference's per-frame arrays (its dataclass fields but the provenance `meta`)
REFERENCE_ARRAYS = [f.name for f in fields(Reference) if f.name != "meta"]

WALK = REPO.parent / "shared" / "reference" / "mass" / "motion" / "walk.bvh"
HALTS = (54, 108)  # the bundled walk's double-support frames (both feet within ~1.5 cm of the floor)
BRAKE_S, ACCEL_S, SETTLE_STEPS = 1.0, 1.0, 360


class Bouts:
    """References for walking bouts on the take's clock (120 Hz), built from one looped clip."""

    def __init__(self, rig, clip):
        self.ref, name = load_clip(rig, clip)
        self.frames = self.ref.num_frames
        self.walk = MotionPlan(rig, [(self.ref, 1e4, name)])
        self.space = self.walk.space
        self.balanced = {}  # halt frame -> offset of its balanced pose (velocity space)
        for h in HALTS:
            held = self.ref.held_at(h / 120.0, name)
            stood = simulate(rig, [(held, 0.05)], params=TrackingParams(residual=0.0), progress=lambda f: None)
            self.balanced[h] = self.space.diff(held.q[0], stood.q[0])

    def reference(self, q):
        sp, n = self.space, len(q)
        qvel = np.stack([sp.diff(q[max(i - 1, 0)], q[min(i + 1, n - 1)]) / ((min(i + 1, n - 1) - max(i - 1, 0)) / 120.0)
                         for i in range(n)])
        arrays = {k: np.repeat(getattr(self.ref, k)[:1], n, axis=0) for k in REFERENCE_ARRAYS if k not in ("times", "q", "qvel")}
        return Reference(times=np.arange(n) / 120.0, q=q, qvel=qvel, meta=dict(self.ref.meta, source="bout"), **arrays)

    def bout(self, start_step, clip_frame, q_from, total_steps, walk_s, accelerate=True):
        """(Reference, halt clip frame, take step of the halt): q_from held until start_step, the
        clip from clip_frame accelerating over ACCEL_S (blended out of q_from over 0.5 s), walking
        walk_s, braking over BRAKE_S to the next halt frame, then held there, blended over 1 s
        into its balanced pose."""
        tau = []
        na = int(ACCEL_S * 120) if accelerate else 0
        tau += [clip_frame + 120 * (i / 120) ** 2 / (2 * ACCEL_S) for i in range(na)]
        clk = clip_frame + 60 * ACCEL_S * accelerate
        earliest = clk + walk_s * 120 + 60 * BRAKE_S
        k0 = int(earliest // self.frames)
        halt = min(k * self.frames + h for k in (k0, k0 + 1) for h in HALTS if k * self.frames + h >= earliest)
        while clk < halt - 60 * BRAKE_S:
            tau.append(clk)
            clk += 1.0
        b0 = halt - 60 * BRAKE_S
        tau += [b0 + 120 * (s - s * s / (2 * BRAKE_S)) for s in np.arange(int(BRAKE_S * 120)) / 120]
        halt_step = start_step + len(tau)
        held = max(total_steps - halt_step, 4)
        q = np.empty((start_step + len(tau) + held, self.space.nq))
        q[:start_step] = q_from
        offset = self.balanced[int(round(halt)) % self.frames]
        for i, t in enumerate(tau + [halt] * held):
            qi = self.walk.sample(0, lag=-t)[0]
            if i >= len(tau):
                w = min(1.0, (i - len(tau) + 1) / 120.0)
                qi = self.space.add(qi, (3 * w * w - 2 * w ** 3) * offset)
            if accelerate and i < 60:
                w = (i + 1) / 61
                qi = self.space.interp(q_from, qi, 3 * w * w - 2 * w ** 3)
            q[start_step + i] = qi
        return self.reference(q), halt, halt_step


def take_over(sim, rig, bouts, q_target) -> StandController:
    """The stand controller's LQR about the balanced pose nearest q_target, designed where the
    character is (StandController.take_over)."""
    hold = bouts.reference(np.repeat(q_target[None], 8, axis=0))
    hold.qvel[:] = 0.0
    st = StandController(sim, MotionPlan(rig, [(hold, 1.0, "rest")]), TrackingParams(residual=0.0))
    st.take_over(sim, q_target)
    return st


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clip", default=str(WALK))
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--fatigue-scale", type=float, default=1.0)
    ap.add_argument("--walk", type=float, default=3.0, help="seconds of walking in each bout")
    ap.add_argument("--resume-at", type=float, default=0.05, help="legs' mean M_F at which the rest ends")
    ap.add_argument("--settle-speed", type=float, default=0.1, help="m/s: the pelvis slower than this hands over")
    ap.add_argument("--out", default="rest_stop.npy")
    a = ap.parse_args(argv)
    rig = load_rig()
    bouts = Bouts(rig, a.clip)
    legs = np.isin(rig.muscle_group, [GROUPS.index("right_leg"), GROUPS.index("left_leg")])
    n = int(round(a.seconds * 120))
    sim = Simulation(rig, "mujoco", fatigue=FatigueParams(scale=a.fatigue_scale))
    params = TrackingParams(residual=0.0, pace=0.0, balance=BalanceParams(workers=2))
    q0, v0, _ = bouts.walk.sample(0)
    q0 = sim.start_at(q0, v0)
    ref, halt, halt_step = bouts.bout(0, 0.0, q0, n + 10, a.walk, accelerate=False)
    plan = MotionPlan(rig, [(ref, n / 120.0 + 0.05, "bout")])
    ctrl, mode, log, fell, t0 = BalancePlanner(sim, plan, params, params.balance, 0), "walk", [], None, time.time()
    while sim.steps < n:
        mf = float(sim.fatigue.MF[legs].mean())
        q, qd = sim.physics.get_q()
        if mode == "walk" and sim.steps >= halt_step:
            mode, settle_from = "settle", sim.steps
        if mode == "settle" and (np.linalg.norm(qd[:2]) < a.settle_speed or sim.steps - settle_from >= SETTLE_STEPS):
            ctrl.close()
            target = plan.sample(sim.steps)[0].copy()
            target[:2] = q[:2]
            ctrl, mode, rest_from = take_over(sim, rig, bouts, target), "rest", sim.steps
            print(f"rest at {sim.time:.2f} s: legs' M_F {mf:.3f}, pelvis {np.linalg.norm(qd[:2]):.2f} m/s", flush=True)
        elif mode == "rest" and mf <= a.resume_at and sim.steps - rest_from > 120:
            ref, halt, halt_step = bouts.bout(sim.steps, halt, ctrl.q0, n + 10, a.walk)
            plan = MotionPlan(rig, [(ref, n / 120.0 + 0.05, "bout")])
            ctrl, mode = BalancePlanner(sim, plan, params, params.balance, 0), "walk"
            print(f"walk at {sim.time:.2f} s: legs' M_F {mf:.3f}", flush=True)
        if hasattr(ctrl, "advance_pace"):
            ctrl.advance_pace(sim)
        sim.step(ctrl.act(sim, sim.state))
        q = sim.physics.get_q()[0]
        effort = (sim.fatigue.MA[legs] * rig.muscle_f0[legs]).sum() / rig.muscle_f0[legs].sum()
        log.append((sim.time, q[0], q[1], q[2], mf, effort, mode == "rest"))
        if q[2] < 0.5:
            fell = sim.time
            break
    if hasattr(ctrl, "close"):
        ctrl.close()
    L = np.array(log)
    np.save(a.out, L)
    print(f"{time.time() - t0:.0f} s of computing; " + (f"fell at {fell:.2f} s" if fell else "no fall"))
    for s in np.arange(0, L[-1, 0], 1.0):
        S = L[(L[:, 0] >= s) & (L[:, 0] < s + 1)]
        speed = np.linalg.norm(S[-1, 1:3] - S[0, 1:3]) / max(S[-1, 0] - S[0, 0], 1e-9)
        print(f"{s:5.1f} s {'rest' if S[:, 6].mean() > 0.5 else 'walk'}: pelvis {S[0, 3]:.3f} m, {speed:.2f} m/s, "
              f"legs' M_F {S[0, 4]:.3f}, effort {S[:, 5].mean():.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
