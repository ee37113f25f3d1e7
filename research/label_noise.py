"""How much of a balance-planner label is the sampler's draw (issue 20's DAgger labels)?

    python research/label_noise.py [--seeds 5] [--seconds 2.4]

The planner (product settings) walks the bundled walk fresh; every 0.2 s its checkpoint is
taken (the state a DAgger episode would be labelled in). At each, the planner is resumed
with `--seeds` different seeds and asked for its activation there (it replans: the state is on
a replan step), and the tracker with no offsets is asked too. Printed per state: the RMS over
muscles of the activations' spread across seeds (what no fit can learn from one label a state),
the RMS activation, and the RMS gap between the seeds' mean and the tracker's own activation
(how much the planner steers). Results: policy_from_expert.md, twenty-first session.
"""
import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engine import fatigue as fat  # noqa: E402
from engine.control.balance import BalanceParams, BalancePlanner  # noqa: E402
from engine.control.plan import MotionPlan, load_clip  # noqa: E402
from engine.control.tracking import TrackingController, TrackingParams  # noqa: E402
from engine.rig import load_rig  # noqa: E402
from engine.simulation import Simulation  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.4)
    args = ap.parse_args()
    rig = load_rig()
    ref, name = load_clip(rig, REPO.parent / "shared" / "reference" / "mass" / "motion" / "walk.bvh")
    plan = MotionPlan(rig, [(ref, args.seconds + 5.0, name)])
    sim = Simulation(rig, "mujoco", fatigue=fat.FatigueParams(scale=1.0))
    q0, v0, _ = plan.sample(0)
    sim.start_at(q0, v0)
    planner = BalancePlanner(sim, plan, TrackingParams(residual=0.0), BalanceParams(), 0)
    checkpoints = []
    for i in range(int(args.seconds * 120)):
        if i >= 24 and i % 24 == 0:
            checkpoints.append(planner.checkpoint(sim))
        sim.step(planner.act(sim, sim.state))
    rows = []
    for cp in checkpoints:
        acts = []
        for seed in range(args.seeds):
            planner.resume(sim, cp, seed)
            acts.append(planner.act(sim, sim.state).activation.copy())
        acts = np.array(acts)
        planner.resume(sim, cp, 0)
        planner.U[:] = 0.0
        alone = TrackingController.act(planner, sim, sim.state).activation
        rows.append((np.sqrt(acts.var(0).mean()), np.sqrt((acts.mean(0) ** 2).mean()),
                     np.sqrt(((acts.mean(0) - alone) ** 2).mean())))
        print(f"t = {cp['time']:.2f} s  seed spread {rows[-1][0]:.4f}  activation {rows[-1][1]:.3f}  "
              f"planner - tracker {rows[-1][2]:.4f}", flush=True)
    spread, size, steer = np.mean(rows, axis=0)
    print(f"mean over {len(rows)} states: seed spread {spread:.4f}, activation {size:.3f}, planner - tracker {steer:.4f}")


if __name__ == "__main__":
    main()
