"""Experiment (issue 20, not part of the product): can a learned policy balance if it is taught
by an expert that does? DAgger (Ross et al. 2011) from the stand controller
(engine/control/stand.py, an LQR on the muscles that holds a pose 120 s) into a small MLP:
policy state features (engine.control.policy.state_features, the MuscleVAE state with the
fatigue parts) -> activations, at 120 Hz.

Round 0 rolls out the expert with action noise from perturbed starts; every later round rolls
out the learner (the expert's action played with probability beta) and labels every visited
state with the expert's action; the MLP is refit on everything gathered. Then the learner
stands alone from the balanced pose, and the report says for how long.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python research/dagger_stand.py --frame 60 --rounds 6
"""
import argparse
import sys
import tempfile
import time
from pathlib import Path

import mujoco
import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "research"))

from engine import fatigue as fat  # noqa: E402
from engine.control import stand, tracking as tr  # noqa: E402
from engine.control.plan import MotionPlan, load_clip  # noqa: E402
from engine.control.policy import fatigue_parts, fatigue_weights, state_features  # noqa: E402
from engine.rig import load_rig  # noqa: E402
from engine.simulation import MuscleCommand, Simulation  # noqa: E402
from engine.take import FALL_ROOT_HEIGHT  # noqa: E402
from root_acceleration_tracking import held_pose_bvh  # noqa: E402


PERIOD = 1  # physics steps per decision (--period)
FULL_FATIGUE = False  # every muscle's M_F in the features too (--muscle-fatigue)


def _copied(sim) -> mujoco.MjData:
    """A copy of the simulation's MuJoCo data (a start state to reset to)."""
    d = mujoco.MjData(sim.physics.model)
    mujoco.mj_copyData(d, sim.physics.model, sim.physics.data)
    return d


def fallen(sim) -> bool:
    """The pelvis below the take's fall height (engine.take.FALL_ROOT_HEIGHT)."""
    return sim.physics.get_q()[0][2] < FALL_ROOT_HEIGHT


class Setup:
    """A held walk frame, a simulation standing in its balanced pose, the expert, and the
    start state to reset to."""

    def __init__(self, frame: int, scale: float):
        self.rig = rig = load_rig()
        ref, name = load_clip(rig, held_pose_bvh(frame, Path(tempfile.mkdtemp())))
        self.plan = MotionPlan(rig, [(ref, 2.0, name)])
        self.sim = sim = Simulation(rig, fatigue=fat.FatigueParams(scale=scale))
        q0, v0, _ = self.plan.sample(0)
        sim.physics.set_q(q0, v0)
        sim.state = sim.physics.body_state()
        self.expert = stand.StandController(sim, self.plan, tr.TrackingParams(residual=0.0))
        self.expert.start(sim)
        self.W = fatigue_weights(rig)
        self.snapshots = [(_copied(sim), sim.fatigue.copy(), 0)]  # start states: MuJoCo data, fatigue, step

    def record_snapshots(self, seconds: float) -> float:
        """Run the expert for `seconds` from the start, keeping a start state every second
        (fatigue grows along it); returns how long it stood."""
        sim, expert = self.sim, self.expert
        self.reset(np.random.default_rng(0), 0.0, start=0)
        for i in range(int(seconds * 120)):
            sim.step(expert.act(sim, sim.state))
            if sim.steps % 120 == 0:
                self.snapshots.append((_copied(sim), sim.fatigue.copy(), sim.steps))
            if fallen(sim):
                break
        return sim.time

    def reset(self, rng, qd_noise: float, start: int | None = None) -> None:
        """To a recorded start state (random one unless `start`), velocities perturbed."""
        sim = self.sim
        k = int(rng.integers(len(self.snapshots))) if start is None else start
        data, fatigue, steps = self.snapshots[k]
        mujoco.mj_copyData(sim.physics.data, sim.physics.model, data)
        sim.fatigue = fatigue.copy()
        sim.steps = steps
        q, qd = sim.physics.get_q()
        sim.physics.set_q(q, qd + qd_noise * rng.standard_normal(len(qd)))
        sim.state = sim.physics.body_state()
        self.expert.design_for(sim)  # as it was designed at that point of its take

    def features(self) -> np.ndarray:
        s, f = self.sim.state, self.sim.fatigue
        x = state_features(s.pos, s.rot, s.linvel, s.angvel, fatigue_parts(f.MA, f.MR, f.MF, self.W))
        return np.concatenate([x, f.MF]) if FULL_FATIGUE else x


class MLP(torch.nn.Module):
    def __init__(self, n_in, n_out, hidden):
        super().__init__()
        layers, n = [], n_in
        for h in hidden:
            layers += [torch.nn.Linear(n, h), torch.nn.ELU()]
            n = h
        layers.append(torch.nn.Linear(n, n_out))
        self.net = torch.nn.Sequential(*layers)
        self.register_buffer("mu", torch.zeros(n_in))
        self.register_buffer("sd", torch.ones(n_in))

    def forward(self, x):
        return torch.sigmoid(self.net((x - self.mu) / self.sd))


