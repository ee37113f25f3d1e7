"""Muscle coordination (MASS eq. 13, OpenSim static optimisation) and fast moment arms.

Given the generalised forces the motion needs, find activations alpha inside the 3CC-r
bounds [alpha_lb, alpha_ub], ground contact forces inside linearised friction cones, and
(optionally) a bounded residual wrench on the root, so that

    -A^T f(alpha) + J_c^T beta + S^T r  =  tau          f(alpha) = f0 (alpha f_l f_v + f_PE)

holds as well as it can, preferring small activations (sum alpha^2) and using the residual
only as a last resort. f is linear in alpha at the current muscle state, so this is one
bounded linear least-squares problem (scipy.optimize.lsq_linear, BVLS): the contact forces
are the non-negative weights beta of MuJoCo's pyramid edges, so every bound is a box.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import lsq_linear
from scipy.sparse import csr_matrix

from .. import kinematics as kin
from ..rig import Rig


_EPS = np.zeros((3, 3, 3))  # Levi-Civita symbol
_EPS[0, 1, 2] = _EPS[1, 2, 0] = _EPS[2, 0, 1] = 1.0
_EPS[0, 2, 1] = _EPS[2, 1, 0] = _EPS[1, 0, 2] = -1.0


class MomentArms:
    """dl/dq (M, nv) at a body state, exact for the muscle paths of engine.muscle_step.

    dl_m/dq_d = sum over m's segments of u_s . d(segment s)/dq_d, and segment vectors are
    DX times the per-body blocks [R^T; t^T] (MuscleSystem). So A = sum_i P_i Y_i, with
    P_i (M x 4B) the per-muscle sums of DX weighted by component i of the unit segment
    directions (a fixed sparsity pattern refilled each call), and Y_i (4B x nv) component i
    of the body blocks' rates for unit velocity of each DOF; the three products are one
    sparse (M x 12B) times (12B x nv) product. About 0.5 ms, against ~18 ms
    for engine.kinematics.moment_arms (which it equals; see tests/test_tracking.py).
    """

    def __init__(self, rig: Rig, muscles):
        from scipy.sparse import csr_matrix as csr

        self.rig = rig
        S, K = len(rig.seg_a), rig.num_waypoints
        s = np.arange(S)
        D = csr((np.r_[-np.ones(S), np.ones(S)], (np.r_[s, s], np.r_[rig.seg_a, rig.seg_b])), shape=(S, K))
        DX = (D @ muscles.paths.X).tocoo()
        keep = DX.data != 0
        seg, col, val = DX.row[keep], DX.col[keep], DX.data[keep]
        m = rig.seg_muscle[seg]
        key = m.astype(np.int64) * (4 * rig.num_bodies) + col
        uniq, slot = np.unique(key, return_inverse=True)
        self._nnz = nnz = len(uniq)
        W = 4 * rig.num_bodies
        rows, cols = uniq // W, uniq % W
        # One sparse P = [P_x P_y P_z] (M x 12B) for the three components at once: its data
        # are three bincounts over the same slots, laid out row by row (CSR).
        rows3 = np.tile(rows, 3)
        cols3 = np.r_[cols, cols + W, cols + 2 * W]
        order = np.lexsort((cols3, rows3))
        self._order = order  # CSR position -> (component, slot) index of the stacked bincount
        self._indices = cols3[order].astype(np.int32)
        self._indptr = np.searchsorted(rows3[order], np.arange(rig.num_muscles + 1)).astype(np.int32)
        self._shape = (rig.num_muscles, 3 * W)
        self._slot3 = np.r_[slot, slot + nnz, slot + 2 * nnz]
        self._seg3 = np.tile(seg, 3)
        self._val3 = np.tile(val, 3)
        self._comp3 = np.repeat(np.arange(3), len(seg))

    def body_jacobians(self, joint_rot, joint_pos, body_pos):
        """Angular and linear velocity of every body's centre per unit velocity of each DOF:
        (nv, B, 3) each."""
        rig = self.rig
        axes, centres, joints, rotational = kin.dof_axes(rig, joint_rot, joint_pos)
        mask = rig.subtree[joints].astype(float)  # (nv, B)
        rot = rotational.astype(float)[:, None]
        w = mask[..., None] * (rot * axes)[:, None, :]
        lever = body_pos[None] - centres[:, None, :]
        v_rot = np.cross(axes[:, None, :], lever)
        v = mask[..., None] * np.where(rotational[:, None, None], v_rot, axes[:, None, :])
        return w, v

    def __call__(self, u: np.ndarray, body_rot, joint_rot, joint_pos, body_pos, jac=None) -> np.ndarray:
        """u: unit segment directions as rows (3, S) from MuscleSystem.kinematics; jac: the
        body_jacobians of this pose when already computed."""
        w, v = self.body_jacobians(joint_rot, joint_pos, body_pos) if jac is None else jac  # (nv, B, 3)
        nv, B = w.shape[:2]
        Y = np.empty((B, 4, 3, nv))
        # R^T [-w]x per body and DOF: (R^T [-w]x)_jk = sum_l,m R_lj eps_lkm w_m, one small
        # matmul per body instead of nv x B 3x3 products
        E = np.einsum("blj,lkm->bjkm", body_rot, _EPS).reshape(B, 9, 3)
        Y[:, :3] = np.matmul(E, w.transpose(1, 2, 0)).reshape(B, 3, 3, nv)
        Y[:, 3] = v.transpose(1, 2, 0)
        Y = Y.reshape(4 * B, 3, nv).transpose(1, 0, 2).reshape(3 * 4 * B, nv)  # [Y_x; Y_y; Y_z]
        data = np.bincount(self._slot3, weights=self._val3 * u[self._comp3, self._seg3], minlength=3 * self._nnz)
        P = csr_matrix((data[self._order], self._indices, self._indptr), shape=self._shape)
        return P @ Y


@dataclass
class CoordinationResult:
    activation: np.ndarray  # (M,)
    achieved: np.ndarray  # (nv,) generalised force the muscles produce, -A^T f
    status: int
    contact: np.ndarray  # (nc,) pyramid-edge forces beta >= 0 (empty without contacts)
    residual: np.ndarray  # (6,) root residual generalised force (zeros without one)
    active: np.ndarray | None = None  # DAQP's active bounds of every unknown, for the next warm start


@dataclass(frozen=True)
class CoordinationWeights:
    """Costs of the solve relative to a 1 N m error in a joint torque (weight 1).
    activation: sum alpha^2 (MASS eq. 13's effort term). smooth: sum (alpha - alpha_prev)^2,
    which picks, among the many activation patterns that give nearly the same torques
    (284 muscles, ~50 joint DOFs), the one nearest the last. contact: per N^2 of
    pyramid-edge force (spreads the load over the contact points). residual: per N^2 (N m^2)
    of root residual, dearer than contact so the ground carries what it can."""

    activation: float = 1.0
    contact: float = 1e-4
    smooth: float = 0.0
    residual: float = 1e-2


def coordinate(tau, A, f0, flfv, fpe, lb, ub, weights: CoordinationWeights = CoordinationWeights(),
               solver: str = "auto", warm=None, Jc=None, residual_bound=None, active=None) -> CoordinationResult:
    """Activations alpha in [lb, ub], contact forces beta >= 0 and a bounded root residual r
    whose generalised forces together best meet tau, in one bounded least-squares problem:

    min || -A^T f(alpha) + Jc^T beta + S^T r - tau ||^2 + w_a |alpha|^2 + w_s |alpha - alpha_prev|^2
        + w_c |beta|^2 + w_r |r|^2,       f = f0 (alpha flfv + fpe)

    tau (nv,), A (M, nv) moment arms dl/dq, f0/flfv/fpe/lb/ub (M,); Jc (nc, nv) friction-
    pyramid edge Jacobians (None: no contacts); residual_bound (6,) or None (no residual);
    S selects the root's 6 rows. Solving muscles and
    contacts together matters: the ground force is split among the contact points in a way
    the muscles can balance at the joints (a split chosen for the root alone asks the ankle
    for torques about axes no muscle spans). warm: the last activations (smooth term and a
    warm start). active: the last result's `active` (DAQP starts from that active set; the
    muscles' part only when the number of contact unknowns changed): the bounds active at
    one 120 Hz step are mostly active at the next, so this saves ~70 % of the iterations
    and ~25 % of the time. solver: 'daqp' (dual active set, DAQP), 'lsq'
    (scipy.optimize.lsq_linear, BVLS), or 'auto' (DAQP when installed).
    """
    M, nv = A.shape
    gain = f0 * flfv  # force per unit activation
    G = -A.T * gain[None, :]  # (nv, M)
    rhs = tau + A.T @ (f0 * fpe)
    lo, hi = np.asarray(lb, float), np.maximum(np.asarray(ub, float), lb)
    reg = np.full(M, weights.activation)
    pull = np.zeros(M)
    if weights.smooth > 0 and warm is not None:
        # w_a a^2 + w_s (a - a_prev)^2 = (w_a + w_s) a^2 - 2 w_s a_prev a + const
        reg = reg + weights.smooth
        pull = weights.smooth * np.asarray(warm, float)
    blocks, nc, nr = [G], 0, 0
    if Jc is not None and len(Jc):
        nc = len(Jc)
        blocks.append(Jc.T)
        reg, pull = np.concatenate((reg, np.full(nc, weights.contact))), np.concatenate((pull, np.zeros(nc)))
        lo, hi = np.concatenate((lo, np.zeros(nc))), np.concatenate((hi, np.full(nc, BIG)))
    if residual_bound is not None:
        nr = 6
        blocks.append(np.eye(nv, 6))  # S^T: the residual acts on the root's rows only
        reg, pull = np.concatenate((reg, np.full(6, weights.residual))), np.concatenate((pull, np.zeros(6)))
        lo, hi = np.concatenate((lo, -residual_bound)), np.concatenate((hi, residual_bound))
    Gall = np.hstack(blocks) if len(blocks) > 1 else G
    start = None
    if warm is not None:
        start = np.concatenate((np.asarray(warm, float), np.zeros(nc + nr)))
    z, status, act = _bounded_lsq(Gall, rhs, reg, lo, hi, solver, start, pull, active, M)
    x = z[:M]
    return CoordinationResult(x, G @ x - A.T @ (f0 * fpe), status, z[M:M + nc], z[M + nc:] if nr else np.zeros(6), act)


def _bounded_lsq(G, rhs, reg, lo, hi, solver, warm, pull, active=None, head=0):
    """min ||G x - rhs||^2 + sum reg x^2 - 2 pull . x over lo <= x <= hi; returns (x, status,
    active bounds). `active` warm-starts DAQP: all of it when it has n entries, else its
    first `head`."""
    n = G.shape[1]
    act = None
    if solver == "auto":
        solver = "daqp" if _have_daqp() else "lsq"
    status = 0
    if solver == "daqp":
        import daqp

        # With the residuals e = G x - rhs as unknowns too, the cost is diagonal,
        # 1/2 sum reg x^2 - pull.x + 1/2 |e|^2, under the equalities G x - e = rhs: DAQP then
        # needs no factorisation of a dense n x n Hessian (5x faster for 284 muscles).
        reach = np.abs(G).max(axis=1)
        keep = reach > 1e-9 * max(reach.max(), 1e-300)  # drop rows no variable reaches (the root's)
        Gk, rk = G[keep], rhs[keep]
        m = len(rk)
        H = np.concatenate((reg, np.ones(m)))
        f = np.concatenate((-pull, np.zeros(m)))
        Aeq = np.hstack([Gk, -np.eye(m)])
        upper = np.concatenate((hi, np.full(m, BIG), rk))
        lower = np.concatenate((lo, np.full(m, -BIG), rk))
        sense = np.concatenate((np.zeros(n + m, np.int32), np.full(m, 5, np.int32)))  # 5: equality
        if active is not None:
            k = n if len(active) == n else min(head, len(active))
            sense[:k] = active[:k]
        kw = {}
        if active is None and warm is not None and len(warm) == n:
            x0 = np.clip(warm, lo, hi)
            kw["primal_start"] = np.concatenate((x0, Gk @ x0 - rk))
        z, _, status, info = daqp.solve(_diagonal(H), f, Aeq, upper, lower, sense, **kw)
        x = z[:n]
        status = int(status)
        lam = info["lam"][:n]
        act = np.where(lam > 0, ACTIVE_UPPER, np.where(lam < 0, ACTIVE_LOWER, 0)).astype(np.int32)
        if status < 0:  # numerical trouble: fall back to scipy's bounded least squares
            solver = "lsq"
    if solver == "lsq":
        Big = np.vstack([G, np.diag(np.sqrt(reg))])
        b = np.concatenate([rhs, pull / np.sqrt(reg)])
        sol = lsq_linear(Big, b, bounds=(lo, np.where(hi >= BIG, np.inf, hi)), method="bvls", lsq_solver="exact")
        x, status = sol.x, int(sol.status)
    return np.clip(x, lo, hi), status, act


BIG = 1e9  # "no upper bound" for contact forces (DAQP wants finite bounds)
ACTIVE_UPPER, ACTIVE_LOWER = 1, 3  # DAQP's sense flags: ACTIVE, ACTIVE | LOWER


class _DiagonalBuffer:
    """Dense diagonal matrices for DAQP written into one reused buffer (a fresh ~1 MB
    np.diag each solve cost ~0.7 ms): only diagonal entries are ever set, and the last
    call's are cleared first, so the returned (n, n) view is exactly diag(h)."""

    def __init__(self):
        self.flat, self.n = np.zeros(0), 0

    def __call__(self, h: np.ndarray) -> np.ndarray:
        n = len(h)
        if self.flat.size < n * n:
            self.flat, self.n = np.zeros(n * n), 0
        self.flat[: self.n * self.n: self.n + 1] = 0.0
        self.flat[: n * n: n + 1] = h
        self.n = n
        return self.flat[: n * n].reshape(n, n)


_diagonal = _DiagonalBuffer()


def _have_daqp() -> bool:
    try:
        import daqp  # noqa: F401
    except ImportError:
        return False
    return True
