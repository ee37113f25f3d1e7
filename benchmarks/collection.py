"""Benchmark: training data collection (training/collect.py), samples per second.

    python benchmarks/collection.py [--samples 240] [--workers 1,2] [--config walk_cpu]

A sample is one 20 Hz policy step: the exported policy (freshly initialised weights of the
config's networks) in numpy, then 6 physics steps of 1/120 s. Per worker count, the same
collection jobs run once with the step as it was before issue 18 (numpy muscle step,
MuJoCo's model without the lean settings) and once with the fast step (compiled muscles,
lean model), interleaved, and the ratio is printed. With several workers each runs its
own jobs in its own process; on a 2-core machine more than 2 workers cannot help.
Prints one JSON line at the end.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

BEFORE = dict(compiled=False, backend_options={"lean": False})


def rate(cfg: dict, arrays, meta, workers: int, samples: int) -> float:
    """Samples per second of `workers` processes collecting `samples` each (pool start-up excluded)."""
    from training.collect import CollectorPool

    pool = CollectorPool(cfg, workers)
    try:
        pool.collect(arrays, meta, [[0, w] for w in range(max(workers, 1))], [12] * max(workers, 1))  # warm up
        t0 = time.perf_counter()
        pool.collect(arrays, meta, [[1, w] for w in range(max(workers, 1))], [samples] * max(workers, 1))
        return samples * max(workers, 1) / (time.perf_counter() - t0)
    finally:
        pool.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=240, help="policy steps per worker (default 240 = 12 s)")
    ap.add_argument("--workers", default="0,1,2", help="worker counts (0: in this process; default 0,1,2)")
    ap.add_argument("--config", default="walk_cpu", help="training config whose networks and settings to use")
    ap.add_argument("--repeat", type=int, default=2, help="before/now pairs per worker count (default 2)")
    args = ap.parse_args()
    import torch

    from training.config import load_config
    from training.trainer import Trainer, policy_file_arrays

    torch.set_num_threads(1)
    cfg_path = REPO / "training" / "configs" / f"{args.config}.toml"
    tcfg = load_config(cfg_path)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:  # only its freshly initialised policy is used
        tr = Trainer(tcfg, tmp)
        arrays, meta = policy_file_arrays(tr.model, tcfg)
        wc = dict(rig=tcfg.rig, stiffness=tcfg.stiffness, damping=tcfg.damping, backend=tcfg.backend,
                  fatigue_scale=tcfg.fatigue_scale, clips=list(tcfg.clips), episode_seconds=tcfg.episode_seconds,
                  switch_prob=tcfg.switch_prob, fall_height=tcfg.fall_height, init_fatigue=tcfg.init_fatigue)
        tr.close()
    out = {}
    for w in [int(x) for x in args.workers.split(",")]:
        runs = {"before": [], "now": []}
        for _ in range(args.repeat):
            runs["before"].append(rate({**wc, **BEFORE}, arrays, meta, w, args.samples))
            runs["now"].append(rate(wc, arrays, meta, w, args.samples))
        med = {k: float(np.median(v)) for k, v in runs.items()}
        per_worker = {k: v / max(w, 1) for k, v in med.items()}
        out[w] = dict(samples_per_s=med, samples_per_s_per_worker=per_worker,
                      ratio=round(med["now"] / med["before"], 2))
        print(f"workers {w}: before {med['before']:7.1f} samples/s ({per_worker['before']:6.1f} per worker) | "
              f"now {med['now']:7.1f} samples/s ({per_worker['now']:6.1f} per worker) = {out[w]['ratio']}x",
              flush=True)
    print(json.dumps(dict(config=args.config, samples=args.samples, results=out)))


if __name__ == "__main__":
    main()
