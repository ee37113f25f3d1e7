"""Experiment (issue 16; the prototype of the product's engine/control/stand.py, kept for the
record of what was tried, balance.md fifth session): hold a pose on the muscles with an LQR
about it, the feedback with a horizon that the greedy whole-body solve lacks.

As in MuJoCo's LQR tutorial (a humanoid balancing on one leg): the equilibrium is the held
pose at the root height where MuJoCo's inverse dynamics (soft contacts included) needs no
vertical root force; u0 is that inverse dynamics' generalised force on the jointed DOFs.
The physics step (soft contacts, implicit joint damping) is linearised about it by finite
differences, x' = A x + B u with x = (position difference on the manifold, velocity) and u
the generalised force on the 50 jointed DOFs, and the infinite-horizon discrete LQR gives
u = u0 - K x. The muscles then produce u: activations in their 3CC-r bounds minimising
sum w a^2 + |G a + g0 - u|^2 over the jointed rows (G: moment arms x f0 f_l f_v).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python research/lqr_hold.py --frame 60 --seconds 20
"""
import argparse
import sys
import tempfile
from pathlib import Path

import mujoco
import numpy as np
from scipy.linalg import solve_discrete_are

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "research"))

from engine.control import tracking as tr  # noqa: E402
from engine.control.coordination import bounded_lsq  # noqa: E402
from engine.simulation import MuscleCommand  # noqa: E402
from root_acceleration_tracking import held_pose_bvh, simulate_with  # noqa: E402


