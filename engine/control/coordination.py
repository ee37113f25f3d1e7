"""Muscle coordination (MASS eq. 13, OpenSim static optimisation) and fast moment arms.

Given the generalised forces the motion needs, find activations alpha inside the 3CC-r
bounds [alpha_lb, alpha_ub], ground contact forces inside linearised friction cones, and
(optionally) a bounded residual wrench on the root, so that

    -A^T f(alpha) + J_c^T beta + S^T r  =  tau          f(alpha) = f0 (alpha f_l f_v + f_PE)

holds as well as it can, preferring small activations (sum alpha^2) and using the residual
only as a last resort. f is linear in alpha at the current muscle state, so this is one
bounded linear least-squares problem: the contact forces are the non-negative weights beta
of a friction pyramid's edges (a linearised cone; MuJoCo's own are elliptic), so every
bound is a box. It is solved on its dual by a
semismooth Newton method (dual_newton, warm-started from the last decision), with DAQP
and scipy's BVLS as the fallback and the cross-checks.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg.lapack import dposv as _dposv
from scipy.optimize import lsq_linear

from .. import kinematics as kin
from ..rig import Rig
from ..transforms import SparseMatmul


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
    sparse (M x 12B) times (12B x nv) product. About 0.12 ms, against ~18 ms
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
        nnz = len(uniq)
        W = 4 * rig.num_bodies
        rows, cols = uniq // W, uniq % W
        # One sparse P = [P_x P_y P_z] (M x 12B) for the three components at once, laid out
        # row by row (CSR).
        rows3 = np.tile(rows, 3)
        cols3 = np.r_[cols, cols + W, cols + 2 * W]
        order = np.lexsort((cols3, rows3))
        indices = cols3[order].astype(np.int32)
        indptr = np.searchsorted(rows3[order], np.arange(rig.num_muscles + 1)).astype(np.int32)
        # P (its pattern fixed, its values refilled each call), and its values in CSR order as
        # one fixed sparse matrix times the segment directions u (3, S) flattened: entry
        # (component, slot) sums val u[component, segment] over the segments of that slot
        self._P = SparseMatmul(csr((np.zeros(len(indices)), indices, indptr), shape=(rig.num_muscles, 3 * W)))
        slot3 = np.r_[slot, slot + nnz, slot + 2 * nnz]
        in_u = np.repeat(np.arange(3), len(seg)) * S + np.tile(seg, 3)  # u[component, segment] in u.ravel()
        where = np.empty(3 * nnz, np.int64)
        where[order] = np.arange(3 * nnz)  # (component, slot) -> CSR position
        self._fill = SparseMatmul(csr((np.tile(val, 3), (where[slot3], in_u)), shape=(3 * nnz, 3 * S)))

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
        self._fill(u.ravel(), out=self._P.data)
        return self._P(Y)


@dataclass
class CoordinationResult:
    activation: np.ndarray  # (M,)
    achieved: np.ndarray  # (nv,) generalised force the muscles produce, -A^T f
    status: int
    contact: np.ndarray  # (nc,) pyramid-edge forces beta >= 0 (empty without contacts)
    residual: np.ndarray  # (6,) root residual generalised force (zeros without one)
    active: np.ndarray | None = None  # the next solve's warm start: dual_newton's multipliers (or DAQP's active bounds)
    root_change: np.ndarray | None = None  # (6,) the change of the root's acceleration the solve chose (root_inertia)


@dataclass(frozen=True)
class CoordinationWeights:
    """Costs of the solve relative to a 1 N m error in a joint torque (weight 1).
    activation: sum alpha^2 (MASS eq. 13's effort term). smooth: sum (alpha - alpha_prev)^2,
    which picks, among the many activation patterns that give nearly the same torques
    (284 muscles, ~50 joint DOFs), the one nearest the last. contact: per N^2 of
    pyramid-edge force (spreads the load over the contact points). residual: per N^2 (N m^2)
    of root residual, dearer than contact so the ground carries what it can.
    root_acceleration: per (m/s^2)^2 (rad/s^2 for the root's turning) by which the solve may
    change the root's wanted acceleration (`coordinate`'s root_inertia)."""

    activation: float = 1.0
    contact: float = 1e-4
    smooth: float = 0.0
    residual: float = 1e-2
    root_acceleration: float = 1.0


def coordinate(tau, A, f0, flfv, fpe, lb, ub, weights: CoordinationWeights = CoordinationWeights(),
               solver: str = "auto", warm=None, Jc=None, residual_bound=None, active=None,
               info=None, root_inertia=None) -> CoordinationResult:
    """Activations alpha in [lb, ub], contact forces beta >= 0 and a bounded root residual r
    whose generalised forces together best meet tau, in one bounded least-squares problem:

    min || -A^T f(alpha) + Jc^T beta + S^T r - tau ||^2 + w_a |alpha|^2 + w_s |alpha - alpha_prev|^2
        + w_c |beta|^2 + w_r |r|^2,       f = f0 (alpha flfv + fpe)

    With root_inertia (nv, 6), the first six columns of the mass matrix M, the solve may also
    change the root's wanted acceleration by d (unbounded, cost w_d |d|^2): the term
    -root_inertia d joins the left side, so the joint torques it picks belong to the root
    motion that muscles and ground can give (without a residual the root's six rows are
    otherwise met by the ground alone, or missed, and the joints are set for a root motion
    that will not happen: docs/research/balance.md, third session).

    tau (nv,), A (M, nv) moment arms dl/dq, f0/flfv/fpe/lb/ub (M,); Jc (nc, nv) friction-
    pyramid edge Jacobians (None: no contacts); residual_bound (6,) or None (no residual);
    S selects the root's 6 rows. Solving muscles and
    contacts together matters: the ground force is split among the contact points in a way
    the muscles can balance at the joints (a split chosen for the root alone asks the ankle
    for torques about axes no muscle spans). warm: the last activations (smooth term and a
    warm start). active: the last result's `active`, the next solve's start: for 'newton' the
    multipliers of the rows (nv of them whatever the contacts), for 'daqp' the active bounds
    (the muscles' part only when the number of contact unknowns changed). solver: 'newton'
    (dual_newton, the default 'auto'; falls back to DAQP when it does not converge), 'daqp'
    (dual active set, DAQP), or 'lsq' (scipy.optimize.lsq_linear, BVLS). info: see
    bounded_lsq.
    """
    return Coordinator(weights, solver)(tau, A, f0, flfv, fpe, lb, ub, warm, Jc, residual_bound, active, info,
                                        root_inertia)


class Coordinator:
    """`coordinate` with its arrays kept from call to call (a tracker solves a problem of the
    same form every step): the problem is assembled into buffers sized for the most unknowns
    met so far, and where the library loads the compiled Newton method runs on them in place
    (engine.compiled.DualNewtonInPlace: no copies, no pointer look-ups). Each entry is the
    same operation on the same numbers as in a fresh call, so a reused Coordinator gives the
    same result to the bit (tests/test_tracking.py)."""

    def __init__(self, weights: CoordinationWeights = CoordinationWeights(), solver: str = "auto"):
        self.weights, self.solver = weights, solver
        self._nv = self._cap = -1  # the buffers' rows and unknowns

    def __getstate__(self):  # a copy or a pickle makes its own buffers (the compiled solve holds addresses)
        return dict(weights=self.weights, solver=self.solver)

    def __setstate__(self, state):
        self.__init__(state["weights"], state["solver"])

    def _buffers(self, nv: int, n: int) -> None:
        """Buffers for nv rows and at least n unknowns: G^T (G by its columns, n x nv
        row-major) in Gt's first n nv entries; reg, lo, hi, pull rows of V; the compiled
        solve bound to them."""
        if nv == self._nv and n <= self._cap:
            return
        self._nv, self._cap = nv, n
        self._Gt, self._V, self._x = np.zeros(n * nv), np.zeros((4, n)), np.zeros(n)
        self._rhs, self._lam = np.zeros(nv), np.zeros(nv)
        from .. import compiled

        lib = compiled.library()
        self._solve = None if lib is None else compiled.DualNewtonInPlace(
            lib, self._Gt, self._rhs, *self._V, self._lam, self._x)

    def __call__(self, tau, A, f0, flfv, fpe, lb, ub, warm=None, Jc=None, residual_bound=None, active=None,
                 info=None, root_inertia=None, achieved: bool = True) -> CoordinationResult:
        """coordinate()'s problem and result (its docstring); achieved=False leaves the
        result's `achieved` None (one product less, for a caller that does not read it)."""
        w = self.weights
        M, nv = A.shape
        nc = len(Jc) if Jc is not None else 0
        nr = 6 if residual_bound is not None else 0
        nd = 6 if root_inertia is not None else 0
        n = M + nc + nr + nd
        self._buffers(nv, n)
        # G = [-A^T diag(f0 f_l f_v), Jc^T, S^T, -root_inertia] by its columns: the rows of G^T
        Gt = self._Gt[:n * nv].reshape(n, nv)
        reg, lo, hi, pull = self._V[:, :n]
        gain = f0 * flfv  # force per unit activation
        np.multiply(A, -gain[:, None], out=Gt[:M])  # the muscles' generalised force per unit activation
        passive = A.T @ (f0 * fpe)  # -(the passive forces' generalised force)
        rhs = np.add(tau, passive, out=self._rhs)
        lo[:M] = lb
        np.maximum(ub, lb, out=hi[:M])
        if w.smooth > 0 and warm is not None:
            # w_a a^2 + w_s (a - a_prev)^2 = (w_a + w_s) a^2 - 2 w_s a_prev a + const
            reg_a = reg[:M] = w.activation + w.smooth
            np.multiply(warm, w.smooth, out=pull[:M])
        else:
            reg_a = reg[:M] = w.activation
            pull[:M] = 0.0
        positive = ((M == 0 or reg_a > 0) and (not nc or w.contact > 0) and (not nr or w.residual > 0)
                    and (not nd or w.root_acceleration > 0))  # np.all(reg > 0)
        pull[M:] = 0.0
        k = M  # the next block's first column
        if nc:
            Gt[k:k + nc] = Jc
            reg[k:k + nc], lo[k:k + nc], hi[k:k + nc] = w.contact, 0.0, BIG
            k += nc
        if nr:
            Gt[k:k + 6] = np.eye(6, nv)  # S^T: the residual acts on the root's rows only
            reg[k:k + 6], hi[k:k + 6] = w.residual, residual_bound
            np.negative(residual_bound, out=lo[k:k + 6])
            k += 6
        if nd:
            np.negative(root_inertia.T, out=Gt[k:k + 6])
            reg[k:k + 6], lo[k:k + 6], hi[k:k + 6] = w.root_acceleration, -BIG, BIG
        start = None
        if warm is not None:
            start = np.concatenate((np.asarray(warm, float), np.zeros(nc + nr + nd)))
        if self.solver in ("auto", "newton"):
            z, status, act = self._newton(Gt, rhs, reg, lo, hi, pull, start, active, info, positive)
        else:
            z, status, act = bounded_lsq(np.ascontiguousarray(Gt.T), rhs, reg, lo, hi, self.solver, start, pull,
                                         active, M, info)
        x = z[:M]
        gf = (-A.T * gain[None, :]) @ x - passive if achieved else None
        return CoordinationResult(x, gf, status, z[M:M + nc], z[M + nc:M + nc + nr] if nr else np.zeros(6), act,
                                  z[M + nc + nr:] if nd else None)

    def _newton(self, Gt, rhs, reg, lo, hi, pull, warm, active, info, positive):
        """bounded_lsq's "newton" branch, the compiled method run on the buffers in place (G
        by its columns, Gt = G^T); G itself, row-major, only where numpy needs it."""
        n, m = Gt.shape
        G = None
        if positive:  # every weight > 0 (np.all(reg > 0), read off the weights)
            if _holds_multipliers(active, m):
                self._lam[:] = active
            else:
                G = np.ascontiguousarray(Gt.T)
                self._lam[:] = _multipliers_at_warm(G, rhs, lo, hi, warm)
            if self._solve is None:  # no library: numpy's method
                G = np.ascontiguousarray(Gt.T) if G is None else G
                x, lam, ok = dual_newton(G, rhs, reg, lo, hi, pull, self._lam, info=info)
            else:
                ok, steps = self._solve(m, n)
                x, lam = self._x[:n].copy(), self._lam.copy()
                if info is not None:
                    info["steps"] = steps
            if ok:
                return x, 0, lam
        return _fall_back(np.ascontiguousarray(Gt.T) if G is None else G, rhs, reg, lo, hi, warm, pull, info)


def _holds_multipliers(active, m: int) -> bool:
    """Whether `active` is the last Newton solve's multipliers for m rows (its warm start)."""
    return active is not None and active.dtype.kind == "f" and len(active) == m


def _multipliers_at_warm(G, rhs, lo, hi, warm) -> np.ndarray:
    """The Newton method's start without the last multipliers: at the optimum lam = rhs - G x,
    so lam at the warm activations (clipped to their box; zeros without them)."""
    n = G.shape[1]
    x0 = np.clip(warm if warm is not None and len(warm) == n else np.zeros(n), lo, hi)
    return rhs - G @ x0


def _fall_back(G, rhs, reg, lo, hi, warm, pull, info):
    """A zero weight, or a Newton solve that did not converge: another solver (DAQP, else
    scipy's BVLS), and its multipliers for the next start."""
    if info is not None:
        info["fallback"] = True
    x, status, _ = bounded_lsq(G, rhs, reg, lo, hi, "daqp" if _have_daqp() else "lsq", warm, pull)
    return x, status, rhs - G @ x


def dual_newton(G, rhs, reg, lo, hi, pull, lam=None, tol=1e-9, max_iter=200, info=None):
    """min 1/2 sum reg x^2 - pull . x + 1/2 |G x - rhs|^2 over lo <= x <= hi (reg > 0), by a
    semismooth Newton method on the dual. Returns (x, lam, converged).

    With e = G x - rhs and multipliers lam for G x - e = rhs, the minimiser over e is
    e = -lam and over the box it is separable: x(lam) = clip((pull + G^T lam) / reg, lo, hi).
    The optimum solves F(lam) = lam + G x(lam) - rhs = 0 (the dual's gradient, negated),
    piecewise linear with generalised Jacobian J = I + G_f diag(1/reg_f) G_f^T over the
    unclipped ("free") x: symmetric, >= I, so every Newton step is one small well-conditioned
    linear solve (rows x rows, 56 for the rig) however many unknowns there are. A full step
    that leaves every x_i on its piece (low, free, high) lands on the solution, F being
    linear along it; otherwise the step that maximises the concave dual along the direction
    is taken (_exact_step). J is updated by the columns whose x_i entered or left its box
    since the last step, not rebuilt. Warm-started from the last decision's lam: ~6 steps a
    decision on the fresh and the tired walk at strength 3 (~13 on the tired one at the
    model's own forces, where fatigue narrows the boxes more), ~60 from a cold start;
    0.55 ms a solve against DAQP's 1.4 on the fresh walk, 0.52 against 1.5 tired
    (benchmarks/coordination_solvers.py). Not converged in max_iter: the caller falls back
    to DAQP. `info`, a dict when given, receives the Newton steps taken."""
    m = len(rhs)
    info = {} if info is None else info
    lam = np.zeros(m) if lam is None else np.array(lam, float)
    scale = 1.0 + np.abs(rhs).max() if m else 1.0

    def box(y):  # x for y: np.clip's values without its wrappers
        return np.minimum(np.maximum(y, lo), hi)

    def primal(lam):
        y = (pull + G.T @ lam) / reg
        return y, box(y)

    def state(y):  # -1 / 0 / +1: clipped low, free, clipped high (low wins where lo = hi)
        low = y <= lo
        return (y >= hi).view(np.int8) * ~low - low.view(np.int8)

    y, x = primal(lam)
    r = G @ x - rhs
    J, in_J = None, None
    for k in range(max_iter):
        info["steps"] = k
        F = lam + r
        if np.abs(F).max() <= tol * scale:
            return x, lam, True
        s = state(y)
        free = s == 0
        changed = None if J is None else np.flatnonzero(free != in_J)
        if changed is None or 2 * len(changed) > np.count_nonzero(free):
            Gf = G[:, free]
            J = (Gf / reg[free]) @ Gf.T
            J[np.diag_indices(m)] += 1.0
        elif len(changed):  # a few x_i entered or left their box: J changes by their columns only
            Gc = G[:, changed]
            J += (Gc * (np.where(free[changed], 1.0, -1.0) / reg[changed])) @ Gc.T
        in_J = free
        step = _spd_solve(J, -F)  # Newton step on F
        w = G.T @ step
        b = w / reg  # y moves by t b along the step
        y_n = y + b
        if np.array_equal(state(y_n), s):
            info["steps"] = k + 1
            # every x_i stayed on its piece (y_i is linear along the step), so F was linear
            # along it and the step lands on F = 0, up to round-off in J's solve (which can
            # exceed tol when tiny weights make J large)
            return box(y_n), lam + step, True
        t = _exact_step(step, F, y, w, b, lo, hi)
        if not t > 0:
            break  # no progress along the step: round-off
        lam = lam + t * step
        y, x = primal(lam)
        r = G @ x - rhs
    return x, lam, bool(np.abs(lam + r).max() <= tol * scale)


def _newton():
    """dual_newton, compiled (engine/native/dual_newton.c) where the library loads, else numpy's."""
    from .. import compiled

    lib = compiled.library()
    if lib is None:
        return dual_newton
    return lambda *a, **k: compiled.dual_newton(lib, *a, **k)


def _spd_solve(J: np.ndarray, F: np.ndarray) -> np.ndarray:
    """J^-1 F for dual_newton's J (symmetric, >= I): LAPACK's Cholesky solve (half the work
    of an LU and less call overhead than numpy's), LU if round-off broke the factorisation."""
    _, x, fail = _dposv(J, F)
    return np.linalg.solve(J, F) if fail else x


def _exact_step(d, F, y, w, b, lo, hi) -> float:
    """The step t > 0 that maximises the dual along lam + t d (dual_newton's line search).
    The dual's slope along d is -c(t), c(t) = d.(lam + t d) + w.x(t) - d.rhs with w = G^T d
    and x_i(t) = clip(y_i + t b_i, lo_i, hi_i), b = w / reg: piecewise linear and increasing,
    so its root is found exactly by walking the breakpoints where an x_i enters or leaves its
    box. At t = 0, c = d.F (F = lam + G x - rhs, x = x(0))."""
    moving = b != 0
    ta = np.divide(lo - y, b, out=np.full_like(b, np.inf), where=moving)  # inf where x_i does not move
    tb = np.divide(hi - y, b, out=np.full_like(b, np.inf), where=moving)
    t_in, t_out = np.minimum(ta, tb), np.maximum(ta, tb)
    slope_i = w * b  # >= 0: x_i's contribution to c's slope while it is inside its box
    c0 = d @ F
    slope0 = d @ d + slope_i[(t_in <= 0) & (t_out > 0)].sum()
    ev_t = np.concatenate((t_in, t_out))
    keep = (ev_t > 0) & (ev_t < np.inf)  # x_i enters its box at t_in > 0, leaves it at t_out > 0
    ev_ds = np.concatenate((slope_i, -slope_i))[keep]
    ev_t = ev_t[keep]
    order = np.argsort(ev_t)
    ev_t, ev_ds = ev_t[order], ev_ds[order]
    knots = np.concatenate(((0.0,), ev_t))
    slopes = slope0 + np.concatenate(((0.0,), np.cumsum(ev_ds)))  # slope on [knots[k], knots[k+1])
    c_at = c0 + np.concatenate(((0.0,), np.cumsum(slopes[:-1] * np.diff(knots))))  # c at each knot
    k = int(np.searchsorted(c_at, 0.0, side="right")) - 1  # last knot with c <= 0
    if k < 0:
        return 0.0
    return float(knots[k] - c_at[k] / slopes[k]) if slopes[k] > 0 else float(knots[k])


def bounded_lsq(G, rhs, reg, lo, hi, solver, warm, pull, active=None, head=0, info=None):
    """min ||G x - rhs||^2 + sum reg x^2 - 2 pull . x over lo <= x <= hi; returns (x, status,
    warm start for the next call). solver "newton" (dual_newton; "auto" picks it): the
    returned warm start is its multipliers. "daqp": its active bounds, and `active`
    warm-starts it: all of it when it has n entries, else its first `head`. "lsq": scipy's
    BVLS. `info`, a dict when given, receives the Newton steps ("steps") and whether the
    Newton method fell back to another solver ("fallback")."""
    n = G.shape[1]
    act = None
    if solver == "auto":
        solver = "newton"
    status = 0
    if solver == "newton":
        if np.all(reg > 0):
            lam0 = active if _holds_multipliers(active, len(rhs)) else _multipliers_at_warm(G, rhs, lo, hi, warm)
            x, lam, ok = _newton()(G, rhs, reg, lo, hi, pull, lam0, info=info)
            if ok:
                return x, 0, lam
        return _fall_back(G, rhs, reg, lo, hi, warm, pull, info)
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
        if active is not None and active.dtype.kind in "iu":  # an active set, not multipliers
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
