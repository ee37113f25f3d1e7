"""Research (thirteenth session): which hand-over stands a walk that the planner has braked.

    python docs/research/stop_basin.py record [--walk 3] [--out stop_states.pkl]
    python docs/research/stop_basin.py try [--states stop_states.pkl] [--variant current] [--seconds 4]

record: the balance planner walks the bundled walk (fresh) for --walk s and brakes to a halt
frame as docs/research/rest_stop.py does, and the simulation's state is kept every 6 steps
from the halt for 2 s (MuJoCo's qpos, qvel, contact warm start; the 3CC-r state).
try: from each kept state, a stand controller (the variant) takes over and plays --seconds;
one line per state: the pelvis's speed and the centre of mass's capture point against the
feet at the hand-over, and whether the character stood (pelvis above 0.7 m, and how far it
drifted in the last second).
"""
import argparse
import os
import pickle
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "docs" / "research"))

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

import rest_stop  # noqa: E402
from engine.control import stand  # noqa: E402
from engine.control.balance import BalanceParams, BalancePlanner  # noqa: E402
from engine.control.plan import MotionPlan  # noqa: E402
from engine.control.tracking import TrackingParams  # noqa: E402
from engine.fatigue import FatigueParams, FatigueState  # noqa: E402
from engine.rig import load_rig  # noqa: E402
from engine.simulation import Simulation  # noqa: E402


def record(a, rig) -> None:
    rest_stop.HALTS = tuple(a.halts)
    bouts = rest_stop.Bouts(rig, str(rest_stop.WALK))
    sim = Simulation(rig, "mujoco", fatigue=FatigueParams(scale=a.fatigue_scale))
    params = TrackingParams(residual=0.0, pace=0.0, balance=BalanceParams(workers=2))
    q0, v0, _ = bouts.walk.sample(0)
    q0 = sim.start_at(q0, v0)
    n = int((a.walk + 6) * 120)
    ref, halt, halt_step = bouts.bout(0, 0.0, q0, n, a.walk, accelerate=False)
    plan = MotionPlan(rig, [(ref, n / 120.0, "bout")])
    ctrl = BalancePlanner(sim, plan, params, params.balance, 0)
    kept = []
    t0 = time.time()
    while sim.steps < halt_step + 240:
        if sim.steps >= halt_step - 60 and (sim.steps - halt_step) % 6 == 0:
            d = sim.physics.data
            kept.append(dict(qpos=d.qpos.copy(), qvel=d.qvel.copy(), warm=d.qacc_warmstart.copy(), time=float(d.time),
                             steps=sim.steps, MA=sim.fatigue.MA.copy(), MR=sim.fatigue.MR.copy(),
                             MF=sim.fatigue.MF.copy(), q_plan=plan.sample(sim.steps)[0].copy(),
                             halt_step=halt_step, halt=halt))
        ctrl.advance_pace(sim)
        sim.step(ctrl.act(sim, sim.state))
        if sim.physics.data.qpos[2] < 0.5:
            print(f"fell at {sim.time:.2f} s")
            break
    ctrl.close()
    with open(a.out, "wb") as f:
        pickle.dump(kept, f)
    print(f"{len(kept)} states kept (halt at step {halt_step}); {time.time() - t0:.0f} s")


def load_state(sim, s) -> None:
    m, d = sim.physics.model, sim.physics.data
    d.qpos[:], d.qvel[:], d.qacc_warmstart[:], d.time = s["qpos"], s["qvel"], s["warm"], s["time"]
    mujoco.mj_step1(m, d)
    sim.fatigue = FatigueState(s["MA"].copy(), s["MR"].copy(), s["MF"].copy())
    sim.steps = s["steps"]
    sim.state = sim.physics.body_state()


def com_state(sim) -> tuple[np.ndarray, np.ndarray, float]:
    """Centre of mass position and horizontal velocity (MuJoCo's subtree of the root)."""
    m, d = sim.physics.model, sim.physics.data
    mujoco.mj_subtreeVel(m, d)
    return d.subtree_com[1].copy(), d.subtree_linvel[1].copy(), float(d.subtree_com[1, 2])


def support(sim, rig) -> np.ndarray:
    """Horizontal corners of the foot boxes touching the floor (within 1 cm)."""
    d = sim.physics.data
    feet = np.array(stand._feet(rig)[0])
    signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    corners = 0.5 * signs[None] * rig.body_size[feet][:, None]
    R = d.ximat[feet + 1].reshape(-1, 3, 3)
    P = (d.xipos[feet + 1, None] + np.einsum("bij,bkj->bki", R, corners)).reshape(-1, 3)
    return P[P[:, 2] < 0.01, :2]


def inside(pt, P) -> float:
    """Signed distance of pt from the convex hull of P (negative inside), m."""
    from scipy.spatial import ConvexHull

    h = ConvexHull(P)
    return float(max(eq[:2] @ pt + eq[2] for eq in h.equations))


