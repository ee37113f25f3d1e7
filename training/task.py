"""The high-level heading/speed policy (MuscleVAE sec. 4.1.2, appendix B.3, Algorithm 2).

pi_g(z|s, g) = N(mu_p(s) + mu_g(s, g), sigma_p^2): an offset of the frozen prior, trained
through the frozen world model and low-level policy on T_HL-step rollouts from buffer
states, with a random target direction and speed per rollout. Loss (eq. 44-45):
    sum_t [w_h |theta* - theta| + w_v |v* - v| / max(v*, 1) + L_fall] + w_z sum_t |mu_g|^2
theta: the facing direction, v: the root's horizontal speed, L_fall = w_fall max(0, h_fall - h).
"""
from __future__ import annotations

import math
import time

import numpy as np
import torch

from engine.control import policy as P

from .networks import MLP


def make_task_net(model, cfg) -> MLP:
    return MLP(model.S + P.GOAL_SIZE, list(cfg.task.hidden), cfg.latent_dim, last_gain=0.1)


def task_loss(model, task_net, st: dict, heading: torch.Tensor, speed: torch.Tensor, tc, gen):
    """Roll T_HL steps through the world model; returns (loss, mean |heading error| rad, mean speed)."""
    m = model
    loss = 0.0
    herr, spd = [], []
    for _ in range(tc.rollout):
        sn = m.state_norm(st)
        g = P.goal_features(st["rot"], heading, speed, torch)
        mu_g = task_net(torch.cat([sn, g], -1))
        z = m.vae.prior(sn) + mu_g + m.cfg.sigma_prior * torch.randn(mu_g.shape, generator=gen)
        a, _ = m.act(sn, z)
        st, _ = m.world_step(st, a)
        g1 = P.goal_features(st["rot"], heading, speed, torch)
        dtheta = torch.atan2(g1[..., 1], g1[..., 0]).abs()
        v = torch.sqrt((st["linvel"][..., 0, :2] ** 2).sum(-1) + 1e-8)
        fall = torch.relu(tc.fall_height - st["pos"][..., 0, 2])
        lg = tc.w_heading * dtheta + tc.w_speed * (speed - v).abs() / torch.clamp(speed, min=1.0)
        loss = loss + (lg + tc.w_fall * fall / 0.1).mean() + tc.w_z * (mu_g ** 2).sum(-1).mean()
        herr.append(float(dtheta.detach().mean()))
        spd.append(float(v.detach().mean()))
    return loss / tc.rollout, float(np.mean(herr)), float(np.mean(spd))


def train_task(trainer, iterations: int) -> None:
    """Algorithm 2 on the trainer's buffer; logs rows with task_loss (iteration = task step)."""
    from .buffer import window_state
    from .log import LOG_COLUMNS

    m, tc = trainer.model, trainer.cfg.task
    if not len(trainer.buffer.valid_starts(1)):  # a fresh run with --iterations 0 once ended in numpy's ValueError
        from engine.errors import SinewError

        raise SinewError("the heading task learns from the run's rollouts, and there are none yet: train at least "
                         "one iteration first")
    for p in list(m.vae.parameters()) + list(m.wm.parameters()):
        p.requires_grad_(False)
    try:
        while trainer.task_iteration < iterations and not trainer.stop.requested:
            t0 = time.perf_counter()
            starts = trainer.buffer.valid_starts(1)
            pick = starts[trainer.rng.integers(0, len(starts), tc.batch_size)]
            w = trainer.buffer.windows(pick, 1)
            st = window_state(w, 0)
            heading = torch.as_tensor(trainer.rng.uniform(-math.pi, math.pi, tc.batch_size), dtype=torch.float32)
            speed = torch.as_tensor(trainer.rng.uniform(tc.speed_min, tc.speed_max, tc.batch_size), dtype=torch.float32)
            loss, herr, spd = task_loss(m, m.task, st, heading, speed, tc, trainer.gen)
            trainer.opt_task.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.task.parameters(), trainer.cfg.grad_clip)
            trainer.opt_task.step()
            trainer.task_iteration += 1
            trainer.seconds += time.perf_counter() - t0
            row = {k: float("nan") for k in LOG_COLUMNS}
            row.update(iteration=trainer.task_iteration, seconds=trainer.seconds, task_loss=float(loss.detach()))
            trainer.log_row(row)
            trainer.last = {**trainer.last, "task_loss": float(loss.detach()), "task_heading_err_rad": herr,
                            "task_speed_mps": spd}
            if trainer.task_iteration % trainer.cfg.checkpoint_every == 0:
                trainer.save()
    finally:
        for p in list(m.vae.parameters()) + list(m.wm.parameters()):
            p.requires_grad_(True)
