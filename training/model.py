"""The differentiable half of MuscleVAE training: the world model step (muscle step in torch,
learned skeleton dynamics, integration and the forward-kinematics pass of sec. 4.1.1 /
appendix B.1) and the losses of eq. 13-17 and 41.

A state is a dict of tensors: pos, linvel, angvel (..., B, 3), rot (..., B, 3, 3) in the world
frame, and the per-muscle fatigue MA, MR, MF (..., M).
"""
from __future__ import annotations

import numpy as np
import torch

from engine import muscle as hill
from engine.control import policy as P
from engine.control.policy import POLICY_PERIOD
from engine.rig import Rig

from .networks import VAE, WorldModel
from .torch_muscle import TorchMuscleSystem, skew

WEIGHT_N = 600.0  # N, N m: the wrench scale of runs that did not measure it (about the weight)


def expmap(phi: torch.Tensor) -> torch.Tensor:
    """Rotation matrices of rotation vectors (..., 3) (Rodrigues), smooth at zero."""
    th2 = (phi * phi).sum(-1, keepdim=True)[..., None]
    th = torch.sqrt(th2 + 1e-12)
    small = th2 < 1e-8
    a = torch.where(small, 1.0 - th2 / 6.0, torch.sin(th) / th)
    b = torch.where(small, 0.5 - th2 / 24.0, (1.0 - torch.cos(th)) / (th2 + 1e-12))
    K = skew(phi)
    eye = torch.eye(3, dtype=phi.dtype, device=phi.device)
    return eye + a * K + b * (K @ K)


def from_heading(v, c, s):
    """Inverse of policy.to_heading: heading-frame vectors (..., B, 3) back to the world."""
    c, s = c[..., None], s[..., None]
    vx, vy, vz = v[..., 0], v[..., 1], v[..., 2]
    return torch.stack([c * vx - s * vy, s * vx + c * vy, vz], -1)


def act_loss(alpha_pd: torch.Tensor, cfg) -> torch.Tensor:
    """L_act (eq. 16) per sample: w_act1 |alpha|_1 / M + w_act2 |alpha|_2 / sqrt(M) of the wanted
    activations alpha_pd (..., M). alpha_pd diverges where f_l f_v -> 0, so it is compressed
    above act_cap, act_cap log(1 + alpha_pd / act_cap), rather than clamped: a muscle driven
    far into saturation still feels the gradient (with a clamp it got none, nor from the
    dynamics, whose activation is clipped at the 3CC-r bound, and stayed saturated for good)."""
    ap = cfg.act_cap * torch.log1p(torch.relu(alpha_pd) / cfg.act_cap)
    return cfg.w_act1 * ap.mean(-1) + cfg.w_act2 * torch.sqrt((ap ** 2).mean(-1) + 1e-8)


