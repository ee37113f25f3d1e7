"""Experiment (issue 16, not part of the product): the walk without the root residual by
receding-horizon iLQR on the muscles (model-predictive control; MuJoCo MPC's humanoid
tracking does the same with joint torques).

Every `--every` steps, from the character's actual state, on a shadow copy of the simulation
(same MuJoCo model, same muscle step, same 3CC-r bounds):

1. Roll out a nominal over `--horizon` steps: the last plan's activations (shifted) and, for
   the steps past it, the product's tracker without its residual. Every step is linearised:
   x' = A x + B_tau tau (MuJoCo finite differences about the step, applied wrench held),
   with the muscles' generalised force per activation G (B = B_tau G: activations as inputs,
   as engine/control/stand.py).
2. iLQR's backward pass for the tracking cost (pose and velocity error against the
   reference, the root's height and tilt dear, plus effort), then forward passes with a line
   search on the true (shadow) dynamics, activations clipped into their 3CC-r bounds.
3. Play the best plan's first `--every` steps (the shadow and the character are the same
   deterministic simulation, so the plan is what happens).

With `--w-res` the root's generalised force is 6 more inputs, its cost stepped up stage by
stage (a homotopy from the tracker's supported walk to none); with `--tvlqr` the plan is the
tracker's own walk with its residual, re-recorded every `--every` steps and played without
the residual by a time-varying LQR about it. `--clip hold:N` holds walk frame N.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python research/mpc_walk.py --seconds 1.5 --iters 2 --verbose
    OPENBLAS_NUM_THREADS=1 .venv/bin/python research/mpc_walk.py --clip hold:60 --seconds 4 --verbose
    OPENBLAS_NUM_THREADS=1 .venv/bin/python research/mpc_walk.py --tvlqr --guide-residual 1 \\
        --horizon 240 --every 60 --seconds 6 --verbose

Measured (docs/research/balance.md, seventh session): every variant falls sooner than or
about when the product tracker does (0.8-1.9 s), held poses included; 25-200x slower than
real time.
"""
import argparse
import copy
import sys
import time
from pathlib import Path

import mujoco
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "research"))
MOTION = ROOT.parent / "shared" / "reference" / "mass" / "motion"

from engine import fatigue as fat  # noqa: E402
from engine.control import tracking as tr  # noqa: E402
from engine.simulation import MuscleCommand, Simulation  # noqa: E402
from root_acceleration_tracking import simulate_with  # noqa: E402

ARGS = None
FATIGUE = None


def linearise(model, src, fd_eps, centred):
    """(A, B_tau) of the coming step of MjData `src` (half-stepped, its applied wrench set):
    next tangent state per state and per generalised force on every DOF (the root's 6 first)."""
    nv = model.nv
    d = mujoco.MjData(model)
    d.qpos[:], d.qvel[:] = src.qpos, src.qvel
    d.xfrc_applied[:] = src.xfrc_applied
    d.qfrc_applied[:] = src.qfrc_applied
    d.qacc_warmstart[:] = src.qacc_warmstart
    mujoco.mj_forward(model, d)
    A = np.zeros((2 * nv, 2 * nv))
    B = np.zeros((2 * nv, nv))
    # mjd_transitionFD differentiates by ctrl only (this model has no actuators): B_tau by
    # perturbing qfrc_applied here
    mujoco.mjd_transitionFD(model, d, fd_eps, centred, A, None, None, None)
    q0 = d.qpos.copy()
    work = mujoco.MjData(model)
    dq = np.zeros(nv)

    def step(extra):
        work.qpos[:], work.qvel[:] = d.qpos, d.qvel
        work.qacc_warmstart[:] = d.qacc_warmstart
        work.xfrc_applied[:] = d.xfrc_applied
        work.qfrc_applied[:] = d.qfrc_applied + extra
        mujoco.mj_step(model, work)
        mujoco.mj_differentiatePos(model, dq, 1.0, q0, work.qpos)
        return np.concatenate([dq, work.qvel])

    eps = 1e-1
    base = None if centred else step(np.zeros(nv))
    e = np.zeros(nv)
    for i in range(nv):
        e[:] = 0.0
        e[i] = eps
        B[:, i] = (step(e) - step(-e)) / (2 * eps) if centred else (step(e) - base) / eps
    return A, B


