"""Does a policy whose action is the planner's offsets balance the walk? (issue 47)

    python research/offset_policy.py expert --seeds 0 1 --seconds 6 --out round0_a.npz
    python research/offset_policy.py learn round0_*.npz --out policy.npz [--evaluate 4]
    python research/offset_policy.py dagger policy.npz --episodes 4 --seconds 6 --out round1_a.npz
    python research/offset_policy.py evaluate policy.npz --starts 8 --seconds 20

The learner: every `replan` steps (0.1 s) it maps what it observes - the policy's state and
fatigue features (engine.control.policy), the reference 0.1 s on as target features, and the
offsets it is playing now - to the first two knots of a plan (the offsets of
engine/control/balance.py offset_dofs now and 0.1 s on), and the tracker plays its reference
with the offsets linear in between and held after: the planner's action space, decided by a
map instead of a search (in 0.1 s a plan's first two knots are all that is played).

The teacher: the balance planner's candidates from the learner's (or its own) current
offsets held, every one played to the end of its horizon, and their cost-weighted mean plan
(weights exp(-(C - C_min) / (lambda C_min)), MPPI-style; lambda 0.1 halves the argmin's draw
noise: research/offset_labels.py). `expert` plays that teacher and keeps a label at each of
its decisions; `dagger` plays the learner from the clip's start with its velocities nudged and
keeps the teacher's label at every decision it meets until it falls. `learn` fits ridge
regression (lambda by held-out file) on every file given and plays the learner alone from the
start: seconds walked, joint error. The tracker alone falls after ~3 s. `dagger --after`
starts episodes later in the walk, after the product's planner has played the first seconds.
Results: docs/research/policy_from_expert.md (thirty-third session).
"""
import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
WALK = REPO.parent / "shared" / "reference" / "mass" / "motion" / "walk.bvh"

import numpy as np  # noqa: E402

from engine.control import balance as bal  # noqa: E402
from engine.control import policy as P  # noqa: E402

FALL_HEIGHT = 0.5  # m: the pelvis this low is a fall (engine.take.FALL_ROOT_HEIGHT)


class Walker:
    """A simulation of the bundled walk with the offset tracker on it, the teacher's shadow,
    and the observation and label of a decision."""

    def __init__(self, seconds: float, seed: int, lam: float, nudge: float = 0.0, clip=WALK):
        from engine.control.plan import MotionPlan, load_clip
        from engine.control.tracking import TrackingParams
        from engine.rig import load_rig
        from engine.simulation import Simulation

        self.rig = rig = load_rig()
        ref, name = load_clip(rig, clip)
        self.plan = MotionPlan(rig, [(ref, seconds + 2.0, name)])
        self.sim = Simulation(rig)
        q0, v0, _ = self.plan.sample(0)
        rng = np.random.default_rng([11, seed])
        v0 = v0 + nudge * rng.standard_normal(v0.shape) * (np.arange(len(v0)) >= 6)
        self.sim.start_at(q0, v0)
        params, self.b = TrackingParams(residual=0.0), bal.BalanceParams()
        self.ctl = bal.BalancePlanner(self.sim, self.plan, params, self.b, seed=seed)
        self.shadow = bal.Shadow(self.sim, self.plan, params, self.b)
        self.W = P.fatigue_weights(rig)
        self.lam = lam

    def observe(self) -> np.ndarray:
        from engine.physics.base import q_to_state

        sim, ctl, st = self.sim, self.ctl, self.sim.state
        f = sim.fatigue
        s = P.state_features(st.pos, st.rot, st.linvel, st.angvel, P.fatigue_parts(f.MA, f.MR, f.MF, self.W))
        q, v, _ = ctl.reference(sim.steps + self.b.replan)
        r = q_to_state(self.rig, q[None], v[None])
        t = P.target_features(st.pos, st.rot, r.pos[0], r.rot[0], r.linvel[0], r.angvel[0])
        return np.concatenate([s, t, ctl.offsets(sim.steps)])

    def teach(self) -> np.ndarray:
        """The teacher's plan from here (every candidate played; their weighted mean)."""
        ctl, now = self.ctl, self.sim.steps
        ctl.advance_pace(self.sim)
        snap = bal.snapshot(self.sim, ctl)
        plans = ctl.candidates(now)
        C = []
        for U in plans:
            self.shadow.load(snap)
            C.append(self.shadow.play(U, now))
        C = np.array(C)
        w = np.exp(-(C - C.min()) / (self.lam * C.min()))
        return np.tensordot(w / w.sum(), np.array(plans), axes=1)

    def follow(self, U: np.ndarray) -> None:
        """Play U (knots from now) until the next decision."""
        ctl, sim = self.ctl, self.sim
        ctl.U, ctl.plan_start = U, sim.steps
        for _ in range(self.b.replan):
            sim.step(bal.OffsetTracker.act(ctl, sim, sim.state))

    def held(self, y: np.ndarray) -> np.ndarray:
        """A learner's plan from its output (the first two knots, as a teacher's plan has
        them: the offsets now and 0.1 s on): linear between, the second held after."""
        u0, u1 = y.reshape(2, -1)
        U = np.repeat(u1[None], self.b.knots, axis=0)
        U[0] = u0
        return U

    def down(self) -> bool:
        return self.sim.physics.get_q()[0][2] < FALL_HEIGHT or self.sim.physics.fault


