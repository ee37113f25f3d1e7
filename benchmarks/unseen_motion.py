"""Benchmark: motion nobody here tuned for (issue 44), played as a user plays it.

    python benchmarks/unseen_motion.py [--clips cmu_walk,kick,...] [--seconds own|S] [--seed N] [--out FILE.md]
                                       [--candidates N --widen N --widen-above X --keep-below X --antithetic 0|1]

Every clip of the corpus in ../shared (the MASS clips beyond the bundled walk, the CMU walk
and run, the Mixamo-named fixture) and transformed copies of them that stand for the defects
real captures have (another library's bone-aligned joint axes with position channels on every
joint, ZXY rotations and 30 fps; mirrored; retimed; exported in place; foot bones resting
turned 25 deg from the soles; walked along an arc; played backwards), each as `sinew simulate` plays it: no
root residual, the balance planner on (one worker per core). Per clip: the kind, whether it
fell or diverged (when), the mean joint error and root error against the clip, what the
reference checks found, what was done with a clip that is not a loop, and the computing time
per simulated second. `--seconds own` (the default) plays each clip for its own length; a
number plays every clip that long (looped where it loops best, or held). Slow: ~20-30 s a
simulated second on the 2-core machine, so the corpus at its own lengths takes ~15 minutes
and at 20 s ~2 hours. Results: README, "Motion from outside".
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

from benchmarks.planner_flags import add_planner_flags, planner_from, search_line  # noqa: E402
from engine.control.balance import default_workers  # noqa: E402
from engine.control.tracking import TrackingParams  # noqa: E402
from engine.fatigue import FatigueParams  # noqa: E402
from engine.motion import read_bvh, write_bvh  # noqa: E402
from engine.rig import load_rig  # noqa: E402
from engine.take import check_balance, simulate  # noqa: E402

SHARED = REPO.parent / "shared" / "reference"
MASS, MOCAP = SHARED / "mass" / "motion", SHARED / "mocap"

# name: (kind, how the clip is made)
CLIPS = {
    "walk": ("walk", lambda d: MASS / "walk.bvh"),
    "cmu_walk": ("walk", lambda d: MOCAP / "cmu_07_01_walk.bvh"),
    "cmu_walk_mirrored_60fps": ("walk", lambda d: _made(d, "cmu_walk_m60", MOCAP / "cmu_07_01_walk.bvh",
                                                       mirror=True, fps=60)),
    "walk_bone_axes_30fps": ("walk", lambda d: _made(d, "walk_aligned", MASS / "walk.bvh", aligned=True, fps=30)),
    "cmu_walk_bone_axes_30fps": ("walk", lambda d: _made(d, "cmu_walk_aligned", MOCAP / "cmu_07_01_walk.bvh",
                                                        aligned=True, fps=30)),
    "cmu_walk_in_place": ("walk", lambda d: _made(d, "cmu_walk_in_place", MOCAP / "cmu_07_01_walk.bvh", in_place=True)),
    "mixamo_fixture": ("other", lambda d: MOCAP / "mixamo_test_freebvh.bvh"),
    "mixamo_fixture_in_place": ("other", lambda d: _made(d, "mixamo_in_place", MOCAP / "mixamo_test_freebvh.bvh",
                                                       in_place=True)),
    "cmu_run": ("jog/run", lambda d: MOCAP / "cmu_009_09_01.bvh"),
    "run_in_place": ("jog/run", lambda d: _made(d, "run_in_place", MASS / "run.bvh", in_place=True)),
    "run_bone_axes_30fps": ("jog/run", lambda d: _made(d, "run_aligned", MASS / "run.bvh", aligned=True, fps=30)),
    "cmu_run_bone_axes_30fps": ("jog/run", lambda d: _made(d, "cmu_run_aligned", MOCAP / "cmu_009_09_01.bvh",
                                                          aligned=True, fps=30)),
    "walk_turning_100deg_left": ("walk", lambda d: _made(d, "walk_curved", MASS / "walk.bvh", cycles=4, curve=100.0)),
    "cmu_walk_turning_90deg_right": ("walk", lambda d: _made(d, "cmu_walk_curved", MOCAP / "cmu_07_01_walk.bvh",
                                                            curve=-90.0)),
    "cmu_walk_backwards": ("walk", lambda d: _made(d, "cmu_walk_backwards", MOCAP / "cmu_07_01_walk.bvh", reverse=True)),
    "walk_feet_rolled": ("walk", lambda d: _made(d, "walk_feet_rolled", MASS / "walk.bvh", rolled_feet=25.0)),
    "kick": ("kick", lambda d: MASS / "kick.bvh"),
    "kick_feet_rolled": ("kick", lambda d: _made(d, "kick_feet_rolled", MASS / "kick.bvh", rolled_feet=25.0)),
    "kick_bone_axes_30fps": ("kick", lambda d: _made(d, "kick_aligned", MASS / "kick.bvh", aligned=True, fps=30)),
    "dance": ("dance", lambda d: MASS / "dance.bvh"),
    "balance": ("balance", lambda d: MASS / "balance.bvh"),
    "pirouette": ("turn", lambda d: MASS / "pirouette.bvh"),
    "cartwheel": ("acrobatics", lambda d: MASS / "cart.bvh"),
    "backflip": ("acrobatics", lambda d: MASS / "backflip.bvh"),
}


def _made(folder: Path, name: str, source: Path, aligned=False, mirror=False, fps=None, in_place=False,
          rolled_feet=None, cycles=1, curve=None, reverse=False) -> Path:
    from tests import clips

    m = read_bvh(source)
    if cycles > 1:  # a cycle walked on, as a longer capture of it
        m = clips.loop(m, cycles)
    if curve:  # walked along an arc that turns it this much (deg; > 0 to its left)
        m = clips.curved(m, curve)
    if reverse:  # played backwards: a walk backwards (the CMU clip's T-pose frame 0 now ends it)
        m = clips.reverse(m)
    if rolled_feet:  # foot bones resting turned from the soles, mirrored (as the CMU captures')
        m = clips.rolled_bones(m, {"Character1_RightFoot": rolled_feet, "Character1_LeftFoot": -rolled_feet})
    if in_place:  # the root's horizontal travel taken out, as an "in place" export leaves it
        m = clips.in_place(m)
    if mirror:
        m = clips.mirror(m)
    if fps:
        m = clips.resample(m, fps)
    path = folder / f"{name}.bvh"
    if aligned:
        write_bvh(path, clips.bone_aligned(m), channel_order="ZXY")
    else:
        write_bvh(path, m)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clips", default=",".join(CLIPS), help="comma-separated, of: " + ", ".join(CLIPS))
    ap.add_argument("--seconds", default="own", help="'own' (each clip's length) or seconds for every clip")
    ap.add_argument("--workers", type=int, default=default_workers())
    ap.add_argument("--seed", type=int, default=0, help="the planner's draw (takes are chaotic: compare several)")
    add_planner_flags(ap)
    ap.add_argument("--out", default=None, help="also write the table to this markdown file")
    a = ap.parse_args()
    from engine.control.plan import load_clip
    from engine.motion.checks import summary_lines
    from engine.commands.take_report import loop_notes

    rig = load_rig()
    balance, residual = check_balance("tracking", True, None, a.workers)
    balance = planner_from(a, balance)
    rows = ["| clip | kind | seconds | result | joint error | root error | waited (ran on) | checks | not a loop "
            "| s a simulated s |", "|---|---|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.clips.split(","):
            kind, make = CLIPS[name]
            path = make(Path(tmp))
            ref, _ = load_clip(rig, path)
            seconds = ref.seconds if a.seconds == "own" else float(a.seconds)
            t0 = time.perf_counter()
            take = simulate(rig, [(path, seconds)], fatigue=FatigueParams(scale=1.0), seed=a.seed,
                            params=TrackingParams(residual=residual, balance=balance), progress=lambda f: None)
            wall = time.perf_counter() - t0
            s = take.meta["summary"]
            result = (f"diverged at {s['stopped_at_s']:.2f} s" if s["diverged"] else
                      f"fell at {s['stopped_at_s']:.1f} s" if s["fell"] else "no fall")
            found = len(take.meta["clips"][0].get("checks") or [])
            note = "; ".join(n for _, n in loop_notes(take)) or "-"
            cost = wall / max(take.meta["simulated_seconds"], 1e-9)
            pc = take.meta.get("pace") or {}  # the clip waiting for the body (engine/control/pace.py eq. 2)
            waited = f"{pc.get('waited_s', 0.0):.1f} s ({pc.get('ran_on_s', 0.0):.1f} s)"
            rows.append(f"| {name} | {kind} | {seconds:.1f} | {result} | {s['joint_err_deg_mean']:.1f} deg | "
                        f"{s['root_err_cm_mean']:.0f} cm | {waited} | {found} | {note} | {cost:.0f} |")
            print(rows[-1], flush=True)
            print("    search:", search_line(take.meta["balance"]), flush=True)
            for line in summary_lines(take.meta["clips"][0].get("checks"), most=2):
                print("    check:", line, flush=True)
    print("\n".join(rows))
    if a.out:
        Path(a.out).write_text("\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
