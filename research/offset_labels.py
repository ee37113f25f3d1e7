"""Can a network predict the balance planner's offsets? (issue 47: the policy's action)

    python research/offset_labels.py gather --seconds 8 --seeds 0 1 2 3 --fatigue-scale 0 50 --out labels.npz
    python research/offset_labels.py fit labels.npz
    python research/offset_labels.py noise [--draws 8]

`gather` plays balanced takes of the bundled walk (the product's planner, in this process) and
keeps at every physics step the policy's observation (engine.control.policy: the state
features, fatigue included, and the target features of the reference as the tracker plays
it one step on) and the label: the offsets the planner's plan puts on the tracker's
reference at that step (engine/control/balance.py, offset_dofs). `fit` trains an MLP on the
takes of all seeds but one and reports, on the held-out take, the offsets' RMS error against
predicting their training mean, per offset and overall (the activations' labels were 0.09-0.14
against 0.15 for predicting nothing: docs/research/policy_from_expert.md). `noise` asks the
planner again, with other seeds and every candidate played to the end, at a decision every
second of a fresh take: how much its answer (the argmin's offsets, or the candidates' offsets
weighted by exp(-(C - C_min) / (lambda C_min)), MPPI-style) varies at one state against across
states. Results: docs/research/policy_from_expert.md (thirty-third session).
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


def gather(seconds: float, seed: int, scale: float) -> dict:
    from engine import fatigue as fat
    from engine.control import balance as bal
    from engine.control import policy as P
    from engine.control.tracking import TrackingParams
    from engine.physics.base import q_to_state
    from engine.rig import load_rig
    from engine.take import simulate

    rig = load_rig()
    W = P.fatigue_weights(rig)
    rows = dict(s=[], t=[], u=[], time=[])
    act = bal.BalancePlanner.act

    def observed(self, sim, state):
        out = act(self, sim, state)
        f = sim.fatigue
        rows["s"].append(P.state_features(state.pos, state.rot, state.linvel, state.angvel,
                                          P.fatigue_parts(f.MA, f.MR, f.MF, W)))
        q, v, _ = self.reference(sim.steps + 1)
        r = q_to_state(rig, q[None], v[None])
        rows["t"].append(P.target_features(state.pos, state.rot, r.pos[0], r.rot[0], r.linvel[0], r.angvel[0]))
        rows["u"].append(self.offsets(sim.steps).copy())
        rows["time"].append(sim.time)
        return out

    bal.BalancePlanner.act = observed
    try:
        take = simulate(rig, [(str(WALK), seconds)], fatigue=fat.FatigueParams(scale=scale), seed=seed, label="labels",
                        params=TrackingParams(residual=0.0, balance=bal.BalanceParams(workers=0)), progress=lambda f: None)
    finally:
        bal.BalancePlanner.act = act
    print(f"seed {seed}, fatigue scale {scale:g}: {len(rows['u'])} labels, fell {take.meta['summary']['fell']}", flush=True)
    return {k: np.array(v, dtype=np.float32) for k, v in rows.items()}


def fit(path: str, steps: int, seed: int) -> None:
    import torch

    d = np.load(path)
    X = np.concatenate([d["s"], d["t"]], axis=1)
    U, take = d["u"], d["take"]
    torch.manual_seed(seed)
    print(f"{len(U)} labels from {len(np.unique(take))} takes; offsets' RMS {np.sqrt((U ** 2).mean()):.4f} rad")
    errs, base = [], []
    for held in np.unique(take):
        tr, te = take != held, take == held
        mu, sd = X[tr].mean(0), X[tr].std(0) + 1e-6
        um, us = U[tr].mean(0), U[tr].std(0) + 1e-6
        x = torch.tensor((X - mu) / sd)
        y = torch.tensor((U - um) / us)
        net = torch.nn.Sequential(torch.nn.Linear(X.shape[1], 256), torch.nn.ELU(), torch.nn.Linear(256, 256),
                                  torch.nn.ELU(), torch.nn.Linear(256, U.shape[1]))
        opt = torch.optim.Adam(net.parameters(), lr=1e-3, weight_decay=1e-5)
        idx = np.flatnonzero(tr)
        for _ in range(steps):
            b = torch.tensor(np.random.default_rng().choice(idx, 256))
            loss = ((net(x[b]) - y[b]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            pred = net(x[te]).numpy() * us + um
        errs.append(np.sqrt(((pred - U[te]) ** 2).mean(0)))
        base.append(np.sqrt(((um - U[te]) ** 2).mean(0)))
        print(f"  held out take {held}: RMS {np.sqrt((errs[-1] ** 2).mean()):.4f} rad against "
              f"{np.sqrt((base[-1] ** 2).mean()):.4f} for the training mean", flush=True)
    e, b0 = np.mean(errs, 0), np.mean(base, 0)
    print("per offset (hips R/L, ankles R/L pitch roll; spine pitch roll), RMS / the mean's:")
    print("  " + " ".join(f"{a:.3f}/{b:.3f}" for a, b in zip(e, b0)))
    print(f"overall: {np.sqrt((e ** 2).mean()):.4f} against {np.sqrt((b0 ** 2).mean()):.4f}; "
          f"explained variance {1 - (e ** 2).sum() / (b0 ** 2).sum():.2f}")


def noise(draws: int, seconds: float = 5.0) -> None:
    from engine.control import balance as bal
    from engine.control.plan import MotionPlan, load_clip
    from engine.control.tracking import TrackingParams
    from engine.rig import load_rig
    from engine.simulation import Simulation

    rig = load_rig()
    ref, name = load_clip(rig, WALK)
    plan = MotionPlan(rig, [(ref, seconds + 3.0, name)])
    sim = Simulation(rig)
    q0, v0, _ = plan.sample(0)
    sim.start_at(q0, v0)
    params, b = TrackingParams(residual=0.0), bal.BalanceParams()
    planner = bal.BalancePlanner(sim, plan, params, b, seed=0)
    shadow = bal.Shadow(sim, plan, params, b)
    lams = (0.01, 0.03, 0.1)
    states = []
    for step in range(int(seconds * 120)):
        if step % 120 == 0 and step:  # a decision every second from 1 s on
            now = sim.steps
            planner.advance_pace(sim)
            snap = bal.snapshot(sim, planner)
            kept = planner.U, planner.plan_start, planner.rng
            per = []
            for seed in range(draws):
                planner.rng = np.random.default_rng([7, seed, step])
                plans = planner.candidates(now)
                C = []
                for U in plans:
                    shadow.load(snap)
                    C.append(shadow.play(U, now))
                C = np.array(C)
                first = np.array([bal.offsets_at(U, now, b.knot, now + b.knot // 2) for U in plans])
                row = dict(argmin=first[np.argmin(C)])
                for lam in lams:
                    w = np.exp(-(C - C.min()) / (lam * C.min()))
                    row[f"weighted, lambda {lam:g}"] = (w / w.sum()) @ first
                per.append(row)
            states.append(per)
            planner.U, planner.plan_start, planner.rng = kept
        sim.step(planner.act(sim, sim.state))
    print(f"{len(states)} states, {draws} draws each; offsets half a knot after the decision, RMS over the 10:")
    for key in states[0][0]:
        A = np.array([[r[key] for r in per] for per in states])  # (states, draws, offsets)
        within = np.sqrt(A.var(axis=1, ddof=1).mean())
        across = np.sqrt(A.mean(axis=1).var(axis=0, ddof=1).mean())
        signal = np.sqrt(max(across ** 2 - within ** 2 / draws, 0.0))  # the draws' mean still holds within / sqrt(draws)
        print(f"  {key}: within a state {within:.4f} rad; the state's own part {signal:.4f} "
              f"({signal ** 2 / (signal ** 2 + within ** 2):.0%} of the variance)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gather")
    g.add_argument("--seconds", type=float, default=8.0)
    g.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    g.add_argument("--fatigue-scale", type=float, nargs="+", default=[0.0])
    g.add_argument("--out", required=True)
    f = sub.add_parser("fit")
    f.add_argument("labels")
    f.add_argument("--steps", type=int, default=4000)
    f.add_argument("--seed", type=int, default=0)
    n = sub.add_parser("noise")
    n.add_argument("--draws", type=int, default=8)
    n.add_argument("--seconds", type=float, default=5.0)
    a = ap.parse_args()
    if a.cmd == "noise":
        noise(a.draws, a.seconds)
        return 0
    if a.cmd == "fit":
        fit(a.labels, a.steps, a.seed)
        return 0
    parts = [gather(a.seconds, seed, scale) for scale in a.fatigue_scale for seed in a.seeds]
    out = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    out["take"] = np.concatenate([np.full(len(p["u"]), i) for i, p in enumerate(parts)])
    np.savez(a.out, **out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
