"""The muscle half of one physics step (DESIGN.md "One physics step", stages 1-6).

Body transforms and velocities in, per-body force and torque out, the 3CC-r state
advanced. Everything is batched over muscles, segments and waypoints; the only Python
work per step is a handful of numpy calls.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import compiled as compiled_lib
from . import fatigue as fat
from . import kinematics as kin
from . import muscle as hill
from .errors import ParameterError, SinewError
from .rig import Rig
from .transforms import SparseMatmul


@dataclass(frozen=True)
class PDGains:
    """Muscle-space PD gains per muscle: kp in N/m, kd in N s/m (eq. 4).

    Chosen by measurement (the arm-hold experiment, `sinew arm-hold`): appendix C.1's
    k_p = f0 per metre of length error holds nothing up (the arms hang 75 deg below
    horizontal), so the stiffness is set per unit strain instead: k_p = stiffness f0 /
    l_tpose, a strain of 1/stiffness asking for f0. With the paper's k_d = 0.1 k_p the
    hand and forearm muscles' damping is too stiff for an explicit 120 Hz step (the arms
    fall with activations saturated); the MuscleVAE release's k_d = 2 sqrt(k_p) is stable.
    With stiffness 20 the fresh arms hold 2.5 deg below horizontal. The gains come from
    the model's f0 (Rig.model_f0), not from a stronger rig's (Rig.with_strength): a
    stronger muscle asked for the same force by the same law needs less activation, as in
    the MuscleVAE release (its k_p from MASS's f0, its maximum forces its own); scaling
    k_p too would make the 120 Hz step unstable (strength 3: the arms diverge at once).
    """

    kp: np.ndarray
    kd: np.ndarray

    @classmethod
    def for_rig(cls, rig: Rig, stiffness: float = 20.0, damping: float = 2.0) -> "PDGains":
        for name, v in (("stiffness", stiffness), ("damping", damping)):
            if not np.isfinite(v) or v < 0:
                raise ParameterError(name, f"must be a finite number >= 0, got {v!r}")
        kp = stiffness * rig.model_f0 / rig.muscle_rest_length
        return cls(kp=kp, kd=damping * np.sqrt(kp))


@dataclass
class MuscleStep:
    """What one step computed, per muscle (M,) and per body (B, 3)."""

    length: np.ndarray
    length_rate: np.ndarray
    activation: np.ndarray
    force: np.ndarray
    body_force: np.ndarray
    body_torque: np.ndarray
    fatigue: fat.FatigueState


class MuscleSystem:
    """Muscles of one rig with their PD gains, 3CC-r parameters and time step.

    Segment vectors are linear in the body transforms. With T the per-body blocks
    [R^T; t^T] (4B x 3) and X the LBS matrix of kinematics.MusclePaths, the segment
    vectors are d = DX T with DX = D X, D taking each segment's end minus its start. The
    same matrix gives their rates from [dR/dt^T; v^T], and its transpose carries the
    tensions back to the bodies: the force a waypoint receives is split over its LBS
    bodies with its blend weights, at the anchor on each body (the Jacobian transpose of
    the LBS map). So the power the muscles deliver to the bodies equals -sum f dl/dt
    exactly, and the joint torques they produce equal -A^T f for the moment arms A.
    (MASS applies a blended waypoint's whole force to its nearest body instead, which
    breaks both identities by a few percent.)

    `step` and `step_activation` run the compiled step (engine.compiled, one C call) when
    its library loads and `compiled` is not False, else `step_numpy`, the reference
    definition; `path` says which. compiled=True insists on the C step.

    Buffers are reused from step to step: one instance must not be stepped from two
    threads at once.
    """

    def __init__(self, rig: Rig, fatigue: fat.FatigueParams | None = None,
                 dt: float = 1.0 / 120.0, gains: PDGains | None = None, compiled: bool | None = None):
        from scipy.sparse import csr_matrix

        self.rig = rig
        self.dt = float(dt)
        self.params = (fatigue or fat.FatigueParams()).validate(self.dt)
        self.gains = gains or PDGains.for_rig(rig)
        self.paths = kin.MusclePaths(rig)
        S, K = len(rig.seg_a), rig.num_waypoints
        s = np.arange(S)
        D = csr_matrix((np.r_[-np.ones(S), np.ones(S)], (np.r_[s, s], np.r_[rig.seg_a, rig.seg_b])),
                       shape=(S, K))
        DX = (D @ self.paths.X).tocsr()
        self._segments_of = SparseMatmul(DX)
        self._to_bodies = SparseMatmul(DX.T.tocsr())
        self._seg_muscle = rig.seg_muscle
        self._xp = FastClipNumpy  # engine.muscle's xp: numpy with a cheaper clip
        self._blocks = np.empty((rig.num_bodies, 4, 6))
        self._dd = np.empty((S, 6))
        # the compiled step (engine.compiled) when it loads, unless compiled=False
        lib = compiled_lib.library() if compiled is not False else None
        if compiled and lib is None:
            raise SinewError(f"compiled muscle step unavailable: {compiled_lib.status()}")
        self._compiled = None if lib is None else compiled_lib.CompiledMuscles(lib, rig, self.params, self.dt,
                                                                               self.gains)

    @property
    def path(self) -> str:
        """Which implementation `step` runs: 'compiled' or 'numpy'."""
        return "numpy" if self._compiled is None else "compiled"

    def kinematics(self, body_rot, body_pos, body_linvel, body_angvel):
        """Stage 1: unit segment directions as rows (3, S), muscle lengths and rates (M,).

        Segment quantities are kept as rows (x, y, z over all segments) so every numpy
        call runs over one long contiguous row.
        """
        blocks = self.paths.blocks(body_rot, body_pos, body_linvel, body_angvel, out=self._blocks)
        dd = self._segments_of(blocks.reshape(-1, 6), out=self._dd).T.copy()  # rows d, dd/dt
        d, d_dot = dd[:3], dd[3:]
        seg_len = np.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
        u = d / seg_len
        seg_rate = (u * d_dot).sum(axis=0)
        start = self.rig.muscle_seg_start
        return u, np.add.reduceat(seg_len, start), np.add.reduceat(seg_rate, start)

    def body_wrench(self, body_rot, u, force):
        """Stage 6: per-body force and torque about the body origin (B, 3) each, from the
        muscle tensions (M,) pulling along the unit segment directions u (3, S) (eq. 20)."""
        pull = (u * force[self._seg_muscle]).T  # on each segment's start; minus on its end
        Q = -self._to_bodies(pull).reshape(-1, 4, 3)  # X^T f per body: [sum w x f^T; sum w f^T]
        body_force = Q[:, 3]
        # Torque about the origin: sum w (R x) x f, the axial part of R (sum w x f^T).
        RS = body_rot @ Q[:, :3]
        body_torque = np.stack([RS[:, 1, 2] - RS[:, 2, 1], RS[:, 2, 0] - RS[:, 0, 2],
                                RS[:, 0, 1] - RS[:, 1, 0]], axis=-1)
        return body_force, body_torque

    def step(self, body_rot, body_pos, body_linvel, body_angvel, action,
             state: fat.FatigueState) -> MuscleStep:
        """Stages 1-6 for a PD action a (eq. 11): lengths, Hill, PD, fatigue clip, forces, update.

        Body states are world frame at each body's origin (box centre); torques come back
        about that origin.
        """
        if self._compiled is not None:
            return self._step_compiled(body_rot, body_pos, body_linvel, body_angvel, action, state, False)
        return self.step_numpy(body_rot, body_pos, body_linvel, body_angvel, action, state)

    def step_activation(self, body_rot, body_pos, body_linvel, body_angvel, wanted,
                        state: fat.FatigueState) -> MuscleStep:
        """Stages 1-6 with the controller asking for activations directly (a muscle
        coordination solve, engine.control) instead of a PD action: the wanted activation
        takes alpha_pd's place and is clipped to the 3CC-r bounds the same way (eq. 36)."""
        if self._compiled is not None:
            return self._step_compiled(body_rot, body_pos, body_linvel, body_angvel, wanted, state, True)
        return self.step_numpy(body_rot, body_pos, body_linvel, body_angvel, wanted, state, activation=True)

    def step_numpy(self, body_rot, body_pos, body_linvel, body_angvel, command,
                   state: fat.FatigueState, activation: bool = False) -> MuscleStep:
        """The reference definition of `step` (a PD action) and `step_activation`
        (activation=True), in numpy, whichever path the instance runs."""
        rig, xp, f0 = self.rig, self._xp, self.rig.muscle_f0
        u, length, rate = self.kinematics(body_rot, body_pos, body_linvel, body_angvel)
        lbar = hill.normalized_length(length, rig.muscle_rest_length, rig.muscle_lt, rig.muscle_lm)
        vbar = hill.normalized_velocity(rate, rig.muscle_rest_length, rig.muscle_lm)
        flfv, fpe = hill.active_and_passive(lbar, vbar, xp)
        if activation:
            wanted = command
        else:
            l_target = hill.target_length(command, rig.muscle_rest_length)
            f_pd = hill.pd_force(length, rate, l_target, self.gains.kp, self.gains.kd, xp)
            wanted = hill.activation_from_factors(f_pd, f0, flfv, fpe, xp)
        alpha, new_state = fat.step_with_activation(state, wanted, self.dt, self.params, xp)
        force = hill.force_from_factors(alpha, f0, flfv, fpe)
        body_force, body_torque = self.body_wrench(body_rot, u, force)
        return MuscleStep(length, rate, alpha, force, body_force, body_torque, new_state)

    def _step_compiled(self, body_rot, body_pos, body_linvel, body_angvel, command, state, activation):
        rows, wrench = self._compiled.step(body_rot, body_pos, body_linvel, body_angvel, command,
                                           state.MA, state.MR, state.MF, activation)
        length, rate, alpha, force, MA, MR, MF = rows
        return MuscleStep(length, rate, alpha, force, wrench[0], wrench[1], fat.FatigueState(MA, MR, MF))


class FastClipNumpy:
    """numpy as an `xp` for engine.muscle, with clip as maximum/minimum: the same values,
    without np.clip's per-call overhead on python-scalar bounds (several microseconds)."""

    exp = staticmethod(np.exp)
    where = staticmethod(np.where)

    @staticmethod
    def clip(x, lo, hi):
        if lo is not None:
            x = np.maximum(x, lo)
        return x if hi is None else np.minimum(x, hi)