class MPC(tr.TrackingController):
    """The receding-horizon controller of the module docstring; a TrackingController only for
    the take's plumbing (reference, stats). Options come from the command line (ARGS)."""

    def __init__(self, sim, plan, params=None):
        super().__init__(sim, plan, params)
        a = ARGS
        self.H, self.N = a.horizon, a.every
        self.shadow = Simulation(sim.rig, fatigue=FATIGUE)
        self.guide = tr.TrackingController(self.shadow, plan, tr.TrackingParams(residual=a.guide_residual))
        self.n_m = sim.rig.num_muscles
        self.w_res = a.w_res[0]
        self.lin_model = copy.deepcopy(self.shadow.physics.model)
        self.lin_model.opt.tolerance, self.lin_model.opt.iterations = a.tol, 1000
        if a.lin_impratio:  # a smoother contact model for the derivatives only
            self.lin_model.opt.impratio = a.lin_impratio
        nv = self.model.nv
        wq = np.full(nv, a.w_joint)
        wq[:6] = [a.w_xy, a.w_xy, a.w_z, a.w_tilt, a.w_tilt, a.w_yaw]
        wv = np.full(nv, a.w_vel)
        wv[:6] = a.w_root_vel
        self.Wq, self.Wv = wq, wv
        self.diff = plan.space.diff  # qb - qa on the configuration manifold
        self.P = None
        self.guide_act = None
        self.plan_u = None  # the current plan: activations (T, M), states, gains
        self.k_in = 0
        self.t_plan = 0.0
        self.max_dev = 0.0  # largest |played state - planned state| (0: the shadow is exact)

    def start(self, sim):
        """Called by the take after it has put the character at the reference's start."""
        if ARGS.terminal_lqr:
            self.terminal_lqr(sim)

    def terminal_lqr(self, sim):
        """P of the stand controller's LQR about the held reference's balanced pose (a held
        pose only: the value of bringing the body to rest there). The stand controller is
        built on the shadow (it becomes the guide with --stand-guide) and the character is
        put where it starts: the balanced pose at rest, the muscles at a0."""
        from scipy.linalg import solve_discrete_are

        from engine.control import stand

        sh = self.shadow
        self.sync(sim)
        sc = stand.StandController(sh, self.plan, tr.TrackingParams(residual=0.0))
        sc.start(sh)
        mujoco.mj_copyData(sim.physics.data, sim.physics.model, sh.physics.data)
        sim.fatigue = sh.fatigue.copy()
        sim.state = sim.physics.body_state()
        Bm = sc._B @ sc.G0
        self.P = ARGS.p_scale * solve_discrete_are((1.0 - 1e-4) * sc._A, Bm, sc._Q,
                                                   stand.R_ACTIVATION * np.eye(Bm.shape[1]))
        self.q0 = sc.q0
        if ARGS.stand_guide:
            self.guide_act = lambda sh_, st: np.concatenate([sc.act(sh_, st).activation, np.zeros(6)])

    # ---- the shadow ---------------------------------------------------------------------
    def sync(self, sim):
        sh = self.shadow
        mujoco.mj_copyData(sh.physics.data, sh.physics.model, sim.physics.data)
        sh.fatigue = sim.fatigue.copy()
        sh.steps = sim.steps
        sh.state = sim.physics.body_state()

    def generalised(self, sim):
        f0 = self.rig.muscle_f0
        flfv, fpe, A, _ = self.guide.muscle_terms(sim, sim.state, margin=-np.inf)
        return -A.T * (f0 * flfv)[None, :]

    def cost_terms(self, q, qd, step):
        q_ref, v_ref, _ = self.guide.reference(step)
        return self.diff(q_ref, q), qd - v_ref

    def rollout(self, sim, us, nominal=None, alpha=0.0, lin=False):
        """From sim's state: activations (and root forces) us[t] (+ alpha k_t + K_t dx against
        `nominal`), the guide past len(us). Returns (states q, qd, the inputs played, cost,
        linearisations, the terminal cost's gradient and Hessian in the tangent state)."""
        self.sync(sim)
        sh = self.shadow
        a = ARGS
        Q, QD, U, lins = [], [], [], []
        cost = 0.0
        p = sh.muscles.params
        n_m = self.n_m
        orig_step = sh.physics.step
        for t in range(self.H):
            q, qd = sh.physics.get_q()
            if t < len(us):
                u = us[t].copy()
                if nominal is not None:
                    nq, nqd, K, k = nominal
                    u += alpha * k[t] + K[t] @ np.concatenate([self.diff(nq[t], q), qd - nqd[t]])
            else:
                if self.guide_act is not None:
                    u = self.guide_act(sh, sh.state)
                else:
                    self.guide.last = None
                    u = np.concatenate([self.guide.act(sh, sh.state).activation, self.guide.last["residual"]])
            lb, ub = fat.activation_bounds(sh.fatigue.MA, sh.fatigue.MR, sh.muscles.dt, p.F_eff, p.LD, p.LR)
            u[:n_m] = np.clip(u[:n_m], lb, np.maximum(ub, lb))
            if self.w_res >= 1e8:
                u[n_m:] = 0.0
            e, ev = self.cost_terms(q, qd, sh.steps)
            terms = 0.5 * np.array([e[:6] @ (self.Wq[:6] * e[:6]), e[6:] @ (self.Wq[6:] * e[6:]),
                                    ev[:6] @ (self.Wv[:6] * ev[:6]), ev[6:] @ (self.Wv[6:] * ev[6:]), a.r * u[:n_m] @ u[:n_m], self.w_res * u[n_m:] @ u[n_m:]])
            self.terms = terms if t == 0 else self.terms + terms
            cost += terms.sum()
            Q.append(q)
            QD.append(qd)
            U.append(u)
            if lin:
                G = self.generalised(sh)[6:]
                sh.physics.data.qfrc_applied[:6] = u[n_m:]
                holder = {}

                def step_with_lin():
                    holder["AB"] = linearise(self.lin_model, sh.physics.data, a.fd_eps, not a.forward)
                    orig_step()
                sh.physics.step = step_with_lin
                sh.step(MuscleCommand(u[:n_m], None, None))
                sh.physics.step = orig_step
                A, Bt = holder["AB"]
                lins.append((A, np.hstack([Bt[:, 6:] @ G, Bt[:, :6]]), e, ev))
            else:
                sh.physics.data.qfrc_applied[:6] = u[n_m:]
                sh.step(MuscleCommand(u[:n_m], None, None))
            sh.physics.data.qfrc_applied[:6] = 0.0
        q, qd = sh.physics.get_q()
        if self.P is not None:  # the stand controller's infinite-horizon value about its balanced pose
            x, Vxx = np.concatenate([self.diff(self.q0, q), qd]), self.P
        else:
            x = np.concatenate(self.cost_terms(q, qd, sh.steps))
            Vxx = np.diag(a.terminal * np.concatenate([self.Wq, self.Wv]))
        cost += 0.5 * x @ Vxx @ x
        return np.array(Q), np.array(QD), np.array(U), cost, lins, (Vxx @ x, Vxx)

    def backward(self, lins, terminal, U, mu=0.0):
        """iLQR's backward pass from the terminal (Vx, Vxx); (K, k) per step, or (None, None)
        where Quu is not positive definite at this regularisation mu."""
        a = ARGS
        Vx, Vxx = terminal
        Wx = np.concatenate([self.Wq, self.Wv])
        T = len(lins)
        Ks, ks = [None] * T, [None] * T
        for t in range(T - 1, -1, -1):
            A, B, e, ev = lins[t]
            lx = Wx * np.concatenate([e, ev])
            Rd = np.full(B.shape[1], a.r)
            Rd[self.n_m:] = self.w_res
            lu = Rd * U[t]
            Qx = lx + A.T @ Vx
            Qu = lu + B.T @ Vx
            VB = Vxx @ B
            Quu = np.diag(Rd) + B.T @ VB
            Qux = VB.T @ A
            Qxx = np.diag(Wx) + A.T @ Vxx @ A
            try:  # state-space regularisation (Tassa et al. 2012) for the gains only
                L = np.linalg.cholesky(Quu + mu * B.T @ B)
            except np.linalg.LinAlgError:
                return None, None
            sol = np.linalg.solve(L.T, np.linalg.solve(L, np.column_stack([Qu, Qux + mu * B.T @ A])))
            k, K = -sol[:, 0], -sol[:, 1:]
            Ks[t], ks[t] = K, k
            Vx = Qx + K.T @ (Quu @ k) + K.T @ Qu + Qux.T @ k
            Vxx = Qxx + K.T @ Quu @ K + K.T @ Qux + Qux.T @ K
            Vxx = 0.5 * (Vxx + Vxx.T)
        return Ks, ks

    def tvlqr(self, lins):
        """Feedback gains about the nominal itself (k = 0; session 5's tvlqr_walk.py): Q on
        the state's deviation, R on the activations' (the nominal's residual is not played)."""
        a = ARGS
        nv = self.model.nv
        wq = np.full(nv, a.tv_q)
        wq[[0, 1, 5]] = 1.0  # horizontal position and heading: a little
        Qd = np.concatenate([wq, np.full(nv, a.tv_qv)])
        P = np.diag(Qd)
        Ks = [None] * len(lins)
        for t in range(len(lins) - 1, -1, -1):
            A, B = lins[t][0], lins[t][1][:, :self.n_m]
            PB = P @ B
            Ks[t] = -np.linalg.solve(a.tv_r * np.eye(self.n_m) + B.T @ PB, PB.T @ A)
            P = np.diag(Qd) + A.T @ P @ (A + B @ Ks[t])
            P = 0.5 * (P + P.T)
        return Ks

    def replan(self, sim):
        t0 = time.perf_counter()
        a = ARGS
        if a.tvlqr:  # re-record the tracker (with its residual) from here; play it without
            self.w_res = 0.0  # the nominal keeps its residual
            Q, QD, U, _, lins, _ = self.rollout(sim, [], lin=True)
            self.plan_u, self.plan_q, self.plan_qd = U.copy(), Q, QD
            self.plan_u[:, self.n_m:] = 0.0
            self.plan_K = self.tvlqr(lins)
            self.k_in = 0
            self.t_plan += time.perf_counter() - t0
            if a.verbose:
                q, qd = sim.physics.get_q()
                e, ev = self.cost_terms(q, qd, sim.steps)
                res = np.abs(U[:, self.n_m:self.n_m + 3]).sum(1).mean() / (self.rig.mass_kg * 9.81)
                print(f"  t={sim.time:5.2f} now: z {100*e[2]:5.1f} cm xy {100*np.hypot(*e[:2]):5.1f} cm tilt "
                      f"{np.degrees(np.linalg.norm(e[3:5])):5.1f} yaw {np.degrees(e[5]):5.1f} joints "
                      f"{np.degrees(np.sqrt((e[6:]**2).mean())):5.1f}; nominal residual {res:.3f} BW; "
                      f"|K| {max(np.abs(K).max() for K in self.plan_K):.1f} ({time.perf_counter() - t0:.1f} s)", flush=True)
            return
        us = [] if self.plan_u is None else list(self.plan_u[self.N:])
        if us and a.fresh_guide:  # the guide tracker alone may be the better warm start
            c_shift = self.rollout(sim, us)[3]
            c_guide = self.rollout(sim, [])[3]
            if c_guide < c_shift:
                us = []
        tried = []
        for stage, w in enumerate(a.w_res):
            self.w_res = w
            Q, QD, U, cost_s, lins, term = self.rollout(sim, us, lin=True)
            if stage == 0:
                cost0, terms0 = cost_s, self.terms
            terms1 = self.terms
            best = (cost_s, Q, QD, U, None)
            for it in range(a.iters):
                improved = False
                for mu in (a.mu, 10 * a.mu + 1.0, 100 * a.mu + 100.0, 1e4):
                    Ks, ks = self.backward(lins, term, U, mu)
                    if Ks is None:
                        tried.append((mu, "not PD"))
                        continue
                    for alpha in (1.0, 0.5, 0.25):
                        Qn, QDn, Un, c, _, _ = self.rollout(sim, U, (Q, QD, Ks, ks), alpha)
                        tried.append((round(mu, 1), round(alpha, 2), round(c, 1)))
                        if c < best[0]:
                            best = (c, Qn, QDn, Un, Ks)
                            terms1 = self.terms
                            improved = True
                            break
                    if improved:
                        break
                if not improved:
                    break
                if it + 1 < a.iters:
                    Q, QD, U, _, lins, term = self.rollout(sim, list(best[3]), lin=True)
            us = list(best[3])
            if a.verbose and len(a.w_res) > 1:
                res = np.abs(best[3][:, self.n_m:self.n_m + 3]).sum(1).mean() / (self.rig.mass_kg * 9.81)
                eT, _ = self.cost_terms(best[1][-1], best[2][-1], sim.steps + len(best[1]) - 1)
                print(f"    stage w_res {w:g}: cost {best[0]:.1f}, residual force {res:.3f} BW, plan end z "
                      f"{100 * eT[2]:.1f} cm tilt {np.degrees(np.linalg.norm(eT[3:5])):.1f} joints "
                      f"{np.degrees(np.sqrt((eT[6:] ** 2).mean())):.1f}, {len(tried)} tries", flush=True)
        c, Q, QD, U, Ks = best
        self.plan_u, self.plan_q, self.plan_qd = U, Q, QD
        self.plan_K = Ks
        self.k_in = 0
        self.t_plan += time.perf_counter() - t0
        if a.verbose:
            q, qd = sim.physics.get_q()
            e, ev = self.cost_terms(q, qd, sim.steps)
            eT, evT = self.cost_terms(Q[-1], QD[-1], sim.steps + len(Q) - 1)
            print(f"  t={sim.time:5.2f} cost {cost0:10.1f} -> {c:10.1f} {tried if a.iters else ''} "
                  f"({time.perf_counter() - t0:.2f} s) now: z {100*e[2]:5.1f} cm xy {100*np.hypot(*e[:2]):5.1f} cm "
                  f"tilt {np.degrees(np.linalg.norm(e[3:5])):5.1f} yaw {np.degrees(e[5]):5.1f} joints {np.degrees(np.sqrt((e[6:]**2).mean())):5.1f} "
                  f"vroot {np.linalg.norm(ev[:3]):4.2f}; plan end: z {100*eT[2]:5.1f} tilt {np.degrees(np.linalg.norm(eT[3:5])):5.1f} "
                  f"joints {np.degrees(np.sqrt((eT[6:]**2).mean())):5.1f}; u mean {U.mean():.3f}", flush=True)
            print("     terms root/joints/vroot/vjoints/effort", terms0.round(0), "->", terms1.round(0))

    def act(self, sim, state):
        if self.plan_u is None or self.k_in >= self.N or len(self.plan_u) <= self.k_in:
            self.replan(sim)
        t = self.k_in
        u = self.plan_u[t].copy()
        q, qd = sim.physics.get_q()
        dev = np.abs(q - self.plan_q[t]).max()
        self.max_dev = max(self.max_dev, dev)
        if dev > 1e-9 and self.plan_K is not None:
            fb = self.plan_K[t] @ np.concatenate([self.diff(self.plan_q[t], q), qd - self.plan_qd[t]])
            u[:len(fb)] += fb
        self.k_in += 1
        q_ref = self.guide.reference(sim.steps)[0]
        self.stats["decisions"] += 1
        n_m = self.n_m
        sim.physics.data.qfrc_applied[:6] = u[n_m:] if ARGS.exec_residual else 0.0
        self.last = dict(q_ref=q_ref, contact_rows=0, residual=np.zeros(6), activation=u[:n_m], status=0)
        return MuscleCommand(u[:n_m], None, None)


