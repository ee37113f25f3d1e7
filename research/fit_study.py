"""What limits the DAgger walk's fit on the learner's states? (issue 20)

    python research/fit_study.py RUN [--variants base,no_noise,...] [--eval-seconds 10]

RUN is a `sinew train` DAgger run folder (its checkpoint and labels.npz). Every variant fits
new networks on the run's labels with one episode of each round held out (the learner's own
states among them), and prints the RMS activation error (one-sided where the expert is off,
as the fit's) on the labels it saw and on the held-out ones, each with the mean latent the
product's "track" mode plays; then, fit again on every label, how long its policy walks alone
from the take's start (the run's evaluation: `eval_starts` starts, the first unperturbed).
A variant changes the fit only: the latent noise of each fit step (sigma_prior's 0.3, or
less), the steps, the policy network's width, the torque term. First it sets simpler
predictors beside them (`baselines`; `--baselines-only` stops there).
"""
import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from training.dagger import DaggerTrainer  # noqa: E402

# name: (config changes, dagger changes, latent noise of the fit steps; None = sigma_prior)
VARIANTS = {
    "base": ({}, {}, None),
    "no_noise": ({}, {}, 0.0),
    "noise_0.1": ({}, {}, 0.1),
    "steps_12k": ({}, {"fit_steps": 12000}, None),
    "no_noise_12k": ({}, {"fit_steps": 12000}, 0.0),
    "wide": ({"policy_hidden": [512, 512, 512]}, {}, None),
    "wide_no_noise_12k": ({"policy_hidden": [512, 512, 512]}, {"fit_steps": 12000}, 0.0),
    "no_torque": ({}, {"torque_weight": 0.0}, None),
}


def rms(tr, P, idx) -> float:
    """The fit's RMS activation error (one-sided where the expert is off) of predictions P."""
    Y, on = np.array(tr.data["label"])[idx], np.array(tr.data["on"])[idx]
    e = P[idx] - Y
    return float(np.sqrt((np.where(on, e, np.maximum(e, 0.0)) ** 2).mean()))


def baselines(tr, seen, held) -> None:
    """What simpler predictors make of the held-out labels: the seen labels' mean, ridge
    regression on the policy's inputs (state and target), the label of the nearest seen state,
    and, on the expert's own episodes (round 0, where the label before is the activation it
    played), the label of the step before."""
    X = np.concatenate([np.array(tr.data["state"]), np.array(tr.data["target"])], 1).astype(np.float64)
    Y = np.array(tr.data["label"], np.float64)
    tags = np.array(tr.data["episode"])
    mean = Y[seen].mean(0)
    print(f"  the seen labels' mean: {rms(tr, np.tile(mean, (len(Y), 1)), held):.4f}")
    mu, sd = X[seen].mean(0), X[seen].std(0) + 1e-3
    Xn = (X - mu) / sd
    for lam in (100.0, 1e3, 1e4):
        W = np.linalg.solve(Xn[seen].T @ Xn[seen] + lam * np.eye(X.shape[1]), Xn[seen].T @ (Y[seen] - mean))
        print(f"  ridge (lambda {lam:g}): seen {rms(tr, Xn @ W + mean, seen):.4f}, held out {rms(tr, Xn @ W + mean, held):.4f}")
    S = Xn[:, :len(tr.data["state"][0])]
    nearest = seen[np.argmin(((S[held][:, None, :] - S[seen][None]) ** 2).sum(-1), axis=1)]
    P = Y.copy()
    P[held] = Y[nearest]
    print(f"  the nearest seen state's label: {rms(tr, P, held):.4f}")
    follows = np.r_[False, np.all(tags[1:] == tags[:-1], axis=1)]  # a label with one before it, same episode
    expert = np.intersect1d(held, np.flatnonzero(follows & (tags[:, 0] == 0)))
    P = np.r_[Y[:1], Y[:-1]]
    print(f"  the label before (round 0, {len(expert)} labels): {rms(tr, P, expert):.4f}; "
          f"ridge on them: {rms(tr, Xn @ W + mean, expert):.4f}")


def fit_variant(tr, name, keep) -> tuple[float, float]:
    """Fit variant `name` on labels `keep` (all when None); returns (seconds, last steps' error)."""
    cfg_changes, d_changes, noise = VARIANTS[name]
    saved_cfg = {k: getattr(tr.cfg, k) for k in cfg_changes}
    saved_d = {k: getattr(tr.d, k) for k in d_changes}
    saved_data = tr.data
    for k, v in cfg_changes.items():
        setattr(tr.cfg, k, v)
    for k, v in d_changes.items():
        setattr(tr.d, k, v)
    if keep is not None:
        tr.data = {k: [v[i] for i in keep] for k, v in saved_data.items()}
    if not tr.d.torque_weight:
        tr.data.pop("arms", None)
    try:
        t0 = time.perf_counter()
        _, err, _ = tr.fit(latent_noise=noise)
        return time.perf_counter() - t0, err
    finally:
        tr.data = saved_data
        for k, v in saved_cfg.items():
            setattr(tr.cfg, k, v)
        for k, v in saved_d.items():
            setattr(tr.d, k, v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--eval-seconds", type=float, default=10.0)
    ap.add_argument("--no-eval", action="store_true", help="the fit's errors only (no simulation)")
    ap.add_argument("--baselines-only", action="store_true", help="the simpler predictors only (no fit)")
    ap.add_argument("--fractions", default="1",
                    help="fit on these fractions of the seen episodes (a learning curve in data), e.g. 0.25,0.5,1")
    args = ap.parse_args()
    tr = DaggerTrainer.resume(args.run)
    tr.d.eval_seconds = args.eval_seconds
    tags = np.array(tr.data["episode"])
    held = np.flatnonzero(tags[:, 1] == tags[:, 1].max())  # one episode a round
    seen = np.flatnonzero(tags[:, 1] != tags[:, 1].max())
    late = np.flatnonzero(tags[:, 0] > 0)
    print(f"{len(tags)} labels in {tr.round} rounds; held out {len(held)} (episode {tags[:, 1].max()} of each round)")
    print("variant | seen episodes | fit s | last steps' error | seen | held out | held out, learner's rounds | "
          "alone s (each start) | joint error deg")
    baselines(tr, seen, held)
    if args.baselines_only:
        return
    episodes = sorted({tuple(t) for t in tags[seen]})
    order = np.random.default_rng(0).permutation(len(episodes))
    for name, frac in itertools.product(args.variants.split(","), [float(f) for f in args.fractions.split(",")]):
        some = {episodes[i] for i in order[:max(1, int(round(frac * len(episodes))))]}
        sub = np.array([i for i in seen if tuple(tags[i]) in some])
        secs, last = fit_variant(tr, name, sub)
        e_seen, e_held = tr.label_error(sub), tr.label_error(held)
        e_late = tr.label_error(np.intersect1d(held, late))
        row = f"{name} | {len(some)} | {secs:.0f} | {last:.4f} | {e_seen:.4f} | {e_held:.4f} | {e_late:.4f}"
        if not args.no_eval and frac == 1:
            fit_variant(tr, name, None)
            evals = tr.play([dict(seed=[tr.cfg.seed, 7, k], seconds=tr.d.eval_seconds, learner=True,
                                   velocity_noise=tr.d.velocity_noise if k else 0.0, start=0, label=False)
                              for k in range(tr.d.eval_starts)])
            row += " | " + " / ".join(f"{t:.2f}" for t, _ in evals) + " | " + " / ".join(f"{e:.1f}" for _, e in evals)
        print(row, flush=True)


if __name__ == "__main__":
    main()
