"""Standing on the muscles alone: an LQR about the held pose's nearest balanced pose.

A take of one clip that holds still (a pose held with CLIP@AT, or frames that repeat) and
stands on its feet, played without the root residual on MuJoCo, is stood by this controller
instead of the frame-by-frame tracker, whose
one-step greedy solve lets a held pose fall within seconds (docs/research/balance.md). As in
MuJoCo's LQR tutorial (a humanoid balancing on one leg), with the muscles as the inputs:

1. `balanced_pose`: a least-squares change of the held pose (joints cheap, the root's tilt
   dear, its horizontal position and heading kept) after which MuJoCo's inverse dynamics,
   soft contacts included, needs no vertical force and no tipping torque at the root, the
   foot boxes lie level at one height, the toes and the ankles' roll and twist carry little
   torque (their muscles are small) and every joint's torque is a small share of what its
   muscles can give. Its generalised force u0 on the jointed DOFs is what the muscles hold.
2. `linearise`: the physics step about that pose at rest under u0, by finite differences:
   x' = A x + B u, x = (pose difference on the configuration manifold, velocity), u the
   generalised force on the jointed DOFs.
3. `StandController._design`: activations a0 that make u0 (least effort, each row's miss
   weighted by the acceleration it causes), then the discrete LQR (`lqr_gains`) with the
   activations as its inputs (B G, G the moment arms x f0 f_l f_v at the pose), so the
   feedback asks of the muscles only what they can give. Every 2 s both are designed again
   with each muscle's cost x 1 / (1 - M_F)^2, so the load moves to fresh synergists.
4. Every step the wanted generalised force G (a0 - K x) + g_PE is made by the muscles inside
   their 3CC-r bounds (one bounded least-squares solve, as the tracker's).

The take starts in the balanced pose, at rest, with its muscles at a0. Friction that does not
creep (engine.physics.mujoco_backend: elliptic cones, impratio 100) matters here: with
MuJoCo's default the feet slide and the same poses fall at 8-14 s. Measured at fatigue scale
50, 120 s: see docs/research/balance.md (fifth session); the tracker without the residual
falls within ~1 s and the research whole-body solve within ~2 s.
"""
from __future__ import annotations

import copy

import mujoco
import numpy as np
from scipy.linalg import solve_discrete_are

from ..physics.base import q_to_state
from ..physics.mujoco_backend import full_mass_matrix
from .coordination import bounded_lsq
from .tracking import TrackingController
from ..simulation import MuscleCommand

# All chosen by measurement (docs/research/balance.md, fifth session; walk frames held at
# fatigue scale 50).
# The balanced pose, a least-squares problem: the root's unbalanced vertical force and tipping
# torques (N, N m) x ROOT_WEIGHT; each foot box's tilt (rad) x FOOT_TILT_SCALE and its
# bottom's height against the others' (m) x FOOT_HEIGHT_SCALE; the toe joints' and the
# ankles' roll and twist torques (N m) x 1; every jointed DOF's torque as a fraction of what
# its muscles can give that way x EFFORT_WEIGHT; the pose's change (rad, m) x POSE_WEIGHT,
# the root's tilt sqrt(TILT_COST) times dearer.
ROOT_WEIGHT, FOOT_TILT_SCALE, FOOT_HEIGHT_SCALE = 10.0, 300.0, 3000.0
EFFORT_WEIGHT, POSE_WEIGHT, TILT_COST = 30.0, 10.0, 100.0
# LQR: per (position unit)^2 x 1e4: root height and tilt Q_ROOT, joints Q_JOINT, the root's
# horizontal position and heading Q_SLIDE (a little, or the body slowly turns away on its
# feet); per (velocity unit)^2 Q_VEL; per activation^2 R_ACTIVATION (x the muscle's fatigue cost)
Q_ROOT, Q_JOINT, Q_SLIDE, Q_VEL, R_ACTIVATION = 100.0, 1.0, 1.0, 0.1, 100.0
# The muscle solve: activation^2 against each row's miss weighted by the acceleration it
# causes; the toes' and the ankles' roll and twist rows count FOOT_ROW_WEIGHT of that (their
# muscles are small, and a foot flat on the floor is held by the floor that way)
FOOT_ROW_WEIGHT = 0.1
REDESIGN_STEPS = 240  # a0 and K re-designed for the muscles' fatigue every 2 s
STILL_TOLERANCE = 1e-3  # rad/s (m/s): a clip this slow everywhere holds still


