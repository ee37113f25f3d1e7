"""Teaching the MuscleVAE policy from an expert that balances: DAgger (Ross, Gordon and
Bagnell 2011) into the prior, posterior and policy networks. The expert (config
`dagger.expert`) is the stand controller (engine.control.stand, an LQR on the muscles that
holds a pose 120 s) or the balance planner ("balance": the tracking controller steered by
engine.control.balance, which walks a clip on the muscles alone).

Each round plays `episodes` from start states with perturbed velocities (states along the
expert's own take, one every `snapshot_every` s): round 0 the expert (its activations with
noise, so the states leave its own path), every later round the policy so far, the expert's
action played instead with probability beta_decay^round. Every visited state is labelled with
the expert's answer there: for a policy whose action is MuscleVAE's PD target (config `action`
"pd_target") as the target length whose muscle-space PD force (eq. 4) is the force the
expert's activation makes (engine.muscle.pd_action_for_force), so the policy keeps its 120 Hz
PD loop; for an "activation" policy as the activations themselves; for an "offset" policy
(engine.control.offset_policy: the planner's own action, decided every 0.1 s, `period` 12) as
the first two knots of the planner's candidates' weighted plan (eq. 5 of engine.control.balance,
from the plan the episode carries: the learner's own, or the teacher's), its episodes started
`after` seconds into the planner's own take, on each of the run's clips in turn. The balance planner answers
at a visited state as it would if it took over there: it plans from that state, on from its
own last plan (`dagger.smooth`: its tracker's weight on the change of activation a step, the
product's 10 by default). A round's episodes play in `workers` forked processes (the same
labels as in one). New networks are fit on everything gathered (`fit_steps` per round): the
force error in units of f0 (the activation error for an activation policy), one-sided where the expert leaves
a muscle off (any action that does not pull is right), with `torque_weight` the joint-torque
error those errors make through the moment arms, plus beta x the KL term (eq. 41). After each round the policy
alone plays from the start (`eval_starts` times: unperturbed, then with the start noise) and
the log says for how long on average and its joint error; the run keeps the round whose
policy lasted longest (DAgger's choice among its policies), and export writes that one.

    tr = DaggerTrainer(cfg, out_dir)    # cfg.dagger set, one clip (CLIP@SECONDS for "stand")
    tr.train()                          # returns the summary figures

Decisions are at 120 Hz (`period` 1): held for MuscleVAE's 20 Hz, the stand controller itself
falls within 1.5 s (docs/research/policy_from_expert.md). Every round's checkpoint keeps the
labels gathered so far (`labels.npz`: each with the round and episode that visited it), so a
stopped run resumes (`DaggerTrainer.resume`, `sinew train --out RUN --resume`) as if it had not
stopped, and a fit can be studied on a run's labels afterwards. The stand run takes about 12
minutes, the walk (configs/walk.toml) about an hour on two cores: a balance label costs ~0.2 s
of one core (the planner's rollouts).
"""
from __future__ import annotations

import csv
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from engine import fatigue as fat
from engine import muscle as hill
from engine.atomic import atomic_path, write_text
from engine.control import policy as P
from engine.control.plan import MotionPlan, load_clip
from engine.control.stand import is_stance, start_stance
from engine.errors import InputFileError, ParameterError, SinewError
from engine.interrupt import StopFlag, end_pool, forked_worker_signals, process_pool
from engine.muscle_step import PDGains
from engine.progress import Progress
from engine.push import Push, PushSchedule
from engine.rig import load_rig
from engine.simulation import MuscleCommand, Simulation
from engine.control.balance import BalanceParams, BalancePlanner, OffsetTracker
from engine.control.controller import Controller
from engine.control.offset_policy import KNOTS_OUT, observe, policy_plan
from engine.control.tracking import TrackingParams
from engine.kinematics import joint_errors_deg
from engine.take import is_down

from .config import out_of_time
from .model import Model
from .networks import VAE
from .torch_muscle import TorchMuscleSystem
from .trainer import CHECKPOINT, STD_FLOOR, policy_file_arrays

LOG = "log.csv"
LABELS = "labels.npz"  # every label gathered, beside the checkpoint
PLOT = "learning_curve.png"
TORQUE_UNIT = 10.0  # N m: the joint-torque error's unit in the fit (config dagger.torque_weight)
LOG_COLUMNS = ["round", "labels", "seconds", "beta", "episodes_stood_s", "new_label_err", "fit_loss", "force_err_f0",
               "torque_err_nm", "eval_stood_s", "eval_min_s", "eval_seconds", "eval_error_deg",
               "label_seconds", "fit_seconds",  # a round's wall time playing and labelling episodes, fitting
               "eval_stood_by_world_s", "labels_by_world"]  # an offset run's worlds (clip x fatigue scale), in order


def doomed_starts_dropped(starts: list, fell_step: int, every: int, margin_s: float = 1.0) -> list:
    """The start states (the first at step 0, then one every `every` steps) without those in
    the last `margin_s` seconds before the expert's own take fell at step `fell_step`; the
    first is always kept."""
    keep = sum(1 for k in range(len(starts)) if k == 0 or k * every <= fell_step - margin_s * 120)
    return starts[:keep]


def action_labels(sim, activation: np.ndarray, gains: PDGains) -> tuple[np.ndarray, np.ndarray]:
    """The expert's activations at the simulation's state as PD actions (eq. 11): the action
    whose PD force (eq. 4) equals the muscle force f0 (f_l f_v alpha + f_PE) the activation
    makes (eq. 22); and where the expert asks for activation at all (elsewhere the action is
    a lower bound: any longer target leaves the muscle off)."""
    s, rig = sim.state, sim.rig
    _, length, rate = sim.muscles.kinematics(s.rot, s.pos, s.linvel, s.angvel)
    lbar = hill.normalized_length(length, rig.muscle_rest_length, rig.muscle_lt, rig.muscle_lm)
    vbar = hill.normalized_velocity(rate, rig.muscle_rest_length, rig.muscle_lm)
    force = hill.muscle_force(activation, lbar, vbar, rig.muscle_f0)
    action = hill.pd_action_for_force(force, length, rate, rig.muscle_rest_length, gains.kp, gains.kd)
    return action, activation > 1e-6


