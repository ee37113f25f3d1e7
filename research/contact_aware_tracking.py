"""Experiment (issue 16, not part of the product): contact-aware tracking.

Predicts the realised q'' of the next step as an affine map of the applied generalised force
through MuJoCo's own soft contact solver (finite differences of qfrc_constraint, one
mj_forwardSkip per DOF) and the implicitfast step's M + dt D, then chooses activations against
that prediction, so the plan's ground force is the physics' by construction (no contact
unknowns, no residual). See docs/research/balance.md for what it measured. Run from the
repository root:

    OPENBLAS_NUM_THREADS=1 .venv/bin/python research/contact_aware_tracking.py 3 extra_rot=1000.0 d_root_t=0.01 w_com=1.0
"""
import sys, time
sys.path.insert(0, str(__import__('pathlib').Path(__file__).resolve().parents[1]))
import numpy as np, mujoco
from engine import fatigue as fat
from engine.control.tracking import TrackingController, TrackingParams
from engine.control.coordination import bounded_lsq
from engine.simulation import MuscleCommand

G = np.array([0, 0, -9.81])

class CA(TrackingController):
    w_act, w_smooth = 1.0, 10.0
    d_root_t, d_root_r, extra_rot = 1.0, 1.0, 0.0
    h = 1.0
    w_com, kp_com, kd_com = 0.0, 30.0, 11.0
    metric = 'M'
    root_pd = 1.0
    diag = []

    def _setup(self):
        self._sd = mujoco.MjData(self.model)
        self._mass = self.model.body_mass[1:].copy()
        self._mtot = self._mass.sum()
        CA.diag = self.diag = []
        self._rm = self.plan.space.model
        self._rd = mujoco.MjData(self._rm)

    def _ref_com(self, step):
        d = self._rd
        d.qpos[:] = self.plan.sample(max(step, 0))[0]
        mujoco.mj_kinematics(self._rm, d)
        mujoco.mj_comPos(self._rm, d)
        return d.subtree_com[1].copy()

    def predict_map(self, q, qd, tau0):
        """q''(tau) ~= a0 + Phi (tau - tau0) through MuJoCo's contact solver (finite differences)."""
        m, d = self.model, self._sd
        nv = m.nv
        d.qpos[:], d.qvel[:] = self.data.qpos, self.data.qvel
        d.qacc_warmstart[:] = self.data.qacc_warmstart
        d.qfrc_applied[:] = tau0
        d.xfrc_applied[:] = 0
        mujoco.mj_forward(m, d)
        # implicitfast: the step integrates with M + dt D; contact forces come from the solve
        F0 = d.qfrc_smooth + d.qfrc_constraint
        C = np.empty((nv, nv))
        c0 = d.qfrc_constraint.copy()
        for j in range(nv):
            d.qfrc_applied[:] = tau0
            d.qfrc_applied[j] += self.h
            mujoco.mj_forwardSkip(m, d, mujoco.mjtStage.mjSTAGE_VEL, 1)
            C[:, j] = (d.qfrc_constraint - c0) / self.h
        C[np.diag_indices(nv)] += 1.0
        Mi = np.linalg.inv(self._M)
        self._c0, self._Cc = c0, C - np.eye(nv)
        return Mi @ F0, Mi @ C

    def act(self, sim, state):
        if not hasattr(self, '_sd'):
            self._setup()
        t0 = time.perf_counter()
        rig = self.rig
        q, qd = sim.physics.get_q()
        a_star, q_ref = self.wanted_acceleration(q, qd, sim.steps)
        Mm, bias = self.dynamics(q, qd)
        flfv, fpe, A, Jc = self.muscle_terms(sim, state)
        f0 = rig.muscle_f0
        Gm = -A.T * (f0 * flfv)[None, :]
        gpe = -A.T @ (f0 * fpe)
        tau0 = gpe + (Gm @ self._warm if self._warm is not None else 0.0)
        a0, Phi = self.predict_map(q, qd, tau0)
        a0 = a0 - Phi @ (tau0 - gpe)  # the affine map about tau0, written from gpe
        ms = sim.muscles; pm = ms.params
        lb, ub = fat.activation_bounds(sim.fatigue.MA, sim.fatigue.MR, ms.dt, pm.F_eff, pm.LD, pm.LR)
        nv = len(qd)
        D = np.ones(nv); D[:3] = self.d_root_t; D[3:6] = self.d_root_r
        if self.metric == 'M':
            L = Mm * np.sqrt(D)[:, None]
        else:
            L = np.diag(np.sqrt(D))
        rows = [L]; targ = [L @ a_star]
        if self.extra_rot > 0:
            S = np.zeros((3, nv)); S[:, 3:6] = np.sqrt(self.extra_rot) * np.eye(3)
            rows.append(S); targ.append(S @ a_star)
        R = np.vstack(rows); r = np.concatenate(targ)
        Gp = R @ Phi @ Gm
        rhs = r - R @ a0
        if self.w_com > 0:
            step = sim.steps
            cp, cr, cn = self._ref_com(step - 1), self._ref_com(step), self._ref_com(step + 1)
            vc_ref, ac_ref = (cn - cp) * 60.0, (cn - 2 * cr + cp) * 14400.0
            Jcom = np.einsum('b,bin->in', self._mass, self._jp) / self._mtot
            com = (self._mass[:, None] * self.data.xipos[1:]).sum(0) / self._mtot
            vcom = Jcom @ qd
            a_des = ac_ref + self.kp_com * (cr - com) + self.kd_com * (vc_ref - vcom)
            # m a_com = sum of contact forces + m g: the constraint force's root translation rows
            Wc = np.sqrt(self.w_com) * np.eye(3)
            Gc = Wc @ self._Cc[:3] @ Gm
            rc = Wc @ (self._mtot * (a_des - G) - self._c0[:3] - self._Cc[:3] @ np.zeros(nv))
            Gp = np.vstack([Gp, Gc]); rhs = np.concatenate([rhs, rc])
        reg = np.full(len(lb), self.w_act + (self.w_smooth if self._warm is not None else 0.0))
        pull = self.w_smooth * self._warm if self._warm is not None else np.zeros(len(lb))
        t1 = time.perf_counter()
        x, status, act = bounded_lsq(Gp, rhs, reg, lb, np.maximum(ub, lb), 'daqp', self._warm, pull, self._active, len(lb))
        t2 = time.perf_counter()
        self._warm, self._active = x, act
        pred = a0 + Phi @ (Gm @ x)
        if getattr(self, '_pq', None) is not None:
            real = (qd - self._pq[1]) * 120.0
            e = real - self._pq[0]
            self.diag.append((sim.time, np.linalg.norm(e), *e[:6], np.linalg.norm(self._pq[0] - self._pq[2])))
        self._pq = (pred, qd.copy(), a_star)
        self.last = dict(q_ref=q_ref, contact_rows=len(Jc), residual=np.zeros(6), activation=x, status=status)
        self.stats['prepare_s'] += t1 - t0; self.stats['solve_s'] += t2 - t1; self.stats['decisions'] += 1
        return MuscleCommand(x, None, None)


