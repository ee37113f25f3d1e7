"""Experiment (issue 16, not part of the product): a whole-body solve whose plan the physics
carries out, for residual-free tracking (the floating-base formulation of Lee et al. 2014 and
Wensing and Orin 2013, with the muscles in the same solve).

Unknowns: activations alpha (in their 3CC-r bounds), pyramid-edge contact forces beta >= 0
and, with --residual, a bounded root residual r. The accelerations follow from them through
the equations of motion, every row including the root's:

    (M + dt D) qdd = G alpha + g0 + Jc^T beta + S^T r - (c - passive)

and the tasks are least-squares rows on those qdd:

    Jp_k qdd = -kv v_k                         contact points stay still (w_contact x m)
    sqrt(M_jj) (qdd_j - qdd*_j) = 0            joints (w_joint; w_stance on a standing leg,
                                               w_toe_down on a toe on the floor)
    pelvis orientation (w_rot), height (w_height), horizontal position (w_root_xy)
    a_z,foot = kp (h_ref - float - h) + kd (v_ref - v)   a foot in the air (w_foot, foot_float)
    m Jcom qdd = m (kp (c* - c) + kd (v* - v)) centre of mass (w_com; com_clip)
    m Jcom qdd = m omega^2 (c - p)             divergent component of motion, p clipped (w_dcm)
    a foot in the air placed from the COM (w_place, c_v: Raibert-style)
    A_L qdd = -k_L L                           centroidal angular momentum damped (w_L)
    J_lim qdd = -kv J_lim qd, forces >= 0      MuJoCo's active joint limits (w_limit)

    J_efc a_c + R f = aref                     MuJoCo's own soft-constraint rows (soft: exact)

Contact points: foot-box corners within contact_margin, or with mj_contacts=1 MuJoCo's own
contacts of the coming step; warp > 0 holds the reference back while it has a foot down that
the character has not. `--set NAME=VALUE` sets any of these; `--log` prints the
planned-against-realised accelerations, contacts and active joint limits. What it measured
is in docs/research/balance.md (fourth session). From the repository root:

    OPENBLAS_NUM_THREADS=1 .venv/bin/python research/whole_body_qp.py --clip hold:0 --set mj_contacts=1
    OPENBLAS_NUM_THREADS=1 .venv/bin/python research/whole_body_qp.py --clip walk --set mj_contacts=1 --set w_com=0 --set w_root_xy=1
    OPENBLAS_NUM_THREADS=1 .venv/bin/python research/whole_body_qp.py --clip walk --seconds 20 --fatigue-scale 50 --residual 1 --set mj_contacts=1 --set w_com=0
"""
import argparse
import sys
import tempfile
from pathlib import Path

import mujoco
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "research"))
MOTION = ROOT.parent / "shared" / "reference" / "mass" / "motion"

from engine.control import tracking as tr  # noqa: E402
from engine.control.coordination import BIG, CoordinationWeights, bounded_lsq  # noqa: E402
from engine.simulation import MuscleCommand  # noqa: E402
from root_acceleration_tracking import held_pose_bvh, simulate_with  # noqa: E402

LEVI_CIVITA = np.zeros((3, 3, 3))  # eps_ijk: (a x b)_i = eps_ijk a_j b_k
LEVI_CIVITA[0, 1, 2] = LEVI_CIVITA[1, 2, 0] = LEVI_CIVITA[2, 0, 1] = 1.0
LEVI_CIVITA[0, 2, 1] = LEVI_CIVITA[2, 1, 0] = LEVI_CIVITA[1, 0, 2] = -1.0


