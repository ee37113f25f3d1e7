"""Experiment (issue 16, not part of the product): the walk without the root residual by
predictive sampling (the derivative-free planner of MuJoCo MPC, Howell et al. 2022) over a
few reference offsets of the residual-free root-acceleration tracker.

The tracker underneath is `root_acceleration_tracking.RootAcceleration` (the muscles, the
contact forces and the root's six accelerations solved together, residual 0; alone it falls
at 3.06 s). What the planner chooses is a 10-vector of offsets added to the reference every
step: both hips and both ankles (pitch about the joint's local x, roll about its local y)
and the spine (pitch, roll); knees=1 adds both knees' flexion. Piecewise linear over the
horizon with a knot every KN steps.
Every R steps, N candidate plans are played from the present state on shadow copies of the
simulation (same MuJoCo model, muscles and 3CC-r state; two worker processes), each for H
steps, and the cheapest is played until the next plan. The candidates: the last plan shifted
to now, no offsets, and N - 2 of the shifted plan x decay plus Gaussian noise (sigma rad).

The cost of a rollout, summed over its steps: w_z (pelvis height - reference)^2 + w_tilt
|pelvis roll and pitch error|^2 (rad) + w_v |horizontal root velocity - reference|^2 +
w_j (mean joint error / 10 deg)^2 + w_u |offsets|^2, and 1000 a step for every step left
once the pelvis is below fall_z (a fall seen coming). A push (TIME:FX,FY,FZ:SECONDS at the
pelvis) is not known to the planner.

    cd research && OPENBLAS_NUM_THREADS=1 ../.venv/bin/python sampling_mpc_walk.py N=16 H=96 seconds=20

Measured in docs/research/balance.md ("Ninth session"). Cost: ~37 s of CPU per simulated
second with N = 16, H = 96 on the 2-core machine (two workers): a research planner, and an
expert a learned policy could be taught from.
"""
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "research"))
MOTION = ROOT.parent / "shared" / "reference" / "mass" / "motion"

from engine import fatigue as fat  # noqa: E402
from engine.control.plan import MotionPlan, load_clip  # noqa: E402
from engine.control.tracking import TrackingParams  # noqa: E402
from engine.rig import load_rig  # noqa: E402
from engine.simulation import Simulation  # noqa: E402
from engine.kinematics import joint_errors_deg  # noqa: E402
from engine.transforms import matrix_to_axis_angle, quat_to_matrix  # noqa: E402
from root_acceleration_tracking import RootAcceleration  # noqa: E402

P = dict(H=96, R=12, N=16, KN=12, sigma=0.05, decay=0.9, seconds=10.0, w_z=100.0, w_tilt=10.0, w_v=1.0, w_j=0.1,
         w_u=0.1, fall_z=0.7, seed=0, fscale=0.0, workers=2, push="", clip="", knees=0)
RIG = load_rig()


def _dof(body: str) -> int:
    return int(RIG.dof_start[RIG.body_names.index(body)])


# (first DOF of the joint, local axis): 0 = x (pitch), 1 = y (roll); the rig's joint frames
# are world-aligned at rest (x the character's left, -y its forward)
OFFSETS = [(_dof(b), k) for b in ("FemurR", "FemurL", "TalusR", "TalusL") for k in (0, 1)] + \
          [(_dof("Spine"), 0), (_dof("Spine"), 1)]
KNEES = [(_dof("TibiaR"), 0), (_dof("TibiaL"), 0)]  # knees=1 samples them too (a lower, bent-kneed gait)


class Offset(RootAcceleration):
    """The root-acceleration tracker with its reference offset by `offset(step)` (rad)."""

    offset = staticmethod(lambda step: None)

    def reference(self, step):
        q_ref, v_ref, a_ref = super().reference(step)
        u = self.offset(step)
        if u is None or not np.any(u):
            return q_ref, v_ref, a_ref
        dv = np.zeros(len(v_ref))
        for (j, k), val in zip(OFFSETS + KNEES, u):
            dv[j + k] += val
        return self.plan.space.add(q_ref, dv), v_ref, a_ref


def make(seconds: float, clip):
    """A simulation at the clip's first frame (as engine.take.simulate starts one) and its tracker."""
    sim = Simulation(RIG, "mujoco", fatigue=fat.FatigueParams(scale=P["fscale"]))
    ref, name = load_clip(RIG, clip)
    plan = MotionPlan(RIG, [(ref, seconds + 1.0, name)])
    q0, v0, _ = plan.sample(0)
    q0 = sim.start_at(q0, v0)
    return sim, Offset(sim, plan, TrackingParams(residual=0.0)), plan


def schedule(U: np.ndarray, start: int):
    """Offsets at step s of a plan whose knot j is at start + j KN (linear between, held after)."""
    def f(step):
        x = (step - start) / P["KN"]
        j = int(np.clip(np.floor(x), 0, len(U) - 2))
        w = float(np.clip(x - j, 0.0, 1.0))
        return (1 - w) * U[j] + w * U[j + 1]
    return f


def snapshot(sim, ctl) -> dict:
    """The product planner's snapshot (engine.control.balance, which this script became)."""
    from engine.control.balance import snapshot as take_snapshot

    return take_snapshot(sim, ctl)


def restore(sim, ctl, snap: dict) -> None:
    """The shadow at the main simulation's state, as the product planner restores its shadow
    (checked: the same costs as a copy made with mj_copyData in one process)."""
    from types import SimpleNamespace

    from engine.control.balance import Shadow

    Shadow.load(SimpleNamespace(sim=sim, ctl=ctl), snap)


