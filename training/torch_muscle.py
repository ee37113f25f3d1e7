"""The muscle step of DESIGN.md ("One physics step", stages 1-6) in torch, batched and
differentiable. The equations are engine.muscle's and engine.fatigue's own functions called
with xp=torch; the segment matrix DX = D X (X: engine.kinematics.MusclePaths's sparse LBS
matrix) is the engine MuscleSystem's own, densified.
tests/test_training.py holds this equal to the numpy step (engine.muscle_step.MuscleSystem).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from engine import fatigue as fat
from engine import muscle as hill
from engine.muscle_step import MuscleSystem, PDGains
from engine.rig import Rig


def skew(w: torch.Tensor) -> torch.Tensor:
    z = torch.zeros_like(w[..., 0])
    x, y, q = w[..., 0], w[..., 1], w[..., 2]
    return torch.stack([torch.stack([z, -q, y], -1), torch.stack([q, z, -x], -1),
                        torch.stack([-y, x, z], -1)], -2)


def _left_mul(A: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """A (R, K) times x (..., K, C) -> (..., R, C) as one matrix product (many small batched
    products are several times slower on a CPU)."""
    if x.dim() == 2:
        return A @ x
    lead, (K, C) = x.shape[:-2], x.shape[-2:]
    y = A @ x.movedim(-2, 0).reshape(K, -1)
    return y.reshape((A.shape[0],) + lead + (C,)).movedim(0, -2)


@dataclass
class TorchStep:
    length: torch.Tensor
    length_rate: torch.Tensor
    alpha_pd: torch.Tensor
    activation: torch.Tensor
    force: torch.Tensor
    body_force: torch.Tensor
    body_torque: torch.Tensor
    MA: torch.Tensor
    MR: torch.Tensor
    MF: torch.Tensor


class TorchMuscleSystem:
    """Muscles of a rig in torch: lengths, Hill factors, PD, 3CC-r clip and update, body wrench.

    Inputs are batched over any leading axes: rot (..., B, 3, 3), pos/linvel/angvel (..., B, 3),
    action and M_A/M_R/M_F (..., M).
    """

    def __init__(self, rig: Rig, fatigue: fat.FatigueParams | None = None, dt: float = 1.0 / 120.0,
                 gains: PDGains | None = None, dtype=torch.float32, device="cpu"):
        ms = MuscleSystem(rig, fatigue, dt, gains)  # the engine's validated params and gains
        self.rig, self.dt, self.params, self.gains = rig, ms.dt, ms.params, ms.gains
        t = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64), dtype=dtype, device=device)
        S = len(rig.seg_a)
        from scipy.sparse import csr_matrix

        i = np.arange(S)  # D: each segment's end minus its start, as MuscleSystem builds it
        D = csr_matrix((np.r_[-np.ones(S), np.ones(S)], (np.r_[i, i], np.r_[rig.seg_a, rig.seg_b])),
                       shape=(S, rig.num_waypoints))
        DX = D @ ms.paths.X  # (S, 4B)
        self.DX = t(DX.toarray())
        self.DXt = t(DX.T.toarray())
        SM = np.zeros((S, rig.num_muscles))
        SM[np.arange(S), rig.seg_muscle] = 1.0
        self.SM = t(SM)  # segment -> muscle sums
        self.seg_muscle = torch.as_tensor(rig.seg_muscle, device=device)
        self.f0, self.rest = t(rig.muscle_f0), t(rig.muscle_rest_length)
        self.lt, self.lm = t(rig.muscle_lt), t(rig.muscle_lm)
        self.kp, self.kd = t(self.gains.kp), t(self.gains.kd)
        self.B, self.M, self.K = rig.num_bodies, rig.num_muscles, rig.num_waypoints

    def to(self, dtype=None, device=None) -> "TorchMuscleSystem":
        for k, v in list(vars(self).items()):
            if isinstance(v, torch.Tensor):
                setattr(self, k, v.to(device=device) if v.dtype in (torch.int64,) else v.to(dtype=dtype, device=device))
        return self

    def kinematics(self, rot, pos, linvel, angvel):
        """Stage 1: unit segment directions (..., S, 3), muscle lengths and rates (..., M).

        Segment vectors and their rates are DX [R^T, dR/dt^T; t^T, v^T] per body, with the
        engine's matrix DX (segment ends minus starts of the LBS map X), as one matrix product
        over the whole batch."""
        Rt = rot.transpose(-1, -2)
        top = torch.cat([Rt, Rt @ (-skew(angvel))], -1)  # [R^T, dR/dt^T]
        bottom = torch.cat([pos, linvel], -1)[..., None, :]  # [t^T, v^T]
        blocks = torch.cat([top, bottom], -2)  # (..., B, 4, 6)
        blocks = blocks.reshape(blocks.shape[:-3] + (4 * self.B, 6))
        dd = _left_mul(self.DX, blocks)  # (..., S, 6)
        d, d_dot = dd[..., :3], dd[..., 3:]
        seg_len = torch.sqrt((d * d).sum(-1))
        u = d / seg_len[..., None]
        seg_rate = (u * d_dot).sum(-1)
        return u, seg_len @ self.SM, seg_rate @ self.SM

    def body_wrench(self, rot, u, force):
        """Stage 6: per-body force and torque about the body origin (..., B, 3): the tensions
        carried back to the bodies by DX^T (engine.muscle_step.MuscleSystem.body_wrench)."""
        pull = u * force[..., self.seg_muscle, None]
        Q = -_left_mul(self.DXt, pull)
        Q = Q.reshape(Q.shape[:-2] + (self.B, 4, 3))
        body_force = Q[..., 3, :]
        RS = rot @ Q[..., :3, :]
        torque = torch.stack([RS[..., 1, 2] - RS[..., 2, 1], RS[..., 2, 0] - RS[..., 0, 2],
                              RS[..., 0, 1] - RS[..., 1, 0]], -1)
        return body_force, torque

    def pd_activation(self, rot, pos, linvel, angvel, action):
        """Stages 1-3: (u, length, rate, alpha_pd, f_l f_v, f_PE)."""
        u, length, rate = self.kinematics(rot, pos, linvel, angvel)
        lbar = hill.normalized_length(length, self.rest, self.lt, self.lm)
        vbar = hill.normalized_velocity(rate, self.rest, self.lm)
        l_target = hill.target_length(action, self.rest)
        f_pd = hill.pd_force(length, rate, l_target, self.kp, self.kd, torch)
        flfv, fpe = hill.active_and_passive(lbar, vbar, torch)
        alpha_pd = hill.activation_from_factors(f_pd, self.f0, flfv, fpe, torch)
        return u, length, rate, alpha_pd, flfv, fpe

    def fatigue_step(self, alpha_pd, MA, MR, MF):
        """Stages 4-5: alpha* and the new compartments (eq. 34-37, 26)."""
        alpha, st = fat.step_with_activation(fat.FatigueState(MA, MR, MF), alpha_pd, self.dt, self.params, torch)
        return alpha, st.MA, st.MR, st.MF

    def step(self, rot, pos, linvel, angvel, action, MA, MR, MF) -> TorchStep:
        """Stages 1-6, as engine.muscle_step.MuscleSystem.step."""
        u, length, rate, alpha_pd, flfv, fpe = self.pd_activation(rot, pos, linvel, angvel, action)
        alpha, MA2, MR2, MF2 = self.fatigue_step(alpha_pd, MA, MR, MF)
        force = hill.force_from_factors(alpha, self.f0, flfv, fpe)
        bf, bt = self.body_wrench(rot, u, force)
        return TorchStep(length, rate, alpha_pd, alpha, force, bf, bt, MA2, MR2, MF2)