def _feet(rig) -> tuple[list[int], list[int]]:
    """Body indices of the foot boxes (talus, toes) and of the toes alone."""
    feet = [rig.body_index(n + side) for side in "RL" for n in ("Talus", "FootThumb", "FootPinky")]
    return feet, [b for b in feet if not rig.body_names[b].startswith("Talus")]


def _ankle_roll_dofs(model, rig) -> np.ndarray:
    """The ankles' roll and twist DOFs (each talus ball joint's 2nd and 3rd: about the
    forward and the up axis; the 1st, about the side axis, flexes the ankle)."""
    feet, toes = _feet(rig)
    return np.concatenate([model.jnt_dofadr[model.body_jntadr[b + 1]] + np.array([1, 2]) for b in feet if b not in toes])


def _lowest_corner(data, rig, bodies=None) -> float:
    """Height of the lowest box corner of `bodies` (default: the foot boxes) in `data`
    (forwarded)."""
    bodies = np.array(_feet(rig)[0] if bodies is None else bodies)
    signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    corners = 0.5 * signs[None] * rig.body_size[bodies][:, None]  # (B, 8, 3) in each box's frame
    R = data.ximat[bodies + 1].reshape(-1, 3, 3)
    return float((data.xipos[bodies + 1, None, 2] + np.einsum("bij,bkj->bki", R, corners)[..., 2]).min())


def _foot_terms(model, rig) -> tuple:
    """What balance_conditions reads of the model and rig (computed once per search): the foot
    boxes' MuJoCo body ids and rest rotations, each box's half-height when level, the toe DOFs
    (a mask) and the ankles' roll and twist DOFs."""
    feet, toes = _feet(rig)
    R0 = rig.body_rest_rot[feet]
    half = 0.5 * np.einsum("bk,bk->b", np.abs(R0[:, 2, :]), rig.body_size[feet])
    return np.array(feet) + 1, R0, half, np.isin(model.dof_bodyid - 1, toes), _ankle_roll_dofs(model, rig)


def balance_conditions(model, data, rig, q, terms=None) -> np.ndarray:
    """What vanishes at a balanced pose q, scaled to comparable sizes: the root's vertical
    force and tipping torques in MuJoCo's inverse dynamics at rest (N, N m), every foot box's
    tilt from its rest orientation, the foot boxes' bottoms' heights against the first's, the
    toe joints' torques and the ankles' roll and twist torques (N m). Leaves `data` holding the
    inverse dynamics at q. `terms`: _foot_terms(model, rig), when already at hand."""
    ids, R0, half, toe_dofs, ankle = terms or _foot_terms(model, rig)
    data.qpos[:] = q
    data.qvel[:] = 0.0
    data.qacc[:] = 0.0
    mujoco.mj_inverse(model, data)
    R = data.ximat[ids].reshape(-1, 3, 3)
    up = np.einsum("bij,bkj,k->bi", R, R0, np.array([0.0, 0.0, 1.0]))  # each box's rest-up axis, now
    bottom = data.xipos[ids, 2] - half  # half: each box's half-height, level
    return np.concatenate([data.qfrc_inverse[[2, 3, 4]], FOOT_TILT_SCALE * up[:, :2].ravel(),
                           FOOT_HEIGHT_SCALE * (bottom[1:] - bottom[0]), data.qfrc_inverse[toe_dofs],
                           data.qfrc_inverse[ankle]])