def expert(seeds, seconds, lam, out):
    X, Y = [], []
    for seed in seeds:
        w = Walker(seconds, seed, lam)
        t0 = time.perf_counter()
        while w.sim.time < seconds and not w.down():
            x, U = w.observe(), w.teach()
            X.append(x)
            Y.append(U[:2].ravel())
            w.follow(U)
        print(f"expert seed {seed}: {'fell' if w.down() else 'walked'} at {w.sim.time:.2f} s, {len(X)} labels so far, "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
    np.savez(out, X=np.array(X), Y=np.array(Y))


def fit(files):
    X = np.concatenate([np.load(f)["X"] for f in files])
    Y = np.concatenate([np.load(f)["Y"] for f in files])
    mu, sd = X.mean(0), X.std(0) + 1e-6
    Z = (X - mu) / sd
    ym = Y.mean(0)
    best = None
    rng = np.random.default_rng(0)
    fold = rng.integers(0, 5, len(X))
    for lam in (1e0, 1e1, 1e2, 1e3, 1e4):
        err = 0.0
        for k in range(5):
            tr, te = fold != k, fold == k
            Wk = np.linalg.solve(Z[tr].T @ Z[tr] + lam * np.eye(Z.shape[1]), Z[tr].T @ (Y[tr] - ym))
            err += ((Z[te] @ Wk + ym - Y[te]) ** 2).sum()
        ev = 1 - err / ((Y - ym) ** 2).sum()
        print(f"  ridge lambda {lam:g}: held-out explained variance {ev:.2f}")
        if best is None or ev > best[0]:
            best = (ev, lam)
    lam = best[1]
    W = np.linalg.solve(Z.T @ Z + lam * np.eye(Z.shape[1]), Z.T @ (Y - ym))
    print(f"{len(X)} labels; ridge lambda {lam:g}; labels' RMS {np.sqrt(((Y - ym) ** 2).mean()):.4f} rad about their mean")
    return dict(mu=mu, sd=sd, W=W, ym=ym)


def fit_mlp(files, steps: int = 4000):
    """A 2 x 256 ELU network on the same inputs (torch), its layers kept for act()."""
    import torch

    X = np.concatenate([np.load(f)["X"] for f in files])
    Y = np.concatenate([np.load(f)["Y"] for f in files])
    mu, sd = X.mean(0), X.std(0) + 1e-6
    ym, ys = Y.mean(0), Y.std(0) + 1e-6
    torch.manual_seed(0)
    x, y = torch.tensor((X - mu) / sd, dtype=torch.float32), torch.tensor((Y - ym) / ys, dtype=torch.float32)
    net = torch.nn.Sequential(torch.nn.Linear(X.shape[1], 256), torch.nn.ELU(), torch.nn.Linear(256, 256), torch.nn.ELU(),
                              torch.nn.Linear(256, Y.shape[1]))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, weight_decay=1e-4)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        b = torch.tensor(rng.integers(0, len(X), 128))
        loss = ((net(x[b]) - y[b]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"{len(X)} labels; MLP fit loss {loss.item():.3f} (units of the labels' spread)")
    layers = [m for m in net if isinstance(m, torch.nn.Linear)]
    out = dict(mu=mu, sd=sd, ym=ym, ys=ys)
    for i, m in enumerate(layers):
        out[f"w{i}"], out[f"b{i}"] = m.weight.detach().numpy().T.astype(float), m.bias.detach().numpy().astype(float)
    return out


def act(pol, x):
    z = (x - pol["mu"]) / pol["sd"]
    if "W" in pol:
        return z @ pol["W"] + pol["ym"]
    elu = lambda v: np.where(v > 0, v, np.expm1(np.minimum(v, 0)))
    h = elu(z @ pol["w0"] + pol["b0"])
    h = elu(h @ pol["w1"] + pol["b1"])
    return (h @ pol["w2"] + pol["b2"]) * pol["ys"] + pol["ym"]


def learner_take(pol, seconds, seed, nudge, lam=0.1, teach=False, after: float = 0.0, clip=WALK):
    """The learner from the clip's start, or from `after` seconds of the product's planner
    (its takes' later states); its decisions labelled by the teacher with `teach`."""
    from engine.kinematics import joint_errors_deg

    w = Walker(seconds, seed, lam, nudge, clip)
    X, Y, errs = [], [], []
    while w.sim.steps < round(after * 120 / w.b.replan) * w.b.replan and not w.down():
        w.sim.step(w.ctl.act(w.sim, w.sim.state))
    while w.sim.time < seconds and not w.down():
        x = w.observe()
        if teach:
            X.append(x)
            Y.append(w.teach()[:2].ravel())
        w.follow(w.held(act(pol, x)))
        q = w.sim.physics.get_q()[0]
        q_ref = w.ctl.reference(w.sim.steps)[0]
        errs.append(joint_errors_deg(w.rig, w.ctl.plan.space.diff(q, q_ref)))
    return w, X, Y, float(np.mean(errs)) if errs else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("expert")
    e.add_argument("--seeds", type=int, nargs="+", default=[0])
    e.add_argument("--seconds", type=float, default=6.0)
    e.add_argument("--lam", type=float, default=0.1)
    e.add_argument("--out", required=True)
    f = sub.add_parser("learn")
    f.add_argument("labels", nargs="+")
    f.add_argument("--out", required=True)
    f.add_argument("--evaluate", type=int, default=3)
    f.add_argument("--mlp", action="store_true", help="an MLP instead of ridge regression")
    f.add_argument("--fit-steps", type=int, default=4000, help="the MLP's Adam steps (batch 128)")
    f.add_argument("--seconds", type=float, default=10.0)
    v = sub.add_parser("evaluate")
    v.add_argument("policy")
    v.add_argument("--starts", type=int, default=8)
    v.add_argument("--seconds", type=float, default=20.0)
    v.add_argument("--clip", default=str(WALK), help="a BVH clip to walk (default: the bundled walk)")
    d = sub.add_parser("dagger")
    d.add_argument("policy")
    d.add_argument("--episodes", type=int, default=2)
    d.add_argument("--first-seed", type=int, default=100)
    d.add_argument("--seconds", type=float, default=6.0)
    d.add_argument("--nudge", type=float, default=0.05)
    d.add_argument("--after", type=float, nargs="+", default=[0.0],
                   help="episodes start after this many seconds of the product's planner (one value per episode, cycled)")
    d.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.cmd == "expert":
        expert(a.seeds, a.seconds, a.lam, a.out)
    elif a.cmd == "learn":
        pol = fit_mlp(a.labels, a.fit_steps) if a.mlp else fit(a.labels)
        np.savez(a.out, **pol)
        for k in range(a.evaluate):
            w, _, _, err = learner_take(pol, a.seconds, seed=k, nudge=0.0 if k == 0 else 0.05)
            print(f"  learner alone, start {k}: {'fell at' if w.down() else 'walked'} {w.sim.time:.2f} s, {err:.1f} deg", flush=True)
    elif a.cmd == "evaluate":
        pol = dict(np.load(a.policy))
        for k in range(a.starts):
            w, _, _, err = learner_take(pol, a.seconds, seed=k, nudge=0.0 if k == 0 else 0.05, clip=a.clip)
            print(f"  learner alone, start {k}: {'fell at' if w.down() else 'walked'} {w.sim.time:.2f} s, {err:.1f} deg", flush=True)
    else:
        pol = dict(np.load(a.policy))
        X, Y = [], []
        for k in range(a.episodes):
            after = a.after[k % len(a.after)]
            w, x, y, err = learner_take(pol, a.seconds, a.first_seed + k, a.nudge, teach=True, after=after)
            X += x
            Y += y
            print(f"dagger episode {k} (from {after:g} s): {'fell at' if w.down() else 'walked'} {w.sim.time:.2f} s, "
                  f"{len(X)} labels", flush=True)
        np.savez(a.out, X=np.array(X), Y=np.array(Y))
    return 0


if __name__ == "__main__":
    sys.exit(main())
