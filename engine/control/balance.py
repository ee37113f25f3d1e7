"""Balance without the root residual: predictive sampling over small reference offsets.

The tracker (engine.control.tracking) is greedy: each step it asks for the reference's
accelerations and solves for them, blind to where the body will be a second later, and with
no residual to hold the root a walk falls within ~3 s. This layer plans ahead (MuJoCo MPC's
predictive sampling, Howell et al. 2022, "Predictive Sampling: Real-time Behaviour Synthesis
with MuJoCo"): it steers the tracker by a few offsets added to its reference - both hips'
and both ankles' pitch and roll, the spine's pitch and roll, both hips' yaw, optionally both
knees' flexion -, piecewise linear in time with a knot every `knot` steps.

Every `replan` steps, `candidates` offset plans are played `horizon` steps ahead on a shadow
of the simulation (the same MuJoCo model, muscles, 3CC-r state, pace and solver warm start;
in this process, or spread over `workers` forked processes), each under the same tracker,
and the cheapest is followed until the next plan. The candidates: the last plan shifted to
now, no offsets, and the rest the shifted plan x `decay` plus Gaussian noise (from
`sigma_min` to `sigma` rad over the candidates)
from the take's seed. A rollout's cost sums over its steps (eq. numbers: this module)

    c = w_height (z - z_ref)^2 + w_tilt |pelvis roll, pitch error|^2 + w_speed |v_xy - v*_xy|^2
        + w_joint (mean joint error / 10 deg)^2 + w_offset |u|^2                              (1)
    v*_xy = v_ref,xy + clip((p_ref,xy - p_xy) / path_time, path_speed)                       (2)
    C = sum_{t < horizon} c_t + tail * mean_{last replan steps} c_t                           (3)

where (2) is the velocity that brings the root back onto the clip's path in `path_time`
(at most `path_speed` faster or slower than the clip): with v_ref alone the cost forgives a
root that fell behind, and a take walking 10 % short of the clip's stride ends metres off it

and adds FALL_COST for every step left once the pelvis is below `fall_height` and
`fall_drop` below the reference's (a fall seen coming: a squat or a crouch in the clip is
not one) or the rollout diverged. Pushes are not known to the planner; it meets them as it
meets any error. Measured in docs/research/balance.md (ninth and tenth sessions).

Where the going gets hard, more search (a turn on the spot coming, a shove): when the cheapest
candidate U* costs more than `extra_above` times the median C* of the last EXTRA_MEMORY
decisions' cheapest, but less than a fall, `extra` more plans about it are played and the
cheapest of all is kept

    U_k = U* + sigma_k n_k  (sigma_k from sigma_min to extra_sigma)
          when extra_above median(C*) < C(U*) < FALL_COST                                    (4)

Only as much breadth as a decision needs (`BalanceParams.widen`, off by default: measured in
the thirty-ninth session, and a tired copy fell with it): `candidates` plans are played at
every decision, and where the cheapest of them, U*, costs more than `widen_above` times the
same median, `widen` more of the same kind are played, pruned against it, and the cheapest
of all goes on to eq. (4)

    U_k = decay U_0 + sigma_k n_k  (sigma_k from sigma_min to sigma), k = 1..widen
          when C(U*) > widen_above median(C*), or fewer than 5 decisions are behind           (6)

Depth where a decision is cheap (`BalanceParams.keep_below`, off by default: measured in the
fortieth session, and the tired 0.85x copy fell with it on one draw of two): the last plan,
continued (`Trace`: only `replan` new steps), is played first, and where it costs at most
keep_below times that median it is kept and no other candidate is played

    U = U_0  when C(U_0) <= keep_below median(C*)                                            (7)

`BalanceParams.antithetic` (off by default, measured there too) draws the noisy candidates in
mirrored pairs, U + n_k and U - n_k at one scale.

A plan is judged by what the take will show: no rollout step at or after the take's end T
(as the rollout's own pace plays it: a clip that runs on moves it later) is played or costed

    C = sum_{t < min(horizon, T - now)} c_t   (no tail past T)                              (8)

Past a clip played once, its reference is its last pose held still, which no running body
can follow; and a take's last 0.8 s played ~half the rollout steps it did.

Where every plan falls, following the one that falls last is no way out (a 3.7 m/s run
followed it 15 cm above its flight and fell at its third landing; 6 of 96 wider plans would
have landed it), and eq. (4) does not search there: `rescue` more plans are played about the
cheapest, wider (forty-second session)

    U_k = U* + sigma_k n_k  (sigma_k from sigma_min to rescue_sigma), k = 1..rescue
          when C(U*) >= FALL_COST                                                            (9)

A teacher for a policy in this action space (training/dagger.py, action "offset";
engine.control.offset_policy) asks instead for every candidate played to its horizon and their
plans weighted as MPPI weighs them (Williams et al. 2017), lambda a share of the cheapest cost
(0.1 halves the argmin's share of the sampler's draw: docs/research/policy_from_expert.md)

    U_w = sum_k w_k U_k / sum_k w_k,  w_k = exp(-(C_k - C_min) / (lambda C_min))             (5)

Once every plan falls within the horizon, more of them seldom find one that does not, and
the widest of them pull the joints off the clip (the CMU run at its own length, five draws:
6.4 -> 7.1 deg with the search there, 6.4 without).

Two savings that leave the take the same to the bit (thirty-second session): the plan chosen
is the next decision's nominal candidate, and where the take has followed it to the bit its
rollout's last horizon - replan steps are that candidate's first, so only `replan` steps are
played (`Trace`); and a rollout stops once its sum passes the cheapest plan played so far,
which the workers share, each taking the next plan as it comes free. (Its sum with the
offsets' term still ahead, which the plan fixes before it is played: `offset_costs_ahead`.)

Successive halving (`BalanceParams.halving`, off by default: it changes the take, and the
tired minute fell with it) plays every sampled plan only to the end of a first round, the
best of them by their sums so far on to the next, and so on; a plan is resumed from its
Trace's state at the round's end, in the take's process.
"""
from __future__ import annotations

import copy
import math
import sys
import time
from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from ..kinematics import joint_errors_deg
from ..interrupt import end_pool, forked_worker_signals, process_pool
from .tracking import TrackingController

FALL_COST = 1e3  # per step left in a rollout once it falls (eq. 1)
DIVERGED_COST = 1e4  # per step left once its physics diverged
EXTRA_MEMORY = 30  # decisions whose cheapest costs set the bar for more search (eq. 4)
MAX_SPEED = 1e3  # m/s or rad/s: a rollout faster than this anywhere has diverged


