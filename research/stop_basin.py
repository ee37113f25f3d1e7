"""Research (thirteenth session): which hand-over stands a walk that the planner has braked.

    python research/stop_basin.py record [--walk 3] [--out stop_states.pkl]
    python research/stop_basin.py try [--states stop_states.pkl] [--variant current] [--seconds 4]

record: the balance planner walks the bundled walk (fresh) for --walk s and brakes to a halt
frame as research/rest_stop.py does, and the simulation's state is kept every 6 steps
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
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "research"))

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

import rest_stop  # noqa: E402
from engine.control import stand  # noqa: E402
from engine.control.balance import BalanceParams, BalancePlanner  # noqa: E402
from engine.control.plan import MotionPlan  # noqa: E402
from engine.control.tracking import TrackingParams  # noqa: E402
from engine.fatigue import FatigueParams, FatigueState  # noqa: E402
from engine.rig import GROUPS, load_rig  # noqa: E402
from engine.simulation import Simulation  # noqa: E402


def record(a, rig) -> None:
    rest_stop.HALTS = tuple(a.halts)
    bouts = rest_stop.Bouts(rig, str(rest_stop.WALK))
    sim = Simulation(rig, "mujoco", fatigue=FatigueParams(scale=a.fatigue_scale))
    params = TrackingParams(residual=0.0, pace=0.0, balance=BalanceParams(workers=2, w_speed=a.w_speed,
                                                                          horizon=a.horizon))
    q0, v0, _ = bouts.walk.sample(0)
    q0 = sim.start_at(q0, v0)
    n = int((a.walk + 4 + a.after) * 120)
    ref, halt, halt_step = bouts.bout(0, 0.0, q0, n, a.walk, accelerate=False)
    plan = MotionPlan(rig, [(ref, n / 120.0, "bout")])
    ctrl = BalancePlanner(sim, plan, params, params.balance, 0)
    kept = []
    t0 = time.time()
    legs = np.isin(rig.muscle_group, [GROUPS.index("right_leg"), GROUPS.index("left_leg")])
    f0 = rig.muscle_f0[legs]
    while sim.steps < halt_step + int(a.after * 120):
        if sim.steps % 60 == 0:
            com, v, _ = com_state(sim)
            print(f"{sim.time:5.1f} s: pelvis {sim.physics.data.qpos[2]:.3f} m, centre of mass {np.linalg.norm(v[:2]):.2f} m/s, "
                  f"legs' effort {(sim.fatigue.MA[legs] * f0).sum() / f0.sum():.3f}, M_F {sim.fatigue.MF[legs].mean():.3f}"
                  + (" (halted)" if sim.steps >= halt_step else ""), flush=True)
        if sim.steps >= halt_step - 60 and sim.steps <= halt_step + 240 and (sim.steps - halt_step) % 6 == 0:
            d = sim.physics.data
            kept.append(dict(qpos=d.qpos.copy(), qvel=d.qvel.copy(), warm=d.qacc_warmstart.copy(), time=float(d.time),
                             steps=sim.steps, MA=sim.fatigue.MA.copy(), MR=sim.fatigue.MR.copy(),
                             MF=sim.fatigue.MF.copy(), q_plan=plan.sample(sim.steps)[0].copy(),
                             halt_step=halt_step, halt=halt))
        if a.rest_weight and sim.steps == halt_step + 120:  # standing: a looser solve, as a rest would want
            ctrl.close()
            rest = replace(params, weights=replace(params.weights, activation=a.rest_weight))
            ctrl = BalancePlanner(sim, plan, rest, rest.balance, 0)
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
    feet = np.array([rig.body_index(n + side) for side in "RL" for n in ("Talus", "FootThumb", "FootPinky")])
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
    kept = stand.FOOT_TILT_SCALE, stand.FOOT_HEIGHT_SCALE, stand.R_ACTIVATION
    stand.FOOT_TILT_SCALE, stand.FOOT_HEIGHT_SCALE = variant.get("feet", kept[:2])
    stand.R_ACTIVATION = variant.get("r", kept[2])
    try:
        st = rest_stop.take_over(sim, rig, bouts, q_target)
    finally:
        stand.FOOT_TILT_SCALE, stand.FOOT_HEIGHT_SCALE, stand.R_ACTIVATION = kept
    st._designed_at = sim.steps + 10 ** 9  # no re-design in these short tries
    if variant.get("muscles_a0"):  # the muscles put at the design's holding activations, as start() does
        sim.fatigue.MA[:] = st.a0
        sim.fatigue.MR[:] = 1.0 - st.a0 - sim.fatigue.MF
        st._warm = st.a0.copy()
    if variant.get("glide"):
        st.__class__ = Glide
        st.q_from, st.t_from, st.glide, st.q_final = sim.physics.get_q()[0].copy(), sim.steps, variant["glide"], st.q0
    return st


class Funnel:
    """A chain of stand controllers (LQR-trees' funnels): each designed, when its turn comes,
    about the balanced pose nearest a point further along from the body's pose at the
    hand-over to the target, and held `dwell` s; the last held to the end."""

    def __init__(self, sim, rig, bouts, q_from, q_to, variant):
        self.rig, self.bouts, self.variant = rig, bouts, variant
        sp = bouts.space
        self.targets = [sp.interp(q_from, q_to, w) for w in variant["funnel"]]
        self.dwell = int(120 * variant.get("dwell", 1.0))
        self._next(sim)

    def _next(self, sim) -> None:
        v = {k: w for k, w in self.variant.items() if k not in ("funnel", "glide")}
        self.ctl = take_over(sim, self.rig, self.bouts, self.targets.pop(0), v)
        self.next_at = sim.steps + self.dwell

    def act(self, sim, state):
        if self.targets and sim.steps >= self.next_at:
            self._next(sim)
        return self.ctl.act(sim, state)


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
    "current_soft": dict(target="current", r=1e4),  # the LQR's activations 100x dearer
    "plan_soft": dict(target="plan", r=1e4),
    "funnel": dict(target="current", funnel=(0.5, 1.0), r=1e4),  # halfway to the plan's pose, then there
    "funnel3": dict(target="current", funnel=(0.0, 0.5, 1.0), r=1e4),
    "muscles_a0": dict(target="current", muscles_a0=True),
    "feet_as_they_are": dict(target="current", feet=(0.0, 0.0)),  # no flat, level feet asked
    "feet_loose": dict(target="current", feet=(30.0, 300.0)),  # a tenth of the stand's
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
            if "funnel" in variant:
                goal = s["q_plan"].copy()
                goal[:2] = q[:2]
                ctl = Funnel(sim, rig, bouts, q.copy(), goal, variant)
            else:
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
        moved = bouts.space.diff(q, (ctl.ctl if isinstance(ctl, Funnel) else ctl).q0)
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
    ap.add_argument("--w-speed", type=float, default=BalanceParams.w_speed,
                    help="the planner's weight on the root's speed error (BalanceParams.w_speed)")
    ap.add_argument("--horizon", type=int, default=BalanceParams.horizon, help="the planner's horizon, steps")
    ap.add_argument("--rest-weight", type=float, default=0.0,
                    help="from 1 s after the halt, the solve's activation weight (0: the take's own)")
    ap.add_argument("--after", type=float, default=2.0, help="seconds played after the halt")
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