def balanced_pose(model, rig, q_ref, capacity=None, iterations: int = 200) -> tuple[np.ndarray, np.ndarray, float]:
    """The balanced pose nearest q_ref (module docstring, step 1): (q, u0 = the inverse
    dynamics' generalised force there, size of the root's unbalanced wrench left, N / N m).

    Least squares (Levenberg-Marquardt on finite differences) over the pose, the root's
    horizontal position and heading kept: the root's vertical force and tipping torques
    (weighted ROOT_WEIGHT, so they end near 0), the foot conditions of balance_conditions,
    each jointed DOF's torque as a fraction of what its muscles can give that way (`capacity`,
    (2, jointed DOFs): N m in the positive and the negative sense; EFFORT_WEIGHT; None leaves
    effort out), and the change of the pose (POSE_WEIGHT per radian or metre, the root's tilt
    sqrt(TILT_COST) times dearer)."""
    data = mujoco.MjData(model)
    nv = model.nv
    free = np.ones(nv, bool)
    free[[0, 1, 5]] = False  # the root's horizontal position and heading stay
    pose_w = np.full(nv, POSE_WEIGHT)
    pose_w[3:5] *= np.sqrt(TILT_COST)
    if capacity is None:
        capacity = np.full((2, nv - 6), np.inf)
    cap_up, cap_down = np.maximum(capacity, 1.0)

    def moved(q, dv):
        out = q.copy()
        mujoco.mj_integratePos(model, out, dv, 1.0)
        return out

    terms = _foot_terms(model, rig)
    q = np.array(q_ref, dtype=float)
    balance_conditions(model, data, rig, q, terms)  # forward kinematics at q_ref
    q[2] -= _lowest_corner(data, rig) + 0.001  # start with the lowest foot-box corner 1 mm into the floor
    start = q.copy()
    dq = np.zeros(nv)

    def residual(q):
        c = balance_conditions(model, data, rig, q, terms)
        mujoco.mj_differentiatePos(model, dq, 1.0, start, q)
        tau = data.qfrc_inverse[6:]
        effort = EFFORT_WEIGHT * tau / np.where(tau > 0, cap_up, cap_down)
        return np.concatenate([ROOT_WEIGHT * c[:3], c[3:], effort, pose_w * dq])

    lam = 1e-3
    eye = np.eye(nv)
    r = residual(q)
    for _ in range(iterations):
        J = np.zeros((len(r), nv))
        for k in np.flatnonzero(free):
            J[:, k] = (residual(moved(q, 1e-6 * eye[k])) - residual(moved(q, -1e-6 * eye[k]))) / 2e-6
        g, H = J.T @ r, J.T @ J
        for _ in range(20):
            step = -np.linalg.solve(H + lam * (np.diag(np.diag(H)) + 1e-9 * eye), g)
            step *= min(1.0, 0.02 / max(float(np.abs(step).max()), 1e-12))  # at most 0.02 rad (m) a step
            r_new = residual(moved(q, step))
            if r_new @ r_new < r @ r:
                lam = max(lam / 3.0, 1e-9)
                break
            lam *= 10.0
        else:  # no step lowers the cost: converged
            break
        converged = (r @ r - r_new @ r_new) < 1e-10 * (r @ r)
        q, r = moved(q, step), r_new
        if converged:
            break
    c = balance_conditions(model, data, rig, q, terms)
    return q, data.qfrc_inverse.copy(), float(np.abs(c[:3]).max())


def _capacity(G) -> np.ndarray:
    """(2, jointed DOFs): what all the muscles on together give each DOF, N m in the positive
    and the negative sense (G: generalised force per unit activation)."""
    return np.stack([np.maximum(G, 0.0).sum(1), -np.minimum(G, 0.0).sum(1)])


