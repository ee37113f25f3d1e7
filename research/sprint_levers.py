"""The bundled sprint (or any chain of the bundled clips) under the balance planner, with the
levers of balance.md's sixteenth session: knee offsets, the planner's noise, weights and
timing, a fixed playback rate, the pace governor's strength or a governor that reads the
working muscles' M_F, the muscles' strength, the seed.

    python research/sprint_levers.py --name kF50p3 --knees --fatigue 50 --pace 3 --seconds 15
    python research/sprint_levers.py --name tired --clips walk:60 --fatigue 50 --replan 24
    python research/sprint_levers.py --name st --straighten --seconds 10 --seed 2
    python research/sprint_levers.py --name m --clips /tmp/mirrored.bvh:10
    python research/sprint_levers.py --name fh0 --flight-help 1 --seed 0 --seconds 8

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
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
import numpy as np
from engine.fatigue import FatigueParams
from engine.rig import load_rig
from engine.take import simulate
from engine.control.balance import BalanceParams
from engine.control.tracking import TrackingParams
from engine.transforms import quat_heading

HAND_N = 9.81 * 75.0  # --flight-help's unit: 736 N (and N m), 1.22 x the rig's 602 N weight

_ref_data = {}


def momentum_error(sim, ctl) -> np.ndarray:
    """The body's angular momentum about its centre of mass minus the reference's at this step."""
    import mujoco
    m, d = sim.physics.model, sim.physics.data
    rd = _ref_data.setdefault(id(m), mujoco.MjData(m))
    q_ref, v_ref, _ = ctl.reference(sim.steps)
    rd.qpos[:], rd.qvel[:] = q_ref, v_ref
    mujoco.mj_forward(m, rd)
    mujoco.mj_subtreeVel(m, rd)
    mujoco.mj_subtreeVel(m, d)
    return d.subtree_angmom[1] - rd.subtree_angmom[1]


def main():
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
    ap.add_argument("--w-momentum", type=float, default=0.0, help="planner cost per (kg m^2/s)^2 of angular momentum "
                    "error about the centre of mass against the reference's, each rollout step")
    ap.add_argument("--braking", type=int, default=0, help="passes of braking_stance.py's centre-of-mass braking")
    ap.add_argument("--ballistic", action="store_true", help="the clips' flights made ballistic (ballistic_flights.py)")
    ap.add_argument("--flight-help", type=float, default=0.0, help="a root residual bounded by this many x HAND_N "
                    "(N, and N m) where no foot corner is near the floor (what a ballistic reference would not need)")
    ap.add_argument("--stance-help", action="store_true", help="--flight-help's residual where a foot is near the "
                    "floor instead of where none is")
    ap.add_argument("--flight-help-axes", default="012345", help="which of the root residual's components "
                    "--flight-help may use (0-2 force x, y, z; 3-5 torque, the root's frame)")
    ap.add_argument("--flight-free", type=float, default=0.0, help="where no foot corner is near the floor, the "
                    "solve's root acceleration change this many times cheaper (the root goes where the physics puts it)")
    ap.add_argument("--amplitude", type=float, default=1.0, help="each clip's motion scaled by this about its mean "
                    "pose (joint angles, root height, tilt, sway and forward progress; the cadence kept)")
    ap.add_argument("--arms", default="", help="more DOFs for the planner to offset, as BODY:AXIS,... (e.g. "
                    "ArmR:0,ArmL:0,Spine:2: the arms' swing and the spine's turn, what a runner steers its turn with)")
    ap.add_argument("--w-touchdown", type=float, default=0.0, help="planner cost per (kg m^2/s)^2 of angular "
                    "momentum error (about the centre of mass, against the reference's) at each touchdown only")
    ap.add_argument("--fps", type=int, default=30, help="frames a second the take records (120 for --cycle-from)")
    ap.add_argument("--cycle-from", default="", help="FILE.npz:START: the clip replaced by one loop of a take this "
                    "script saved at --fps 120 (dynamics_filter.py)")
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
    if a.braking:
        os.environ["BRAKE_PASSES"] = str(a.braking)
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import braking_stance
        braking_stance.install()
    if a.ballistic:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import ballistic_flights
        ballistic_flights.install()
    if a.straighten:
        import types
        import engine.control.plan as plan_mod
        _init2 = plan_mod.CyclicClip.__init__

        def straight_init(self, space, ref, *args, **kw):
            q0, v0 = np.asarray(ref.q, float), np.asarray(ref.qvel, float)
            F = len(q0)
            q_next = space.add(q0[-1], v0[-1] / plan_mod.PHYSICS_HZ)
            yaw = float(quat_heading(q_next[3:7])) - float(quat_heading(q0[0, 3:7]))
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
    if a.amplitude != 1.0:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import amplitude
        amplitude.install(a.amplitude)
    if a.arms:
        import engine.control.balance as bal_a
        _dofs = bal_a.offset_dofs

        def more_dofs(rig, knees=False):
            extra = [int(rig.dof_start[rig.body_index(b)]) + int(k) for b, k in (x.split(":") for x in a.arms.split(","))]
            return np.concatenate([_dofs(rig, knees), extra])
        bal_a.offset_dofs = more_dofs
    if a.cycle_from:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import dynamics_filter
        _file, _start = a.cycle_from.rsplit(":", 1)
        dynamics_filter.install(_file, float(_start))
    if a.w_yaw:
        import engine.control.balance as bal
        _cost = bal.rollout_cost

        def yaw_cost(sim, ctl):
            q = sim.physics.data.qpos
            q_ref = ctl.reference(sim.steps)[0]
            e = float(np.angle(np.exp(1j * (float(quat_heading(q[3:7])) - float(quat_heading(q_ref[3:7]))))))
            return _cost(sim, ctl) + a.w_yaw * e * e
        bal.rollout_cost = yaw_cost
    if a.w_momentum:
        import engine.control.balance as bal_m
        _cost_m = bal_m.rollout_cost

        def momentum_cost(sim, ctl):
            e = momentum_error(sim, ctl)
            return _cost_m(sim, ctl) + a.w_momentum * float(e @ e)
        bal_m.rollout_cost = momentum_cost
    if a.w_touchdown:
        import engine.control.balance as bal_t
        _cost_t = bal_t.rollout_cost
        _airborne = {}

        def touchdown_cost(sim, ctl):
            c = _cost_t(sim, ctl)
            step_was, was = _airborne.get(id(sim), (-1, False))  # after a snapshot is loaded: not known
            air = sim.physics.data.ncon == 0
            _airborne[id(sim)] = (sim.steps, air)
            if was and step_was == sim.steps - 1 and not air:  # a foot has just landed
                e = momentum_error(sim, ctl)
                c += a.w_touchdown * float(e @ e)
            return c
        bal_t.rollout_cost = touchdown_cost
    # the levers below wrap the tracker's solve (engine.control.coordination.Coordinator, one
    # per tracker, called with the problem's arrays and these keywords)
    from engine.control.coordination import Coordinator
    if a.root_yaw_weight:
        _coord = Coordinator.__call__

        def coord(self, *args, **kw):  # the root's turning rows dearer: scale root_inertia's yaw column
            ri = kw.get("root_inertia")
            if ri is not None:
                ri = ri.copy()
                ri[:, 5] *= np.sqrt(self.weights.root_acceleration / a.root_yaw_weight)
                kw["root_inertia"] = ri
            return _coord(self, *args, **kw)
        Coordinator.__call__ = coord
    if a.flight_help:
        _coord2 = Coordinator.__call__

        def coord_flight(self, *args, **kw):  # in flight (no contact rows; in stance with --stance-help) the root may be held
            if (len(kw["Jc"]) > 0) == a.stance_help:
                bw = HAND_N * a.flight_help
                if a.flight_help_axes == "012345" and a.flight_help >= 1:  # it meets the root's rows: no giving way
                    kw = {**kw, "residual_bound": np.full(6, bw), "root_inertia": None}
                else:  # the root still gives way for what the hand does not hold
                    bound = np.array([bw if str(i) in a.flight_help_axes else 1e-9 for i in range(6)])
                    kw = {**kw, "residual_bound": bound}
            return _coord2(self, *args, **kw)
        Coordinator.__call__ = coord_flight
    if a.flight_free:
        _coord3 = Coordinator.__call__

        def coord_free(self, *args, **kw):  # in flight (no contact rows) the root's wanted acceleration is cheap to change
            if len(kw["Jc"]) == 0 and kw.get("root_inertia") is not None:
                kw = {**kw, "root_inertia": kw["root_inertia"] * np.sqrt(a.flight_free)}
            return _coord3(self, *args, **kw)
        Coordinator.__call__ = coord_free
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
    take = simulate(rig, clips, fatigue=FatigueParams(scale=a.fatigue), params=p, strength=a.strength, label=a.name, seed=a.seed,
                    fps=a.fps)
    s = take.meta["summary"]
    q, qr, t = take.q, take.q_ref, take.times
    rows = []
    for i in range(0, len(t), 15):
        rows.append(f"{t[i]:.1f}:z{q[i,2]:.2f}/{qr[i,2]:.2f} e{take.joint_err_deg[i]:.0f}")
    out = dict(name=a.name, seconds=s["seconds"], fell=s["fell"], err=s["joint_err_deg_mean"], wall=round(time.time() - t0),
               residual_N=s["residual_mean_N"], residual_Nm=s["residual_torque_mean_Nm"],
               gait=s.get("gait", {}).get("early"), late=s.get("gait", {}).get("late"), pace=s.get("pace"),
               MF=s.get("MF_final_by_group"), balance=take.meta.get("balance"))
    print(" | ".join(rows))
    print(json.dumps(out))
    np.savez(Path(a.out) / f"{a.name}.npz", t=t, q=q, qr=qr, err=take.joint_err_deg, act=take.activation, MF=take.MF)


if __name__ == "__main__":
    main()
