"""Does the average of several balance planners' activations walk? (issue 20's DAgger labels)

    python research/ensemble_expert.py --planners 4 --seconds 8 [--seed 0]

label_noise.py found one planner label a state ~0.043 RMS noisy across seeds, as large as the
steering it carries. A smoother label is the mean of K planners' activations at each state
(K independent planners, each with its own seed, plan and warm starts, all reading the one
simulation). This plays that mean as the take's action (residual 0, product settings) and
prints how long it walks and its joint error: if it walks, it is a teacher whose labels a
network can fit; if not, averaging the sampler's draws is not a controller.
"""
import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engine import fatigue as fat  # noqa: E402
from engine.control.balance import BalanceParams, BalancePlanner  # noqa: E402
from engine.control.plan import MotionPlan, load_clip  # noqa: E402
from engine.control.tracking import TrackingParams  # noqa: E402
from engine.rig import load_rig  # noqa: E402
from engine.simulation import MuscleCommand, Simulation  # noqa: E402
from engine.kinematics import joint_errors_deg  # noqa: E402
from engine.take import FALL_ROOT_HEIGHT  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--planners", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fatigue-scale", type=float, default=1.0)
    ap.add_argument("--lowpass", type=float, default=0.0, metavar="SECONDS",
                    help="play the answer through a first-order low-pass of this time constant (a smoother "
                         "action than the expert's, as a network fit to its labels would give)")
    ap.add_argument("--smooth", type=float, default=None,
                    help="the tracker's smooth weight on (a - a_prev)^2 (product: 10; fit_study.py's question)")
    args = ap.parse_args()
    rig = load_rig().with_strength(3.0)
    ref, name = load_clip(rig, REPO.parent / "shared" / "reference" / "mass" / "motion" / "walk.bvh")
    plan = MotionPlan(rig, [(ref, args.seconds + 2.0, name)])
    sim = Simulation(rig, "mujoco", fatigue=fat.FatigueParams(scale=args.fatigue_scale))
    q0, v0, _ = plan.sample(0)
    sim.start_at(q0, v0)
    params = TrackingParams(residual=0.0)
    if args.smooth is not None:
        params = dataclasses.replace(params, weights=dataclasses.replace(params.weights, smooth=args.smooth))
    planners = [BalancePlanner(sim, plan, params, BalanceParams(), 1000 * args.seed + k)
                for k in range(args.planners)]
    errs, spread, change, last = [], [], [], None
    for i in range(int(args.seconds * 120)):
        acts = np.array([p.act(sim, sim.state).activation for p in planners])
        spread.append(np.sqrt(acts.var(0).mean()))
        a = acts.mean(0)
        if last is not None and args.lowpass > 0:
            a = last + (1.0 - np.exp(-sim.dt / args.lowpass)) * (a - last)
        if last is not None:
            change.append(np.sqrt(((a - last) ** 2).mean()))
        last = a
        sim.step(MuscleCommand(a))
        q = sim.physics.get_q()[0]
        errs.append(joint_errors_deg(rig, plan.space.diff(q, planners[0].reference(sim.steps)[0])))
        if sim.diverged_body() is not None or q[2] < FALL_ROOT_HEIGHT:
            print(f"fell at {sim.time:.2f} s", flush=True)
            break
        if i % 120 == 119:
            print(f"t = {sim.time:.1f} s  joint error {np.mean(errs[-120:]):.2f} deg  planners' spread "
                  f"{np.mean(spread[-120:]):.4f}", flush=True)
    print(f"{args.planners} planners averaged, seed {args.seed}: {sim.time:.2f} s of {args.seconds:g}, "
          f"joint error {np.mean(errs):.2f} deg, spread {np.mean(spread):.4f}, activation's change a step "
          f"{np.mean(change):.4f} (RMS), mean activation {np.mean(last):.3f}")


if __name__ == "__main__":
    main()