def linearise(model, q0, u0) -> tuple[np.ndarray, np.ndarray]:
    """(A, B) of the physics step about q0 at rest under the generalised force u0 (its
    jointed part), by centred finite differences; B per unit of generalised force on each
    jointed DOF."""
    model = copy.deepcopy(model)  # the constraint solve converged tightly: finite differences of
    model.opt.tolerance, model.opt.iterations = 1e-12, 1000  # a loose one are noise (66 % off)
    nv = model.nv
    data = mujoco.MjData(model)
    data.qpos[:] = q0
    data.qfrc_applied[6:] = u0[6:]
    mujoco.mj_forward(model, data)
    A = np.zeros((2 * nv, 2 * nv))
    mujoco.mjd_transitionFD(model, data, 1e-6, True, A, None, None, None)
    step = mujoco.MjData(model)
    dq = np.zeros(nv)

    def next_state(qfrc):
        step.qpos[:] = q0
        step.qvel[:] = 0.0
        step.qacc_warmstart[:] = 0.0
        step.qfrc_applied[:] = qfrc
        mujoco.mj_step(model, step)
        mujoco.mj_differentiatePos(model, dq, 1.0, q0, step.qpos)
        return np.concatenate([dq, step.qvel])

    eps = 1e-2
    B = np.zeros((2 * nv, nv - 6))
    for i in range(6, nv):
        up, dn = data.qfrc_applied.copy(), data.qfrc_applied.copy()
        up[i] += eps
        dn[i] -= eps
        B[:, i - 6] = (next_state(up) - next_state(dn)) / (2 * eps)
    return A, B


def lqr_gains(A, B, Q, R) -> np.ndarray:
    """Discrete infinite-horizon LQR gain K (u = -K x). The neutral modes (the whole body slid
    or turned on the floor: equilibria too, and not controllable) are counted as very
    slightly stable, which the Riccati solve needs."""
    Ad = (1.0 - 1e-4) * A
    P = solve_discrete_are(Ad, B, Q, R)
    return np.linalg.solve(R + B.T @ P @ B, B.T @ P @ Ad)