def fit(model, X, Y, steps, lr, batch=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    X, Y = torch.as_tensor(np.array(X), dtype=torch.float32), torch.as_tensor(np.array(Y), dtype=torch.float32)
    model.mu.copy_(X.mean(0))
    model.sd.copy_(X.std(0) + 1e-3)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for i in range(steps):
        idx = torch.randint(0, len(X), (min(batch, len(X)),), generator=g)
        loss = torch.nn.functional.mse_loss(model(X[idx]), Y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        return float(torch.nn.functional.mse_loss(model(X), Y))


def rollout(setup, rng, seconds, learner=None, beta=1.0, act_noise=0.0, qd_noise=0.0, label=True, start=None):
    """One episode; returns (features, expert labels, seconds stood)."""
    setup.reset(rng, qd_noise, start)
    t_start = setup.sim.time
    sim, expert = setup.sim, setup.expert
    X, Y = [], []
    for i in range(int(seconds * 120)):
        if i % PERIOD == 0:  # a decision; between decisions the activations are held
            x = setup.features()
            a_exp = expert.act(sim, sim.state).activation if (label or learner is None) else None
            if learner is None or rng.random() < beta:
                a = a_exp
            else:
                with torch.no_grad():
                    a = learner(torch.as_tensor(x, dtype=torch.float32)[None])[0].numpy().astype(float)
            if label:
                X.append(x)
                Y.append(a_exp)
            if act_noise:
                a = np.clip(a + act_noise * rng.standard_normal(len(a)), 0.0, 1.0)
        sim.step(MuscleCommand(a, None, None))
        if fallen(sim):
            break
    return X, Y, sim.time - t_start


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frame", type=int, default=60)
    ap.add_argument("--fatigue", type=float, default=0.0)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--episode-seconds", type=float, default=4.0)
    ap.add_argument("--eval-seconds", type=float, default=30.0)
    ap.add_argument("--hidden", type=lambda s: [int(x) for x in s.split(",")], default=[256, 256])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--qd-noise", type=float, default=0.1)
    ap.add_argument("--act-noise", type=float, default=0.03)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--final-seconds", type=float, default=60.0)
    ap.add_argument("--final-episodes", type=int, default=4)
    ap.add_argument("--final-noise", type=float, default=0.05)
    ap.add_argument("--save", default=None)
    ap.add_argument("--muscle-fatigue", action="store_true", help="the learner sees every muscle's M_F, not "
                    "only the 15 part means of MuscleVAE's appendix B.4")
    ap.add_argument("--period", type=int, default=1, help="physics steps per decision (6: MuscleVAE's 20 Hz); "
                    "the expert acts at the same rate")
    ap.add_argument("--snapshots", type=float, default=0.0, help="seconds of the expert's take to start "
                    "episodes from (a state every second; with --fatigue, increasingly tired)")
    a = ap.parse_args()
    global PERIOD, FULL_FATIGUE
    PERIOD, FULL_FATIGUE = a.period, a.muscle_fatigue
    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    rng = np.random.default_rng(a.seed)
    t0 = time.perf_counter()
    setup = Setup(a.frame, a.fatigue)
    print(f"set-up {time.perf_counter() - t0:.1f} s; expert summary {setup.expert.summary}", flush=True)
    if a.snapshots:
        stood = setup.record_snapshots(a.snapshots)
        print(f"expert's take for the start states: stood {stood:.1f} s of {a.snapshots:g}, "
              f"{len(setup.snapshots)} start states", flush=True)
    X, Y = [], []
    learner = None
    for r in range(a.rounds):
        t1 = time.perf_counter()
        beta = 1.0 if r == 0 else 0.5 ** r
        stood = []
        for e in range(a.episodes):
            x, y, t = rollout(setup, rng, a.episode_seconds, learner, beta, a.act_noise if r == 0 else 0.0, a.qd_noise)
            X += x
            Y += y
            stood.append(round(t, 2))
        learner = MLP(len(X[0]), len(Y[0]), a.hidden)
        mse = fit(learner, X, Y, a.steps, a.lr, seed=a.seed + r)
        _, _, alone = rollout(setup, rng, a.eval_seconds, learner, beta=0.0, label=False, start=0)
        print(f"round {r}: beta {beta:.3f}, episodes stood {stood}, {len(X)} samples, fit mse {mse:.2e}; "
              f"the learner alone stands {alone:.2f} s of {a.eval_seconds:g} ({time.perf_counter() - t1:.0f} s)",
              flush=True)
    # the last learner and the expert from the same perturbed starts
    for who, pol in (("learner", learner), ("expert", None)):
        stood = [round(rollout(setup, np.random.default_rng(100 + k), a.final_seconds, pol, beta=0.0, label=False,
                               qd_noise=a.final_noise, start=0)[2], 2) for k in range(a.final_episodes)]
        print(f"{who}: stood {stood} s of {a.final_seconds:g} (start velocity noise {a.final_noise} rad/s, m/s)",
              flush=True)
    if a.save:
        torch.save(learner.state_dict(), a.save)


if __name__ == "__main__":
    main()