def activation_error(action: torch.Tensor, label: torch.Tensor, on: torch.Tensor) -> torch.Tensor:
    """The activation error of an activation policy's output against the expert's activations
    (about the force error in units of f0 at the muscle's optimal length); where the expert
    leaves a muscle off only a positive output (a pull) is wrong (the engine clips to [0, 1])."""
    e = action - label
    return torch.where(on, e, torch.clamp(e, min=0.0))


def force_error(action: torch.Tensor, label: torch.Tensor, on: torch.Tensor, stiffness: float) -> torch.Tensor:
    """The PD force error, in units of f0, of `action` against the labels (action_labels):
    kp l_tpose / f0 = stiffness, so the force differs by stiffness x (label - action) f0.
    Where the expert leaves a muscle off only a target shorter than the label (a pull) is wrong."""
    e = stiffness * (action - label)
    return torch.where(on, e, torch.clamp(e, max=0.0))


class PlannerEnsemble(Controller):
    """The balance expert with smoother answers (config dagger.planners = K): K balance
    planners, each with its own seed, plan and solve warm start, steer the one simulation, and
    the action is the mean of their activations. One planner's answer at a state varies by
    ~0.043 RMS across seeds, as much as its steering away from the tracker alone (0.053), so
    a network fit to one label a state learns its seeds' average at best
    (research/label_noise.py); the mean of 4 planners walks the fresh walk as one does
    (research/ensemble_expert.py: 8 s, 3.4-3.6 deg, two seeds). K times the cost a label."""

    def __init__(self, sim, plan, k: int, seed: int, params: TrackingParams):
        self.planners = [BalancePlanner(sim, plan, params, BalanceParams(), [seed, j]) for j in range(k)]
        self.plan = plan

    def advance_pace(self, sim) -> None:
        for p in self.planners:
            p.advance_pace(sim)

    def reference_now(self, sim):
        return self.planners[0].reference_now(sim)

    def close(self) -> None:
        for p in self.planners:
            p.close()

    def act(self, sim, state) -> MuscleCommand:
        return MuscleCommand(np.mean([p.act(sim, state).activation for p in self.planners], axis=0))

    def checkpoint(self, sim) -> list[dict]:
        return [p.checkpoint(sim) for p in self.planners]

    def resume(self, sim, snaps: list[dict], seed) -> None:
        """Every planner back at its checkpoint (the same physics state), its noise drawn from
        (seed, its index)."""
        for j, (p, snap) in enumerate(zip(self.planners, snaps)):
            p.resume(sim, snap, [int(seed), j])

    def muscle_terms(self, sim, state):
        return self.planners[0].muscle_terms(sim, state)


