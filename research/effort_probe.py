"""What a tracked clip costs the legs: the cheap first judge of a gait for a tired take.

    python research/effort_probe.py [--clip walk.bvh] [--seconds 6] [--activation-weight 1]
                                         [--rig human284] [--fatigue-scale 1] [--residual 1]

Plays the clip with the tracking controller (with the root residual by default, so the take
does not fall whatever the gait costs: ~2 s of computing for 6 s of walk) and prints the legs'
f0-weighted mean activation after the first second, against what 3CC-r sustains: held at M_A
= a, M_F settles at (F/R) a = 5 a (MuscleVAE's rates), which leaves M_A + M_R = 1 - 5 a of
the muscle for the peaks, so a gait whose peaks are p times its mean lasts only while
a <= 1 / (p + 5) (the endurance limit R / (F + R) = 1/6 is p = 1). Then the leg muscles that
work hardest, and those that add most to the mean. Measured in balance.md (twelfth session).
"""
import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from engine.control.coordination import CoordinationWeights  # noqa: E402
from engine.control.tracking import TrackingParams  # noqa: E402
from engine.fatigue import FatigueParams, endurance_limit  # noqa: E402
from engine.rig import GROUPS, load_rig  # noqa: E402
from engine.take import simulate  # noqa: E402

WALK = REPO.parent / "shared" / "reference" / "mass" / "motion" / "walk.bvh"


def legs_effort(take, rig, after_s: float = 1.0):
    """(per-frame legs' f0-weighted mean activation after `after_s`, per-muscle mean activation
    over the same frames, mask of the leg muscles)."""
    legs = np.isin(rig.muscle_group, [GROUPS.index("right_leg"), GROUPS.index("left_leg")])
    sel = take.times >= after_s
    a = take.activation[sel]
    w = rig.muscle_f0
    return (a[:, legs] * w[legs]).sum(1) / w[legs].sum(), a.mean(0), legs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clip", default=str(WALK))
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--activation-weight", type=float, default=1.0,
                    help="the solve's effort weight (TrackingParams.weights.activation; product: 1)")
    ap.add_argument("--rig", default="human284")
    ap.add_argument("--fatigue-scale", type=float, default=1.0)
    ap.add_argument("--residual", type=float, default=1.0)
    a = ap.parse_args(argv)
    rig = load_rig(a.rig)
    base = TrackingParams().weights
    params = TrackingParams(residual=a.residual, weights=CoordinationWeights(
        activation=a.activation_weight, smooth=base.smooth, residual=base.residual))
    fatigue = FatigueParams(scale=a.fatigue_scale)
    take = simulate(rig, [(a.clip, a.seconds)], fatigue=fatigue, params=params, progress=lambda f: None)
    eff, m, legs = legs_effort(take, rig)
    s = take.meta["summary"]
    print(f"{Path(a.clip).name}, {s['seconds']:.1f} s, activation weight {a.activation_weight:g}: joint error "
          f"{s['joint_err_deg_mean']:.2f} deg, residual {s['residual_mean_N']:.0f} N on average"
          + (f"; fell at {s['stopped_at_s']:.2f} s" if s["fell"] else ""))
    print(f"legs' effort {eff.mean():.3f} (f0-weighted mean activation after 1 s; 3CC-r sustains "
          f"{endurance_limit(fatigue):.3f} with nothing to spare)")
    top = np.argsort(-m * legs)[:10]
    print("hardest working:", ", ".join(f"{rig.muscle_names[i]} {m[i]:.2f}" for i in top))
    share = m * rig.muscle_f0 * legs / rig.muscle_f0[legs].sum()
    print("most of the mean:", ", ".join(f"{rig.muscle_names[i]} {share[i]:.3f}" for i in np.argsort(-share)[:8]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
