"""The training-free tracking controller (DESIGN.md "Controllers").

Every `period` physics steps:

1. Reference q, qdot, qddot at this step (engine.control.plan: looped / chained clips),
   played slower as the legs tire (engine.control.pace, strength `pace`).
2. Wanted accelerations qddot* = qddot_ref + kp (q_ref - q) + kd (qdot_ref - qdot), with
   differences on the configuration manifold (mj_differentiatePos).
3. Inverse dynamics without contacts: tau = M qddot* + c(q, qdot) - passive (joint
   damping), from MuJoCo's mass matrix and bias forces at the current state.
4. Contacts enter the coordination, not the inverse dynamics: every body-box corner within
   `contact_margin` of the floor (the feet's, and a cartwheel's hands or a kneel's knees)
   contributes its friction-pyramid edges as non-negative force unknowns. The root's 6 rows
   of tau, which no muscle can produce, are met by the ground where the body can push and by
   the residual otherwise.
5. Muscle coordination (engine.control.coordination): activations inside the 3CC-r bounds
   of the coming step, the contact forces, and a root residual bounded by `residual` x body
   weight (force) and x body weight x 1 m (torque) - or, with no residual, a change of the
   root's wanted acceleration (cost `weights.root_acceleration`), so the joint torques
   belong to the root motion muscles and ground can give -, in one bounded least-squares solve
   (a semismooth Newton method on its dual, warm-started from the last step's
   multipliers), with a small pull towards the last step's activations. Solving them together
   lets the ground force be split in a way the leg muscles can balance. Body Jacobians
   for the moment arms and contacts come from MuJoCo (mj_jac) at the physics state.
6. The activations are held until the next decision (the muscle step clips them to the
   bounds again each step, so fatigue acts physically); the residual, converted to a force
   and torque on the pelvis, is held too.

Fatigue then shows up by itself: as a muscle's bounds close, the solve moves its load to
synergists; when no feasible activation meets tau, the unmet part becomes tracking error
and the pose sags.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import mujoco
import numpy as np

from .. import fatigue as fat
from ..errors import ParameterError
from ..physics.mujoco_backend import full_mass_matrix
from ..muscle_step import FastClipNumpy
from ..simulation import MuscleCommand
from ..rig import GROUPS
from ..transforms import cross
from .controller import Controller
from .coordination import CoordinationWeights, Coordinator, MomentArms
from .pace import SYNC_EVERY, SYNC_GAIN_M, SYNC_WINDOW_S, SYNC_YAW_M, Pace, heading, sync_rate
from .plan import PHYSICS_HZ, MotionPlan

G = 9.81
FRICTION = 0.8  # friction coefficient the plan assumes (MuJoCo's ground has 1)


@dataclass(frozen=True)
class TrackingParams:
    """Gains and settings of the tracking controller (chosen by measurement, see issue 5's
    report in engine/control/__init__.py)."""

    kp: float = 400.0  # 1/s^2 on joint and root position errors (20 rad/s natural frequency)
    kd: float = 40.0  # 1/s on velocity errors (critically damped)
    # m: the horizontal root position error the kp term pulls back; a character that strays
    # further from the clip's path is pulled by this much, as if the clip's place followed it.
    # Without the cap a tired minute's walk that drifted 0.8 m across the path was pulled at
    # ~300 m/s^2 and fell at 39 s (seed 0); with it the same take walked the minute, 8 cm
    # from the path on average instead of 23 (docs/research/balance.md, twentieth session).
    root_reach: float = 0.1
    # physics steps per decision (1 = 120 Hz). Held activations over 2 steps lose the walk
    # (~20 deg); so does feeding the torque change between decisions through the solve's
    # exact sensitivity d alpha / d tau (measured: the active set changes every step).
    period: int = 1
    residual: float = 1.0  # residual strength: bound on the root residual in body weights
    # m: box corners nearer the floor than this may carry load in the plan. Small, not 15 mm:
    # with 15 mm the plan hands load to corners that are not touching yet (a heel or toe
    # edge still 1 cm up), the muscles are set for a ground force that never comes, and the
    # walk stumbles. Measured on the fresh walk (20 s) with the corrected foot boxes:
    # 2 mm 5.70 deg / 0.49 cm, 4 mm 5.91 deg / 0.52 cm, 8 mm and 15 mm fall apart at once.
    contact_margin: float = 0.002
    # activation 1, smooth 10 (per unit^2) and residual 0.1 (per N^2), against 1 per (N m)^2
    # of joint-torque error. Fresh 60 s walk: 4.72 deg, residual 0.085 body weights, mean
    # activation 0.20; activation 0.01, no smooth and residual 0.01 give 4.47 deg but lean on
    # the residual more (0.115 body weights), co-contract more and take twice the iterations.
    # (Measured before the reference was low-passed at 5 Hz; with it: 4.51 deg, 0.033 body weights.)
    weights: CoordinationWeights = field(default_factory=lambda: CoordinationWeights(activation=1.0, smooth=10.0, residual=0.1))
    # pace governor strength (engine.control.pace eq. 1): 1 slows the reference by 1 % per
    # 1 % of the legs' motor units fatigued beyond a tenth, down to half pace; 0 keeps the
    # recorded pace however tired the legs are
    pace: float = 1.0
    # the clip waits for a body that fell behind it in time, at a turn or a stop
    # (engine.control.pace eq. 2); False: the clip keeps its clock
    sync: bool = True
    # the balance planner (engine.control.balance.BalanceParams) that steers the tracker when
    # there is no residual; None: the tracker alone (with residual 0 a walk falls within ~3 s)
    balance: object | None = None

    def validate(self) -> "TrackingParams":
        for name in ("kp", "kd", "residual", "contact_margin", "pace"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and np.isfinite(v) and v >= 0):
                raise ParameterError(name, f"must be a finite number >= 0, got {v!r}")
        if not (isinstance(self.root_reach, (int, float)) and np.isfinite(self.root_reach) and self.root_reach > 0):
            raise ParameterError("root_reach", f"must be a finite number of metres > 0, got {self.root_reach!r}")
        if not (isinstance(self.period, (int, np.integer)) and self.period >= 1):
            raise ParameterError("period", f"must be a whole number of steps >= 1, got {self.period!r}")
        if self.balance is not None:
            if not callable(getattr(self.balance, "validate", None)):  # engine.control.balance.BalanceParams
                raise ParameterError("balance", f"expected BalanceParams or None, got {type(self.balance).__name__}")
            self.balance.validate()
            if self.residual > 0:
                raise ParameterError("residual", f"{self.residual:g}: the balance planner balances without the "
                                     "root residual; set it to 0 (or plan no balance)")
            if self.period != 1:
                raise ParameterError("period", "the balance planner plays the tracker every step (period 1)")
        return self


@dataclass
class DecisionInputs:
    """What TrackingController.prepare hands the solve: the generalised coordinates q and the
    reference q_ref, the mass matrix M (with the implicit damping), the wanted generalised
    force tau = M qddot* + c, the Hill factors f_l f_v and f_PE, the moment arms A, the contact
    edge Jacobians Jc and the 3CC-r activation bounds [lb, ub] of the coming step."""

    q: np.ndarray
    q_ref: np.ndarray
    M: np.ndarray
    tau: np.ndarray
    flfv: np.ndarray
    fpe: np.ndarray
    A: np.ndarray
    Jc: np.ndarray
    lb: np.ndarray
    ub: np.ndarray


class TrackingController(Controller):
    """Tracks a MotionPlan with muscles; see the module docstring."""

    def __init__(self, sim, plan: MotionPlan, params: TrackingParams | None = None):
        from ..physics.mujoco_backend import MujocoBackend, build_mjcf

        self.params = (params or TrackingParams()).validate()
        self.period = int(self.params.period)
        self.plan = plan
        self.rig = sim.rig
        self.arms = MomentArms(sim.rig, sim.muscles)
        if isinstance(sim.physics, MujocoBackend):
            self.model, self.data, self._shadow = sim.physics.model, sim.physics.data, False
        else:  # another backend: a MuJoCo copy of the rig gives the dynamics terms
            self.model = mujoco.MjModel.from_xml_string(
                build_mjcf(sim.rig, sim.dt, sim.physics.joint_damping, True, sim.physics.pinned))
            self.data = mujoco.MjData(self.model)
            self._shadow = True
        if self.model.nv != sim.rig.num_dofs:
            raise ParameterError("pinned", "the tracking controller needs a free character (no pinned bodies)")
        weight = sim.rig.mass_kg * G
        r = self.params.residual
        self.residual_bound = np.array([r * weight] * 3 + [r * weight * 1.0] * 3) if r > 0 else None
        self._M = np.zeros((self.model.nv, self.model.nv))
        self._M_diag = self._M.reshape(-1)[::self.model.nv + 1]  # a view of M's diagonal
        # every body may push on the floor where its corners come within contact_margin of it,
        # as every body collides with it in the physics: with the feet alone (the rig's contact
        # flag, MASS's), a cartwheel, whose hands carry it upside down, fell at 1.6 s on
        # every draw; a walk's other bodies never come near the floor (its take is the same)
        self._contact_bodies = np.arange(sim.rig.num_bodies)
        signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
        self._corner_local = 0.5 * signs[None] * sim.rig.body_size[:, None]  # (B, 8, 3)
        mu = FRICTION
        self._edges = np.array([[mu, 0, 1], [-mu, 0, 1], [0, mu, 1], [0, -mu, 1]], float)
        self._warm = self._active = None
        self._jp = np.zeros((sim.rig.num_bodies, 3, self.model.nv))
        self._jr = np.zeros((sim.rig.num_bodies, 3, self.model.nv))
        self.last = None  # the last decision's details, for probes and tests
        # whether a decision keeps its diagnostics (`last`, the ground-force gap in `stats`); the
        # balance planner's rollouts (engine.control.balance.Shadow) read only the command
        self.diagnostics = True
        self.stats = dict(solve_s=0.0, prepare_s=0.0, decisions=0, ground_gap_N=0.0, ground_gap_steps=0,
                          solver_steps=0, solver_fallbacks=0)
        self._planned_ground = None
        self.pace = Pace(self.params.pace, sim.dt)
        self._legs = np.isin(sim.rig.muscle_group, [GROUPS.index("right_leg"), GROUPS.index("left_leg")])
        self._paced_to = 0  # physics steps the pace governor has seen
        self._leg_muscles = np.flatnonzero(self._legs)
        # the last reference sampled and what it was sampled at (`reference`): a balance rollout's
        # cost and its next decision ask for the same step
        self._ref_key, self._ref = None, None
        self._segments_changed = 0  # counts the changes of the plan's segments (rebase, restore)
        self._terms = self._compiled_terms(sim)
        self._coordinate = Coordinator(self.params.weights)  # coordinate(), its buffers kept between decisions

    def _compiled_terms(self, sim):
        """muscle_terms in C (engine.compiled.DecisionTerms) where the muscle step is compiled,
        else None (the numpy below, the definition)."""
        from .. import compiled

        lib, steps = compiled.library(), getattr(sim.muscles, "_compiled", None)
        if lib is None or steps is None:
            return None
        return compiled.DecisionTerms(lib, sim.rig, self.model, steps, self._contact_bodies, self._corner_local, FRICTION)

    # ---- state ------------------------------------------------------------------------
    def snapshot(self) -> dict:
        """The controller's own state a decision reads (the solve's warm start, the pace and
        where the plan's clips are matched), for `restore`; with Simulation.snapshot it is all a
        rollout (engine.control.balance) needs to continue the take from here."""
        return dict(warm=None if self._warm is None else self._warm.copy(),
                    active=None if self._active is None else self._active.copy(),
                    pace=copy.deepcopy(self.pace), paced_to=self._paced_to, total_steps=self.plan.total_steps,
                    segments=[(seg.phase, seg.place, seg.start) for seg in self.plan.segments])

    def report(self) -> dict:
        ran_on = (self.plan.total_steps - self.plan.asked_steps) / PHYSICS_HZ
        return dict(ground_force_gap_N=self.ground_gap_N(), pace=dict(self.pace.summary(), ran_on_s=round(ran_on, 3)))

    def restore(self, snap: dict) -> None:
        self._warm = None if snap["warm"] is None else snap["warm"].copy()
        self._active = None if snap["active"] is None else snap["active"].copy()
        self.pace, self._paced_to = copy.deepcopy(snap["pace"]), snap["paced_to"]
        for seg, (phase, place, start) in zip(self.plan.segments, snap["segments"]):
            seg.phase, seg.place, seg.start = phase, place, start
        self.plan.total_steps = snap["total_steps"]
        self._segments_changed += 1

    # ---- pieces -----------------------------------------------------------------------
    def reference(self, step):
        """(q, qdot, qddot) of the reference at physics step `step` as this take plays it:
        `pace.lag` steps behind the plan's clock at `pace.rate` times the recorded speed."""
        pc = self.pace
        # the reference is a function of these alone (the plan's segments change only by
        # rebase and restore, which advance the count): the last one is returned again
        key = (step, pc.lag, pc.prev_lag, pc.rate, self.plan, self._segments_changed)
        if key != self._ref_key:
            q_ref, v_ref, a_ref = self.plan.sample(step, pc.lag, pc.prev_lag)
            self._ref_key, self._ref = key, (q_ref, pc.rate * v_ref, pc.rate ** 2 * a_ref)
        return self._ref

    def reference_now(self, sim):
        """The reference at the simulation's current step as this take plays it (the pace
        governor brought up to that step first): what a recorded frame is compared with."""
        self.advance_pace(sim)
        return self.reference(sim.steps)

    def advance_pace(self, sim) -> None:
        """Update the pace governor for every physics step up to the current one that it has
        not seen, at the legs' M_F now (a no-op when called again at the same step; the take
        calls it every step, so a decision every `period` steps sees the same pace)."""
        if self._paced_to > sim.steps:
            return
        if self.params.sync and self._paced_to == sim.steps and sim.steps % SYNC_EVERY == 0:
            supported = self.plan.supported(sim.steps, self.pace.lag)  # a flight does not wait
            self.pace.sync_target = sync_rate(self._sync_gaps(sim)) if supported else 1.0
        legs = self._leg_muscles
        mf_legs = float(np.add.reduce(sim.fatigue.MF[legs]) / len(legs))  # their mean (np.mean's sum and division)
        while self._paced_to <= sim.steps:
            self._run_on(self._paced_to)
            i = self.plan.segment_index(self._paced_to)
            if self.pace.update(mf_legs, i):  # a new clip continues from where the last one got to
                self.plan.rebase(i, self.pace.prev_lag)
                self._segments_changed += 1
            self._paced_to += 1

    def take_steps(self, sim) -> int:
        """The take's length in steps as the pace has played it up to the simulation's step
        (the pace brought up to it first: a clip held back has not yet played to its end)."""
        self.advance_pace(sim)
        return self.plan.total_steps

    def _run_on(self, step: int) -> None:
        """At the step where the current segment ends, a clip on its own clock (not looped:
        Segment.repeats) that the pace held back and has not played to its end gets the steps
        it lacks: the segments after it, and the take's end, move on (MotionPlan.delay). A
        looped clip ends on the take's clock, after fewer loops."""
        j = self.pace.segment
        seg = self.plan.segments[j]
        if seg.repeats or step != self.plan.segment_end(j):
            return
        left = seg.steps - (step - seg.start - self.pace.lag)  # the clip's steps not yet played
        if left > 0.5:
            self.plan.delay(j + 1, int(math.ceil(left - 0.5)))
            self._segments_changed += 1

    def _sync_gaps(self, sim) -> list[float]:
        """The body root's distance (m, the heading error at SYNC_YAW_M a radian) from the
        clip's root now and every SYNC_EVERY steps back over SYNC_WINDOW_S (pace eq. 2), up to
        the first that decides it: one SYNC_GAIN_M nearer than now, or none past now where
        the body is within SYNC_GAIN_M of the clip."""
        q = sim.physics.get_q()[0]
        pc, out, yaw = self.pace, [], heading(q[3:7])
        for k in range(int(round(SYNC_WINDOW_S / sim.dt / SYNC_EVERY)) + 1):
            n = k * SYNC_EVERY
            qr = self.plan.sample(sim.steps, pc.lag + n, pc.prev_lag + n)[0]
            dyaw = (yaw - heading(qr[3:7]) + math.pi) % (2 * math.pi) - math.pi
            out.append(math.sqrt((q[0] - qr[0]) ** 2 + (q[1] - qr[1]) ** 2 + (SYNC_YAW_M * dyaw) ** 2))
            if out[-1] < out[0] - SYNC_GAIN_M or (k == 0 and out[0] < SYNC_GAIN_M):
                break  # eq. (2) is decided
        return out

    def steer(self, q_ref, step):
        """The reference pose the decision at `step` aims for: the reference itself here; the
        balance planner (engine.control.balance) offsets it."""
        return q_ref

    def wanted_acceleration(self, q, qd, step):
        q_ref, v_ref, a_ref = self.reference(step)
        q_ref = self.steer(q_ref, step)
        err = self.plan.space.diff(q, q_ref)
        p = self.params
        off = np.hypot(err[0], err[1])  # the root's horizontal error, capped at root_reach
        if off > p.root_reach:
            err[:2] *= p.root_reach / off
        return a_ref + p.kp * err + p.kd * (v_ref - qd), q_ref

    def contact_jacobian(self, state, jac, margin: float | None = None):
        """Friction-pyramid edge Jacobians (4 per point, (n, nv)) of the body boxes' corners
        that are within `margin` (default contact_margin) of the floor: each edge is n + mu t for a tangent
        t = +-x, +-y, and its force beta >= 0 (a linearised cone; MuJoCo's own are elliptic,
        engine.physics.mujoco_backend). The lowest 4 corners of each contact body are candidates."""
        w, v = jac  # (nv, B, 3)
        bodies = self._contact_bodies
        corners = np.einsum("bij,bkj->bki", state.rot[bodies], self._corner_local[bodies]) + state.pos[bodies][:, None]
        low = np.argsort(corners[..., 2], axis=1, kind="stable")[:, :4]  # the 4 lowest corners of each body
        pts = np.take_along_axis(corners, low[..., None], axis=1).reshape(-1, 3)
        owner = np.repeat(bodies, 4)
        near = pts[:, 2] < (self.params.contact_margin if margin is None else margin)
        pts, owner = pts[near], owner[near]
        if not len(pts):
            return np.zeros((0, self.rig.num_dofs))
        r = pts - state.pos[owner]
        Jp = v[:, owner, :] + cross(w[:, owner, :], r[None])  # (nv, P, 3) corner velocity per DOF
        return np.einsum("npi,ei->pen", Jp, self._edges).reshape(-1, Jp.shape[0])

    def dynamics(self, q, qd):
        """M (with the implicit joint damping) and c - passive (nv,) at the state."""
        m, d = self.model, self.data
        if self._shadow:
            d.qpos[:], d.qvel[:] = q, qd
            mujoco.mj_forward(m, d)
        full_mass_matrix(m, d, self._M)
        # implicitfast integrates joint damping implicitly: the step sees M + dt D
        self._M_diag += m.opt.timestep * m.dof_damping
        return self._M, d.qfrc_bias - d.qfrc_passive

    def _check_ground(self, sim) -> None:
        """Adds |ground force the physics gave in the last step - ground force the last
        decision planned| to stats (ground_gap_N, ground_gap_steps). The plan's contacts are
        rigid corners within contact_margin under a friction pyramid; MuJoCo's are soft
        (they push a sunken foot back out), so the two differ, and the root residual and the
        joint PD absorb the difference. Measured on the fresh walk: 0.34 body weights a step
        on average (130 N horizontal, 144 N vertical) against a mean residual of 0.05: the
        gap, not the clip, is what a residual-free controller has to close first. Backends
        that cannot tell the ground force (ground_force() None) add nothing."""
        if self._planned_ground is None:
            return
        realised = sim.physics.ground_force()
        if realised is not None:
            self.stats["ground_gap_N"] += float(np.linalg.norm(realised - self._planned_ground))
            self.stats["ground_gap_steps"] += 1

    def ground_gap_N(self) -> float | None:
        """Mean |realised - planned| ground force over the take's decisions so far (N)."""
        n = self.stats["ground_gap_steps"]
        return self.stats["ground_gap_N"] / n if n else None

    # ---- the decision -----------------------------------------------------------------
    def body_jacobians(self):
        """Angular and linear velocity of every body's centre per unit velocity of each DOF,
        (nv, B, 3) each, from MuJoCo's mj_jac at the data's current state."""
        m, d = self.model, self.data
        for b in range(self.rig.num_bodies):
            mujoco.mj_jac(m, d, self._jp[b], self._jr[b], d.xipos[b + 1], b + 1)
        return self._jr.transpose(2, 0, 1), self._jp.transpose(2, 0, 1)

    def muscle_terms(self, sim, state, margin: float | None = None):
        """What the solve needs of the muscles and the ground at the physics state (the
        data already forwarded there): the Hill factors f_l f_v and f_PE (M,), the moment
        arms A (M, nv) and the contact edge Jacobians Jc (n, nv) of the corners within
        `margin` (default contact_margin) of the floor. Computed in C where the library loads
        (engine/native/decision_terms.c, equal to the numpy here to rounding)."""
        from .. import muscle as hill

        if self._terms is not None:
            return self._terms(state, self.data, self.params.contact_margin if margin is None else margin)
        rig = self.rig
        u, length, rate = sim.muscles.kinematics(state.rot, state.pos, state.linvel, state.angvel)
        lbar = hill.normalized_length(length, rig.muscle_rest_length, rig.muscle_lt, rig.muscle_lm)
        vbar = hill.normalized_velocity(rate, rig.muscle_rest_length, rig.muscle_lm)
        flfv, fpe = hill.active_and_passive(lbar, vbar)
        jac = self.body_jacobians()
        A = self.arms(u, state.rot, None, None, state.pos, jac)
        return flfv, fpe, A, self.contact_jacobian(state, jac, margin)

    def prepare(self, sim, state) -> DecisionInputs:
        """Everything a decision's solve needs at the physics state (steps 1-4 of the module
        docstring), after checking the last step's ground force and advancing the pace."""
        q, qd = sim.physics.get_q()
        if self.diagnostics:
            self._check_ground(sim)
        self.advance_pace(sim)
        a_star, q_ref = self.wanted_acceleration(q, qd, sim.steps)
        Mm, bias = self.dynamics(q, qd)
        flfv, fpe, A, Jc = self.muscle_terms(sim, state)
        p = sim.muscles.params
        lb, ub = fat.activation_bounds(sim.fatigue.MA, sim.fatigue.MR, sim.muscles.dt, p.F_eff, p.LD, p.LR, FastClipNumpy)
        return DecisionInputs(q, q_ref, Mm, Mm @ a_star + bias, flfv, fpe, A, Jc, lb, ub)

    def act(self, sim, state) -> MuscleCommand:
        import time

        t0 = time.perf_counter()
        rig = self.rig
        d = self.prepare(sim, state)
        q, q_ref, tau, A, Jc, lb, ub = d.q, d.q_ref, d.tau, d.A, d.Jc, d.lb, d.ub
        t1 = time.perf_counter()
        info = {}
        free_root = d.M[:, :6] if self.residual_bound is None else None  # no residual: the root may give way
        sol = self._coordinate(tau, A, rig.muscle_f0, d.flfv, d.fpe, lb, ub, warm=self._warm, Jc=Jc,
                               residual_bound=self.residual_bound, active=self._active, info=info,
                               root_inertia=free_root, achieved=self.diagnostics)
        g = sol.residual
        self._warm, self._active = sol.activation, sol.active
        t2 = time.perf_counter()
        # residual generalised force -> force at the pelvis centre and torque (world)
        if self.residual_bound is None:  # no residual: g = 0, and so are the force and torque
            force, torque = np.zeros(3), np.zeros(3)
        else:
            force = g[:3].copy()
            R0 = state.rot[0] @ rig.body_rest_rot[0].T  # the root joint's frame
            torque = R0 @ g[3:] - cross(state.pos[0] - q[:3], force)
        if self.diagnostics:
            contact_gf = Jc.T @ sol.contact
            self._planned_ground = contact_gf[:3].copy()  # the free root's translation rows: the summed ground force
            achieved = sol.achieved + contact_gf
            achieved[:6] += g
            self.last = dict(tau=tau, achieved=achieved, contact_gf=contact_gf, muscle_gf=sol.achieved, residual=g,
                             activation=sol.activation, lb=lb, ub=ub, contact_rows=len(Jc), q_ref=q_ref,
                             status=sol.status, root_change=sol.root_change)
        self.tally(t1 - t0, t2 - t1, info)
        return MuscleCommand(sol.activation, force, torque)

    def tally(self, prepare_s: float, solve_s: float, info: dict) -> None:
        """Count one decision in `stats`: its preparation and solve times, and the solve's
        Newton steps and fallback (`info` from engine.control.coordination)."""
        self.stats["prepare_s"] += prepare_s
        self.stats["solve_s"] += solve_s
        self.stats["solver_steps"] += info.get("steps", 0)
        self.stats["solver_fallbacks"] += bool(info.get("fallback"))
        self.stats["decisions"] += 1