class StandController(TrackingController):
    """Stands a still reference on the muscles alone; see the module docstring."""

    def start(self, sim) -> None:
        """Find the balanced pose, put the character there at rest with its muscles at a0,
        and design the feedback."""
        model, rig = self.model, self.rig
        q_ref = self.reference(0)[0]
        G, _ = self._generalised(sim, sim.state)
        q0, u0, left = balanced_pose(model, rig, q_ref, _capacity(G))
        A, B = linearise(model, q0, u0)
        sim.physics.set_q(q0, np.zeros(model.nv))
        sim.state = sim.physics.body_state()
        G, g_pe = self._generalised(sim, sim.state)
        self._about(sim, q0, u0, A, B, G, g_pe, self._row_weights())
        self._warm = self.a0  # the solve's warm start, in the model's activations (_generalised)
        a0 = self.a0 / self.rig.strength
        sim.fatigue.MA[:] = a0  # the muscles already holding the pose
        sim.fatigue.MR[:] = 1.0 - a0 - sim.fatigue.MF
        moved = self.plan.space.diff(q_ref, q0)
        radius = float(np.abs(np.linalg.eigvals(A - B @ self.G0 @ self.K)).max())
        self.summary = dict(
            mode="stand", balance_left=round(left, 4), root_dz_cm=round(100 * float(moved[2]), 2),
            root_tilt_deg=round(float(np.degrees(np.linalg.norm(moved[3:5]))), 2),
            joints_moved_deg_mean=round(float(np.degrees(np.abs(moved[6:])).mean()), 2),
            joints_moved_deg_max=round(float(np.degrees(np.abs(moved[6:])).max()), 1),
            activation_mean=round(float(a0.mean()), 4), activation_max=round(float(a0.max()), 3),
            closed_loop_radius=round(radius, 6))

    def report(self) -> dict:
        return dict(super().report(), stand=getattr(self, "summary", None))  # the balanced pose it held

    def take_over(self, sim, q_target) -> float:
        """Design the feedback about the balanced pose nearest q_target where the character
        is, moving neither the body nor its muscles (start's steps without the move): for a
        body handed over by another controller, e.g. a walk braked to a halt. Returns the
        root's unbalanced wrench left at that pose (as balanced_pose). Its basin is small: a
        braked walk's states fall within ~1 s (docs/research/balance.md, thirteenth session)."""
        model = self.model
        data = mujoco.MjData(model)  # the design's poses, away from the simulation's own data

        def generalised_at(q):
            data.qpos[:], data.qvel[:] = q, 0.0
            mujoco.mj_forward(model, data)
            kept, self.data = self.data, data  # muscle_terms reads the controller's data
            try:
                return self._generalised(sim, q_to_state(self.rig, q, np.zeros(model.nv)))
            finally:
                self.data = kept

        q0, u0, left = balanced_pose(model, self.rig, q_target, _capacity(generalised_at(q_target)[0]))
        A, B = linearise(model, q0, u0)
        G, g_pe = generalised_at(q0)
        self._about(sim, q0, u0, A, B, G, g_pe, self._row_weights(data))
        self._warm, self._active = sim.fatigue.MA * self.rig.strength, None
        return left

    def _about(self, sim, q0, u0, A, B, G, g_pe, rows) -> None:
        """Set the balanced pose q0 (u0; the step's A, B there; the muscles' G and g_PE and the
        solve's row weights there) and design a0 and K for the muscles' fatigue now."""
        nv = self.model.nv
        wq = np.full(nv, Q_JOINT)
        wq[:6] = [Q_SLIDE, Q_SLIDE, Q_ROOT, Q_ROOT, Q_ROOT, Q_SLIDE]
        self._Q = np.diag(np.concatenate([1e4 * wq, np.full(nv, Q_VEL)]))
        self._A, self._B, self._rows = A, B, rows
        self.q0, self.u0, self.G0, self.g0 = q0, u0, G, g_pe
        self._design(sim.fatigue.MF)
        self._designed_at = sim.steps

    def design_for(self, sim) -> None:
        """a0 and K for the simulation's fatigue now, as at that point of its own take: for a
        controller dropped into a state it did not play to (a DAgger episode's start). The
        solve starts afresh there too, so what it answers does not hang on where it was before."""
        self._design(sim.fatigue.MF)
        self._designed_at = sim.steps
        self._warm, self._active = sim.fatigue.MA * self.rig.strength, None

    def _design(self, MF) -> None:
        """a0 and the LQR gain K for muscles whose fatigued fractions are MF: a tired muscle
        costs 1 / (1 - M_F)^2 as much, in a0 and in the feedback, so the load moves to fresh
        synergists (3CC-r: a muscle above ~1/6 activation tires for good)."""
        n_m = self.G0.shape[1]
        cost = 1.0 / np.maximum(1.0 - MF, 0.05) ** 2
        rows = self._rows
        self.a0, _, _ = bounded_lsq(rows[:, None] * self.G0, rows * (self.u0[6:] - self.g0), cost, np.zeros(n_m),
                                     np.full(n_m, self.rig.strength), "newton", None, np.zeros(n_m))
        self.K = lqr_gains(self._A, self._B @ self.G0, self._Q, R_ACTIVATION * np.diag(cost))

    def _generalised(self, sim, state) -> tuple[np.ndarray, np.ndarray]:
        """G (jointed DOFs x muscles): generalised force per unit of the model's activation,
        and the passive part g_PE, at the physics state.

        The design (balanced pose, a0, K, the solve) is in the activations of the model's f0
        (Rig.model_f0), a' = strength x activation: on a stronger rig (Rig.with_strength) it
        is the model's design in torque, played at 1/strength of the activation. Designed on
        the stronger f0 itself (the balanced pose, priced in fractions of the muscles'
        capacity, then moves) it fell within 1 s at strength 3 and within 16 s at 2 (walk
        frames 0 and 30 held at fatigue scale 50; 120 s at 1; balance.md, fourteenth session)."""
        flfv, fpe, A, _ = self.muscle_terms(sim, state, margin=-np.inf)  # no contact rows: not used here
        return (-A.T * (self.rig.model_f0 * flfv)[None, :])[6:], (-A.T @ (self.rig.muscle_f0 * fpe))[6:]

    def _row_weights(self, data=None) -> np.ndarray:
        """Each jointed DOF's miss weighted by the acceleration it causes (1 / sqrt(M_jj)) at
        the pose of `data` (default: the controller's); the toes' and the ankles' roll and
        twist FOOT_ROW_WEIGHT of that."""
        M = np.zeros((self.model.nv, self.model.nv))
        full_mass_matrix(self.model, self.data if data is None else data, M)
        w = 1.0 / np.sqrt(np.diag(M)[6:])
        m = self.model
        feet, toes = _feet(self.rig)
        w[np.isin(m.dof_bodyid[6:] - 1, toes)] *= FOOT_ROW_WEIGHT
        w[_ankle_roll_dofs(m, self.rig) - 6] *= FOOT_ROW_WEIGHT
        return w

    def act(self, sim, state) -> MuscleCommand:
        import time

        from .. import fatigue as fat

        t0 = time.perf_counter()
        if sim.steps - self._designed_at >= REDESIGN_STEPS:
            self._design(sim.fatigue.MF)
            self._designed_at = sim.steps
        q, qd = sim.physics.get_q()
        dq = self.plan.space.diff(self.q0, q)
        G, g_pe = self._generalised(sim, state)
        p = sim.muscles.params
        lb, ub = fat.activation_bounds(sim.fatigue.MA, sim.fatigue.MR, sim.muscles.dt, p.F_eff, p.LD, p.LR)
        s = self.rig.strength  # the solve is in the model's activations (_generalised)
        lb, ub = s * lb, s * np.maximum(ub, lb)
        wanted = self.G0 @ (self.a0 - self.K @ np.concatenate([dq, qd])) + self.g0
        t1 = time.perf_counter()
        n_m = len(lb)
        info = {}
        x, status, act = bounded_lsq(self._rows[:, None] * G, self._rows * (wanted - g_pe), np.ones(n_m), lb,
                                      ub, "newton", self._warm, np.zeros(n_m), self._active, n_m, info)
        self._warm, self._active = x, act
        self.tally(t1 - t0, time.perf_counter() - t1, info)
        x = x / s
        self.last = dict(q_ref=self.q0, activation=x, residual=np.zeros(6), status=status, contact_rows=0)
        return MuscleCommand(x, None, None)


