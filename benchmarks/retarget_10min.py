"""Benchmark: retarget a 10-minute, 120 fps clip (the MASS walk, looped) onto human284.

    python benchmarks/retarget_10min.py [--minutes 10]

Issue 4's target: under 10 s on the 2-core reference machine, BVH text parsing excluded
(it is timed separately here).
"""
import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from engine.motion import Retargeter, SourceMotion, read_bvh  # noqa: E402
from engine.rig import load_rig  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--clip", default=str(REPO.parent / "shared" / "reference" / "mass" / "motion" / "walk.bvh"))
    args = ap.parse_args()
    t = time.perf_counter()
    walk = read_bvh(args.clip)
    parse = time.perf_counter() - t
    frames = int(args.minutes * 60 * 120)
    n = int(np.ceil(frames / walk.num_frames))
    step = walk.root_translation[-1] - walk.root_translation[0]
    step[2] = 0
    root = (walk.root_translation[None] + np.arange(n)[:, None, None] * step).reshape(-1, 3)[:frames]
    long = SourceMotion(walk.skeleton, np.tile(walk.rotations, (n, 1, 1))[:frames], root, walk.frame_time)
    rig = load_rig()
    t = time.perf_counter()
    rt = Retargeter.build(rig, long.skeleton)
    ref = rt.to_model(long)
    to_model = time.perf_counter() - t
    t = time.perf_counter()
    rt.to_source(ref.root_pos, ref.local_rot, walk.frame_time, ref.meta.get("ground_offset_m", 0.0))
    back = time.perf_counter() - t
    print(f"{args.minutes:g} min at 120 fps ({frames} frames): source -> model {to_model:.2f} s, "
          f"model -> source {back:.2f} s (parsing the {walk.num_frames}-frame clip took {parse:.3f} s)")


if __name__ == "__main__":
    main()
