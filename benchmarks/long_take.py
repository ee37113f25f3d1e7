"""Benchmark: does a long take hold? 10 minutes of the looped MASS walk under the tracking
controller at fatigue scale 1.

    python benchmarks/long_take.py [--seconds 600] [--window 60] [--json]

Reports the mean joint error of the last `window` seconds against the first (drift, or a
tiring gait), the peak resident memory and its growth along the take (a leak grows with
the take's length beyond what its recorded frames need, also reported),
the take file's size and the time to save and load it, and the speed. Runs at about real
time on the 2-core reference machine: the full 10 minutes take 10-15 minutes; --seconds 60
checks it works. A policy take is to be added once a policy is shipped.
"""
import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engine.fatigue import FatigueParams  # noqa: E402
from engine.rig import load_rig  # noqa: E402
from engine.take import _ARRAYS as ARRAYS, load_take, simulate  # noqa: E402

WALK = REPO.parent / "shared" / "reference" / "mass" / "motion" / "walk.bvh"


def rss_mb() -> float:
    """Current resident memory of this process, MB (Linux /proc; the peak elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return peak_mb()


def peak_mb() -> float:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux, bytes on macOS
    return kb / (2**20 if sys.platform == "darwin" else 2**10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=600.0, help="take length in simulated seconds (default 600)")
    ap.add_argument("--window", type=float, default=60.0, help="seconds compared at the start and the end (default 60)")
    ap.add_argument("--clip", default=str(WALK))
    ap.add_argument("--json", action="store_true", help="print the figures as JSON on the last line")
    args = ap.parse_args()
    if not args.seconds > 0:
        ap.error("--seconds must be > 0")
    window = min(args.window, args.seconds / 2)
    rig = load_rig()
    rss0 = rss_mb()
    samples = []  # (fraction, wall s, RSS MB) about every 1 % of the take

    def progress(fraction):
        samples.append((fraction, time.perf_counter() - t0, rss_mb()))
        if len(samples) % 10 == 0:
            print(f"  {100 * fraction:3.0f}%  {samples[-1][1]:7.1f} s wall  RSS {samples[-1][2]:7.1f} MB",
                  file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    take = simulate(rig, [(args.clip, args.seconds)], fatigue=FatigueParams(scale=1.0), progress=progress,
                    label="long take")
    wall = time.perf_counter() - t0
    rss_end = rss_mb()
    t, err = take.times, take.joint_err_deg
    T = float(take.meta["simulated_seconds"])
    first = err[(t > 0) & (t <= window)]
    last = err[t >= T - window]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "take.npz"
        ts = time.perf_counter()
        take.save(path)
        save_s = time.perf_counter() - ts
        size_mb = path.stat().st_size / 2**20
        ts = time.perf_counter()
        load_take(path)
        load_s = time.perf_counter() - ts
    # while simulating (the samples), not after: stacking the recorded frames copies them once
    half = [(f, rss) for f, _, rss in samples if f >= 0.5]
    minutes = (samples[-1][0] - half[0][0]) * T / 60 if half else 0.0
    growth = (samples[-1][2] - half[0][1]) / minutes if minutes > 0 else float("nan")  # MB per simulated minute
    s = dict(
        seconds=round(T, 2), planned_seconds=args.seconds, fell=take.meta["fell"], diverged=take.meta["diverged"],
        wall_s=round(wall, 1), realtime_factor=round(T / wall, 3), frames=take.num_frames,
        window_s=window, joint_err_deg_first=round(float(first.mean()), 3) if first.size else None,
        joint_err_deg_last=round(float(last.mean()), 3) if last.size else None,
        root_err_cm_first=round(float(take.root_err_cm[(t > 0) & (t <= window)].mean()), 3) if first.size else None,
        root_err_cm_last=round(float(take.root_err_cm[t >= T - window].mean()), 3) if last.size else None,
        MF_final_by_group=take.meta["summary"]["MF_final_by_group"],
        rss_start_mb=round(rss0, 1), rss_last_step_mb=round(samples[-1][2], 1) if samples else None,
        rss_end_mb=round(rss_end, 1), peak_rss_mb=round(peak_mb(), 1),
        rss_growth_mb_per_min_second_half=round(growth, 2),
        recorded_mb_per_min=round(sum(getattr(take, k).nbytes for k in ARRAYS) / 2**20 / max(T / 60, 1e-9), 2),
        take_file_mb=round(size_mb, 2), save_s=round(save_s, 2), load_s=round(load_s, 2),
    )
    print(f"long take: {s['seconds']:g} s of the looped walk at fatigue scale 1 ({s['frames']} frames), "
          f"{s['wall_s']:g} s wall = {s['realtime_factor']}x real time"
          + ("; FELL" if s["fell"] else "") + ("; DIVERGED" if s["diverged"] else ""))
    print(f"  joint error   first {window:g} s {s['joint_err_deg_first']} deg, last {window:g} s "
          f"{s['joint_err_deg_last']} deg (root {s['root_err_cm_first']} -> {s['root_err_cm_last']} cm)")
    print(f"  memory        RSS {s['rss_start_mb']} MB before, {s['rss_last_step_mb']} MB at the last step, "
          f"{s['rss_end_mb']} MB with the take built, peak {s['peak_rss_mb']} MB; in the second half it grows "
          f"{s['rss_growth_mb_per_min_second_half']} MB per simulated minute (the recorded frames: "
          f"{s['recorded_mb_per_min']} MB per minute)")
    print(f"  take file     {s['take_file_mb']} MB (saved in {s['save_s']} s, loaded in {s['load_s']} s)")
    print("  M_F final     " + ", ".join(f"{g} {v:.3f}" for g, v in s["MF_final_by_group"].items()))
    if args.json:
        print(json.dumps(s))


if __name__ == "__main__":
    main()