@dataclass(frozen=True)
class BalanceParams:
    """Settings of the balance planner (chosen by measurement, docs/research/balance.md)."""

    # offset plans tried at each replan. 8 alone fell at 35-39 s of the tired minute; 8 with
    # the swing-foot law (`feedback`) walk the bundled walk's battery but let kicks and spins
    # drift 35-44 cm, which eq. (6)'s widening takes back (docs/research/balance.md,
    # forty-third and forty-fourth sessions)
    candidates: int = 8
    # eq. (6): `widen` more plans of the candidates' kind where their cheapest costs more than
    # `widen_above` times the median of the last EXTRA_MEMORY decisions' cheapest, or fewer
    # than 5 decisions are behind; 0: never. Without the swing-foot law 6 + 10 fell on the
    # tired 0.85x copy's two draws counted and 8 + 8 on one of two (thirty-ninth session);
    # with it, 8 + 8 walk it (forty-fourth session)
    widen: int = 8
    widen_above: float = 1.5
    # eq. (7): where the last plan, continued (only `replan` new steps), costs at most
    # `keep_below` times the median of the last EXTRA_MEMORY decisions' cheapest, it is kept
    # and no other candidate is played; 0: never (docs/research/balance.md, fortieth session)
    keep_below: float = 0.0
    antithetic: bool = False  # the noisy plans in mirrored pairs (U + n, U - n) at one scale each
    horizon: int = 96  # physics steps each is played ahead (0.8 s; 0.5 s fell)
    # physics steps after the horizon that a rollout's cost stands for, at the mean cost of its
    # last `replan` steps (eq. 3): a shorter horizon that still weighs where the body is going
    tail: int = 0
    replan: int = 12  # physics steps between plans (0.1 s)
    knot: int = 12  # physics steps between an offset plan's knots
    # rad: the noise a candidate adds at each knot, spread evenly over the noisy candidates
    # from sigma_min to sigma. Wide noise gives a shove the authority it needs (with 0.05 alone a
    # 120 N, 0.2 s push at the pelvis toppled the walk forward, backward and sideways; with 0.1
    # all three walked on), narrow noise tracks closer (the fresh walk's minute: 5.6 deg with
    # 0.05 alone, 6.2 with 0.1 alone)
    sigma: float = 0.1
    sigma_min: float = 0.05
    decay: float = 0.9  # the last plan's offsets shrink by this in the noisy candidates
    # successive halving: the horizon cut into len(halving) + 1 equal rounds, and after round i
    # only the best halving[i] of the sampled plans (the noisy ones and no offsets; the
    # nominal always goes on) by running cost are played on; () plays every plan to the end.
    # (8, 4, 2) plays 28 % fewer rollout steps, but the tired minute (fatigue scale 50) fell
    # on both draws counted (at 19.0 and 6.2 s; both walk without it): not the default
    # (docs/research/balance.md, thirty-third session)
    halving: tuple = ()
    knees: bool = False  # sample both knees' flexion too (a lower, bent-kneed gait)
    # sample both hips' yaw too (the thigh turned about the vertical), its noise this times the
    # others' (0: not sampled): nothing else the planner samples turns the legs, which a
    # turning walk and a walk knocked sideways both need (the CMU walk's bone-axes 30 fps copy
    # crabbed 73 cm off its path without it, 9 cm with it: docs/research/balance.md, fortieth
    # and forty-first sessions)
    hips_yaw: float = 1.0
    # more search where the going gets hard (eq. 4): when a decision's cheapest plan costs
    # `extra_above` times the median of the last EXTRA_MEMORY decisions' (a turn coming, a
    # shove) and no fall, `extra` more plans are tried about it with noise from sigma_min to
    # `extra_sigma` rad; 0: never. The Mixamo fixture's turn in place (180 deg every 2.3 s)
    # fell on 2 of 4 draws at 10 s without it, on none of 4 with it, and walked 20 s on 3 of
    # 3 (docs/research/balance.md, thirty-fifth session)
    extra: int = 16
    extra_above: float = 3.0
    extra_sigma: float = 0.3
    # eq. (9): where every plan played falls within the horizon, `rescue` more are tried about
    # the cheapest with noise from sigma_min to `rescue_sigma` rad; 0: never. Eq. (4) stops at
    # a fall, and following the plan that falls last carried a run into the air and down at its
    # third landing, where 6 of 96 wider plans landed it (docs/research/balance.md,
    # forty-second session)
    rescue: int = 32
    rescue_sigma: float = 0.5
    # rad per m/s: the swing hip placed by the centre of mass's velocity error after the
    # offsets (engine.control.feedback, eq. 1), in the take and its rollouts; 0: none. It
    # carries part of the planner's load, so half the candidates do (forty-third session)
    feedback: float = 0.2
    workers: int = 0  # processes playing the candidates (0: this process; the take is the same)
    w_height: float = 100.0  # per m^2 of pelvis height error (eq. 1)
    w_tilt: float = 10.0  # per rad^2 of pelvis roll and pitch error
    w_speed: float = 1.0  # per (m/s)^2 of horizontal root velocity error (against eq. 2's v*)
    path_time: float = 1.0  # s: eq. (2), the root is steered back onto the clip's path in this time
    # m/s: eq. (2), the most it is asked to go faster or slower than the clip; it binds where
    # the root is more than path_speed x path_time off the path. After a turn in place (the
    # Mixamo fixture's, 180 deg every 2.3 s) the take trails 0.4-0.8 m, which 0.3 m/s could
    # not make up before the next turn (10 s: 63 and 56 cm on two draws; 0.6: 30 and 43).
    # Takes that stay within 0.3 m of their path are not changed by it (the bundled walk's 10
    # s, bit for bit; the tired minute, the CMU walk and the pushes walk as before:
    # docs/research/balance.md, thirtieth session)
    path_speed: float = 0.6
    w_joint: float = 0.1  # per (mean joint error / 10 deg)^2
    w_offset: float = 0.1  # per rad^2 of offsets
    # m: a rollout whose pelvis sinks below fall_height and fall_drop below the reference's
    # has fallen. With the first alone, a clip that squats (MASS's one-leg balance takes the
    # pelvis to 0.55 m) made every plan that followed it a fall, and the planner held the
    # body up until it fell (at 1.5 s); the bundled walk's pelvis never goes below 0.93 m,
    # where 0.2 leaves 0.7 the bound (the CMU walk's reaches 0.89: 0.69 there)
    fall_height: float = 0.7
    fall_drop: float = 0.2

    def validate(self) -> "BalanceParams":
        if not (isinstance(self.tail, (int, np.integer)) and self.tail >= 0):
            raise ParameterError("balance.tail", f"must be a whole number >= 0, got {self.tail!r}")
        for name in ("extra", "widen", "rescue"):
            v = getattr(self, name)
            if not (isinstance(v, (int, np.integer)) and v >= 0):
                raise ParameterError(f"balance.{name}", f"must be a whole number >= 0, got {v!r}")
        for name in ("extra_above", "widen_above"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and np.isfinite(v) and v >= 1):
                raise ParameterError(f"balance.{name}", f"must be a finite number >= 1 (times the recent decisions' "
                                     f"median cost), got {v!r}")
        for name in ("candidates", "horizon", "replan", "knot"):
            v = getattr(self, name)
            if not (isinstance(v, (int, np.integer)) and v >= 1):
                raise ParameterError(f"balance.{name}", f"must be a whole number >= 1, got {v!r}")
        if self.candidates < 2:
            raise ParameterError("balance.candidates", f"must be at least 2 (the last plan and no offsets), got {self.candidates}")
        if not (isinstance(self.workers, (int, np.integer)) and self.workers >= 0):
            raise ParameterError("balance.workers", f"must be a whole number >= 0, got {self.workers!r}")
        if self.workers > 0:
            import multiprocessing as mp

            if "fork" not in mp.get_all_start_methods():
                raise ParameterError("balance.workers", f"{self.workers}: the planner forks its worker processes, "
                                     "and this system cannot fork; use 0 (plan in the take's process)")
        for name in ("keep_below", "hips_yaw", "sigma", "sigma_min", "extra_sigma", "rescue_sigma", "decay", "feedback", "w_height", "w_tilt",
                     "w_speed", "path_speed", "w_joint", "w_offset", "fall_height", "fall_drop"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and np.isfinite(v) and v >= 0):
                raise ParameterError(f"balance.{name}", f"must be a finite number >= 0, got {v!r}")
        if not (isinstance(self.path_time, (int, float)) and np.isfinite(self.path_time) and self.path_time > 0):
            raise ParameterError("balance.path_time", f"must be a finite number of seconds > 0, got {self.path_time!r}")
        h = tuple(self.halving)
        rounds = self.horizon // (len(h) + 1)
        if h and not (all(isinstance(n, (int, np.integer)) and n >= 1 for n in h) and list(h) == sorted(h, reverse=True)
                      and h[0] < self.candidates - 1):
            raise ParameterError("balance.halving", f"{h!r}: plans kept after each round, whole numbers >= 1, "
                                 f"none more than the last and the first under the {self.candidates - 1} sampled plans")
        if h and (rounds < self.replan or rounds % self.replan):
            raise ParameterError("balance.halving", f"{len(h) + 1} rounds of a {self.horizon}-step horizon are "
                                 f"{self.horizon / (len(h) + 1):g} steps, not a multiple of replan ({self.replan}): "
                                 "a plan is resumed from the states kept every replan steps")
        if self.sigma_min > self.sigma:
            raise ParameterError("balance.sigma_min", f"{self.sigma_min:g} is above sigma ({self.sigma:g}): the noise "
                                 "runs from sigma_min up to sigma over the candidates")
        return self

    @property
    def knots(self) -> int:
        """Knots of an offset plan: enough to cover a horizon started up to `replan` steps ago."""
        return -(-(self.horizon + self.replan) // self.knot) + 1


def weighted_plan(plans: list[np.ndarray], costs, lam: float) -> np.ndarray:
    """Eq. (5): the plans' mean weighted by exp(-(C - C_min) / (lam C_min))."""
    C = np.asarray(costs, float)
    w = np.exp(-(C - C.min()) / (lam * max(C.min(), 1e-12)))
    return np.tensordot(w / w.sum(), np.asarray(plans), axes=1)


def check_backend(backend: str) -> None:
    """The planner copies MuJoCo's state into its rollouts: another backend is refused."""
    if backend != "mujoco":
        raise ParameterError("--balance", f"plans its rollouts on MuJoCo; the {backend} backend cannot be "
                             "copied into them: use --backend mujoco")


def can_fork() -> bool:
    """Whether this system forks the planner's worker processes by default: Linux. Windows has
    no fork, and on macOS the system libraries are not fork-safe (Python's own default there
    is spawn); a take there plans in its own process unless workers are asked for."""
    return sys.platform.startswith("linux")


def default_workers() -> int:
    """Planner processes for a take (the command line's, the add-on's, the batch script's): one
    per CPU core this process may use where workers are forked by default (`can_fork`), else 0."""
    import os

    if not can_fork():
        return 0
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # no affinity call on this system
        return max(os.cpu_count() or 1, 1)


def offset_dofs(rig, knees: bool = False, hips_yaw: float = 0.0) -> np.ndarray:
    """The DOFs the planner offsets: each joint's first DOF + axis (0: its local x, pitch;
    1: its local y, roll; 2: its local z, yaw; the rig's joint frames are world-aligned at
    rest, x the character's left, z up): hips and ankles pitch and roll, the spine's pitch and
    roll, with `knees` both knees' flexion and where `hips_yaw` (not 0) both hips' yaw, last."""
    def dof(body: str, axis: int) -> int:
        return int(rig.dof_start[rig.body_index(body)]) + axis

    dofs = [dof(b, k) for b in ("FemurR", "FemurL", "TalusR", "TalusL") for k in (0, 1)] + [dof("Spine", 0), dof("Spine", 1)]
    if knees:
        dofs += [dof("TibiaR", 0), dof("TibiaL", 0)]
    if hips_yaw:
        dofs += [dof("FemurR", 2), dof("FemurL", 2)]
    return np.array(dofs)


def offsets_at(U: np.ndarray, start: int, knot: int, step: int) -> np.ndarray:
    """The offsets at physics step `step` of a plan whose knot j (row j of U) is at
    start + j knot: linear between knots, the first before and the last held after. In whole
    steps, so a plan shifted by whole knots (`shift_plan`) gives the same offsets to the bit,
    as a continued rollout (`Trace`) needs."""
    d = step - start
    j = min(max(d // knot, 0), len(U) - 2)
    w = min(max((d - j * knot) / knot, 0.0), 1.0)
    return (1 - w) * U[j] + w * U[j + 1]


def shift_plan(U: np.ndarray, start: int, knot: int, now: int) -> np.ndarray:
    """The plan U (knots from `start`) resampled at knots from `now`."""
    return np.array([offsets_at(U, start, knot, now + j * knot) for j in range(len(U))])


def offset_costs_ahead(U: np.ndarray, start: int, knot: int, w_offset: float, until: int) -> np.ndarray:
    """rest[t]: eq. (1)'s offset term summed over a rollout's steps after its step t, up to
    `until` (step t's cost is read at physics step start + t + 1). The plan fixes it before
    the rollout is played and every other term is >= 0, so a rollout whose sum so far plus
    rest[t] passes the cheapest plan found cannot win (`Shadow.play` stops it there); shrunk
    by 1e-9 so that round-off never stops the plan that would win."""
    d = np.arange(1, until + 1)
    j = np.minimum(d // knot, len(U) - 2)
    w = np.minimum((d - j * knot) / knot, 1.0)[:, None]
    u = (1 - w) * U[j] + w * U[j + 1]
    sq = w_offset * np.einsum("ij,ij->i", u, u)
    return np.append(np.cumsum(sq[::-1])[::-1][1:], 0.0) * (1 - 1e-9)


class OffsetTracker(TrackingController):
    """The tracker with its reference offset at `offset_dofs` by the plan (U, start): what the
    planner's rollouts and the take both run. With no plan (or zero offsets) it is the
    tracker, bit for bit."""

    def __init__(self, sim, plan, params, balance: BalanceParams):
        super().__init__(sim, plan, params)
        self.balance = balance
        self.dofs = offset_dofs(sim.rig, balance.knees, balance.hips_yaw)
        self.U, self.plan_start = np.zeros((balance.knots, len(self.dofs))), 0
        self._u_key, self._u = None, None  # the last offsets and the (step, plan) they are at (`offsets`)
        self.placement = None
        if balance.feedback > 0:
            from .feedback import SwingPlacement

            self.placement = SwingPlacement(sim.rig, self.plan.space.model, balance.feedback)

    def offsets(self, step: int) -> np.ndarray:
        # a rollout's cost and its next decision ask for the same step: the last offsets are
        # returned again while the plan is the same (plans are replaced, never changed in place)
        U, start, last = self.U, self.plan_start, self._u_key
        if last is None or last[0] != step or last[1] is not U or last[2] != start:
            self._u_key, self._u = (step, U, start), offsets_at(U, start, self.balance.knot, step)
        return self._u

    def steer(self, q_ref, step):
        u = self.offsets(step)
        if np.any(u):
            dv = np.zeros(self.rig.num_dofs)
            dv[self.dofs] = u
            q_ref = self.plan.space.add(q_ref, dv)
        if self.placement is not None:  # after the offsets, at the pose they give
            dv = self.placement(self.model, self.data, q_ref, self.reference(step)[1])
            if np.any(dv):
                q_ref = self.plan.space.add(q_ref, dv)
        return q_ref


def path_velocity(p, p_ref, v_ref, b: BalanceParams) -> tuple[float, float]:
    """Eq. (2): the horizontal root velocity that brings the root p back onto the clip's path."""
    catch_x, catch_y = (p_ref[0] - p[0]) / b.path_time, (p_ref[1] - p[1]) / b.path_time
    n = math.hypot(catch_x, catch_y)
    if n > b.path_speed:
        catch_x, catch_y = catch_x * (b.path_speed / n), catch_y * (b.path_speed / n)
    return float(v_ref[0] + catch_x), float(v_ref[1] + catch_y)


def pelvis_tilt_sq(q_ref: np.ndarray, q: np.ndarray) -> float:
    """|roll, pitch|^2 of the world-frame pelvis error q_ref q^-1 as a rotation vector (eq. 1's
    tilt; transforms.quat_to_axis_angle of quat_multiply(q_ref, quat_conjugate(q)), in floats:
    this runs every rollout step)."""
    aw, ax, ay, az = (float(v) for v in q_ref)
    bw, bx, by, bz = float(q[0]), -float(q[1]), -float(q[2]), -float(q[3])
    w = aw * bw - ax * bx - ay * by - az * bz
    x = aw * bx + ax * bw + ay * bz - az * by
    y = aw * by - ax * bz + ay * bw + az * bx
    z = aw * bz + ax * by - ay * bx + az * bw
    n = math.sqrt(w * w + x * x + y * y + z * z)
    if w < 0:
        n = -n
    w, x, y, z = w / n, x / n, y / n, z / n
    s = math.sqrt(x * x + y * y + z * z)
    scale = 2.0 if s < 1e-12 else 2.0 * math.atan2(s, w) / s
    return (x * x + y * y) * scale * scale


def rollout_cost(sim, ctl: OffsetTracker) -> float:
    """Eq. (1) at the shadow's present state, against the reference as the tracker plays it
    (its pace; without the offsets)."""
    b = ctl.balance
    q, qd = sim.physics.get_q()
    q_ref, v_ref, _ = ctl.reference(sim.steps)
    u = ctl.offsets(sim.steps)
    vx, vy = path_velocity(q, q_ref, v_ref, b)
    dvx, dvy = qd[0] - vx, qd[1] - vy
    err = joint_errors_deg(sim.rig, ctl.plan.space.diff(q, q_ref)) / 10.0
    return (b.w_height * (q[2] - q_ref[2]) ** 2 + b.w_tilt * pelvis_tilt_sq(q_ref[3:7], q[3:7])
            + b.w_speed * float(dvx * dvx + dvy * dvy) + b.w_joint * err * err + b.w_offset * float(u @ u))


@dataclass
class Trace:
    """A rollout played without falling from its plan's start (U, start): the cost of each of
    its steps (eq. 1, in order) and its state (`snapshot`) after every `replan` steps, by step
    count; `end`, the step it reached (the horizon's, or a halving round's). A rollout is
    resumed at its end (`Shadow.resume`). The plan chosen at a decision is the next decision's
    nominal candidate, shifted by `replan` steps (`shift_plan`): where the take has followed it
    to the bit (no push, nothing changed), that candidate's first horizon - replan steps are
    this rollout's last ones, and only `replan` steps are left to play."""

    U: np.ndarray
    start: int
    costs: list
    states: dict
    final: bool = True  # nothing is left to play: it reached its horizon or the take's end

    @property
    def end(self) -> int:
        return self.start + len(self.costs)


def same_state(a, b) -> bool:
    """Whether two snapshots (`snapshot`) are equal to the bit: arrays, numbers and the objects
    they hold (the pace governor, the clips' places), field by field."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape
                and a.dtype == b.dtype and a.tobytes() == b.tobytes())
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same_state(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same_state(x, y) for x, y in zip(a, b))
    if hasattr(a, "__dict__"):
        return type(a) is type(b) and same_state(vars(a), vars(b))
    return type(a) is type(b) and a == b


class Shadow:
    """A copy of the take's simulation and tracker that candidates are played on: `load`
    puts it at a snapshot of the take (`snapshot`), `play` runs one candidate from there."""

    def __init__(self, sim, plan, params, balance: BalanceParams):
        from ..simulation import Simulation

        p = sim.physics
        self.sim = Simulation(sim.rig, "mujoco", fatigue=sim.muscles.params, dt=sim.dt, joint_damping=p.joint_damping)
        self.ctl = OffsetTracker(self.sim, copy.deepcopy(plan), params, balance)
        self.ctl.diagnostics = False  # a rollout reads the commands and its cost only
        self.balance = balance
        self.steps_played = 0  # rollout steps, for the planner's cost figures
        self.seconds = dict(physics=0.0, cost=0.0)  # where a rollout step's time goes (the decision: ctl.stats)
        self.shared_best = None  # a RawValue the workers share: the cheapest plan any has played
        self.trace = None  # the last rollout's Trace, when it was kept and played to its horizon

    def load(self, snap: dict) -> None:
        """The shadow at the snapshot (`restore`)."""
        restore(self.sim, self.ctl, snap)

    def play(self, U: np.ndarray, start: int, bound: float = np.inf, resume: Trace | None = None,
             until: int | None = None) -> float:
        """Eq. (1) summed over the horizon with the plan (U, start), from the loaded state, and
        eq. (3)'s tail; inf as soon as the sum, with the offsets' term still ahead
        (`offset_costs_ahead`), passes `bound` or the workers' shared best (the cheapest plan
        found so far: every term is >= 0, so this one cannot win, and the plan chosen is the
        same as without the bound). A rollout played to its
        horizon, or to `until` steps after `start` (a halving round's end: the sum so far is
        returned), leaves its Trace in `trace`. `resume`: the loaded state is that Trace's end,
        and its costs from `start` on are this rollout's first steps (`resume`)."""
        sim, ctl, b, shared = self.sim, self.ctl, self.balance, self.shared_best
        ctl.U, ctl.plan_start = U, start
        d = sim.physics.data
        total = 0.0
        steps = b.horizon + b.tail  # the steps the cost stands for
        until = b.horizon if until is None else until
        first, costs, states = 0, [], {}
        self.trace = None
        if resume is not None:  # the steps played already, summed in the order they were played
            first = resume.end - start
            costs = resume.costs[start - resume.start:]
            for c in costs:
                total += c
            states = {k: v for k, v in resume.states.items() if k > start}
        # eq. (8): no step after the take's end is played or costed. Its end as known now (a
        # clip that runs on moves it later, never earlier) bounds the offsets' term ahead
        known = min(max(ctl.plan.total_steps - start, 0), until)
        rest = np.zeros(until)
        if b.w_offset and known:
            rest[:known] = offset_costs_ahead(U, start, b.knot, b.w_offset, known)
        clock, seconds = time.perf_counter, self.seconds
        ended = False
        for t in range(first, until):
            if sim.steps >= ctl.plan.total_steps and sim.steps >= ctl.take_steps(sim):
                ended = True  # as the take's run loop reads it (Simulation.run's `until`)
                if sim.steps not in states:  # where a resumed rollout starts (Trace.end)
                    states[sim.steps] = snapshot(sim, ctl)
                break
            self.steps_played += 1
            try:
                command = ctl.act(sim, sim.state)
                t0 = clock()
                sim.step(command)
                t1 = clock()
            except (ArithmeticError, ValueError, np.linalg.LinAlgError):  # a solve or step that broke down
                return total + DIVERGED_COST * (steps - t)
            if sim.physics.fault or not np.abs(d.qvel).max() < MAX_SPEED:  # (NaN fails the comparison too)
                return total + DIVERGED_COST * (steps - t)
            c = rollout_cost(sim, ctl)
            total += c
            seconds["physics"] += t1 - t0
            seconds["cost"] += clock() - t1
            if d.qpos[2] < b.fall_height and d.qpos[2] < ctl.reference(sim.steps)[0][2] - b.fall_drop:
                return total + FALL_COST * (steps - t)
            least = total + rest[t]  # the least this plan's sum can come to (offset_costs_ahead)
            if least > bound or (shared is not None and least > shared.value):
                return np.inf
            costs.append(c)
            if (t + 1) % b.replan == 0 or t + 1 == b.horizon:
                ctl.advance_pace(sim)  # as the take's is when it decides (the next act's is then a no-op)
                states[sim.steps] = snapshot(sim, ctl)
        self.trace = Trace(U, start, costs, states, final=ended or until == b.horizon)
        if b.tail and until == b.horizon and not ended:  # eq. (3): the rest of the horizon the cost stands for, at its last steps' mean
            late = 0.0
            for c in costs[-min(b.replan, b.horizon):]:
                late += c
            total += late / min(b.replan, b.horizon) * b.tail
        return total

    def resume(self, trace: Trace, U: np.ndarray, start: int, bound: float = np.inf, until: int | None = None) -> float:
        """play(U, start, ...) from `trace`'s end: a round of the same decision's rollout
        (trace.start == start), or the take's state at `start` where the take followed the
        trace's plan to the bit up to there and U is that plan shifted to `start`
        (BalancePlanner.costs checks both): the trace's steps from `start` on are U's first,
        and only the steps after its end are played. The same cost to the bit."""
        self.load(trace.states[trace.end])
        return self.play(U, start, bound, resume=trace, until=until)

    def play_all(self, snap: dict, plans: list[np.ndarray], start: int,
                 bound: float = np.inf) -> tuple[list[float], int, tuple | None]:
        """play() for each plan from the snapshot, each bounded by the cheapest before it (and
        by `bound`, a plan's cost already known); the rollout steps that took; and (index, Trace)
        of the cheapest plan played to its horizon, None if none was."""
        out, best, before, shared = [], bound, self.steps_played, self.shared_best
        kept, kept_cost = None, np.inf
        for j, U in enumerate(plans):
            self.load(snap)
            out.append(self.play(U, start, best))
            if self.trace is not None and (kept is None or out[-1] < kept_cost):  # the first of equals, as argmin
                kept, kept_cost = (j, self.trace), out[-1]
            best = min(best, out[-1])
            if shared is not None and best < shared.value:  # unlocked: a lost race leaves a looser
                shared.value = best  # bound (still some played plan's cost), never a wrong one
        return out, self.steps_played - before, kept


def snapshot(sim, ctl: TrackingController) -> dict:
    """What Shadow.load needs of the take: the simulation's and the tracker's state (copies),
    without a push in progress (the planner does not know pushes: it meets them as errors)."""
    state = sim.snapshot()
    state["physics"]["external"] = np.zeros_like(state["physics"]["external"])
    return dict(sim=state, ctl=ctl.snapshot())


def restore(sim, ctl: TrackingController, snap: dict) -> None:
    """Put a simulation and its tracker at a snapshot (`snapshot`): every state a decision
    reads (MuJoCo's qpos, qvel, contact warm start and time; the 3CC-r state; the pace and
    where the plan's clips are matched; the solve's warm start). Checked: a shadow restored
    so gives the same candidate costs as a fresh copy."""
    sim.restore(snap["sim"])
    ctl.restore(snap["ctl"])


_WORKER: dict = {}


def _worker_init(sim, plan, params, balance, shared_best) -> None:
    forked_worker_signals()  # forked from a take that handles Ctrl-C and SIGTERM itself
    _WORKER["shadow"] = Shadow(sim, plan, params, balance)
    _WORKER["shadow"].shared_best = shared_best


def _worker_play(job) -> tuple[list[float], int, tuple | None]:
    snap, plans, start = job
    return _WORKER["shadow"].play_all(snap, plans, start)


class BalancePlanner(OffsetTracker):
    """The tracker, steered by predictive sampling (module docstring). Call `close` when the
    take is over (it ends the worker processes)."""

    def __init__(self, sim, plan, params, balance: BalanceParams | None = None, seed: int = 0):
        balance = (balance or BalanceParams()).validate()
        check_backend(sim.physics.name)
        super().__init__(sim, plan, params, balance)
        self.dt = sim.dt
        self.rng = np.random.default_rng(seed)
        self._pool = self._shadow_here = None
        self._shadow_args = (sim, plan, params, balance)
        self.workers_lost = ""  # why the worker processes were given up, if they were
        if balance.workers > 0:  # forked: the workers inherit the rig and the plan (nothing pickled)
            import multiprocessing as mp

            # the cheapest plan played so far in this decision (by any worker, or the continued
            # nominal here): every worker prunes against it, as one process prunes against its own
            self._shared_best = mp.get_context("fork").RawValue("d", np.inf)
            self._pool = process_pool(balance.workers, "fork", _worker_init, self._shadow_args + (self._shared_best,))
        else:
            self._shadow_here = Shadow(*self._shadow_args)
        self._shadow_main = None  # plays the continued nominal where workers play the rest (`costs`)
        self._trace, self._traces = None, {}  # the chosen plan's Trace; this decision's, by plan
        self.plans = self.rollout_steps = self.continued = 0
        self.cost_sum = 0.0
        self.kept = self.zero = 0  # plans that kept the shifted plan, that chose no offsets
        self._recent = []  # the last decisions' cheapest costs (extra)
        self.searched_more = self.found_more = 0
        self.rescues = self.rescued = 0  # decisions where every plan fell (eq. 9); of them, a plan found that does not
        self.widened_n = 0  # decisions that played `widen` more candidates (eq. 6)
        self.kept_cheap = 0  # decisions that kept the last plan without playing the others (eq. 7)
        self.offset_sum, self.offset_max = 0.0, 0.0  # rad: mean |offset| at each plan's start

    def candidates(self, now: int) -> list[np.ndarray]:
        """The plans tried at step `now` (module docstring)."""
        b = self.balance
        nominal = shift_plan(self.U, self.plan_start, b.knot, now)
        return [nominal, np.zeros_like(nominal)] + list(b.decay * nominal + self._noise(b.candidates - 2, b.sigma, nominal.shape))

    def more_candidates(self, best: np.ndarray, n: int, top: float) -> list[np.ndarray]:
        """n plans about the cheapest one, with noise from sigma_min to `top` (eqs. 4 and 9)."""
        return list(best + self._noise(n, top, best.shape))

    def _noise(self, n: int, top: float, shape: tuple) -> np.ndarray:
        """n plans' offsets of Gaussian noise from the take's seed, the k-th scaled by the k-th
        of n steps from sigma_min to `top` (rad); with `antithetic`, in pairs n_k, -n_k at one
        scale each."""
        b = self.balance
        if not b.antithetic:
            scale = np.linspace(b.sigma_min, top, n)[:, None, None]
            noise = scale * self.rng.standard_normal((n,) + shape)
        else:
            m = (n + 1) // 2
            z = self.rng.standard_normal((m,) + shape)
            pairs = np.stack([z, -z], axis=1).reshape((2 * m,) + shape)[:n]
            noise = np.repeat(np.linspace(b.sigma_min, top, m), 2)[:n, None, None] * pairs
        if b.hips_yaw and b.hips_yaw != 1.0:  # the hips' yaw, offset_dofs' last two, at its own scale
            noise[..., -2:] *= b.hips_yaw
        return noise

    def costs(self, snap: dict, plans: list[np.ndarray], now: int, bound: float = np.inf) -> list[float]:
        """Eq. (1) summed over the horizon for every plan, from the snapshot; the nominal
        (plans[0]) continued from the last decision's Trace where the take followed it to the
        bit (`followed`), its cost then bounding the rest. `bound`: a cost already found this
        decision, which a plan's rollout stops at once its sum passes it (it cannot be chosen).
        Leaves each plan's Trace, where one was kept, in `_traces` by index (the cheapest a
        worker or this process played)."""
        costs, self._traces = [np.inf] * len(plans), {}
        trace = self.followed(snap, now)
        if self.balance.halving:
            return self.halved(snap, plans, now, trace)
        first = int(trace is not None)
        rest, pending, parts = plans[first:], None, None
        if trace is not None and self.balance.keep_below:  # eq. (7): the last plan first, kept where it is cheap
            costs[0] = self._continued(trace, plans[0], now)
            median = self._recent_median()
            if median is not None and costs[0] <= self.balance.keep_below * median:
                self.kept_cheap += 1
                return costs
            bound, trace = min(bound, costs[0]), None
        if self._pool is not None:  # one plan a job, taken in order by whichever worker is free:
            self._shared_best.value = bound  # the likely cheap plans first, so their costs bound the rest
            pending = self._deal(now, lambda: [self._pool.submit(_worker_play, (snap, [U], now)) for U in rest])
        if trace is not None:  # meanwhile here; the workers prune against it from then on
            costs[0] = self._continued(trace, plans[0], now)
            if pending is not None:
                self._shared_best.value = min(self._shared_best.value, costs[0])
        if pending is not None:
            parts = self._deal(now, lambda: [f.result() for f in pending])
        if parts is None:  # no workers, or they were lost: the same plans here, slower
            parts = [self._shadow_here.play_all(snap, rest, now, min(costs[0], bound) if first else bound)]
        j = first
        for c, n, kept in parts:
            self.rollout_steps += n
            if kept is not None:
                self._traces[j + kept[0]] = kept[1]
            costs[j:j + len(c)] = c
            j += len(c)
        return costs

    def halved(self, snap: dict, plans: list[np.ndarray], now: int, trace: Trace | None) -> list[float]:
        """costs() by successive halving (BalanceParams.halving): every sampled plan is played
        to the first round's end, the best halving[0] of them by their sums so far on to the
        next round's, and so on to the horizon; the nominal (plans[0]) is continued from
        `trace`, or played to the horizon, first. Plans dropped at a round cost inf. Round 0
        ranks every sampled plan; a later round prunes against the plans finished before it
        starts (the nominal's), the last one also against each plan it finishes, as `costs`
        does. Played in this process, with or without workers: on the workers the rounds'
        takes differed from this process's at round-off on 1 run in 6 to 3 in 4 (thirty-third
        session; likely numpy's last bit by where an output landed, DESIGN.md 'Same bits',
        found since and not measured here again), and halving is a measurement, not the default."""
        b, sh = self.balance, self._local_shadow()
        rounds = len(b.halving) + 1
        ends = [b.horizon // rounds * (i + 1) for i in range(rounds - 1)] + [b.horizon]
        costs = [np.inf] * len(plans)
        if trace is not None:
            costs[0] = self._continued(trace, plans[0], now)
        else:
            costs[0] = self._played(sh, snap, None, plans[0], now, b.horizon, np.inf)[0]
            if sh.trace is not None:
                self._traces[0] = sh.trace
        alive: dict = {j: None for j in range(1, len(plans))}  # a sampled plan still played: its Trace so far
        running: dict = {j: 0.0 for j in alive}
        for r, until in enumerate(ends):
            bound = min(costs) if r else np.inf  # round 0 ranks every sampled plan
            for j in sorted(alive, key=lambda j: (running[j], j)):  # the likely cheap plans first
                cost, tr = self._played(sh, snap, alive[j], plans[j], now, until, bound)
                if tr is not None and not tr.final:
                    alive[j], running[j] = tr, cost
                    continue
                costs[j] = cost  # played to the horizon, fallen, diverged or pruned
                del alive[j]
                if tr is not None:
                    self._traces[j] = tr
                if r == rounds - 1:
                    bound = min(bound, cost)
            if r < rounds - 1:
                for j in sorted(alive, key=lambda j: (running[j], j))[b.halving[r]:]:
                    del alive[j]
        return costs

    def _played(self, sh: Shadow, snap: dict, trace: Trace | None, U: np.ndarray, now: int, until: int,
                bound: float) -> tuple[float, Trace | None]:
        """sh.play(U, now, bound) up to `until` steps, from the decision's snapshot or resumed
        at `trace`'s end; its rollout steps counted. (the sum, its Trace)."""
        before = sh.steps_played
        if trace is None:
            sh.load(snap)
            cost = sh.play(U, now, bound, until=until)
        else:
            cost = sh.resume(trace, U, now, bound, until)
        self.rollout_steps += sh.steps_played - before
        return cost, sh.trace

    def _local_shadow(self) -> Shadow:
        """This process's shadow (`_shadow_here`, or one made beside the workers)."""
        if self._shadow_main is None:
            self._shadow_main = self._shadow_here or Shadow(*self._shadow_args)
        return self._shadow_main

    def _deal(self, now: int, work):
        """work() on the worker pool at step `now`; None, and planning on in this process from
        then on, if a worker died."""
        from concurrent.futures.process import BrokenProcessPool

        try:
            return work()
        except BrokenProcessPool as e:
            self.workers_lost = (f"a worker process ended at t = {now * self.dt:.2f} s ({e}); "
                                 "planned on in the take's process")
            print(f"balance planner: {self.workers_lost}", file=sys.stderr)
            self.close()
            self._shadow_here = Shadow(*self._shadow_args)
            return None

    def _continued(self, trace: Trace, U: np.ndarray, now: int) -> float:
        """The nominal U resumed from `trace` to the horizon on this process's shadow (one made
        for it where workers play the rest); its Trace kept as plan 0's."""
        cost, tr = self._played(self._local_shadow(), None, trace, U, now, self.balance.horizon, np.inf)
        self.continued += 1
        if tr is not None:
            self._traces[0] = tr
        return cost

    def followed(self, snap: dict, now: int) -> Trace | None:
        """The last decision's Trace of the plan the take has followed since, where the take's
        state now is the trace's to the bit (no push between, no other change) and the nominal
        candidate is that plan shifted by whole knots; else None (every plan played afresh)."""
        t, b = self._trace, self.balance
        self._trace = None
        if (t is None or t.U is not self.U or t.start != self.plan_start or not 0 < now - t.start < b.horizon
                or (now - t.start) % b.knot or now not in t.states):
            return None
        return t if same_state(snap, t.states[now]) else None

    def act(self, sim, state):
        if sim.steps % self.balance.replan == 0:
            self.advance_pace(sim)
            now = sim.steps
            plans = self.candidates(now)
            snap = snapshot(sim, self)
            costs = self.costs(snap, plans, now)
            plans, costs = self.widened(snap, plans, costs, now)
            best = int(np.argmin(costs))
            plans, costs, best, sampled = self.searched(snap, plans, costs, best, now)
            self.U, self.plan_start = plans[best], now
            self._trace = self._traces.get(best)
            if self._trace is not None:
                self._trace.U = self.U  # (a worker's is a copy) followed() asks for this plan
            self.plans += 1
            self.cost_sum += float(costs[best])
            self.kept += sampled and best == 0
            self.zero += sampled and best == 1
            u = np.abs(self.U[0])
            self.offset_sum += float(u.mean())
            self.offset_max = max(self.offset_max, float(u.max()))
        return super().act(sim, state)

    def teach(self, sim, lam: float) -> np.ndarray:
        """Eq. (5) at the simulation's state: the candidates from the plan carried now, every
        one played to its horizon in this process (no pruning, no continuation), weighted.
        The simulation and the carried plan are left as they were."""
        self.advance_pace(sim)
        now, sh = sim.steps, self._local_shadow()
        snap = snapshot(sim, self)
        plans, costs, before = self.candidates(now), [], sh.steps_played
        for U in plans:
            sh.load(snap)
            costs.append(sh.play(U, now))
        self.rollout_steps += sh.steps_played - before
        return weighted_plan(plans, costs, lam)

    def _recent_median(self) -> float | None:
        """The median of the last EXTRA_MEMORY decisions' cheapest costs, the bar of eqs. (4)
        and (6); None while fewer than 5 decisions are behind."""
        return float(np.median(self._recent)) if len(self._recent) >= 5 else None

    def widened(self, snap: dict, plans: list, costs: list, now: int) -> tuple[list, list]:
        """Eq. (6): where the candidates' cheapest costs more than widen_above x the recent
        median (or fewer than 5 decisions are behind), `widen` more plans of the same kind (the
        shifted plan x decay plus noise from sigma_min to sigma), pruned against that cheapest
        one; (plans, costs) of them all, the Traces kept by their index among them."""
        b, median = self.balance, self._recent_median()
        if not b.widen or (median is not None and min(costs) <= b.widen_above * median):
            return plans, costs
        traces, nominal = self._traces, plans[0]
        more = list(b.decay * nominal + self._noise(b.widen, b.sigma, nominal.shape))
        more_costs = self.costs(snap, more, now, bound=min(costs))
        self._traces = {**traces, **{len(plans) + k: t for k, t in self._traces.items()}}
        self.widened_n += 1
        return plans + more, costs + more_costs

    def searched(self, snap: dict, plans: list, costs: list, best: int, now: int) -> tuple[list, list, int, bool]:
        """Eq. (4): where the cheapest plan costs extra_above x the recent median and is no fall,
        `extra` more plans about it played; eq. (9): where it falls, `rescue` more, wider.
        (plans, costs, best, sampled) of whichever set holds the cheapest of all (sampled: the
        candidates'). Keeps the recent cheapest costs."""
        b, median = self.balance, self._recent_median()
        bar = b.extra_above * median if median is not None else np.inf
        self._recent = (self._recent + [costs[best]])[-EXTRA_MEMORY:]
        falls = costs[best] >= FALL_COST
        if falls and b.rescue:
            n, top = b.rescue, b.rescue_sigma
        elif b.extra and bar < costs[best] < FALL_COST:
            n, top = b.extra, b.extra_sigma
        else:
            return plans, costs, best, True
        traces, more = self._traces, self.more_candidates(plans[best], n, top)
        more_costs = self.costs(snap, more, now)
        j = int(np.argmin(more_costs))
        if falls:
            self.rescues += 1
            self.rescued += more_costs[j] < FALL_COST
        else:
            self.searched_more += 1
        if more_costs[j] < costs[best]:
            self.found_more += not falls
            return more, more_costs, j, False
        self._traces = traces  # the candidates' Traces: the chosen plan's is among them
        return plans, costs, best, True

    def checkpoint(self, sim) -> dict:
        """The take's state and the planner's own (its plan), for `resume`: a start state a
        DAgger run (training/dagger.py) returns to."""
        return dict(snapshot(sim, self), U=self.U.copy(), plan_start=self.plan_start, recent=list(self._recent))

    def resume(self, sim, snap: dict, seed) -> None:
        """Put the simulation and the planner back at a `checkpoint`, its candidates' noise
        drawn afresh from `seed`."""
        restore(sim, self, snap)
        self.U, self.plan_start, self._recent = snap["U"].copy(), snap["plan_start"], list(snap.get("recent", []))
        self._trace = None
        self.rng = np.random.default_rng(seed)

    def balance_summary(self) -> dict:
        """What the take's metadata keeps of the planning."""
        n, b = max(self.plans, 1), self.balance
        return dict(plans=self.plans, candidates=b.candidates, horizon_s=round(b.horizon * self.dt, 3),
                    widen=b.widen, widened=self.widened_n,
                    keep_below=b.keep_below, kept_cheap=self.kept_cheap,
                    halving=list(b.halving),
                    rollout_steps=self.rollout_steps,
                    mean_best_cost=round(self.cost_sum / n, 3),
                    kept_share=round(self.kept / n, 3), no_offset_share=round(self.zero / n, 3),
                    extra=b.extra, searched_more=self.searched_more, found_more=self.found_more,
                    rescue=b.rescue, rescues=self.rescues, rescued=self.rescued,
                    continued_share=round(self.continued / n, 3),
                    offset_deg_mean=round(float(np.degrees(self.offset_sum / n)), 3),
                    offset_deg_max=round(float(np.degrees(self.offset_max)), 3),
                    rollout_step_us=self.rollout_split(),
                    workers_lost=self.workers_lost or None)

    def report(self) -> dict:
        return dict(super().report(), balance=self.balance_summary())

    def rollout_split(self) -> dict | None:
        """Where a rollout step's time went, us a step by part (the decision's preparation and
        solve, the muscles and physics, the cost): planned in this process only (the workers'
        clocks stay in theirs), else None."""
        sh = self._shadow_here
        if sh is None or not sh.steps_played:
            return None
        n, st = sh.steps_played, sh.ctl.stats
        parts = dict(prepare=st["prepare_s"], solve=st["solve_s"], **sh.seconds)
        return {k: round(1e6 * v / n, 1) for k, v in parts.items()}

    def close(self) -> None:
        """End the worker processes (idle between plans; a broken pool's survivors are ended)."""
        if self._pool is not None:
            end_pool(self._pool)
            self._pool = None