class Model:
    """Networks, normalisation and the rig constants the rollouts need."""

    def __init__(self, rig: Rig, cfg, tm: TorchMuscleSystem, dtype=torch.float32):
        self.rig, self.cfg, self.tm = rig, cfg, tm
        B, M = rig.num_bodies, rig.num_muscles
        self.B, self.M = B, M
        self.S, self.T = P.state_size(B), P.target_size(B)
        self.A = M  # the policy's output: a PD target or activation per muscle ...
        if cfg.action == "offset":  # ... or an offset plan's first two knots, the offsets now observed
            from engine.control.balance import BalanceParams, offset_dofs
            from engine.control.offset_policy import KNOTS_OUT

            b = BalanceParams()
            D = len(offset_dofs(rig, b.knees, b.hips_yaw))
            self.S, self.A = self.S + D, KNOTS_OUT * D
        t = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64), dtype=dtype)
        self.Wfat = t(P.fatigue_weights(rig))
        self.rest_rot = t(rig.body_rest_rot)
        self.parent = [int(p) for p in rig.body_parent]
        off = rig.joint_pos - rig.joint_pos[np.maximum(rig.body_parent, 0)]
        self.joint_offset = t(off)
        self.body_from_joint = t(rig.body_rest_pos - rig.joint_pos)
        self.dt_policy = POLICY_PERIOD * tm.dt
        self.vae = VAE(self.S, self.T, self.A, cfg.latent_dim, cfg.vae_hidden, cfg.policy_hidden,
                       cfg.experts, cfg.gate_hidden)
        self.wm = WorldModel(self.S, M, B, cfg.wm_hidden)
        self.task = None
        # normalisation (set from the clips and the first buffer fill; saved with the run)
        self.state_mean = torch.zeros(self.S)
        self.state_std = torch.ones(self.S)
        self.target_mean = torch.zeros(self.T)
        self.target_std = torch.ones(self.T)
        self.delta_std = torch.ones(6 * B)
        # world-model input scales (set with delta_std; these defaults are the fixed scales
        # of runs started before they were measured, so those resume unchanged)
        self.action_std = torch.tensor(float(cfg.action_scale))
        self.wrench_std = torch.full((6 * B,), WEIGHT_N)

    # ---- the policy's action -------------------------------------------------------------
    def act(self, sn: torch.Tensor, z: torch.Tensor, gen: torch.Generator | None = None):
        """(a, mean a): a = action_scale (mu_pi(s, z) [+ sigma_policy noise]); the numpy
        PolicyFile.action (and the collectors' noise) scale the same way."""
        mu = self.vae.policy(torch.cat([sn, z], -1))
        a = mu + self.cfg.sigma_policy * torch.randn(mu.shape, generator=gen) if gen is not None else mu
        return self.cfg.action_scale * a, self.cfg.action_scale * mu

    # ---- features -----------------------------------------------------------------------
    def fat_parts(self, st):
        return P.fatigue_parts(st["MA"], st["MR"], st["MF"], self.Wfat, torch)

    def state_raw(self, st):
        return P.state_features(st["pos"], st["rot"], st["linvel"], st["angvel"], self.fat_parts(st), torch)

    def state_norm(self, st):
        return (self.state_raw(st) - self.state_mean) / self.state_std

    def target_norm(self, st, ref):
        t = P.target_features(st["pos"], st["rot"], ref["pos"], ref["rot"], ref["linvel"], ref["angvel"], torch)
        return (t - self.target_mean) / self.target_std

    # ---- world model ----------------------------------------------------------------------
    def fk_positions(self, root_pos, rot):
        """Body positions from the root body's position and every body's rotation (the
        forward-kinematics pass: bodies stay attached at their joints)."""
        G = rot @ self.rest_rot.transpose(-1, -2)
        x = [None] * self.B
        x[0] = root_pos - (G[..., 0, :, :] @ self.body_from_joint[0][:, None])[..., 0]
        for b in range(1, self.B):
            p = self.parent[b]
            x[b] = x[p] + (G[..., p, :, :] @ self.joint_offset[b][:, None])[..., 0]
        X = torch.stack(x, -2)
        return X + (G @ self.body_from_joint[..., None])[..., 0]

    def muscle_wrench(self, st: dict, action: torch.Tensor):
        """The torch muscle step at st under the action: (MuscleStep, heading cos, sin, and
        the muscles' force and torque on every body in the heading frame, (..., 6B), N and N m)."""
        ms = self.tm.step(st["rot"], st["pos"], st["linvel"], st["angvel"], action, st["MA"], st["MR"], st["MF"])
        c, s = P.heading_cs(st["rot"], torch)
        wrench = torch.cat([P.to_heading(ms.body_force, c, s, torch), P.to_heading(ms.body_torque, c, s, torch)], -1)
        return ms, c, s, wrench.reshape(wrench.shape[:-2] + (6 * self.B,))

    def world_step(self, st: dict, action: torch.Tensor):
        """One policy step (6 physics steps) of omega(s, a). Returns (next state, alpha_pd).

        Fatigue: the torch muscle step (the engine's equations) at the start state gives
        alpha_pd; the 3CC-r clip and update then run for the 6 physics steps with that
        alpha_pd held (the simulator re-evaluates it every step as the lengths change).
        Skeleton: the network sees the normalised state, the action and the muscles' wrench
        on every body (each scaled to unit spread over the first buffer fill: unscaled, the
        action's and the wrench's parts were ~0.05 against the state's ~1, and the model
        learned to ignore them). It predicts each body's change of linear and angular
        velocity in the heading frame; velocities are integrated (trapezoid) into the root
        position and every rotation, and the other bodies' positions follow by forward
        kinematics.
        """
        tm = self.tm
        ms, c, s, wrench = self.muscle_wrench(st, action)
        MA, MR, MF = ms.MA, ms.MR, ms.MF
        for _ in range(POLICY_PERIOD - 1):
            _, MA, MR, MF = tm.fatigue_step(ms.alpha_pd, MA, MR, MF)
        x = torch.cat([self.state_norm(st), action / self.action_std, wrench / self.wrench_std], -1)
        d = (self.wm(x) * self.delta_std).reshape(x.shape[:-1] + (self.B, 6))
        v1 = st["linvel"] + from_heading(d[..., :3], c, s)
        w1 = st["angvel"] + from_heading(d[..., 3:], c, s)
        h = self.dt_policy
        rot1 = expmap(0.5 * h * (st["angvel"] + w1)) @ st["rot"]
        root1 = st["pos"][..., 0, :] + 0.5 * h * (st["linvel"][..., 0, :] + v1[..., 0, :])
        pos1 = self.fk_positions(root1, rot1)
        return dict(pos=pos1, rot=rot1, linvel=v1, angvel=w1, MA=MA, MR=MR, MF=MF), ms.alpha_pd

    def deltas(self, st0: dict, st1: dict):
        """The velocity changes (heading frame of st0) the world model should predict, (..., 6B)."""
        c, s = P.heading_cs(st0["rot"], torch)
        dv = P.to_heading(st1["linvel"] - st0["linvel"], c, s, torch)
        dw = P.to_heading(st1["angvel"] - st0["angvel"], c, s, torch)
        d = torch.cat([dv, dw], -1)
        return d.reshape(d.shape[:-2] + (6 * self.B,))

    # ---- losses ---------------------------------------------------------------------------
    def skeleton_blocks(self):
        B = self.B
        return dict(height=slice(0, 1), pos=slice(1, 1 + 3 * B), rot=slice(1 + 3 * B, 1 + 9 * B),
                    vel=slice(1 + 9 * B, 1 + 12 * B), angvel=slice(1 + 12 * B, 1 + 15 * B),
                    skeleton=slice(0, 1 + 15 * B))

    def state_error(self, a: dict, b: dict, weights: dict):
        """Weighted squared differences of normalised skeleton features (per sample), plus
        the difference of the roots' headings (cos, sin)."""
        fa = (self.state_raw(a) - self.state_mean) / self.state_std
        fb = (self.state_raw(b) - self.state_mean) / self.state_std
        sq = (fa - fb) ** 2
        blocks = self.skeleton_blocks()
        out = 0.0
        for k in ("height", "pos", "rot", "vel", "angvel"):
            out = out + weights[k] * sq[..., blocks[k]].mean(-1)
        ca, sa = P.heading_cs(a["rot"], torch)
        cb, sb = P.heading_cs(b["rot"], torch)
        return out + weights["heading"] * ((ca - cb) ** 2 + (sa - sb) ** 2)

    def wm_loss(self, states: list, actions: list):
        """L_w (eq. 17): roll the world model from the real s^0 with the real actions; squared
        error of the normalised skeleton features of every step plus the root position.
        Returns (loss, per-step mean body position error in m)."""
        cfg = self.cfg
        st = states[0]
        loss, pos_err = 0.0, []
        w = dict(height=1.0, pos=1.0, rot=1.0, vel=1.0, angvel=1.0, heading=1.0)
        for t, a in enumerate(actions):
            st, _ = self.world_step(st, a)
            real = states[t + 1]
            root = ((st["pos"][..., 0, :] - real["pos"][..., 0, :]) ** 2).sum(-1) / 0.01
            loss = loss + (self.state_error(st, real, w) + cfg.w_root_wm * root).mean()
            pos_err.append(torch.linalg.norm(st["pos"] - real["pos"], dim=-1).mean().detach())
        return loss / len(actions), torch.stack(pos_err)

    def target_error(self, a_mean: torch.Tensor, ref_len: torch.Tensor) -> torch.Tensor:
        """L_target per sample: the mean action's PD target lengths (eq. 11) against the
        reference's muscle lengths at the next policy step, squared, in units of muscle_scale.
        Not in MuscleVAE: a model-free imitation term whose gradient does not pass through the
        world model's answer to the action (on CPU-sized data that answer is almost blind to
        the action, wm_action_cos ~0.05, and the policy drifts without it). Aiming every
        muscle at the reference's length alone halves the untrained policy's joint error."""
        return (((hill.target_length(a_mean, self.tm.rest) - ref_len) / self.tm.rest / self.cfg.muscle_scale) ** 2).mean(-1)

    def imitation_loss(self, st: dict, ref: dict, ref_len: torch.Tensor):
        """(L_target, L_kl) of the posterior-mean latent at real states st (per-sample means)."""
        sn = self.state_norm(st)
        off = self.vae.posterior(torch.cat([sn, self.target_norm(st, ref)], -1))
        _, a_mean = self.act(sn, self.vae.prior(sn) + off)
        kl = (off ** 2).sum(-1) / (2 * self.cfg.sigma_prior ** 2)
        return self.target_error(a_mean, ref_len).mean(), kl.mean()

    def vae_rollout(self, st: dict, refs: list, ref_len: list, gen: torch.Generator, weights: dict):
        """TrainMuscleVAE's rollout through the frozen world model: returns the loss terms
        L_rec (eq. 14), L_kl (eq. 41), L_act (eq. 16) and L_target (target_error), each
        discounted by gamma^t."""
        cfg = self.cfg
        rec = kl = act = tgt = 0.0
        sig_p = cfg.sigma_prior
        norm = 0.0
        for t, ref in enumerate(refs):
            g = cfg.gamma ** t
            sn = self.state_norm(st)
            tn = self.target_norm(st, ref)
            mu_p = self.vae.prior(sn)
            off = self.vae.posterior(torch.cat([sn, tn], -1))
            z = mu_p + off + sig_p * torch.randn(mu_p.shape, generator=gen)
            a, a_mean = self.act(sn, z, gen)
            tgt = tgt + g * self.target_error(a_mean, ref_len[t]).mean()
            st, alpha_pd = self.world_step(st, a)
            # L_rec: skeleton features and muscle lengths of s^{t+1} against the reference
            ref_full = dict(ref, MA=st["MA"], MR=st["MR"], MF=st["MF"])
            e = self.state_error(st, ref_full, weights)
            _, length, _ = self.tm.kinematics(st["rot"], st["pos"], st["linvel"], st["angvel"])
            me = (((length - ref_len[t]) / self.tm.rest / cfg.muscle_scale) ** 2).mean(-1)
            rec = rec + g * (e + cfg.w_muscle * me).mean()
            kl = kl + g * ((off ** 2).sum(-1) / (2 * sig_p ** 2)).mean()  # eq. 41
            act = act + g * act_loss(alpha_pd, cfg).mean()
            norm += g
        return rec / norm, kl / norm, act / norm, tgt / norm