class DaggerTrainer:
    """A DAgger run: the expert started on the config's held pose, its start states, the
    labels gathered so far, the networks, the log and the checkpoint in `out_dir`."""

    def __init__(self, cfg, out_dir, model: Model | None = None):
        if cfg.dagger is None:
            raise ParameterError("config", "DaggerTrainer needs a config with a [dagger] table")
        self.cfg, self.d = cfg, cfg.dagger
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        self.model = build_model(cfg) if model is None else model  # resume's: its networks loaded
        self.rig = rig = self.model.rig
        self.gains = self.model.tm.gains
        self.gen = torch.Generator().manual_seed(cfg.seed + 11)
        self.round = 0
        self.seconds = 0.0
        self.stop = StopFlag()
        self.last: dict = {}
        self.best: dict = {}  # the round whose policy stood longest alone (the latest of equals)
        self.episode_tag = (0, 0)  # (round, episode) of the episode being played: each label's "episode"
        self.data = {k: [] for k in ("state", "target", "label", "on", "episode")
                     + (("arms",) if self.d.torque_weight else ())}
        self.arms = ArmPattern(rig)  # each label's moment arms kept as their possible non-zeros

        self.W = P.fatigue_weights(rig)
        # one world a clip and fatigue scale (an offset run's clips x dagger.fatigue_scales; the
        # others' one clip at fatigue_scale): its plan, simulation, expert and start states.
        # `_use` makes one of them the trainer's
        self.worlds, self.world_notes = [], []
        for clip in cfg.clips:
            for scale in self.d.fatigue_scales or [cfg.fatigue_scale]:
                self._build_world(clip, scale, cfg.seed + len(self.worlds))  # each world its own draws
                self.worlds.append((self.plan, self.sim, self.expert, self.track, self.starts))
        self._use(0)

    def _use(self, world: int) -> None:
        self.plan, self.sim, self.expert, self.track, self.starts = self.worlds[world]

    def _build_world(self, clip, fatigue_scale: float, seed: int) -> None:
        """The plan, simulation, expert (its noise from `seed`), reference track and start
        states of one clip at one fatigue scale (as the trainer's own attributes). Where the
        expert's own take falls, the start states of its last second before the fall are
        dropped (episodes from them fall at once, and their labels would be dropped too)."""
        cfg, rig = self.cfg, self.rig
        ref, name = load_clip(rig, clip)
        longest = max(self.d.episode_seconds, self.d.eval_seconds) + self.d.snapshot_seconds + max(self.d.after)
        self.plan = MotionPlan(rig, [(ref, longest + 1.0, name)])
        self.sim = sim = Simulation(rig, cfg.backend, fatigue=fat.FatigueParams(scale=fatigue_scale),
                                    gains=self.gains)
        q0, v0, _ = self.plan.sample(0)
        if self.d.expert == "stand":
            sim.physics.set_q(q0, v0)
            sim.state = sim.physics.body_state()
            if not is_stance(sim, self.plan):
                raise ParameterError("clips", f"{clip}: the stand controller, the expert of a [dagger] "
                                     "run, needs a held pose standing on its feet, on the mujoco backend")
            self.expert = start_stance(sim, self.plan)
        else:  # the tracker steered by the balance planner, started as a take starts (engine.take.simulate)
            sim.start_at(q0, v0)
            params = TrackingParams(residual=0.0)
            params = dataclasses.replace(params, weights=dataclasses.replace(params.weights, smooth=self.d.smooth))
            self.expert = (BalancePlanner(sim, self.plan, params, BalanceParams(), seed) if self.d.planners == 1
                           else PlannerEnsemble(sim, self.plan, self.d.planners, seed, params))
        self.track = P.PlanTrack(rig, self.plan, self.d.period)
        self.starts = [self._snapshot()]
        every = max(int(round(self.d.snapshot_every * 120)), 1)
        if self.d.snapshot_seconds:  # the expert's own take, a start state every snapshot_every s (fatigue grows along it)
            for _ in range(int(self.d.snapshot_seconds * 120)):
                sim.step(self.expert.act(sim, sim.state))
                if self._fallen():
                    self.starts = doomed_starts_dropped(self.starts, sim.steps, every)
                    self.world_notes.append(f"{Path(str(clip)).name} at fatigue scale {fatigue_scale:g}: the expert's "
                                            f"own take fell at {sim.time:.1f} s; {len(self.starts)} start states kept")
                    print(f"DAgger: {self.world_notes[-1]}", file=sys.stderr, flush=True)
                    break
                if sim.steps % every == 0:
                    self.starts.append(self._snapshot())

    # ---- the simulation -------------------------------------------------------------------------
    def _snapshot(self):
        if self.d.expert == "balance":
            return self.expert.checkpoint(self.sim)
        return self.sim.snapshot()

    def _fallen(self) -> bool:
        """The pelvis down as a take judges it (engine.take.is_down, against the clip's), or the
        physics diverged (its labels would be wild)."""
        if self.sim.diverged_body() is not None:
            return True
        return is_down(float(self.sim.physics.get_q()[0][2]), float(self.plan.sample(self.sim.steps)[0][2]))

    def reset(self, rng, velocity_noise: float, start: int | None = None, world: int = 0) -> None:
        """To a start state of clip `world` (a random one unless `start`), every DOF's velocity
        perturbed."""
        self._use(world)
        sim = self.sim
        snap = self.starts[int(rng.integers(len(self.starts))) if start is None else start]
        if self.d.expert == "balance":
            self.expert.resume(sim, snap, rng.integers(2 ** 32))
        else:
            sim.restore(snap)
        q, qd = sim.physics.get_q()
        sim.physics.set_q(q, qd + velocity_noise * rng.standard_normal(len(qd)))
        sim.state = sim.physics.body_state()
        if self.d.expert != "balance":
            self.expert.design_for(sim)

    def policy_file(self) -> P.PolicyFile:
        arrays, meta = policy_file_arrays(self.model, self.cfg)
        return P.PolicyFile(meta, {k: np.asarray(v, np.float64) for k, v in arrays.items()})

    def episode(self, rng, seconds: float, learner: P.PolicyController | None, beta: float = 0.0,
                action_noise: float = 0.0, velocity_noise: float = 0.0, start: int | None = None,
                label: bool = True, push: bool = False, after: float = 0.0, world: int = 0) -> float:
        """Play one episode (the learner, or the expert where it is None or with probability
        beta per decision), labelling every decision's state, with a random push (`push`,
        when the config's push_force is set); returns the seconds stood. An offset policy's
        episode (`_offset_episode`) starts `after` seconds into the planner's own take, on the
        run's clip `world`."""
        if self.cfg.action == "offset":
            return self._offset_episode(rng, seconds, learner, beta, velocity_noise, start, label, push, after, world)
        self.reset(rng, velocity_noise, start)
        sim, period = self.sim, self.d.period
        t0, n0 = sim.time, len(self.data["label"])
        err_sum, err_n = 0.0, 0
        pushes = PushSchedule(self.rig, [self._random_push(rng, t0)] if push else [], sim.dt)
        action = None
        for i in range(int(round(seconds * 120))):
            pushes.apply(sim)
            if i % period == 0:
                s = sim.state
                play_expert = learner is None or rng.random() < beta
                try:
                    expert = self.expert.act(sim, s) if (label or play_expert) else None
                except (ArithmeticError, ValueError, np.linalg.LinAlgError):  # the expert's solve broke down
                    self._drop_before_fall(n0)
                    break
                if label:
                    self._label(expert.activation)
                if play_expert:
                    a = expert.activation
                    if action_noise:
                        a = np.clip(a + action_noise * rng.standard_normal(len(a)), 0.0, 1.0)
                    action = MuscleCommand(a, None, None)
                else:
                    action = learner.act(sim, s)
            sim.step(action)
            if not label:  # an evaluation
                err_sum, err_n = err_sum + self._joint_error(), err_n + 1
            if self._fell(n0):
                break
        return self._episode_end(t0, err_sum, err_n)

    def _offset_episode(self, rng, seconds: float, learner: P.PolicyFile | None, beta: float, velocity_noise: float,
                        start: int | None, label: bool, push: bool, after: float, world: int) -> float:
        """episode() for an offset policy (engine.control.offset_policy): from the start state
        the planner plays `after` seconds itself; then every `period` steps the plan its
        tracker follows is the teacher's (eq. 5 of engine.control.balance, from the plan carried
        now) or the learner's, and each decision is labelled with the teacher's first two knots."""
        self.reset(rng, velocity_noise, start, world)
        sim, ctl, d = self.sim, self.expert, self.d
        for _ in range(int(round(after * 120))):
            sim.step(ctl.act(sim, sim.state))
            if self._fallen():
                self.last_error_deg = float("nan")
                return 0.0
        t0, n0 = sim.time, len(self.data["label"])
        err_sum, err_n = 0.0, 0
        pushes = PushSchedule(self.rig, [self._random_push(rng, t0)] if push else [], sim.dt)
        for i in range(int(round(seconds * 120))):
            pushes.apply(sim)
            if i % d.period == 0:
                ctl.advance_pace(sim)
                teacher = learner is None or rng.random() < beta
                try:
                    U = ctl.teach(sim, d.weighting) if (label or teacher) else None
                except (ArithmeticError, ValueError, np.linalg.LinAlgError):  # a rollout's solve broke down
                    self._drop_before_fall(n0)
                    break
                if label:
                    self._label_offsets(U)
                ctl.U, ctl.plan_start = U if teacher else policy_plan(learner, sim, ctl, self.W), sim.steps
            sim.step(OffsetTracker.act(ctl, sim, sim.state))
            if not label:
                err_sum, err_n = err_sum + self._joint_error(), err_n + 1
            if self._fell(n0):
                break
        return self._episode_end(t0, err_sum, err_n)

    def _joint_error(self) -> float:
        """The mean joint error now against the reference as a take measures it (deg)."""
        q = self.sim.physics.get_q()[0]
        return joint_errors_deg(self.rig, self.plan.space.diff(q, self.plan.sample(self.sim.steps)[0]))

    def _fell(self, n0: int) -> bool:
        """Whether the episode (its labels from n0) ended in a fall; if so its last labels go."""
        if not self._fallen():
            return False
        self._drop_before_fall(n0)
        return True

    def _episode_end(self, t0: float, err_sum: float, err_n: int) -> float:
        """An episode's close: no push left acting, its mean joint error kept; the seconds stood."""
        self.sim.physics.set_external_force(np.zeros((self.rig.num_bodies, 3)))  # a push may still act
        self.last_error_deg = err_sum / max(err_n, 1)
        return self.sim.time - t0

    def _label_offsets(self, U: np.ndarray) -> None:
        """The decision's observation (offset_policy.observe) and the teacher's plan's first
        two knots as its label."""
        s, t = observe(self.sim, self.expert, self.W, self.d.period)
        self.data["state"].append(s.astype(np.float32))
        self.data["target"].append(t.astype(np.float32))
        self.data["label"].append(np.asarray(U[:KNOTS_OUT], np.float32).ravel())
        self.data["on"].append(np.ones(KNOTS_OUT * U.shape[1], bool))
        self.data["episode"].append(np.array(self.episode_tag, np.int32))

    def _error(self, action: torch.Tensor, label: torch.Tensor, on: torch.Tensor) -> torch.Tensor:
        """The fit's per-output error: offsets in units of action_scale, activations, or the PD
        force in units of f0."""
        cfg = self.cfg
        if cfg.action == "offset":
            return (action - label) / cfg.action_scale
        if cfg.action == "activation":
            return activation_error(action, label, on)
        return force_error(action, label, on, cfg.stiffness)

    def _drop_before_fall(self, n0: int) -> None:
        """The last states before a fall are past saving (the expert falls from far less): their
        labels (those of this episode, from n0) would spend the fit on what cannot be learnt."""
        keep = max(n0, len(self.data["label"]) - int(self.d.fall_margin_seconds * 120 / self.d.period))
        for v in self.data.values():
            del v[keep:]

    def _random_push(self, rng, t0: float) -> Push:
        """A shove at the pelvis for 0.2 s, 0.5-1.5 s into the episode: horizontal, in any
        direction, up to push_force newtons."""
        angle, size = rng.uniform(0.0, 2.0 * np.pi), rng.uniform(0.0, self.d.push_force)
        return Push(t0 + rng.uniform(0.5, 1.5), (size * np.cos(angle), size * np.sin(angle), 0.0), 0.2)

    def _label(self, activation: np.ndarray) -> None:
        s, f = self.sim.state, self.sim.fatigue
        fp = P.fatigue_parts(f.MA, f.MR, f.MF, self.W)
        rp, rr, rv, rw, _ = self.track.state_at(self.sim.time + self.d.period * self.sim.dt)
        if self.cfg.action == "activation":
            label, on = activation, activation > 1e-6
        else:
            label, on = action_labels(self.sim, activation, self.gains)
        self.data["state"].append(P.state_features(s.pos, s.rot, s.linvel, s.angvel, fp).astype(np.float32))
        self.data["target"].append(P.target_features(s.pos, s.rot, rp, rr, rv, rw).astype(np.float32))
        self.data["label"].append(label.astype(np.float32))
        self.data["on"].append(on)
        self.data["episode"].append(np.array(self.episode_tag, np.int32))
        if "arms" in self.data:  # the generalised force per unit of each muscle's error: A^T f0 for
            # a PD action's force error (units of the model's f0), A^T f0 f_l f_v for an activation's
            flfv, _, A, _ = self.expert.muscle_terms(self.sim, s)
            per_unit = self.rig.muscle_f0 * flfv if self.cfg.action == "activation" else self.rig.model_f0
            self.data["arms"].append(self.arms.pack(A.T * per_unit[None, :]))

    # ---- the fit ----------------------------------------------------------------------------------
    def _normalise(self) -> None:
        """State and target statistics from every label so far (each round's fit is new
        networks on all of them; statistics kept from the first round's labels alone put the
        learner's later states up to 80 standard deviations out)."""
        m = self.model
        for key in ("state", "target"):
            x = np.array(self.data[key], np.float64)
            setattr(m, f"{key}_mean", torch.as_tensor(x.mean(0), dtype=torch.float32))
            setattr(m, f"{key}_std", torch.as_tensor(np.maximum(x.std(0), STD_FLOOR), dtype=torch.float32))

    def fit(self, latent_noise: float | None = None) -> tuple[float, float]:
        """New networks fit with `fit_steps` minibatch steps on every label gathered (DAgger
        trains each round's policy afresh on the aggregate: a warm start carries one round's
        bad fit into the next); returns the loss, the RMS force error (f0; an activation policy's
        activation error) and the RMS generalised-force error (N m; nan without torque_weight)
        of the last 100 steps. The latent is sampled with sigma_prior's noise (eq. 41's
        posterior) unless `latent_noise` says otherwise (a study of the fit: research/fit_study.py)."""
        m, cfg, d = self.model, self.cfg, self.d
        torch.manual_seed(cfg.seed + 1000 * self.round)
        m.vae = VAE(m.S, m.T, m.A, cfg.latent_dim, cfg.vae_hidden, cfg.policy_hidden, cfg.experts, cfg.gate_hidden,
                    dropout=d.dropout)
        opt = torch.optim.RAdam(m.vae.parameters(), lr=d.lr)
        X = (torch.as_tensor(np.array(self.data["state"])) - m.state_mean) / m.state_std
        T = (torch.as_tensor(np.array(self.data["target"])) - m.target_mean) / m.target_std
        Y = torch.as_tensor(np.array(self.data["label"]))
        on = torch.as_tensor(np.array(self.data["on"]))
        arms = torch.as_tensor(np.array(self.data["arms"])) if d.torque_weight else None
        losses, errs, torques = [], [], []
        for k in range(d.fit_steps):
            i = torch.randint(0, len(X), (min(d.fit_batch, len(X)),), generator=self.gen)
            sn = X[i]
            mu_p = m.vae.prior(sn)
            off = m.vae.posterior(torch.cat([sn, T[i]], -1))
            noise = cfg.sigma_prior if latent_noise is None else latent_noise
            z = mu_p + off + noise * torch.randn(mu_p.shape, generator=self.gen)
            _, a = m.act(sn, z)
            e = self._error(a, Y[i], on[i])
            err = (e ** 2).mean()
            kl = ((off ** 2).sum(-1) / (2 * cfg.sigma_prior ** 2)).mean()  # eq. 41
            loss = err + cfg.beta * kl
            if arms is not None:  # the generalised-force error the force errors make (units of TORQUE_UNIT)
                torque = (self.arms.apply(arms[i], e) ** 2).mean() / TORQUE_UNIT ** 2
                loss = loss + d.torque_weight * torque
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.vae.parameters(), cfg.grad_clip)
            opt.step()
            if k >= d.fit_steps - 100:
                losses.append(loss.item())
                errs.append(err.item())
                torques.append(torque.item() if arms is not None else np.nan)
        m.vae.eval()  # every unit from here on (label_error; the export's numpy has no dropout)
        return float(np.mean(losses)), float(np.sqrt(np.mean(errs))), float(TORQUE_UNIT * np.sqrt(np.mean(torques)))

    def label_error(self, idx) -> float:
        """RMS error (as the fit's: force in f0, or activation) of the networks now at labels
        `idx`, with the mean latent the product's track mode plays: on the labels a round has
        just gathered, before they join the fit, how well the last policy generalises to the
        states it led to (DAgger's own held-out figure)."""
        m = self.model
        pick = lambda key: torch.as_tensor(np.array([self.data[key][i] for i in idx]))
        with torch.no_grad():
            X = (pick("state") - m.state_mean) / m.state_std
            T = (pick("target") - m.target_mean) / m.target_std
            z = m.vae.prior(X) + m.vae.posterior(torch.cat([X, T], -1))
            _, a = m.act(X, z)
            Y, on = pick("label"), pick("on")
            return float(torch.sqrt((self._error(a, Y, on) ** 2).mean()))

    # ---- rounds -----------------------------------------------------------------------------------
    def _learner(self) -> P.PolicyController | P.PolicyFile:
        """The policy so far as an episode plays it (an offset policy's file: the episode's
        tracker plays its plans)."""
        if self.cfg.action == "offset":
            return self.policy_file()
        return P.PolicyController(self.policy_file(), self.rig, "track", self.track)

    def play(self, jobs: list[dict]) -> list[tuple[float, float]]:
        """Play episodes (each a dict of `episode`'s keywords, its rng a seed, `learner` a
        flag), labels gathered in order; returns each one's (seconds stood, joint error).
        With `workers` > 1 they are played in forked processes, each a copy of this trainer
        as it is now (its networks, start states and expert): the same episodes, the same labels."""
        if self.d.workers <= 1 or len(jobs) <= 1:
            return [_episode_here(self, job) for job in jobs]
        from concurrent.futures.process import BrokenProcessPool

        global _TRAINER
        _TRAINER = self
        pool = process_pool(min(self.d.workers, len(jobs)), "fork", forked_worker_signals)
        try:
            results = list(pool.map(_episode_job, jobs))
        except BrokenProcessPool as e:
            raise SinewError(f"DAgger round {self.round + 1}: an episode's worker process ended ({e}); "
                             "the checkpoint of the rounds before it is kept") from None
        finally:
            _TRAINER = None
            end_pool(pool)
        out = []
        for figures, data in results:
            for k, v in data.items():
                self.data[k].extend(v)
            out.append(figures)
        return out

    def step(self) -> dict:
        """One DAgger round: episodes, labels, a fit, the policy alone from the start."""
        d, t_start = self.d, time.perf_counter()
        beta = 1.0 if self.round == 0 else d.beta_decay ** self.round
        n = len(self.worlds)  # an offset run's clips take the episodes in turn, each from every `after`
        where = lambda k: dict(world=k % n, after=d.after[(k // n) % len(d.after)]) if self.cfg.action == "offset" else {}
        jobs = [dict(seed=[self.cfg.seed, 5, self.round, k], episode=k, seconds=d.episode_seconds, learner=self.round > 0,
                     beta=beta, action_noise=d.action_noise if self.round == 0 else 0.0,
                     velocity_noise=d.velocity_noise, push=d.push_force > 0, **where(k))
                for k in range(d.episodes)]
        n0 = len(self.data["label"])
        stood = [t for t, _ in self.play(jobs)]
        t_fit = time.perf_counter()
        if not self.data["label"]:  # every episode fell at once: nothing to fit (the checkpoint before stays)
            raise SinewError(f"DAgger round {self.round + 1}: no labels to fit: every episode fell within "
                             f"dagger.fall_margin_seconds = {d.fall_margin_seconds} s of its start (labels that near "
                             "a fall are dropped); check that the expert holds the clip (`sinew simulate` it), or "
                             "shorten fall_margin_seconds")
        new = range(n0, len(self.data["label"]))
        new_err = self.label_error(new) if self.round > 0 and len(new) else float("nan")
        self._normalise()
        loss, err, torque = self.fit()
        fit_seconds = time.perf_counter() - t_fit
        # the policy alone from the start, unperturbed and perturbed: the round's figure, the
        # mean time stood (not labelled: a minute of quiet standing would outweigh the episodes)
        # (an offset run's clips in turn, each one's first start unperturbed)
        evals = self.play([dict(seed=[self.cfg.seed, 7, k], seconds=d.eval_seconds, learner=True,
                                 velocity_noise=d.velocity_noise if k >= n else 0.0, start=0, label=False,
                                 **({"world": k % n} if self.cfg.action == "offset" else {}))
                            for k in range(d.eval_starts)])
        eval_stood = float(np.mean([t for t, _ in evals]))
        stood_by_world, labels_by_world = self._by_world(evals, n0) if self.cfg.action == "offset" and n > 1 else ("", "")
        self.round += 1
        self.seconds += time.perf_counter() - t_start
        row = dict(round=self.round, labels=len(self.data["label"]), seconds=round(self.seconds, 1),
                   beta=round(beta, 4), episodes_stood_s=round(float(np.mean(stood)), 2),
                   new_label_err=round(new_err, 5),
                   fit_loss=round(loss, 6), force_err_f0=round(err, 5), torque_err_nm=round(torque, 3),
                   eval_stood_s=round(eval_stood, 2),
                   eval_min_s=round(min(t for t, _ in evals), 2), eval_seconds=d.eval_seconds,
                   eval_error_deg=round(float(np.mean([e for _, e in evals])), 2),
                   label_seconds=round(t_fit - t_start, 1), fit_seconds=round(fit_seconds, 1),
                   eval_stood_by_world_s=stood_by_world, labels_by_world=labels_by_world)
        self.last = row
        if eval_stood >= self.best.get("eval_stood_s", -1.0):
            self.best = dict(round=self.round, eval_stood_s=row["eval_stood_s"],
                             vae={k: v.clone() for k, v in self.model.vae.state_dict().items()})
        self._log(row)
        return row

    def _by_world(self, evals: list, n0: int) -> tuple[str, str]:
        """An offset run's round figures for each world, in order (the mean hides a world that
        fails): the mean seconds its evaluations stood ("-" where none played it) and the labels
        its episodes gave from label n0 on. Episode and evaluation k play world k % len(worlds),
        as `step` deals them."""
        n = len(self.worlds)
        stood = [[t for k, (t, _) in enumerate(evals) if k % n == w] for w in range(n)]
        episodes = np.array(self.data["episode"][n0:], np.int32).reshape(-1, 2)[:, 1]
        return (" ".join(f"{np.mean(t):.2f}" if t else "-" for t in stood),
                " ".join(map(str, np.bincount(episodes % n, minlength=n))))

    def train(self, rounds: int | None = None, stop=None) -> dict:
        """Run rounds up to `rounds` (the config's by default); `stop` (engine.interrupt.StopFlag)
        ends the run after the round under way, with the checkpoint of the policy so far."""
        total = self.d.rounds if rounds is None else int(rounds)
        self.stop = stop or self.stop
        write_text(self.out / "config.json", json.dumps(self.cfg.to_dict(), indent=1))
        self._piece_from = self.seconds  # max_seconds bounds this piece of the run
        with Progress("DAgger rounds", max(total, 1)) as bar:
            while self.round < total and not self.stop.requested and not self._out_of_time():
                self.step()
                bar.update(self.round)
                self.save()
                self.plot()
                if not bar.enabled:  # written to a log, not a terminal: a line a round (rounds take minutes)
                    print(self._round_line(total), file=sys.stderr, flush=True)
        return self.summary()

    def _round_line(self, total: int) -> str:
        r, b = self.last, self.best
        worlds = f" (by world: {r['eval_stood_by_world_s']} s; new labels {r['labels_by_world']})" \
            if r.get("eval_stood_by_world_s") else ""
        return (f"DAgger round {r['round']}/{total}: {r['labels']} labels; the policy alone stood {r['eval_stood_s']} s "
                f"of {r['eval_seconds']}{worlds} (best {b.get('eval_stood_s')} s, round {b.get('round')}); "
                f"{r['seconds']:.0f} s so far ({r['label_seconds']:.0f} s labelling, {r['fit_seconds']:.0f} s fitting "
                "this round)")

    def _out_of_time(self) -> bool:
        """Whether another round would take this piece of the run past max_seconds (out_of_time)."""
        return out_of_time(self.cfg.max_seconds, self.seconds, self._piece_from, self.round)

    def summary(self) -> dict:
        r = self.last
        return dict(rounds=self.round, labels=r.get("labels"), force_err_f0=r.get("force_err_f0"),
                    eval_stood_s=r.get("eval_stood_s"), eval_seconds=self.d.eval_seconds,
                    best_round=self.best.get("round"), best_eval_stood_s=self.best.get("eval_stood_s"),
                    seconds=round(self.seconds, 2), out=str(self.out))

    # ---- log, plot, checkpoint --------------------------------------------------------------------
    def _log(self, row: dict) -> None:
        path = self.out / LOG
        new = not path.exists() or self.round == 1
        columns = LOG_COLUMNS
        if not new:  # a resumed run's log keeps its own columns (older logs lack the newest)
            with open(path, newline="") as f:
                columns = next(csv.reader(f), None) or LOG_COLUMNS
        with open(path, "w" if new else "a", newline="") as f:
            w = csv.DictWriter(f, columns, extrasaction="ignore")
            if new:
                w.writeheader()
            w.writerow(row)

    def plot(self) -> Path:
        return plot_log(self.out / LOG, self.out / PLOT)

    def save(self) -> Path:
        """A checkpoint `sinew export-policy` reads: the networks (the last round's, and the
        best round's, which export writes) and their normalisation."""
        m = self.model
        ck = dict(format="sinew-train-checkpoint", version=1, config=self.cfg.to_dict(), iteration=self.round,
                  task_iteration=0, seconds=self.seconds, vae=m.vae.state_dict(), best=self.best,
                  norm=dict(state_mean=m.state_mean, state_std=m.state_std, target_mean=m.target_mean,
                            target_std=m.target_std), last=self.last)
        ck["gen"], ck["labels"] = self.gen.get_state(), len(self.data["label"])
        with atomic_path(self.out / LABELS) as tmp:  # first: a checkpoint never counts labels it lacks
            np.savez(tmp, **_packed(self.data, self.arms))
        with atomic_path(self.out / CHECKPOINT) as tmp:
            torch.save(ck, tmp)
        return self.out / CHECKPOINT

    @classmethod
    def resume(cls, run_dir, cfg=None, checkpoint: dict | None = None) -> "DaggerTrainer":
        """The run in `run_dir` as its last checkpoint left it: its config (of `cfg` only the
        schedule: rounds, workers, max_seconds), networks, best round, log and labels; the
        rounds it plays next are those it would have played had it not stopped. `checkpoint`:
        the run's checkpoint already read by load_checkpoint (not read again)."""
        from .config import config_from_dict
        from .trainer import load_checkpoint

        run_dir = Path(run_dir)
        ck = load_checkpoint(run_dir) if checkpoint is None else checkpoint
        saved = config_from_dict(ck["config"])
        if saved.dagger is None:
            raise ParameterError("resume", f"{run_dir}: not a DAgger run (its config has no [dagger] table)")
        if cfg is not None:
            saved.max_seconds = cfg.max_seconds
            if cfg.dagger is not None:
                saved.dagger.rounds, saved.dagger.workers = cfg.dagger.rounds, cfg.dagger.workers
        model = build_model(saved)
        load_networks(model, ck["vae"], run_dir / CHECKPOINT)  # before the trainer's start-up take
        labels = run_dir / LABELS
        pattern = ArmPattern(load_rig(saved.rig))  # a rig that cannot be read says so itself
        try:  # before the trainer, whose start-up take may run for minutes
            with np.load(labels) as f:
                data = _unpacked({k: f[k] for k in f.files}, pattern)
        except (OSError, ValueError, KeyError, IndexError) as e:
            raise InputFileError(labels, f"the run's labels cannot be read ({type(e).__name__}: {e}); "
                                 "train it again into a new --out") from None
        tr = cls(saved, run_dir, model)
        counts = {len(v) for v in data.values()}
        kept = int(ck.get("labels", min(counts, default=0)))  # the first such checkpoints lack it
        if set(data) != set(tr.data) or len(counts) != 1 or min(counts) < kept:
            raise InputFileError(labels, f"holds {sorted(data)} ({sorted(counts)} of each); this run's checkpoint "
                                 f"needs {kept} of {sorted(tr.data)}: train it again into a new --out")
        # labels only grow: those past the checkpoint's count (a run stopped between the two
        # files) belong to a round the resumed run plays again
        tr.data = {k: list(v[:kept]) for k, v in data.items()}
        m = tr.model
        for k, v in ck["norm"].items():
            setattr(m, k, v)
        tr.gen.set_state(ck["gen"])
        tr.round, tr.seconds, tr.last, tr.best = int(ck["iteration"]), float(ck["seconds"]), ck["last"], ck["best"] or {}
        return tr


class ArmPattern:
    """Where a label's moment arms (A^T f0, nv x M) are not zero: DOF n changes muscle m's length
    only when m spans n's joint, some of its waypoints on bodies that joint moves and some on
    bodies it does not. Elsewhere the muscle turns rigidly with the joint (or not at all) and
    its arm is zero up to round-off (the tracker's A: below 1e-12 of its largest entries; the
    root's six rows too, a muscle being a force inside the body). For the MASS rig 7 % of the
    entries, so each label keeps those alone (`pack`), and the fit multiplies them as they are
    (`apply`)."""

    def __init__(self, rig):
        touches = np.zeros((rig.num_bodies, rig.num_muscles), np.int64)  # body b carries a waypoint of m
        for k in range(rig.wp_body.shape[1]):
            touches[rig.wp_body[:, k], rig.wp_muscle] = 1
        moved = rig.subtree.astype(np.int64)
        spans = ((moved @ touches) > 0) & (((1 - moved) @ touches) > 0)  # joint j: waypoints on both sides
        self.mask = spans[np.repeat(np.arange(rig.num_bodies), rig.joint_dofs)]  # (nv, M)
        n, m = np.nonzero(self.mask)
        self.n, self.m = torch.as_tensor(n), torch.as_tensor(m)

    def pack(self, arms: np.ndarray) -> np.ndarray:
        """(nv, M) -> its entries inside the pattern, float32."""
        return arms[self.mask].astype(np.float32)

    def apply(self, packed: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        """The generalised forces (B, nv) that errors e (B, M) make through packed arms (B, K):
        sum over m of arms[b, n, m] e[b, m]."""
        n, m = self.n.to(e.device), self.m.to(e.device)  # the same tensors on the CPU
        out = torch.zeros(len(e), self.mask.shape[0], dtype=e.dtype, device=e.device)
        return out.index_add(1, n, packed * e[:, m])


def _packed(data: dict, pattern: ArmPattern) -> dict:
    """The labels as arrays for labels.npz; the moment arms ("arms") as kept, with their
    pattern ("arms_mask"), so a file reads back whatever pattern wrote it."""
    out = {k: np.array(v) for k, v in data.items()}
    if "arms" in out:
        out["arms_mask"] = pattern.mask
    return out


def _unpacked(arrays: dict, pattern: ArmPattern) -> dict:
    """labels.npz's arrays as the labels they were (_packed undone), the moment arms in this
    rig's pattern. Files written before it kept the entries non-zero in any label: those
    outside the pattern are round-off and dropped; larger ones mean another rig's labels,
    refused (ValueError)."""
    if "arms_mask" in arrays:
        mask, arms = arrays.pop("arms_mask"), arrays["arms"]
        if mask.shape != pattern.mask.shape:
            raise ValueError(f"moment arms of shape {mask.shape}, this rig's are {pattern.mask.shape}")
        if not np.array_equal(mask, pattern.mask):
            keep = pattern.mask[mask]  # the file's entries inside the pattern
            stray = np.abs(arms[:, ~keep]).max(initial=0.0)
            if stray > 1e-9 * max(np.abs(arms).max(initial=0.0), 1e-300):
                raise ValueError(f"moment arms up to {stray:.3g} where this rig's muscles span no joint")
            full = np.zeros((len(arms), int(pattern.mask.sum())), np.float32)
            full[:, np.flatnonzero(mask[pattern.mask])] = arms[:, keep]
            arrays["arms"] = full
    return arrays


_TRAINER: DaggerTrainer | None = None  # the trainer a forked episode process plays on


def _episode_here(tr: DaggerTrainer, job: dict) -> tuple[float, float]:
    """One episode of `job` (DaggerTrainer.play) on this process's trainer, labels appended
    to its data; (seconds stood, mean joint error in degrees)."""
    job = dict(job)
    rng = np.random.default_rng(job.pop("seed"))
    tr.episode_tag = (tr.round, job.pop("episode", 0))
    learner = tr._learner() if job.pop("learner") else None
    t = tr.episode(rng, job.pop("seconds"), learner, **job)
    return t, tr.last_error_deg


def _episode_job(job: dict):
    tr = _TRAINER
    for v in tr.data.values():  # the labels this episode adds, not the parent's
        v.clear()
    figures = _episode_here(tr, job)
    return figures, tr.data


def build_model(cfg) -> Model:
    """The run's networks and the rig constants they need (the config's rig, PD gains, fatigue)."""
    rig = load_rig(cfg.rig).with_strength(cfg.strength)
    gains = PDGains.for_rig(rig, cfg.stiffness, cfg.damping)
    return Model(rig, cfg, TorchMuscleSystem(rig, fat.FatigueParams(scale=cfg.fatigue_scale), 1.0 / 120.0, gains))


def load_networks(model: Model, state: dict, where) -> None:
    """The checkpoint's networks into `model`; a checkpoint whose sizes are not this engine's
    (an offset run from before the hips' yaw: 10 offsets, now 12) is refused naming `where`."""
    try:
        model.vae.load_state_dict(state)
    except RuntimeError as e:
        sizes = "; ".join(line.strip() for line in str(e).splitlines() if "size mismatch" in line)[:300]
        raise InputFileError(where, f"its networks do not fit this engine's ({sizes or e}): it was trained "
                             "with another action or observation size; train it again into a new --out") from None


def model_from_checkpoint(ck: dict, cfg, where="checkpoint") -> Model:
    """The networks of a DAgger checkpoint's best round, for export (no simulation, no expert)."""
    m = build_model(cfg)
    load_networks(m, (ck.get("best") or {}).get("vae", ck["vae"]), where)
    for k, v in ck["norm"].items():
        setattr(m, k, v)
    return m


def plot_log(log_path, out_path) -> Path:
    """Per round: how long the policy stands alone (and the episodes it played), and the fit's
    force error."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from engine.figures import save

    with open(log_path, newline="") as f:
        rows = list(csv.DictReader(f))
    get = lambda k: np.array([float(r[k]) for r in rows])
    r = get("round")
    errors = bool(rows) and "eval_error_deg" in rows[0]  # logs before the walk expert have no joint error
    fig, ax = plt.subplots(1, 3 if errors else 2, figsize=(16 if errors else 11, 4))
    ax[0].plot(r, get("eval_stood_s"), "o-", label="policy alone, from the start (mean)")
    ax[0].plot(r, get("eval_min_s"), "v:", label="policy alone, shortest")
    ax[0].plot(r, get("episodes_stood_s"), "s--", label="round's episodes (mean; each a few seconds)")
    ax[0].axhline(get("eval_seconds")[-1], color="0.6", lw=0.8)
    ax[0].set(xlabel="DAgger round", ylabel="seconds on its feet", title="On its muscles, before a fall")
    ax[0].legend()
    ax[1].semilogy(r, get("force_err_f0"), "o-", label="the fit, on its labels")
    if rows and "new_label_err" in rows[0]:  # older logs lack it
        ax[1].semilogy(r, get("new_label_err"), "s--", label="the last policy, on the round's new labels")
    ax[1].legend()
    ax[1].set(xlabel="DAgger round", ylabel="RMS error (f0; activation for an activation policy)",
              title="Fit to the expert's labels")
    if errors:
        ax[2].plot(r, get("eval_error_deg"), "o-")
        ax[2].set(xlabel="DAgger round", ylabel="mean joint error (deg)", title="Policy alone: joint error until it falls")
    return save(fig, out_path)
