"""Benchmark: issue 16's residual-free takes under the balance planner (`--balance`).

    python benchmarks/balance_takes.py [--takes fresh,mixamo,push_fwd,...] [--seconds S] [--seeds 0,1,...]
                                       [--horizon STEPS --tail STEPS --candidates N --extra N --halving N,N,N
                                        --feedback GAIN --widen N --widen-above X --keep-below X --antithetic 0|1]
                                       [--out FILE.md]

Each take starts at the clip's first frame with no root residual, as `sinew simulate
--balance` plays it (worker processes: one per core). Reports per take whether it fell
(when), its mean joint error, its forward speed against the reference's over the last
quarter, the report's push recovery and gait lines, and the computing time per simulated
second. --seeds plays each take once per seed (the planner's draws); --horizon and --tail
set the planner's rollout length and the steps its cost stands for beyond it (eq. 3 of
engine/control/balance.py), --candidates its candidates, --halving the plans it keeps after
each round of successive halving, --extra the plans added where the cheapest turns costly
(eq. 4 of engine/control/balance.py; 0: none), --widen and --widen-above the plans added
where the candidates' cheapest costs more than that many times the recent median (eq. 6),
--keep-below the share of that median under which the last plan is kept unsearched (eq. 7),
--antithetic whether the noisy plans come in mirrored pairs, and --feedback the swing-foot
placement's gain (engine/control/feedback.py), to measure a cheaper planner against the
product's. Slow: ~6-10 s a simulated second on the 2-core reference machine, so the full list
(60 s walk, three pushes, a Mixamo-style copy, the walk mirrored, played at 0.65 and at 1.25
of its pace, the tired walk and its 0.85x CMU-named copy, 10 s of the bundled sprint) takes
~40 minutes; results are in
docs/research/balance.md (tenth session on).
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from benchmarks.planner_flags import add_planner_flags, planner_from, search_line  # noqa: E402
from engine.fatigue import FatigueParams  # noqa: E402
from engine.rig import load_rig  # noqa: E402
from engine.take import check_balance, simulate  # noqa: E402
from engine.control.balance import default_workers  # noqa: E402
from engine.control.tracking import TrackingParams  # noqa: E402

MOTION = REPO.parent / "shared" / "reference" / "mass" / "motion"

# name: (clip maker, seconds, fatigue scale, pushes)
TAKES = {
    "fresh": ("walk", 60.0, 1.0, ()),
    "push_forward": ("walk", 10.0, 1.0, ("4:0,-120,0:0.2",)),
    "push_backward": ("walk", 10.0, 1.0, ("4:0,120,0:0.2",)),
    "push_sideways": ("walk", 10.0, 1.0, ("4:120,0,0:0.2",)),
    "mixamo_30fps_tpose": ("mixamo", 10.0, 1.0, ()),
    "mirrored": ("mirrored", 10.0, 1.0, ()),
    "slow_walk": ("slow", 10.0, 1.0, ()),
    "brisk_walk": ("brisk", 10.0, 1.0, ()),
    "tired": ("walk", 60.0, 50.0, ()),
    # the tired minute on the walk slowed to 0.85x, at 60 fps with CMU's bone names: the draw
    # that breaks cheaper searches (docs/research/balance.md, thirty-ninth session)
    "tired_slow_cmu": ("slow_cmu", 60.0, 50.0, ()),
    "sprint": ("run", 10.0, 1.0, ()),
}


def clip_path(kind: str, folder: Path) -> Path:
    if kind in ("walk", "run"):
        return MOTION / f"{kind}.bvh"
    from tests.clips import variant_file

    made = {"mixamo": dict(names="mixamo", fps=30, pose="T", pose_frames=1), "mirrored": dict(mirrored=True),
            "slow": dict(tempo=0.65), "brisk": dict(tempo=1.25), "slow_cmu": dict(tempo=0.85, fps=60, names="cmu")}  # the bundled walk transformed
    return variant_file(folder, "walk", **made[kind])


def speed(take, quarter=True) -> tuple[float, float]:
    """Horizontal speed of the pelvis and of the reference over the take's last quarter (m/s)."""
    t = take.times
    late = t >= t[-1] - (t[-1] - t[0]) / 4 if quarter else t >= 0
    span = max(t[late][-1] - t[late][0], 1e-9)
    go = lambda q: float(np.linalg.norm(q[late][-1, :2] - q[late][0, :2]) / span)
    return go(take.q), go(take.q_ref)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--takes", default=",".join(TAKES), help="comma-separated, of: " + ", ".join(TAKES))
    ap.add_argument("--seconds", type=float, default=None, help="override every take's length")
    ap.add_argument("--workers", type=int, default=default_workers())
    ap.add_argument("--seeds", default="0", help="comma-separated seeds, each take played once per seed")
    add_planner_flags(ap)
    ap.add_argument("--out", default=None, help="also write the table to this markdown file")
    a = ap.parse_args()
    from engine.commands import take_report

    rig = load_rig()
    balance, residual = check_balance("tracking", True, None, a.workers)
    balance = planner_from(a, balance)
    print(f"planner: horizon {balance.horizon} steps, tail {balance.tail}, {balance.candidates} candidates "
          f"(+{balance.widen} above {balance.widen_above:g}x the median, +{balance.extra} where hard, "
          f"the last plan kept below {balance.keep_below:g}x{', antithetic pairs' if balance.antithetic else ''}"
          f"{f', the hips yaw at {balance.hips_yaw:g}x' if balance.hips_yaw else ''}, "
          f"+{balance.rescue} up to {balance.rescue_sigma:g} rad where every plan falls), "
          f"feedback {balance.feedback:g}, halving {balance.halving}", flush=True)
    rows = ["| take | seed | seconds | result | joint error | speed, last quarter (reference) | "
            "rollout steps a step | s a simulated s |", "|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for name, seed in [(n, int(sd)) for n in a.takes.split(",") for sd in a.seeds.split(",")]:
            kind, seconds, scale, pushes = TAKES[name]
            seconds = a.seconds or seconds
            t0 = time.perf_counter()
            take = simulate(rig, [(clip_path(kind, Path(tmp)), seconds)], fatigue=FatigueParams(scale=scale),
                            params=TrackingParams(residual=residual, balance=balance), pushes=pushes,
                            progress=lambda f: None, seed=seed)
            wall = time.perf_counter() - t0
            s = take.meta["summary"]
            v, vr = speed(take)
            result = f"fell at {s['stopped_at_s']:.1f} s" if s["fell"] else "no fall"
            cost = wall / max(take.meta["simulated_seconds"], 1e-9)
            per_step = take.meta["balance"]["rollout_steps"] / max(take.meta["timing"]["steps"], 1)
            rows.append(f"| {name} | {seed} | {seconds:g} | {result} | {s['joint_err_deg_mean']:.1f} deg | "
                        f"{v:.2f} m/s ({vr:.2f}) | {per_step:.0f} | {cost:.0f} |")
            print(rows[-1], flush=True)
            print("    search     ", search_line(take.meta["balance"]), flush=True)
            for line in take_report.extra_lines(take):
                if line.startswith(("push", "gait")):
                    print("   ", line, flush=True)
    print("\n".join(rows))
    if a.out:
        Path(a.out).write_text("\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