def holds_still(plan) -> bool:
    """The plan is one clip that holds still (its reference velocities below STILL_TOLERANCE:
    a pose held with CLIP@AT, or a clip whose frames repeat)."""
    return len(plan.segments) == 1 and float(np.abs(plan.segments[0].clip.qvel).max()) < STILL_TOLERANCE


def stands_on_its_feet(model, rig, q) -> bool:
    """With its lowest foot-box corner on the floor, does every other body's box stay more
    than 1 cm above it (a pose on its feet, as the balance search assumes; an upside-down or
    kneeling pose is not)? `model`: any MuJoCo model of the rig."""
    data = mujoco.MjData(model)
    data.qpos[:] = q
    mujoco.mj_kinematics(model, data)
    feet = _lowest_corner(data, rig)
    low = _lowest_corner(data, rig, np.setdiff1d(np.arange(rig.num_bodies), _feet(rig)[0]))
    return low - feet > 0.01


def is_stance(sim, plan) -> bool:
    """One still clip standing on its feet, on MuJoCo (the stand controller's LQR is
    designed on MuJoCo's contacts): a take the stand controller can start and hold."""
    from ..physics.mujoco_backend import MujocoBackend

    return (isinstance(sim.physics, MujocoBackend) and holds_still(plan)
            and stands_on_its_feet(plan.space.model, sim.rig, plan.sample(0)[0]))


def start_stance(sim, plan) -> StandController:
    """Put the character of a stance take (`is_stance`) in its balanced pose, at rest, with its
    muscles holding it (StandController.start), whatever controller then plays the take: a held
    pose as the clip gives it is not balanced, and from it even the stand controller falls
    within a second. Returns the started stand controller (the expert a policy learns from)."""
    from .tracking import TrackingParams

    ctrl = StandController(sim, plan, TrackingParams(residual=0.0))
    ctrl.start(sim)
    return ctrl
