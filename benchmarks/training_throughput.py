"""Benchmark: the training package's throughput on this machine (issue 20's speed figures).

    python benchmarks/training_throughput.py [--config walk_cpu] [--dagger walk] [--planners 1,4]
                                             [--threads N] [--seconds 10] [--json]

World-model training (training/trainer.py, MuscleVAE Algorithm 1; `--config`'s networks,
buffer and batch):
  - collection: policy samples (20 Hz steps of the exported policy and the simulation) a
    second, one collector process;
  - world-model updates and VAE updates a second (one minibatch step each, on the buffer
    that collection filled).
DAgger (training/dagger.py; `--dagger`'s networks):
  - expert labels a second, one process: the stand controller (stand.toml) and the balance
    planner averaged over each count in `--planners` (the walk's expert; a label is one
    120 Hz decision, the expert's solve and the physics step);
  - fit steps a second (one minibatch step of DaggerTrainer.fit, torque term included).
Torch runs on `--threads` threads (default: as many as this process may use). Times are wall
time; on a loaded machine they fall. Prints a table and, with --json, one JSON line at the end.
"""
import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

CONFIGS = REPO / "training" / "configs"


def timed(fn, seconds: float, at_least: int = 3) -> float:
    """Calls of fn a second: one warm-up call, then calls until `seconds` have passed (at least `at_least`)."""
    fn()
    n, t0 = 0, time.perf_counter()
    while n < at_least or time.perf_counter() - t0 < seconds:
        fn()
        n += 1
    return n / (time.perf_counter() - t0)


def world_model_rates(config: str, seconds: float, threads: int) -> dict:
    from training.config import load_config
    from training.trainer import Trainer

    cfg = load_config(CONFIGS / f"{config}.toml")
    cfg.threads, cfg.workers = threads, 1
    with tempfile.TemporaryDirectory() as tmp:
        tr = Trainer(cfg, tmp)
        try:
            tr.collect()  # fills the buffer (buffer_size samples) and starts the collector
            tr._init_deltas()
            t0 = time.perf_counter()
            _, stats = tr.collect()  # samples_per_iter more, the collector warm
            samples = stats["samples"] / (time.perf_counter() - t0)
            wm = timed(tr.train_world_model, seconds)
            vae = timed(tr.train_vae, seconds)
        finally:
            tr.close()
    return dict(config=config, samples_per_s=samples, wm_updates_per_s=wm, vae_updates_per_s=vae,
                batch=cfg.batch_size, wm_rollout=cfg.wm_rollout, vae_rollout=cfg.vae_rollout)


def dagger_rates(config: str, planners: list[int], seconds: float, threads: int) -> dict:
    from training.config import load_config
    from training.dagger import DaggerTrainer

    out = {}
    for name, k in [("stand", None)] + [("balance", k) for k in planners]:
        cfg = load_config(CONFIGS / (f"{config}.toml" if name == "balance" else "stand.toml"))
        d = dataclasses.replace(cfg.dagger, workers=1, snapshot_seconds=0.0,
                                **({"planners": k} if k else {}))
        cfg.dagger, cfg.threads = d, threads
        with tempfile.TemporaryDirectory() as tmp:
            tr = DaggerTrainer(cfg, tmp)
            rng = np.random.default_rng(0)
            tr.episode(rng, 1 / 120, None)  # warm up: the expert's first solve
            n0, t0 = len(tr.data["label"]), time.perf_counter()
            while time.perf_counter() - t0 < seconds:  # episodes of 0.1 s from the start state
                tr.episode(rng, 0.1, None)
            labels = (len(tr.data["label"]) - n0) / (time.perf_counter() - t0)
            key = "stand" if k is None else f"balance_x{k}"
            out[f"{key}_labels_per_s"] = labels
            if name == "balance" and "fit_steps_per_s" not in out:
                tr._normalise()
                steps = 40
                tr.d = dataclasses.replace(tr.d, fit_steps=steps)
                t0 = time.perf_counter()
                tr.fit()
                out["fit_steps_per_s"] = steps / (time.perf_counter() - t0)
                out["fit_batch"] = cfg.dagger.fit_batch
    return dict(config=config, **out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="walk_cpu", help="world-model training config to time (default walk_cpu)")
    ap.add_argument("--dagger", default="walk", help="DAgger config whose networks and balance expert to time (default walk)")
    ap.add_argument("--planners", default="1,4", help="balance planners averaged, each count timed (default 1,4)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: the cores this process may use)")
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds of timing per figure (default 10)")
    ap.add_argument("--json", action="store_true", help="print one JSON summary as the last line")
    args = ap.parse_args()
    import torch

    threads = args.threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    planners = [int(x) for x in args.planners.split(",") if x.strip()]
    wm = world_model_rates(args.config, args.seconds, threads)
    print(f"world-model training ({args.config}, {threads} torch threads): collection {wm['samples_per_s']:.0f} "
          f"policy samples/s (one process); world-model updates {wm['wm_updates_per_s']:.1f}/s "
          f"(batch {wm['batch']} x {wm['wm_rollout']} steps); VAE updates {wm['vae_updates_per_s']:.1f}/s "
          f"(batch {wm['batch']} x {wm['vae_rollout']} steps)", flush=True)
    dg = dagger_rates(args.dagger, planners, args.seconds, threads)
    experts = ", ".join([f"stand controller {dg['stand_labels_per_s']:.1f}"]
                        + [f"balance planner x{k} {dg[f'balance_x{k}_labels_per_s']:.2f}" for k in planners])
    print(f"DAgger ({args.dagger}): expert labels/s, one process: {experts}", flush=True)
    if "fit_steps_per_s" in dg:
        print(f"DAgger fit: {dg['fit_steps_per_s']:.1f} steps/s (batch {dg['fit_batch']}, {threads} torch threads)")
    if args.json:
        print(json.dumps(dict(threads=threads, world_model=wm, dagger=dg)))


if __name__ == "__main__":
    main()