class WholeBody(tr.TrackingController):
    w_contact, w_joint, w_rot, w_com, w_height, w_root_xy = 10.0, 1.0, 3.0, 3.0, 1.0, 0.0
    kp_com, kd_com, kv_contact, log, com_ref_acc = 20.0, 9.0, 20.0, False, True
    log_from, log_to, com_clip, w_stance = 1e9, 0.0, -1.0, 1.0
    mj_contacts, mj_margin, w_limit, dz, w_L, k_L = 0, 0.0, 0.0, 0.0, 0.0, 10.0
    warp, warp_height, warped = 0.0, 0.03, 0
    w_foot, foot_float, kp_foot, kd_foot = 0.0, 0.015, 400.0, 40.0
    w_place, c_v, kp_place, kd_place = 0.0, 0.0, 100.0, 20.0
    knee_lever, solver, tired_cost = 0.0, "daqp", 0.0
    w_dcm, k_dcm = 0.0, 2.0
    w_toe_down = 1.0
    w_ankle_down = 1.0  # x the ankle's tracking weight while any of its foot's boxes touches
    fixed_rate = 0.0  # > 0: play the reference at this fraction of its pace (no pace governor)
    soft = 0.0  # > 0: MuJoCo's constraint rows (J a + R f = aref) in place of the stay-still rows, this weight

    def wanted_acceleration(self, q, qd, step):
        q_ref, v_ref, a_ref = self.reference(step)
        if self.dz:
            q_ref = q_ref.copy()
            q_ref[2] -= self.dz
        if self.knee_lever:  # tired legs: the knees' flexion scaled down as the legs' M_F rises
            mf = float(self._sim.fatigue.MF[self._legs].mean())
            k = float(np.clip(1.0 - self.knee_lever * (mf - 0.1), 0.3, 1.0))
            q_ref, v_ref, a_ref = q_ref.copy(), v_ref.copy(), a_ref.copy()
            for name in ("TibiaR", "TibiaL"):
                j = self.model.joint(name)
                qa, va = self.model.jnt_qposadr[j.id], self.model.jnt_dofadr[j.id]
                q_ref[qa] *= k
                v_ref[va] *= k
                a_ref[va] *= k
        self._ref = (q_ref, v_ref, a_ref)
        p = self.params
        a = a_ref + p.kp * self.plan.space.diff(q, q_ref) + p.kd * (v_ref - qd)
        self._a_star = a
        return a, q_ref

    def posed(self, key: str, q, v=None):
        """MuJoCo data of the reference model posed at q (velocities v), with its centres of
        mass; one data per `key`, reused."""
        m = self.plan.space.model
        if not hasattr(self, "_posed"):
            self._posed = {}
        if key not in self._posed:
            self._posed[key] = mujoco.MjData(m)
        d = self._posed[key]
        d.qpos[:] = q
        if v is not None:
            d.qvel[:] = v
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        return d

    def advance_pace(self, sim) -> None:
        """The pace governor, then (warp > 0) a touchdown time warp: while the reference has a
        foot on the floor (its lowest box corner below warp_height) that the character has not
        yet put down, the reference waits (its lag grows by `warp` a step)."""
        self._sim = sim
        step_before = self._paced_to
        if self.fixed_rate:  # the reference played at a fixed fraction of its pace
            while self._paced_to <= sim.steps:
                self.pace.rate = self.fixed_rate
                self.pace.lag += 1.0 - self.fixed_rate
                self._paced_to += 1
        super().advance_pace(sim)
        if not self.warp or self._paced_to == step_before:
            return
        m, rig = self.plan.space.model, self.rig
        rd = self.posed("warp", self.reference(sim.steps)[0])
        touching = sim.physics.contacts()
        for side in "RL":
            bodies = [rig.body_index(f"{n}{side}") for n in ("Talus", "FootThumb", "FootPinky")]
            if self._lowest_corner(m, rd, bodies)[0] < self.warp_height and not touching[bodies].any():
                self.pace.lag += self.warp
                self.warped += 1
                return

    def _lowest_corner(self, m, d, bodies):
        """(height, geom index, world point) of the lowest box corner of `bodies` in data d."""
        signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
        best = None
        for g in np.flatnonzero(np.isin(m.geom_bodyid, np.array(bodies) + 1)):
            pts = d.geom_xpos[g][:, None] + d.geom_xmat[g].reshape(3, 3) @ (signs * m.geom_size[g]).T
            k = int(np.argmin(pts[2]))
            if best is None or pts[2, k] < best[0]:
                best = (pts[2, k], g, pts[:, k].copy())
        return best

    def foot_rows(self, sim, state):
        """For each foot with no contact: (vertical Jacobian row of its lowest corner, wanted
        vertical acceleration kp (h_ref - float - h) + kd (v_ref - v))."""
        m, d, rig = self.model, self.data, self.rig
        rm = self.plan.space.model
        r0 = self.posed("foot now", self.reference(sim.steps)[0])
        r1 = self.posed("foot next", self.reference(sim.steps + 1)[0])
        touching = sim.physics.contacts()
        qd = sim.physics.get_q()[1]
        out = []
        for side in "RL":
            bodies = [rig.body_index(f"{n}{side}") for n in ("Talus", "FootThumb", "FootPinky")]
            if touching[bodies].any():
                continue
            h, g, p = self._lowest_corner(m, d, bodies)
            h_ref = self._lowest_corner(rm, r0, bodies)[0]
            v_ref = (self._lowest_corner(rm, r1, bodies)[0] - h_ref) / sim.dt
            jp = np.zeros((3, m.nv))
            mujoco.mj_jac(m, d, jp, None, p, m.geom_bodyid[g])
            v = jp[2] @ qd
            target = max(h_ref - self.foot_float, 0.0)
            out.append((jp[2], self.kp_foot * (target - h) + self.kd_foot * (v_ref - v)))
        return out

    def placement_rows(self, sim):
        """For each foot with no contact: rows (2, nv) of its talus's horizontal acceleration
        and the wanted one, kp (p* - p) + kd (v* - v): p* the reference's talus offset from the
        reference's centre of mass carried to the character's, plus c_v (v_com - v_com,ref)
        (Raibert-style placement: a body moving faster than the reference steps further)."""
        m, d, rig = self.model, self.data, self.rig
        rm = self.plan.space.model
        q_ref, v_ref, _ = self.reference(sim.steps)
        rd = self.posed("placement", q_ref, v_ref)
        touching = sim.physics.contacts()
        qd = sim.physics.get_q()[1]
        Jc, Jcr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
        mujoco.mj_jacSubtreeCom(m, d, Jc, 1)
        mujoco.mj_jacSubtreeCom(rm, rd, Jcr, 1)
        c, c_ref = d.subtree_com[1], rd.subtree_com[1]
        vc, vc_ref = Jc @ qd, Jcr @ v_ref
        out = []
        for side in "RL":
            bodies = [rig.body_index(f"{n}{side}") for n in ("Talus", "FootThumb", "FootPinky")]
            if touching[bodies].any():
                continue
            b = bodies[0] + 1
            jp, jpr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
            mujoco.mj_jac(m, d, jp, None, d.xipos[b], b)
            mujoco.mj_jac(rm, rd, jpr, None, rd.xipos[b], b)
            target = c[:2] + rd.xipos[b, :2] - c_ref[:2] + self.c_v * (vc[:2] - vc_ref[:2])
            v_target = vc[:2] + (jpr @ v_ref)[:2] - vc_ref[:2]
            p, v = d.xipos[b, :2], (jp @ qd)[:2]
            out.append((jp[:2], self.kp_place * (target - p) + self.kd_place * (v_target - v)))
        return out

    def corners(self, state):
        """Point Jacobians (P, 3, nv), positions (P, 3) and velocities of the foot-box corners
        within contact_margin of the floor."""
        w, v = self.body_jacobians()
        if self.mj_contacts:  # the contact points MuJoCo will use in the coming step
            d, m = self.data, self.model
            pts, owner = [], []
            for i in range(d.ncon):
                c = d.contact[i]
                if c.dist > self.mj_margin:
                    continue
                g = c.geom2 if m.geom_bodyid[c.geom2] > 0 else c.geom1
                pts.append(c.pos.copy())
                owner.append(m.geom_bodyid[g] - 1)
            pts, owner = np.array(pts).reshape(-1, 3), np.array(owner, int)
        else:
            bodies = self._contact_bodies
            corners = np.einsum("bij,bkj->bki", state.rot[bodies], self._corner_local[bodies]) + state.pos[bodies][:, None]
            low = np.argsort(corners[..., 2], axis=1)[:, :4]
            pts = np.take_along_axis(corners, low[..., None], axis=1).reshape(-1, 3)
            owner = np.repeat(bodies, 4)
            near = pts[:, 2] < self.params.contact_margin
            pts, owner = pts[near], owner[near]
        r = pts - state.pos[owner]
        Jp = v[:, owner, :] + np.cross(w[:, owner, :], r[None])  # (nv, P, 3)
        return Jp.transpose(1, 2, 0), pts, owner

    def angular_momentum_matrix(self):
        """A_L (3, nv): the whole body's angular momentum about its centre of mass per unit
        velocity of each DOF, from the body Jacobians at the bodies' centres of mass."""
        m, d = self.model, self.data
        w, v = self.body_jacobians()  # (nv, B, 3) at xipos
        mass = m.body_mass[1:]
        com = (mass[:, None] * d.xipos[1:]).sum(0) / mass.sum()
        R = d.ximat[1:].reshape(-1, 3, 3)
        Iw = np.einsum("bij,bj,bkj->bik", R, m.body_inertia[1:], R)
        lin = mass[:, None] * (d.xipos[1:] - com)  # (B, 3)
        return np.einsum("bij,nbj->in", Iw, w) + np.einsum("bi,nbj,kij->kn", lin, v, LEVI_CIVITA)

    def _efc_jacobian(self):
        """MuJoCo's constraint Jacobian of the coming step, dense (nefc, nv)."""
        m, d = self.model, self.data
        n = d.nefc
        if not mujoco.mj_isSparse(m):
            return d.efc_J[:n * m.nv].reshape(n, m.nv).copy()
        J = np.zeros((n, m.nv))
        if n:
            mujoco.mju_sparse2dense(J, d.efc_J, d.efc_J_rownnz[:n], d.efc_J_rowadr[:n], d.efc_J_colind)
        return J

    def soft_rows(self):
        """MuJoCo's constraint rows of the coming step that carry force (pyramid edges of the
        contacts that penetrate, active joint limits): Jacobians (k, nv), R (k,), aref (k,)."""
        d, n = self.data, self.data.nefc
        t = d.efc_type[:n]
        keep = (t == mujoco.mjtConstraint.mjCNSTR_LIMIT_JOINT) | (
            (t == mujoco.mjtConstraint.mjCNSTR_CONTACT_PYRAMIDAL) & (d.efc_pos[:n] - d.efc_margin[:n] <= self.mj_margin))
        return self._efc_jacobian()[keep], d.efc_R[:n][keep].copy(), d.efc_aref[:n][keep].copy()

    def limit_rows(self):
        """Rows (k, nv) of MuJoCo's joint-limit constraints at the data's state (force J^T f,
        f >= 0)."""
        d = self.data
        return self._efc_jacobian()[d.efc_type[:d.nefc] == mujoco.mjtConstraint.mjCNSTR_LIMIT_JOINT]

    def com_rows(self, sim, q_ref, v_ref, a_ref, owner):
        m, d, rig = self.model, self.data, self.rig
        rm, rd = self.plan.space.model, self.posed("com", q_ref)
        talus = [rig.body_index("Talus" + s) for s in "RL"]
        feet = [t for t, s in zip(talus, "RL") if np.isin(owner, [rig.body_index(f"{n}{s}") for n in ("Talus", "FootThumb", "FootPinky")]).any()]
        J, Jr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
        mujoco.mj_jacSubtreeCom(m, d, J, 1)
        mujoco.mj_jacSubtreeCom(rm, rd, Jr, 1)
        c, c_ref = d.subtree_com[1].copy(), rd.subtree_com[1].copy()
        if feet:
            b = np.array(feet) + 1
            target = d.xipos[b, :2].mean(0) + c_ref[:2] - rd.xipos[b, :2].mean(0)
        else:
            target = c[:2].copy()
        if self.com_clip >= 0 and len(self._pts):
            lo, hi = self._pts[:, :2].min(0) + self.com_clip, self._pts[:, :2].max(0) - self.com_clip
            target = np.clip(target, np.minimum(lo, hi), np.maximum(lo, hi))
        qd = sim.physics.get_q()[1]
        v, vr = J @ qd, Jr @ v_ref
        a = self.kp_com * (target - c[:2]) + self.kd_com * (vr[:2] - v[:2])
        if self.com_ref_acc:
            a = a + (Jr @ a_ref)[:2]
        return J[:2], a

    def dcm_rows(self, sim, q_ref, v_ref, a_ref, owner):
        """Divergent-component-of-motion balance (Englsberger): xi = c + c'/omega against the
        reference's xi carried to the character's feet in contact; the centre of pressure that
        steers it, p = p_ref + (1 + k_dcm / omega)(xi - xi_ref), is clipped into the contact
        points' box, and the COM is asked for c'' = omega^2 (c - p): only what the feet can do."""
        m, d, rig = self.model, self.data, self.rig
        rm, rd = self.plan.space.model, self.posed("dcm", q_ref)
        J, Jr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
        mujoco.mj_jacSubtreeCom(m, d, J, 1)
        mujoco.mj_jacSubtreeCom(rm, rd, Jr, 1)
        c, c_ref = d.subtree_com[1].copy(), rd.subtree_com[1].copy()
        qd = sim.physics.get_q()[1]
        v, vr, ar = J @ qd, Jr @ v_ref, Jr @ a_ref
        omega = np.sqrt(9.81 / max(c[2], 0.3))
        bodies = [[rig.body_index(f"{n}{s}") for n in ("Talus", "FootThumb", "FootPinky")] for s in "RL"]
        feet = [k for k in range(2) if np.isin(owner, bodies[k]).any()]
        if not feet or not len(self._pts):
            return None
        b = np.array([bodies[k][0] for k in feet]) + 1
        shift = d.xipos[b, :2].mean(0) - rd.xipos[b, :2].mean(0)  # reference feet -> character's
        xi = c[:2] + v[:2] / omega
        xi_ref = c_ref[:2] + vr[:2] / omega + shift
        p_ref = c_ref[:2] - ar[:2] / omega ** 2 + shift
        p = p_ref + (1.0 + self.k_dcm / omega) * (xi - xi_ref)
        lo, hi = self._pts[:, :2].min(0) + 0.01, self._pts[:, :2].max(0) - 0.01
        p = np.clip(p, np.minimum(lo, hi), np.maximum(lo, hi))
        return J[:2], omega ** 2 * (c[:2] - p)

    def act(self, sim, state):
        rig = self.rig
        d = self.prepare(sim, state)
        q, q_ref, Mm, lb, ub = d.q, d.q_ref, d.M, d.lb, d.ub
        a_star = self._a_star
        bias = d.tau - Mm @ a_star
        nv, n_m = Mm.shape[0], len(lb)
        qd = sim.physics.get_q()[1]
        Jp, pts, owner = self.corners(state)
        P = len(pts)
        self._pts = pts
        E = np.einsum("pin,ei->pen", Jp, self._edges).reshape(-1, nv)  # (4P, nv) edge Jacobians
        if self.soft:  # MuJoCo's own constraint rows of the coming step: contacts and limits
            E, R_soft, aref = self.soft_rows()
            P = P if self.w_contact else 0  # the stay-still rows stay, as a task
        if self.w_limit and not self.soft:  # joint limits MuJoCo enforces in the coming step: forces >= 0 in the plan too
            Lj = self.limit_rows()
            E = np.vstack([E, Lj])
        nc = len(E)
        G = -d.A.T * (rig.muscle_f0 * d.flfv)[None, :]
        g0 = -d.A.T @ (rig.muscle_f0 * d.fpe)
        # the equations of motion hold exactly: qdd = M^-1 (G alpha + E^T beta + g0 - bias)
        Minv = np.linalg.inv(Mm)
        res = self.residual_bound is not None
        if res and getattr(self, "torque_only", False):
            self.residual_bound[:3] = 0.0
        B = Minv @ np.hstack([G, E.T] + ([np.eye(nv)[:, :6]] if res else []))
        b0 = Minv @ (g0 - bias)
        rows, rhs = [], []

        def add(T, t, weight):  # rows T qdd = t, weight per unit^2
            rows.append(np.sqrt(weight) * (T @ B))
            rhs.append(np.sqrt(weight) * (t - T @ b0))

        if self.soft and len(E):
            # MuJoCo's soft constraints: for an active row, J a_c + R f = aref with a_c the
            # acceleration the constraint solve sees (plain M: implicit damping comes after)
            Mp = np.zeros((nv, nv))
            mujoco.mj_fullM(self.model, self.data, Mp)
            Mpinv = np.linalg.inv(Mp)
            Bc = E @ Mpinv @ np.hstack([G, E.T] + ([np.eye(nv)[:, :6]] if res else []))
            Bc[:, n_m:n_m + len(E)] += np.diag(R_soft)
            bc = E @ Mpinv @ (g0 - bias)
            wsq = np.sqrt(self.soft * rig.mass_kg)
            rows.append(wsq * Bc)
            rhs.append(wsq * (aref - bc))
        # corners in contact stay put
        if P:
            vp = np.einsum("pin,n->pi", Jp, qd)
            add(Jp.reshape(-1, nv), (-self.kv_contact * vp).ravel(), self.w_contact * rig.mass_kg)
        if self.w_limit and len(Lj):
            add(Lj, -self.kv_contact * (Lj @ qd), self.w_limit)
        diag = np.sqrt(np.diag(Mm))
        I = np.eye(nv)
        wj = np.full(nv, self.w_joint)  # joints; a leg standing on the floor follows its foot instead
        body = self.model.dof_bodyid - 1
        for leg in (range(1, 6), range(6, 11)):
            if np.isin(owner, list(leg)[2:]).any():
                wj[np.isin(body, list(leg))] *= self.w_stance
        toes = [self.rig.body_index(n + side) for side in "RL" for n in ("FootThumb", "FootPinky")]
        for t in toes:  # a toe on the floor takes the angle the floor gives it
            if np.isin(owner, [t]).any():
                wj[body == t] *= self.w_toe_down
        for side in "RL":  # a foot on the floor takes the floor's angle at the ankle
            foot = [self.rig.body_index(n + side) for n in ("Talus", "FootThumb", "FootPinky")]
            if np.isin(owner, foot).any():
                wj[body == foot[0]] *= self.w_ankle_down
        wj = np.sqrt(wj[6:])
        add((wj * diag[6:])[:, None] * I[6:], wj * diag[6:] * a_star[6:], 1.0)
        add(diag[3:6, None] * I[3:6], diag[3:6] * a_star[3:6], self.w_rot)  # pelvis orientation
        add(diag[2:3, None] * I[2:3], diag[2:3] * a_star[2:3], self.w_height)  # pelvis height
        if self.w_root_xy:
            add(diag[:2, None] * I[:2], diag[:2] * a_star[:2], self.w_root_xy)
        if self.w_com:
            Jcom, a_com = self.com_rows(sim, *self._ref, owner)  # centre of mass
            add(rig.mass_kg * Jcom, rig.mass_kg * a_com, self.w_com)
        if self.w_dcm:
            out = self.dcm_rows(sim, *self._ref, owner)
            if out is not None:
                add(rig.mass_kg * out[0], rig.mass_kg * out[1], self.w_dcm)
        if self.w_foot:  # a foot in the air follows the reference's foot height less its float
            for Jz, a_z in self.foot_rows(sim, state):
                add(Jz[None], np.array([a_z]), self.w_foot * rig.mass_kg)
        if self.w_place:  # a foot in the air goes where the reference puts it relative to its COM
            for Jxy, a_xy in self.placement_rows(sim):
                add(Jxy, a_xy, self.w_place * rig.mass_kg)
        if self.w_L:  # centroidal angular momentum damped: dL/dt = -k_L L (Macchietto 2009)
            AL = self.angular_momentum_matrix()
            add(AL, -self.k_L * (AL @ qd), self.w_L)
        R, r = np.vstack(rows), np.concatenate(rhs)
        w = self.params.weights
        smooth = w.smooth if self._warm is not None else 0.0
        k = 6 if res else 0
        effort = np.full(n_m, w.activation)
        if self.tired_cost:  # a fatigued muscle costs more: load spreads before bounds close
            mf = sim.fatigue.MF
            effort = effort * (1.0 + self.tired_cost * mf / np.maximum(1.0 - mf, 0.05))
        reg = np.concatenate([effort + smooth, np.full(nc, 1e-4), np.full(k, w.residual)])
        pull = np.concatenate([smooth * self._warm if self._warm is not None else np.zeros(n_m), np.zeros(nc + k)])
        lo = np.concatenate([lb, np.zeros(nc), -self.residual_bound if res else []])
        hi = np.concatenate([np.maximum(ub, lb), np.full(nc, BIG), self.residual_bound if res else []])
        z, status, act = bounded_lsq(R, r, reg, lo, hi, self.solver, None, pull, self._active, n_m)
        x, beta, g = z[:n_m], z[n_m:n_m + nc], z[n_m + nc:]
        qdd = B @ z + b0
        self._warm, self._active = x, act
        if getattr(self, "_prev", None) is not None:
            real = (qd - self._prev[1]) / sim.dt
            err = real - self._prev[0]
            self._acc_err = err
        self._prev = (qdd, qd.copy())
        self._planned_ground = (E.T @ beta)[:3]
        g = g if res else np.zeros(6)
        self.last = dict(q_ref=q_ref, contact_rows=nc, residual=g, activation=x, status=status)
        self.stats["decisions"] += 1
        if self.log and (sim.steps % 12 == 0 or self.log_from <= sim.time <= self.log_to):
            e = self.plan.space.diff(q, q_ref)
            gap = sim.physics.ground_force()
            worst = np.argsort(-np.abs(qdd[6:]))[:3] + 6
            ae = getattr(self, "_acc_err", np.zeros(nv))
            dd = self.data
            on = (dd.efc_type[:dd.nefc] == mujoco.mjtConstraint.mjCNSTR_LIMIT_JOINT) & (dd.efc_force[:dd.nefc] != 0)
            lim = [(self.model.joint(int(j)).name, round(float(np.degrees(2 * np.arccos(min(1, abs(dd.qpos[self.model.jnt_qposadr[j]])))) if self.model.jnt_type[j] == 1 else np.degrees(dd.qpos[self.model.jnt_qposadr[j]])), 1)) for j in dd.efc_id[:dd.nefc][on]]
            print(f"   realised - planned qdd: root {np.abs(ae[:6]).round(1)}, joints worst {[(int(i), round(float(ae[i]))) for i in np.argsort(-np.abs(ae[6:]))[:3] + 6]}, limits active {lim}")
            print(f"   worst qdd {[(self.rig.dof_names[i] if hasattr(self.rig, 'dof_names') else i, round(float(qdd[i])), round(float(a_star[i]))) for i in worst]}")
            print(f"t={sim.time:5.2f} rot err {np.degrees(e[3:6]).round(1)} dz {100 * e[2]:+.1f} cm "
                  f"joints {np.degrees(np.abs(e[6:])).mean():4.1f} deg  P={P} {np.bincount(owner, minlength=self.rig.num_bodies)[self._contact_bodies]}  qdd root {np.abs(qdd[:6]).max():.1f}  planned Fz {self._planned_ground[2]:.0f} given {gap[2]:.0f}")
        if not res:
            return MuscleCommand(x, None, None)
        force = g[:3].copy()
        R0 = state.rot[0] @ rig.body_rest_rot[0].T  # the root joint's frame
        return MuscleCommand(x, force, R0 @ g[3:] - np.cross(state.pos[0] - q[:3], force))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clip", default="hold:0", help="walk, run, or hold:FRAME (a frame of the walk held)")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--fatigue-scale", type=float, default=1.0)
    ap.add_argument("--set", action="append", default=[], help="NAME=VALUE of a WholeBody weight or gain")
    ap.add_argument("--residual", type=float, default=0.0)
    ap.add_argument("--residual-weight", type=float, default=0.1)
    ap.add_argument("--torque-only", action="store_true", help="the residual may only turn the pelvis (no force)")
    ap.add_argument("--save", help="write the take here (.npz)")
    ap.add_argument("--log", action="store_true")
    a = ap.parse_args()
    for kv in a.set:
        k, v = kv.split("=")
        old = getattr(WholeBody, k)
        setattr(WholeBody, k, v if isinstance(old, str) else type(old)(float(v)))
    WholeBody.log = a.log
    WholeBody.torque_only = a.torque_only
    with tempfile.TemporaryDirectory() as tmp:
        if "," in a.clip:  # a chain: run:60,walk:20,run:5
            clips = [(MOTION / f"{c.split(':')[0]}.bvh", float(c.split(':')[1])) for c in a.clip.split(",")]
        else:
            clips = [(held_pose_bvh(int(a.clip[5:]), Path(tmp)) if a.clip.startswith("hold:") else MOTION / f"{a.clip}.bvh", a.seconds)]
        weights = CoordinationWeights(activation=1.0, smooth=10.0, residual=a.residual_weight)
        take = simulate_with(WholeBody, clips, tr.TrackingParams(residual=a.residual, weights=weights), a.fatigue_scale)
    if a.save:
        take.save(a.save)
    s = take.meta["summary"]
    print(f"{a.clip} r={a.residual} w={a.residual_weight} fatigue={a.fatigue_scale} {' '.join(a.set)}: {'fell at %.2f s' % s['stopped_at_s'] if s['fell'] else 'stood'}, joint error "
          f"{s['joint_err_deg_mean']:.2f} deg, residual {s.get('residual_mean_body_weights')} BW, ground force gap {s['ground_force_gap_body_weights']} body weights")
    g = s["gait"]
    print(f"   speed {g['early'].get('forward_speed_mps')} -> {g['late'].get('forward_speed_mps')} m/s, stride {g['early'].get('stride_m')} -> "
          f"{g['late'].get('stride_m')}, step {s['step_ms']}, pace {(s['pace'] or {}).get('final_rate')}")


if __name__ == "__main__":
    main()