class LQRHold(tr.TrackingController):
    w_root_pos, w_root_rot, w_joint, w_vel, r_torque = 100.0, 100.0, 1.0, 0.1, 1e-4
    w_effort, w_track = 1.0, 1e-3  # muscle solve: activation^2 and (N m)^2 of torque error
    log = False
    muscle_space, a_floor, r_act = 1.0, 0.0, 100.0
    realise, tired_cost, w_toe_rows = 0.0, 0.0, 1.0
    flat_feet, w_toe_free, w_ankle_free = 1.0, 1.0, 0.0
    w_tilt = 100.0  # cost of tilting the root against moving a joint, finding the equilibrium

    def _linearise(self, sim):
        m = sim.physics.model
        d = mujoco.MjData(m)
        q_ref = self.reference(0)[0].copy()
        nv = m.nv

        rig = self.rig
        feet = [rig.body_index(n + side) for side in "RL" for n in ("Talus", "FootThumb", "FootPinky")]
        R0 = rig.body_rest_rot[feet]
        half_z = 0.5 * np.abs(R0[:, 2, :]) @ np.ones(3) * 0  # filled below
        toe_dofs = np.flatnonzero(np.isin(m.dof_bodyid - 1, [b for b in feet if "Foot" in rig.body_names[b]]))
        ankle_dofs = np.flatnonzero(np.isin(m.dof_bodyid - 1, [b for b in feet if "Talus" in rig.body_names[b]]))
        half_z = 0.5 * np.einsum("bk,bk->b", np.abs(R0[:, 2, :]), rig.body_size[feet])

        def root_wrench(q):
            """What must vanish at the equilibrium: the root's vertical force and tipping
            torques (N, N m), and with flat_feet every foot box level and at one height."""
            d.qpos[:] = q
            d.qvel[:] = 0
            d.qacc[:] = 0
            mujoco.mj_inverse(m, d)
            out = d.qfrc_inverse[[2, 3, 4]].copy()
            if not self.flat_feet:
                return out
            R = d.ximat[np.array(feet) + 1].reshape(-1, 3, 3)
            up = np.einsum("bij,bkj,k->bi", R, R0, np.array([0.0, 0.0, 1.0]))  # rest-up axis now
            bottom = d.xipos[np.array(feet) + 1, 2] - half_z
            # toes that carry no load: no torque asked of the weak toe muscles
            toes = d.qfrc_inverse[toe_dofs] * self.w_toe_free
            ankles = d.qfrc_inverse[ankle_dofs] * self.w_ankle_free  # the centre of mass over the ankles
            return np.concatenate([out, 300.0 * up[:, :2].ravel(), 3000.0 * (bottom[1:] - bottom[0]), toes, ankles])

        def moved(q, dv):
            out = q.copy()
            mujoco.mj_integratePos(m, out, dv, 1.0)
            return out

        # Gauss-Newton for the nearest static equilibrium: the smallest weighted change of
        # the pose (root tilt dear, joints cheap) after which the contacts carry the body
        # (no vertical force, no tipping torque left at the root)
        W = np.full(nv, 1.0)
        W[:2], W[3:6] = 1e6, self.w_tilt
        W[2] = 1.0
        q = q_ref.copy()
        lam = 1e-6
        best = (np.inf, q)
        for it in range(300):
            f = root_wrench(q)
            nf = np.linalg.norm(f)
            if not nf < best[0] * (1 - 1e-4) and it - best[2] > 20 if len(best) > 2 else False:
                break
            if nf < best[0] * (1 - 1e-4):
                best = (nf, q.copy(), it)
            if nf < 1e-2:
                break
            J = np.zeros((len(f), nv))
            for k in range(nv):
                e = np.zeros(nv)
                e[k] = 1e-6
                J[:, k] = (root_wrench(moved(q, e)) - root_wrench(moved(q, -e))) / 2e-6
            Wi = 1.0 / W
            for _ in range(30):  # Levenberg-Marquardt in the weighted metric
                H = (J * Wi) @ J.T
                step = -Wi * (J.T @ np.linalg.solve(H + (lam * np.trace(H) / len(f) + 1e-12) * np.eye(len(f)), f))
                step *= min(1.0, 0.02 / max(np.abs(step).max(), 1e-12))
                if np.linalg.norm(root_wrench(moved(q, step))) < np.linalg.norm(f):
                    lam = max(lam / 3, 1e-8)
                    break
                lam *= 10
            q = moved(q, step)
            if self.log and it % 20 == 0:
                print(f"  equilibrium search {it}: |f| {np.linalg.norm(f):.3f} {np.abs(f).round(2)[:5]}")
        q = best[1]
        f = root_wrench(q)
        if self.log:
            print("  left:", [(i, round(float(v), 2)) for i, v in enumerate(f) if abs(v) > 0.05])
        print(f"equilibrium residual {np.abs(root_wrench(q)).max():.3f}")
        dv = np.zeros(nv)
        mujoco.mj_differentiatePos(m, dv, 1.0, q_ref, q)
        print(f"equilibrium after {it} steps: root dz {100 * dv[2]:+.2f} cm, tilt {np.degrees(dv[3:6]).round(2)} deg, "
              f"joints moved {np.degrees(np.abs(dv[6:])).mean():.2f} deg mean, {np.degrees(np.abs(dv[6:])).max():.1f} max")
        self.q0 = d.qpos.copy()
        self.u0 = d.qfrc_inverse.copy()
        print(f"root wrench left {self.u0[:6].round(2)}")
        # A by MuJoCo's finite differences, B by perturbing the generalised force
        d.qpos[:] = self.q0
        d.qvel[:] = 0
        d.qfrc_applied[:] = self.u0
        d.qfrc_applied[:6] = 0
        mujoco.mj_forward(m, d)
        A = np.zeros((2 * nv, 2 * nv))
        mujoco.mjd_transitionFD(m, d, 1e-6, True, A, None, None, None)
        base = mujoco.MjData(m)

        def step_from(qfrc):
            base.qpos[:] = self.q0
            base.qvel[:] = 0
            base.qfrc_applied[:] = qfrc
            base.time = 0
            mujoco.mj_step(m, base)
            dq = np.zeros(nv)
            mujoco.mj_differentiatePos(m, dq, 1.0, self.q0, base.qpos)
            return np.concatenate([dq, base.qvel])

        u_nom = d.qfrc_applied.copy()
        eps = 1e-2
        B = np.zeros((2 * nv, nv - 6))
        for i in range(6, nv):
            up, dn = u_nom.copy(), u_nom.copy()
            up[i] += eps
            dn[i] -= eps
            B[:, i - 6] = (step_from(up) - step_from(dn)) / (2 * eps)
        self.A_lin, self.B_tau = A, B
        wq = np.full(nv, self.w_joint)
        wq[:3], wq[3:6] = self.w_root_pos, self.w_root_rot
        Q = np.diag(np.concatenate([1e4 * wq, np.full(nv, self.w_vel)]))
        cap = np.abs(self._A0[:, 6:]).T @ self.rig.muscle_f0  # N m the muscles could give each DOF
        self.cap = cap
        R = self.r_torque * np.diag((100.0 / np.maximum(cap, 1.0)) ** 2)
        if self.muscle_space:
            self.K = None
            return
        P = solve_discrete_are(A, B, Q, R)
        self.K = np.linalg.solve(R + B.T @ P @ B, B.T @ P @ A)
        eig = np.abs(np.linalg.eigvals(A - B @ self.K))
        print(f"LQR: open-loop spectral radius {np.abs(np.linalg.eigvals(A)).max():.4f}, closed {eig.max():.4f}, "
              f"|K| {np.abs(self.K).max():.0f}")

    def _muscle_lqr(self, sim, state):
        """The LQR with the activations as its inputs (B = B_tau G at the equilibrium): the
        feedback then only asks of the muscles what they can give."""
        rig = self.rig
        flfv, fpe, A, _ = self.muscle_terms(sim, state)
        G = (-A.T * (rig.muscle_f0 * flfv)[None, :])[6:]
        g0 = (-A.T @ (rig.muscle_f0 * fpe))[6:]
        n_m = G.shape[1]
        Mm = np.zeros((self.model.nv, self.model.nv))
        mujoco.mj_fullM(self.model, self.data, Mm)
        # the miss weighed as the acceleration it causes: a hand's N m counts for more than a hip's
        w = np.sqrt(self.w_track) / np.sqrt(np.diag(Mm)[6:])[:, None]
        foot_dofs = np.isin(self.model.dof_bodyid[6:] - 1, [rig.body_index(n + s) for s in "RL" for n in ("FootThumb", "FootPinky")])
        w[foot_dofs] *= self.w_toe_rows
        if self.log:
            print("  toes: u0", self.u0[6:][foot_dofs].round(1), "passive", g0[foot_dofs].round(1))
        self.a0, _, _ = bounded_lsq(w * G, (w * (self.u0[6:] - g0)[:, None]).ravel(), np.full(n_m, self.w_effort),
                                     np.full(n_m, self.a_floor), np.ones(n_m), "newton", None, np.zeros(n_m))
        miss = G @ self.a0 + g0 - self.u0[6:]
        self.G0, self.g00, self.w_rows = G, g0, w
        nv = self.model.nv
        wq = np.full(nv, self.w_joint)
        wq[:3], wq[3:6] = self.w_root_pos, self.w_root_rot
        wq[[0, 1, 5]] = 0.0  # the whole body slid or turned on the floor: an equilibrium too, not controllable
        Q = np.diag(np.concatenate([1e4 * wq, np.full(nv, self.w_vel)]))
        Ba = self.B_tau @ G
        R = self.r_act * np.eye(n_m)
        Ad = (1.0 - 1e-4) * self.A_lin  # the neutral modes (sliding, turning on the floor) count as stable
        P = solve_discrete_are(Ad, Ba, Q, R)
        self.Ka = np.linalg.solve(R + Ba.T @ P @ Ba, Ba.T @ P @ Ad)
        eig = np.abs(np.linalg.eigvals(self.A_lin - Ba @ self.Ka)).max()
        acc_miss = np.linalg.solve(Mm[6:, 6:], miss)
        print(f"muscle-space LQR: a0 mean {self.a0.mean():.3f} max {self.a0.max():.2f}, torque miss {np.abs(miss).max():.1f} N m, "
              f"acceleration miss {np.abs(acc_miss).max():.1f} rad/s^2, busiest "
              f"{[(rig.muscle_names[j], round(float(self.a0[j]), 2)) for j in np.argsort(-self.a0)[:4]]}, "
              f"closed loop {eig:.4f}, |Ka| {np.abs(self.Ka).max():.2f}")

    def act(self, sim, state):
        if not hasattr(self, "K"):
            self._A0 = self.muscle_terms(sim, state)[2]
            self._linearise(sim)
            sim.physics.set_q(self.q0, np.zeros(self.model.nv))  # start at the equilibrium
            state = sim.state = sim.physics.body_state()
            if self.muscle_space:
                self._muscle_lqr(sim, state)
                sim.fatigue.MA[:] = self.a0  # the muscles already holding the pose
                sim.fatigue.MR[:] = 1.0 - self.a0 - sim.fatigue.MF
        rig = self.rig
        q, qd = sim.physics.get_q()
        self._check_ground(sim)
        self.advance_pace(sim)
        flfv, fpe, A, _ = self.muscle_terms(sim, state)
        p = sim.muscles.params
        from engine import fatigue as fat
        lb, ub = fat.activation_bounds(sim.fatigue.MA, sim.fatigue.MR, sim.muscles.dt, p.F_eff, p.LD, p.LR)
        dq = np.zeros(len(qd))
        mujoco.mj_differentiatePos(self.model, dq, 1.0, self.q0, q)
        if self.muscle_space and self.realise:
            # the LQR's wanted generalised force, made by whichever muscles can (fatigue-aware)
            flfv, fpe, A, _ = self.muscle_terms(sim, state)
            G = (-A.T * (rig.muscle_f0 * flfv)[None, :])[6:]
            g0 = (-A.T @ (rig.muscle_f0 * fpe))[6:]
            u = self.G0 @ (self.a0 - self.Ka @ np.concatenate([dq, qd])) + self.g00
            mf = sim.fatigue.MF
            cost = self.w_effort * (1.0 + self.tired_cost * mf / np.maximum(1.0 - mf, 0.05))
            x, status, act = bounded_lsq(self.w_rows * G, (self.w_rows * (u - g0)[:, None]).ravel(), cost, lb,
                                          np.maximum(ub, lb), "newton", self._warm, np.zeros(len(lb)), self._active, len(lb))
            self._warm, self._active = x, act
            self.stats["decisions"] += 1
            self.last = dict(q_ref=self.q0, contact_rows=0, residual=np.zeros(6), activation=x, status=status)
            if self.log and sim.steps % 12 == 0:
                print(f"t={sim.time:5.2f} |dq| root {np.abs(dq[:6]).max():.3f} joints {np.degrees(np.abs(dq[6:])).mean():.2f} deg, "
                      f"act mean {x.mean():.3f} max {x.max():.2f}, legs' M_F {mf[self._legs].mean():.3f}")
            return MuscleCommand(x, None, None)
        if self.muscle_space:
            x = np.clip(self.a0 - self.Ka @ np.concatenate([dq, qd]), lb, np.maximum(ub, lb))
            self.stats["decisions"] += 1
            self.last = dict(q_ref=self.q0, contact_rows=0, residual=np.zeros(6), activation=x, status=0)
            if self.log and sim.steps % 12 == 0:
                print(f"t={sim.time:5.2f} |dq| root {np.abs(dq[:6]).max():.3f} joints {np.degrees(np.abs(dq[6:])).mean():.2f} deg, "
                      f"act mean {x.mean():.3f} max {x.max():.2f}, clipped {(x != self.a0 - self.Ka @ np.concatenate([dq, qd])).sum()}")
            return MuscleCommand(x, None, None)
        u = self.u0[6:] - self.K @ np.concatenate([dq, qd])
        G = -A.T * (rig.muscle_f0 * flfv)[None, :]
        g0 = -A.T @ (rig.muscle_f0 * fpe)
        w = np.sqrt(self.w_track)
        Rm, r = w * G[6:], w * (u - g0[6:])
        n_m = len(lb)
        reg = np.full(n_m, self.w_effort)
        x, status, act = bounded_lsq(Rm, r, reg, lb, np.maximum(ub, lb), "newton", self._warm, np.zeros(n_m),
                                      self._active, n_m)
        self._warm, self._active = x, act
        self.stats["decisions"] += 1
        self.last = dict(q_ref=self.q0, contact_rows=0, residual=np.zeros(6), activation=x, status=status)
        if self.log and sim.steps % 12 == 0:
            err = G[6:] @ x + g0[6:] - u
            print(f"t={sim.time:5.2f} |dq| root {np.abs(dq[:6]).max():.3f} joints {np.degrees(np.abs(dq[6:])).mean():.2f} deg, "
                  f"|u-u0| {np.abs(u - self.u0[6:]).max():.0f}, torque miss {np.abs(err).max():.0f} N m, "
                  f"act mean {x.mean():.3f} max {x.max():.2f}")
            worst = np.argsort(-np.abs(err))[:4]
            names = [self.model.joint(int(self.model.dof_jntid[i + 6])).name + str(i + 6) for i in worst]
            jw = np.argsort(-np.abs(dq[6:]))[:4] + 6
            print("     drift", [(self.model.joint(int(self.model.dof_jntid[i])).name + str(i), round(float(np.degrees(dq[i])), 1)) for i in jw])
            print("     worst", [(n, round(float(u[i])), round(float(err[i]))) for n, i in zip(names, worst)])
        return MuscleCommand(x, None, None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frame", type=int, default=60)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--fatigue-scale", type=float, default=1.0)
    ap.add_argument("--set", action="append", default=[], help="NAME=VALUE of an LQRHold weight")
    ap.add_argument("--save")
    ap.add_argument("--log", action="store_true")
    a = ap.parse_args()
    for kv in a.set:
        k, v = kv.split("=")
        setattr(LQRHold, k, float(v))
    LQRHold.log = a.log
    with tempfile.TemporaryDirectory() as tmp:
        take = simulate_with(LQRHold, [(held_pose_bvh(a.frame, Path(tmp)), a.seconds)],
                             tr.TrackingParams(residual=0.0), a.fatigue_scale)
    if a.save:
        take.save(a.save)
    s = take.meta["summary"]
    print(f"hold:{a.frame} fatigue={a.fatigue_scale} {' '.join(a.set)}: "
          f"{'fell at %.2f s' % s['stopped_at_s'] if s['fell'] else 'stood'}, joint error {s['joint_err_deg_mean']:.2f} deg")


if __name__ == "__main__":
    main()


def torque_only(ctrl: "LQRHold", seconds: float, noise: float = 0.0):
    """The same LQR with ideal joint torques (no muscles): does the linear design hold?"""
    m = ctrl.model
    d = mujoco.MjData(m)
    d.qpos[:] = ctrl.q0
    mujoco.mj_forward(m, d)
    dq = np.zeros(m.nv)
    rng = np.random.default_rng(0)
    for k in range(int(seconds * 120)):
        mujoco.mj_differentiatePos(m, dq, 1.0, ctrl.q0, d.qpos)
        u = ctrl.u0[6:] - ctrl.K @ np.concatenate([dq, d.qvel])
        d.qfrc_applied[6:] = u + noise * rng.standard_normal(len(u))
        d.qfrc_applied[:6] = 0
        mujoco.mj_step(m, d)
        if k % 120 == 0:
            print(f"torque-only t={d.time:5.2f} root dq {np.abs(dq[:6]).max():.3f} joints {np.degrees(np.abs(dq[6:])).mean():.2f} deg |u| {np.abs(u).max():.0f}")
