"""The DAgger fit's minibatch step (training/dagger.py DaggerTrainer.fit: VAE prior, posterior,
policy, activation error, KL, torque term) timed on the CPU's threads and on CUDA, on random
data of a walk run's shapes. Prints steps/s for each."""
import sys
import time

import torch

from training.config import load_config
from training.dagger import ArmPattern, activation_error, build_model, TORQUE_UNIT
from training.networks import VAE


def main(config: str) -> None:
    cfg = load_config(config)
    m = build_model(cfg)
    N, B = 8000, cfg.dagger.fit_batch
    for device in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):
        g = torch.Generator(device=device).manual_seed(0)
        vae = VAE(m.S, m.T, m.M, cfg.latent_dim, cfg.vae_hidden, cfg.policy_hidden, cfg.experts, cfg.gate_hidden).to(device)
        opt = torch.optim.RAdam(vae.parameters(), lr=1e-3)
        X = torch.randn(N, m.S, device=device)
        T = torch.randn(N, m.T, device=device)
        Y = torch.rand(N, m.M, device=device)
        on = Y > 0.1
        pattern = ArmPattern(m.rig)  # the labels' moment arms as the fit keeps them
        arms = torch.randn(N, int(pattern.mask.sum()), device=device) * 0.01
        def step():
            i = torch.randint(0, N, (B,), generator=g, device=device)
            sn = X[i]
            mu_p = vae.prior(sn)
            off = vae.posterior(torch.cat([sn, T[i]], -1))
            z = mu_p + off + 0.3 * torch.randn(mu_p.shape, generator=g, device=device)
            a = vae.policy(torch.cat([sn, z], -1))
            e = activation_error(a, Y[i], on[i])
            torque = (pattern.apply(arms[i], e) ** 2).mean() / TORQUE_UNIT ** 2
            loss = (e ** 2).mean() + 0.01 * ((off ** 2).sum(-1)).mean() + 0.1 * torque
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(vae.parameters(), 1.0)
            opt.step()
            return loss
        for _ in range(20):
            step()
        if device == "cuda":
            torch.cuda.synchronize()
        t0, n = time.perf_counter(), 0
        while time.perf_counter() - t0 < 6.0:
            step().item() if n % 50 == 49 else step()
            n += 1
        if device == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        print(f"fit steps on {device} ({torch.get_num_threads()} threads): {n / dt:.1f} steps/s of batch {B}")


if __name__ == "__main__":
    main(sys.argv[1])