def step_cost(sim, ctl, u) -> tuple[float, float]:
    q, qd = sim.physics.get_q()
    q_ref, v_ref, _ = ctl.plan.sample(sim.steps, ctl.pace.lag, ctl.pace.prev_lag)  # as the tracker plays it
    v_ref = ctl.pace.rate * v_ref
    tilt = matrix_to_axis_angle(quat_to_matrix(q_ref[3:7]) @ quat_to_matrix(q[3:7]).T)[:2]
    c = (P["w_z"] * (q[2] - q_ref[2]) ** 2 + P["w_tilt"] * float(tilt @ tilt)
         + P["w_v"] * float(np.sum((qd[:2] - v_ref[:2]) ** 2))
         + P["w_j"] * (joint_errors_deg(RIG, ctl.plan.space.diff(q, q_ref)) / 10.0) ** 2 + P["w_u"] * float(u @ u))
    return c, q[2]


def rollout(sim, ctl, U, start) -> float:
    f = schedule(U, start)
    ctl.offset = f
    total = 0.0
    for t in range(P["H"]):
        cmd = ctl.act(sim, sim.state)
        try:
            sim.step(cmd)
        except Exception:  # diverged: the worst
            return total + 1e4 * (P["H"] - t)
        c, z = step_cost(sim, ctl, f(sim.steps))
        total += c
        if z < P["fall_z"]:
            return total + 1e3 * (P["H"] - t)
    return total


W = {}


def init_worker(seconds, clip, params):
    P.update(params)
    W["sim"], W["ctl"], _ = make(seconds, clip)


def work(args):
    snap, cands, start = args
    out = []
    for U in cands:
        restore(W["sim"], W["ctl"], snap)
        out.append(rollout(W["sim"], W["ctl"], U, start))
    return out


def main():
    from multiprocessing import Pool

    for a in sys.argv[1:]:
        k, v = a.split("=")
        P[k] = type(P[k])(v)
    clip = P["clip"] or str(MOTION / "walk.bvh")
    rng = np.random.default_rng(P["seed"])
    sim, ctl, plan = make(P["seconds"], clip)
    pool = Pool(P["workers"], initializer=init_worker, initargs=(P["seconds"], clip, dict(P)))
    n_knots = P["H"] // P["KN"] + 2
    U, start = np.zeros((n_knots, len(OFFSETS) + (len(KNEES) if P["knees"] else 0))), 0
    ctl.offset = schedule(U, start)
    push = None
    if P["push"]:
        tp, fv, dur = P["push"].split(":")
        push = (float(tp), np.array([float(x) for x in fv.split(",")]), float(dur))
    errs, roots, t0, pushed = [], [], time.time(), False
    for i in range(int(P["seconds"] * 120)):
        if sim.steps % P["R"] == 0:
            f_old = schedule(U, start)
            start = sim.steps
            U_nom = np.array([f_old(start + j * P["KN"]) for j in range(n_knots)])
            cands = [U_nom, np.zeros_like(U_nom)] + [P["decay"] * U_nom + P["sigma"] * rng.standard_normal(U_nom.shape)
                                                     for _ in range(P["N"] - 2)]
            snap = snapshot(sim, ctl)
            k = -(-len(cands) // P["workers"])
            costs = sum(pool.map(work, [(snap, cands[j:j + k], start) for j in range(0, len(cands), k)]), [])
            U = cands[int(np.argmin(costs))]
            ctl.offset = schedule(U, start)
            if sim.steps % 60 == 0:
                print(f"t={sim.time:5.2f} pelvis {sim.physics.get_q()[0][2]:.3f} m, cost best {min(costs):9.1f} "
                      f"kept {costs[0]:9.1f} worst {max(costs):9.1f}, |u| {np.abs(U[0]).max():.3f} "
                      f"({time.time() - t0:.0f} s)", flush=True)
        if push is not None and (push[0] <= sim.time < push[0] + push[2]) != pushed:
            pushed = not pushed
            F = np.zeros((RIG.num_bodies, 3))
            F[0] = push[1] if pushed else 0.0
            sim.physics.set_external_force(F)
        sim.step(ctl.act(sim, sim.state))
        q, _ = sim.physics.get_q()
        if i % 4 == 0:
            q_ref = plan.sample(sim.steps, ctl.pace.lag, ctl.pace.prev_lag)[0]  # as the tracker plays it
            errs.append(joint_errors_deg(RIG, plan.space.diff(q, q_ref)))
            roots.append((sim.time, q[0], q[1], q_ref[0], q_ref[1]))
        if q[2] < 0.5:
            print(f"FELL at {sim.time:.2f} s, {np.mean(errs):.1f} deg")
            break
    else:
        print(f"WALKED {P['seconds']} s, {np.mean(errs):.1f} deg, {time.time() - t0:.0f} s")
    r = np.array(roots)
    k = max(len(r) // 4, 2)
    speed = lambda a: np.linalg.norm(r[-1, a:a + 2] - r[-k, a:a + 2]) / (r[-1, 0] - r[-k, 0])
    print(f"last quarter: speed {speed(1):.2f} m/s (reference {speed(3):.2f}), joint error {np.mean(errs[-k:]):.1f} "
          f"deg; pelvis {np.linalg.norm(r[-1, 1:3] - r[-1, 3:5]):.2f} m off the reference's path at the end")
    pool.close()


if __name__ == "__main__":
    main()
