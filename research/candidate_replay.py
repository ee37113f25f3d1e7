"""Which candidates could the balance planner stop playing sooner? (issue 45)

    python research/candidate_replay.py [--seconds 4] [--fatigue-scale 0 50] [--seed 0]

Plays a take of the bundled walk with the product's planner in this process, every
candidate played to the end of its horizon (no pruning: the take is the same, the choice
being the argmin either way), and keeps each candidate's per-step costs (eq. 1 of
engine/control/balance.py) at every decision. Then replays rules on those costs: the exact
pruning the product does (with and without the continued nominal), successive halving (keep
the best n by running cost at steps 24, 48, 72) and a bound against the nominal's running
cost. Per rule: rollout steps a decision, the share of decisions whose plan it keeps, and
the regret (the cost of the plan it picks over the best's, - 1). Results:
docs/research/balance.md, thirty-second session. A rule that changes the plan changes the
take: count it on the tired minute's draws (benchmarks/balance_takes.py) before it ships.
"""
import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
WALK = REPO.parent / "shared" / "reference" / "mass" / "motion" / "walk.bvh"

import numpy as np  # noqa: E402

CHECKPOINTS = (24, 48, 72)  # steps at which halving keeps the best candidates by running cost


def record(seconds: float, fatigue_scale: float, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """[(totals (K,), running costs (K, horizon)) per decision] of a take, candidates in the
    planner's order (the nominal first). A rollout that fell keeps its total from then on."""
    from engine import fatigue as fat
    from engine.control import balance as bal
    from engine.control.tracking import TrackingParams
    from engine.rig import load_rig
    from engine.take import simulate

    decisions, horizon = [], bal.BalanceParams().horizon
    play, act = bal.Shadow.play, bal.BalancePlanner.act

    def play_all_steps(self, U, start, bound=np.inf, resume=None, **rest):
        costs, cost = [], bal.rollout_cost

        def kept(sim, ctl):
            costs.append(cost(sim, ctl))
            return costs[-1]
        bal.rollout_cost = kept
        try:
            total = play(self, U, start, np.inf, resume, **rest)
        finally:
            bal.rollout_cost = cost
        if resume is not None:
            costs[:0] = resume.costs[start - resume.start:]
        running = np.full(horizon, total)
        running[:len(costs)] = np.cumsum(costs)
        decisions[-1].append((total, running))
        return total

    def deciding(self, sim, state):
        if sim.steps % self.balance.replan == 0:
            decisions.append([])
        return act(self, sim, state)

    bal.Shadow.play, bal.BalancePlanner.act = play_all_steps, deciding
    try:
        simulate(load_rig(), [(str(WALK), seconds)], fatigue=fat.FatigueParams(scale=fatigue_scale), seed=seed,
                 label="replay", params=TrackingParams(residual=0.0, balance=bal.BalanceParams(workers=0)))
    finally:
        bal.Shadow.play, bal.BalancePlanner.act = play, act
    return [(np.array([t for t, _ in d]), np.array([r for _, r in d])) for d in decisions if len(d) > 1]


def exact_steps(totals, running, continued: bool) -> int:
    """Rollout steps of the product's pruning: each candidate in order, stopped once its running
    cost passes the cheapest total before it; the nominal's 12 steps only if continued."""
    steps, bound = 0, np.inf
    for k in range(len(totals)):
        if k == 0 and continued:
            steps, bound = 12, totals[0]
            continue
        over = np.flatnonzero(running[k] > bound)
        steps += over[0] + 1 if len(over) else running.shape[1]
        bound = min(bound, totals[k])
    return steps


def halving_pick(totals, running, keep, projected: bool = False) -> tuple[int, int]:
    """(the plan picked, rollout steps) when the best keep[i] of the noisy and no-offset
    candidates by running cost go on at CHECKPOINTS[i], the nominal continued (12 steps).
    `projected`: ranked by the running cost plus the steps left at the mean cost of the last
    12 (eq. 3's tail, to the horizon)."""
    alive, steps, prev, H = list(range(1, len(totals))), 12, 0, running.shape[1]

    def rank(k, t):
        if not projected:
            return running[k, t - 1]
        return running[k, t - 1] + (H - t) * (running[k, t - 1] - running[k, t - 13]) / 12

    for t, n in zip(CHECKPOINTS + (H,), tuple(keep) + (None,)):
        steps += len(alive) * (t - prev)
        prev = t
        if n is not None:
            alive = sorted(alive, key=lambda k: rank(k, t))[:n]
    return min([0] + alive, key=lambda k: totals[k]), steps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--fatigue-scale", type=float, nargs="+", default=[0.0, 50.0])
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    for scale in a.fatigue_scale:
        decisions = record(a.seconds, scale, a.seed)
        best = [int(np.argmin(t)) for t, _ in decisions]
        print(f"fatigue scale {scale:g}: {len(decisions)} decisions; the plan chosen, by candidate: "
              f"{np.bincount(best, minlength=len(decisions[0][0])).tolist()}")
        for continued in (False, True):
            n = np.mean([exact_steps(t, r, continued) for t, r in decisions])
            print(f"  exact pruning{' with the continued nominal' if continued else ''}: {n:.0f} steps a decision")
        for keep, projected in [(k, p) for p in (False, True) for k in ((10, 6, 3), (8, 4, 2), (6, 3, 2))]:
            picks = [halving_pick(t, r, keep, projected) for t, r in decisions]
            kept = np.mean([p == b for (p, _), b in zip(picks, best)])
            regret = [t[p] / t[b] - 1 for (p, _), b, (t, _) in zip(picks, best, decisions)]
            name = f"{keep}{' projected' if projected else ''}"
            print(f"  halving to {name}: {np.mean([s for _, s in picks]):.0f} steps a decision, the plan kept at "
                  f"{kept:.0%} of decisions, regret {np.mean(regret):.3f} mean, {np.max(regret):.2f} at most")
    return 0


if __name__ == "__main__":
    sys.exit(main())