def take_over(sim, rig, bouts, q_target, variant) -> stand.StandController:
    """The stand controller about the balanced pose nearest q_target, designed where the body
    is (rest_stop.take_over); with `glide`, its set point moving there from the body's pose."""
    st = rest_stop.take_over(sim, rig, bouts, q_target)
    st._designed_at = sim.steps + 10 ** 9  # no re-design in these short tries
    if variant.get("glide"):
        st.__class__ = Glide
        st.q_from, st.t_from, st.glide, st.q_final = sim.physics.get_q()[0].copy(), sim.steps, variant["glide"], st.q0
    return st


class Glide(stand.StandController):
    """The LQR's set point moves from where the body was handed over to the balanced pose
    over `glide` s (smoothstep), so the feedback sees small errors all the way."""

    def act(self, sim, state):
        w = min(1.0, (sim.steps - self.t_from) / (120 * self.glide))
        w = 3 * w * w - 2 * w ** 3
        sp = self.plan.space
        q_set = sp.interp(self.q_from, self.q_final, w)
        q0 = self.q0
        self.q0 = q_set
        try:
            return super().act(sim, state)
        finally:
            self.q0 = q0


VARIANTS = {
    "plan": dict(target="plan"),  # rest_stop.py's: the halt frame's pose where the body stands
    "current": dict(target="current"),  # the pose the body is in
    "glide": dict(target="current", glide=1.0),
    "glide_plan": dict(target="plan", glide=1.0),
}


def try_states(a, rig) -> None:
    with open(a.states, "rb") as f:
        states = pickle.load(f)
    variant = VARIANTS[a.variant]
    rest_stop.HALTS = tuple(a.halts)
    bouts = rest_stop.Bouts(rig, str(rest_stop.WALK))
    for s in states[:: a.every]:
        sim = Simulation(rig, "mujoco", fatigue=FatigueParams(scale=a.fatigue_scale))
        load_state(sim, s)
        if a.still:  # the same pose at rest: is it the velocity or the pose that falls?
            sim.physics.set_q(sim.physics.get_q()[0], np.zeros(sim.physics.model.nv))
            sim.state = sim.physics.body_state()
        q, qd = sim.physics.get_q()
        com, vcom, h = com_state(sim)
        cp = com[:2] + vcom[:2] * np.sqrt(h / 9.81)
        P = support(sim, rig)
        margin = inside(cp, P) if len(P) >= 3 else np.nan
        target = s["q_plan"].copy() if variant["target"] == "plan" else q.copy()
        target[:2] = q[:2]
        try:
            ctl = take_over(sim, rig, bouts, target, variant)
        except Exception as e:  # noqa: BLE001
            print(f"step {s['steps'] - s['halt_step']:+4d}: design failed: {e}")
            continue
        n, fell, track = int(a.seconds * 120), None, []
        for i in range(n):
            sim.step(ctl.act(sim, sim.state))
            track.append(sim.physics.data.qpos[:3].copy())
            if sim.physics.data.qpos[2] < 0.7:
                fell = i / 120
                break
        T = np.array(track)
        drift = np.linalg.norm(T[-1, :2] - T[max(len(T) - 120, 0), :2])
        moved = bouts.space.diff(q, ctl.q0)
        print(f"step {s['steps'] - s['halt_step']:+4d}: balanced pose {np.degrees(np.abs(moved[6:])).mean():.1f} deg "
              f"(max {np.degrees(np.abs(moved[6:])).max():.0f}), tilt {np.degrees(np.linalg.norm(moved[3:5])):.1f} deg away; pelvis {np.linalg.norm(qd[:2]):.2f} m/s, com {np.linalg.norm(vcom[:2]):.2f} m/s, "
              f"capture point {100 * margin:+.1f} cm from the feet's hull ({len(P)} corners down): "
              + (f"fell after {fell:.2f} s" if fell is not None else f"stood {a.seconds:g} s, last second drift {100 * drift:.1f} cm"),
              flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("record", "try"))
    ap.add_argument("--walk", type=float, default=3.0)
    ap.add_argument("--fatigue-scale", type=float, default=1.0)
    ap.add_argument("--out", default="stop_states.pkl")
    ap.add_argument("--halts", type=int, nargs="+", default=list(rest_stop.HALTS),
                    help="the clip frames a brake may halt at")
    ap.add_argument("--states", default="stop_states.pkl")
    ap.add_argument("--variant", default="plan", choices=sorted(VARIANTS))
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--still", action="store_true", help="each kept pose at rest")
    ap.add_argument("--every", type=int, default=2)
    a = ap.parse_args(argv)
    rig = load_rig()
    (record if a.mode == "record" else try_states)(a, rig)
    return 0


if __name__ == "__main__":
    sys.exit(main())