def run(secs=3.0, clip='walk', scale=1.0, cls=CA, every=12, **kw):
    import engine.take as T
    import engine.control.tracking as TR
    from engine.rig import load_rig
    for k, v in kw.items():
        setattr(cls, k, v)
    orig = TR.TrackingController
    TR.TrackingController = lambda sim, plan, params: cls(sim, plan, params)
    rig = load_rig('human284')
    try:
        motion = __import__('pathlib').Path(__file__).resolve().parents[2] / 'shared' / 'reference' / 'mass' / 'motion'
        take = T.simulate(rig, [(str(motion / ('%s.bvh' % clip)), secs)], params=TrackingParams(residual=0.0),
                          fatigue=fat.FatigueParams(scale=scale), fps=30)
    finally:
        TR.TrackingController = orig
    s = take.meta['summary']
    print({k: s.get(k) for k in ('seconds', 'joint_err_deg_mean', 'root_err_cm_mean', 'fell', 'realtime_factor', 'step_ms')}, take.meta['stop_reason'])
    for r in cls.diag[::every]:
        print('t=%.2f pred err %7.2f root %6.2f %6.2f %6.2f %6.2f %6.2f %6.2f | pred-want %7.1f' % r)
    return take

if __name__ == '__main__':
    import ast
    kw = {k: ast.literal_eval(v) for k, v in (a.split('=') for a in sys.argv[2:])}
    take = run(float(sys.argv[1]), **kw)