def main():
    global ARGS, FATIGUE
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clip", default="walk")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--horizon", type=int, default=36)
    ap.add_argument("--every", type=int, default=6)
    ap.add_argument("--iters", type=int, default=1)
    ap.add_argument("--w-joint", type=float, default=100.0)
    ap.add_argument("--w-xy", type=float, default=100.0)
    ap.add_argument("--w-z", type=float, default=1e4)
    ap.add_argument("--w-tilt", type=float, default=1e3)
    ap.add_argument("--w-yaw", type=float, default=1e3)
    ap.add_argument("--w-vel", type=float, default=1.0)
    ap.add_argument("--w-root-vel", type=float, default=10.0)
    ap.add_argument("--r", type=float, default=1.0)
    ap.add_argument("--mu", type=float, default=0.0)
    ap.add_argument("--terminal", type=float, default=10.0)
    ap.add_argument("--tol", type=float, default=1e-10)
    ap.add_argument("--fd-eps", type=float, default=1e-6)
    ap.add_argument("--forward", action="store_true", help="forward differences (half the cost)")
    ap.add_argument("--fatigue", type=float, default=1.0)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--fresh-guide", action="store_true")
    ap.add_argument("--lin-impratio", type=float, default=0.0)
    ap.add_argument("--guide-residual", type=float, default=0.0)
    ap.add_argument("--w-res", type=lambda s: [float(x) for x in s.split(",")], default=[1e9],
                    help="root residual cost per (N, N m)^2, one iLQR stage each (>= 1e8: none)")
    ap.add_argument("--exec-residual", action="store_true", help="play the plan's residual too")
    ap.add_argument("--tvlqr", action="store_true", help="re-record the tracker with its residual every --every "
                    "steps over --horizon, play it without by a time-varying LQR")
    ap.add_argument("--terminal-lqr", action="store_true", help="a held pose: the stand controller's "
                    "LQR value as the terminal cost (and its start in the balanced pose)")
    ap.add_argument("--p-scale", type=float, default=1.0)
    ap.add_argument("--stand-guide", action="store_true", help="with --terminal-lqr: the stand controller "
                    "is the warm start past the last plan")
    ap.add_argument("--tv-q", type=float, default=1e4)
    ap.add_argument("--tv-qv", type=float, default=10.0)
    ap.add_argument("--tv-r", type=float, default=100.0)
    ARGS = a = ap.parse_args()
    FATIGUE = fat.FatigueParams(scale=a.fatigue)
    t0 = time.perf_counter()
    holder = {}

    def make(sim, plan, params):
        holder["c"] = MPC(sim, plan, params)
        return holder["c"]
    if a.clip.startswith("hold:"):  # a frame of the walk held (as root_acceleration_tracking.py)
        import tempfile

        from root_acceleration_tracking import held_pose_bvh
        path = held_pose_bvh(int(a.clip[5:]), Path(tempfile.mkdtemp()))
    else:
        path = MOTION / f"{a.clip}.bvh"
    take = simulate_with(make, [(path, a.seconds)], tr.TrackingParams(residual=0.0), a.fatigue)
    s = take.meta["summary"]
    wall = time.perf_counter() - t0
    print("largest deviation of the played state from the plan:", holder["c"].max_dev)
    print(f"{'fell at %.2f s' % s['stopped_at_s'] if s['fell'] else 'no fall'} of {a.seconds} s; joint error "
          f"{s['joint_err_deg_mean']:.2f} deg; wall {wall:.0f} s (planning {holder['c'].t_plan:.0f} s)")


if __name__ == "__main__":
    main()
