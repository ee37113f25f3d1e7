"""The bundled sprint (or any chain of the bundled clips) under the balance planner, with the
levers of balance.md's sixteenth session: knee offsets, the planner's noise, weights and
timing, a fixed playback rate, the pace governor's strength or a governor that reads the
working muscles' M_F, the muscles' strength, the seed.

    python docs/research/sprint_levers.py --name kF50p3 --knees --fatigue 50 --pace 3 --seconds 15
    python docs/research/sprint_levers.py --name tired --clips walk:60 --fatigue 50 --replan 24
    python docs/research/sprint_levers.py --name st --straighten --seconds 10 --seed 2
    python docs/research/sprint_levers.py --name m --clips /tmp/mirrored.bvh:10

A clip is a bundled one's name or a path to a .bvh file.

Prints the pelvis height (take / reference) and joint error every 0.5 s and a JSON line;
writes NAME.npz (times, q, q_ref, joint error, activations, M_F) into --out.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
import numpy as np
from engine.fatigue import FatigueParams
from engine.rig import load_rig
from engine.take import simulate
from engine.control.balance import BalanceParams
from engine.control.tracking import TrackingParams

ap = argparse.ArgumentParser()
ap.add_argument("--seconds", type=float, default=6)
ap.add_argument("--fatigue", type=float, default=0)
ap.add_argument("--sigma", type=float, default=0.1)
ap.add_argument("--sigma-min", type=float, default=0.05)
ap.add_argument("--knees", action="store_true")
ap.add_argument("--w-height", type=float, default=100)
ap.add_argument("--w-speed", type=float, default=1)
ap.add_argument("--candidates", type=int, default=16)
ap.add_argument("--horizon", type=int, default=96)
ap.add_argument("--replan", type=int, default=12)
ap.add_argument("--workers", type=int, default=1)
ap.add_argument("--clips", default="run")
ap.add_argument("--strength", type=float, default=3)
ap.add_argument("--pace", type=float, default=1)
ap.add_argument("--name", required=True)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--rate", type=float, default=0)
ap.add_argument("--work-signal", action="store_true")
ap.add_argument("--out", default=".")
ap.add_argument("--no-ground", action="store_true", help="the clips as retargeted, feet not grounded")
ap.add_argument("--w-yaw", type=float, default=0.0, help="planner cost per rad^2 of pelvis heading error")
ap.add_argument("--root-yaw-weight", type=float, default=0.0, help="solve's cost per (rad/s^2)^2 of root yaw "
                "acceleration change (default: the weights' root_acceleration)")
ap.add_argument("--straighten", action="store_true", help="each looped clip's per-cycle turn removed (a straight path)")
a = ap.parse_args()
if a.work_signal:
    from engine.control.tracking import TrackingController
    def advance_pace(self, sim):
        if self._paced_to > sim.steps:
            return
        f = sim.fatigue
        w = f.MA[self._legs]
        mf_legs = float((w * f.MF[self._legs]).sum() / max(w.sum(), 1e-9))
        while self._paced_to <= sim.steps:
            i = self.plan.segment_index(self._paced_to)
            if self.pace.update(mf_legs, i):
                self.plan.rebase(i, self.pace.prev_lag)
            self._paced_to += 1
    TrackingController.advance_pace = advance_pace
if a.no_ground:
    import engine.control.plan as plan_mod
    _init = plan_mod.CyclicClip.__init__
    plan_mod.CyclicClip.__init__ = lambda self, *args, **kw: _init(self, *args, **{**kw, "ground": False})
if a.straighten:
    import types
    import engine.control.plan as plan_mod
    _init2 = plan_mod.CyclicClip.__init__

    def straight_init(self, space, ref, *args, **kw):
        q0, v0 = np.asarray(ref.q, float), np.asarray(ref.qvel, float)
        F = len(q0)
        q_next = space.add(q0[-1], v0[-1] / plan_mod.PHYSICS_HZ)
        yaw = plan_mod._yaw(q_next[3:7]) - plan_mod._yaw(q0[0, 3:7])
        q, v = q0.copy(), v0.copy()
        for i in range(F):  # frame i turned by -yaw i / F about frame 0's root
            T = plan_mod.Planar(-yaw * i / F)
            qi = q0[i].copy()
            qi[:2] -= q0[0, :2]
            qi = T.apply_q(qi)
            qi[:2] += q0[0, :2]
            q[i], v[i] = qi, T.apply_v(v0[i])
        _init2(self, space, types.SimpleNamespace(q=q, qvel=v, fps=ref.fps), *args, **kw)
        print(f"straightened {self.name}: {np.degrees(yaw):.2f} -> {np.degrees(self.cycle.yaw):.2f} deg a cycle", file=sys.stderr)
    plan_mod.CyclicClip.__init__ = straight_init
if a.w_yaw:
    import engine.control.balance as bal
    from engine.control.plan import _yaw
    _cost = bal.rollout_cost

    def yaw_cost(sim, ctl):
        q = sim.physics.data.qpos
        q_ref = ctl.reference(sim.steps)[0]
        e = float(np.angle(np.exp(1j * (_yaw(q[3:7]) - _yaw(q_ref[3:7])))))
        return _cost(sim, ctl) + a.w_yaw * e * e
    bal.rollout_cost = yaw_cost
if a.root_yaw_weight:
    import engine.control.coordination as co
    _coord = co.coordinate

    def coord(*args, **kw):  # the root's turning rows dearer: scale root_inertia's yaw column
        ri = kw.get("root_inertia")
        if ri is not None:
            w = kw["weights"] if "weights" in kw else args[7]
            ri = ri.copy()
            ri[:, 5] *= np.sqrt(w.root_acceleration / a.root_yaw_weight)
            kw["root_inertia"] = ri
        return _coord(*args, **kw)
    import engine.control.tracking as trk
    trk.coordinate = coord
if a.rate:
    import engine.control.pace as pace_mod
    pace_mod.target_rate = lambda mf, strength: a.rate
    pace_mod.TAU_S = 1/120
M = str(REPO.parent / "shared" / "reference" / "mass" / "motion") + "/"
clips = []
for c in a.clips.split(","):
    n, s = (c.split(":") + [None])[:2]
    clips.append((n if "/" in n else M + n + ".bvh", float(s) if s else a.seconds))
b = BalanceParams(sigma=a.sigma, sigma_min=a.sigma_min, knees=a.knees, w_height=a.w_height, w_speed=a.w_speed,
                  candidates=a.candidates, horizon=a.horizon, replan=a.replan, workers=a.workers)
p = TrackingParams(residual=0.0, balance=b, pace=a.pace)
rig = load_rig("human284")
t0 = time.time()
take = simulate(rig, clips, fatigue=FatigueParams(scale=a.fatigue), params=p, strength=a.strength, label=a.name, seed=a.seed)
s = take.meta["summary"]
q, qr, t = take.q, take.q_ref, take.times
rows = []
for i in range(0, len(t), 15):
    rows.append(f"{t[i]:.1f}:z{q[i,2]:.2f}/{qr[i,2]:.2f} e{take.joint_err_deg[i]:.0f}")
out = dict(name=a.name, seconds=s["seconds"], fell=s["fell"], err=s["joint_err_deg_mean"], wall=round(time.time() - t0),
           gait=s.get("gait", {}).get("early"), late=s.get("gait", {}).get("late"), pace=s.get("pace"),
           MF=s.get("MF_final_by_group"), balance=take.meta.get("balance"))
print(" | ".join(rows))
print(json.dumps(out))
np.savez(Path(a.out) / f"{a.name}.npz", t=t, q=q, qr=qr, err=take.joint_err_deg, act=take.activation, MF=take.MF)
