"""MuscleVAE Algorithm 1: collect rollouts into a FIFO buffer, train the world model on T_W-step
windows, then the prior/posterior/policy through the frozen world model on T_VAE-step
windows; checkpoints that resume exactly; a CSV log and a learning-curve PNG.

    tr = Trainer(cfg, out_dir)          # or Trainer.resume(out_dir)
    tr.train(iterations)                # returns the summary figures
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from engine import fatigue as fat
from engine.control import policy as P
from engine.atomic import atomic_path, write_text
from engine.errors import InputFileError, SinewError
from engine.interrupt import StopFlag, children_ignore_sigint
from engine.muscle_step import PDGains
from engine.progress import Progress
from engine.rig import load_rig

from .buffer import Buffer, window_reference, window_state
from .collect import CollectorPool, fatigue_curve, load_clip, random_fatigue
from .config import TrainConfig, config_from_dict, out_of_time as config_out_of_time
from .log import EVAL_HORIZON, LOG, LOG_COLUMNS, PLOT, append_row, drop_rows_after, plot_log
from .model import Model
from .torch_muscle import TorchMuscleSystem

CHECKPOINT = "checkpoint.pt"
STD_FLOOR = 0.05


def _rng_state(rng: np.random.Generator) -> dict:
    st = rng.bit_generator.state
    return {"bit_generator": st["bit_generator"], "state": int(st["state"]["state"]),
            "inc": int(st["state"]["inc"]), "has_uint32": int(st["has_uint32"]), "uinteger": int(st["uinteger"])}


def _set_rng_state(rng: np.random.Generator, d: dict) -> None:
    rng.bit_generator.state = {"bit_generator": d["bit_generator"], "state": {"state": d["state"], "inc": d["inc"]},
                               "has_uint32": d["has_uint32"], "uinteger": d["uinteger"]}


def policy_file_arrays(model: Model, cfg: TrainConfig, extra_meta: dict | None = None) -> tuple[dict, dict]:
    """The policy file's arrays and meta for the model's current weights (export and workers)."""
    rig = model.rig
    arrays = model.vae.export()
    if model.task is not None:
        arrays.update(model.task.export("task"))
    arrays["norm.state_mean"] = model.state_mean.numpy()
    arrays["norm.state_std"] = model.state_std.numpy()
    arrays["norm.target_mean"] = model.target_mean.numpy()
    arrays["norm.target_std"] = model.target_std.numpy()
    arrays = {k: np.asarray(v, np.float32) for k, v in arrays.items()}
    meta = dict(format=P.FORMAT, version=P.FORMAT_VERSION,
                rig=dict(name=rig.name, fingerprint=P.rig_fingerprint(rig), bodies=rig.num_bodies,
                         muscles=rig.num_muscles),
                latent_dim=cfg.latent_dim, sigma_prior=cfg.sigma_prior, sigma_policy=cfg.sigma_policy,
                action_scale=cfg.action_scale, action=cfg.action,
                experts=cfg.experts, period=cfg.dagger.period if cfg.dagger else P.POLICY_PERIOD, dt=1.0 / 120.0,
                state_size=model.S, target_size=model.T, goal_size=P.GOAL_SIZE,
                fatigue_scale=cfg.fatigue_scale, strength=rig.strength, stiffness=cfg.stiffness, damping=cfg.damping,
                has_task=model.task is not None, **(extra_meta or {}))
    if cfg.action == "offset":  # the action space engine.control.offset_policy plays
        from engine.control.balance import BalanceParams
        from engine.control.offset_policy import offset_meta

        meta["offsets"] = offset_meta(rig, BalanceParams(), cfg.dagger.smooth)
    if model.task is not None and cfg.task is not None:  # the speeds heading mode may ask for
        meta["task"] = dict(speed_min=cfg.task.speed_min, speed_max=cfg.task.speed_max)
    return arrays, meta


class Trainer:
    def __init__(self, cfg: TrainConfig, out_dir, fresh: bool = True):
        self.cfg = cfg
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        self.rig = load_rig(cfg.rig).with_strength(cfg.strength)
        gains = PDGains.for_rig(self.rig, cfg.stiffness, cfg.damping)
        self.tm = TorchMuscleSystem(self.rig, fat.FatigueParams(scale=cfg.fatigue_scale), 1.0 / 120.0, gains)
        self.model = Model(self.rig, cfg, self.tm)
        if cfg.task is not None:
            from .task import make_task_net

            self.model.task = make_task_net(self.model, cfg)
        self.opt_wm = torch.optim.RAdam(self.model.wm.parameters(), lr=cfg.lr_wm)
        self.opt_vae = torch.optim.RAdam(self.model.vae.parameters(), lr=cfg.lr_vae)
        self.opt_task = (torch.optim.RAdam(self.model.task.parameters(), lr=cfg.task.lr)
                         if self.model.task is not None else None)
        self.buffer = Buffer(cfg.buffer_size, self.rig.num_bodies, self.rig.num_muscles)
        self.rng = np.random.default_rng([cfg.seed, 1])
        self.gen = torch.Generator().manual_seed(cfg.seed + 7)
        self.iteration = 0
        self.task_iteration = 0
        self.seconds = 0.0
        self.delta_ready = False
        self._pool = None
        self.stop = StopFlag()  # engine.interrupt: read between iterations (train's `stop`)
        self.last = {}
        self.weights = dict(height=cfg.w_height, pos=cfg.w_pos, rot=cfg.w_rot, vel=cfg.w_vel,
                            angvel=cfg.w_angvel, heading=cfg.w_heading)
        if fresh:
            self._init_normalisation()

    # ---- set-up ----------------------------------------------------------------------------
    def _init_normalisation(self) -> None:
        """State and target statistics from the clips (with random fatigue states)."""
        rig, m = self.rig, self.model
        rng = np.random.default_rng([self.cfg.seed, 2])
        curve = fatigue_curve()
        W = P.fatigue_weights(rig)
        S, T = [], []
        for c in self.cfg.clips:
            from engine.control.policy import ReferenceTrack

            tr = ReferenceTrack(rig, load_clip(c, rig))
            for k in range(tr.frames):
                f = random_fatigue(rng, rig, curve)
                fp = P.fatigue_parts(f.MA, f.MR, f.MF, W)
                S.append(P.state_features(tr.pos[k], tr.rot[k], tr.linvel[k], tr.angvel[k], fp))
                rp, rr, rv, rw, _ = tr.state_at((k + P.POLICY_PERIOD) / tr.fps)
                T.append(P.target_features(tr.pos[k], tr.rot[k], rp, rr, rv, rw))
        S, T = np.array(S), np.array(T)
        m.state_mean = torch.as_tensor(S.mean(0), dtype=torch.float32)
        m.state_std = torch.as_tensor(np.maximum(S.std(0), STD_FLOOR), dtype=torch.float32)
        m.target_mean = torch.as_tensor(T.mean(0), dtype=torch.float32)
        m.target_std = torch.as_tensor(np.maximum(T.std(0), STD_FLOOR), dtype=torch.float32)

    def _init_deltas(self) -> None:
        """World-model scales from the first fill: the output's (std of the per-step velocity
        changes) and the inputs' (the actions' spread, one number, and every wrench
        component's, floored at 1 N or 1 N m)."""
        starts = self.buffer.valid_starts(2)
        w = self.buffer.windows(starts[: 4096], 2)
        m = self.model
        d = m.deltas(window_state(w, 0), window_state(w, 1))
        m.delta_std = torch.clamp(d.std(0), min=1e-2)
        a = w["action"][:, 0]
        m.action_std = torch.clamp(a.std(), min=1e-6)
        with torch.no_grad():
            wrench = m.muscle_wrench(window_state(w, 0), a)[3]
        m.wrench_std = torch.clamp(wrench.std(0), min=1.0)
        self.delta_ready = True

    @property
    def pool(self) -> CollectorPool:
        if self._pool is None:
            cfg = self.cfg
            wc = dict(rig=cfg.rig, stiffness=cfg.stiffness, damping=cfg.damping, backend=cfg.backend,
                      fatigue_scale=cfg.fatigue_scale, clips=list(cfg.clips), episode_seconds=cfg.episode_seconds,
                      switch_prob=cfg.switch_prob, fall_height=cfg.fall_height, init_fatigue=cfg.init_fatigue)
            with children_ignore_sigint():  # a terminal's Ctrl-C stops this process, which stops them
                self._pool = CollectorPool(wc, cfg.workers)
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    # ---- one iteration of Algorithm 1 ----------------------------------------------------------
    def collect(self) -> tuple[np.ndarray, dict]:
        cfg = self.cfg
        n = cfg.buffer_size if self.buffer.count == 0 else cfg.samples_per_iter
        per = math.ceil(cfg.samples_per_iter / cfg.chunks_per_iter)
        sizes = [per] * (n // per) + ([n % per] if n % per else [])
        seeds = [[cfg.seed, self.iteration, j] for j in range(len(sizes))]
        arrays, meta = policy_file_arrays(self.model, cfg)
        results = self.pool.collect(arrays, meta, seeds, sizes)
        slots = []
        stats = dict(episodes=0, falls=0, err=0.0)
        for r in results:
            slots.append(self.buffer.add(r["data"]))
            stats["episodes"] += r["stats"]["episodes"]
            stats["falls"] += r["stats"]["falls"]
            stats["err"] += r["stats"]["track_err_m"] * len(r["data"]["has_next"])
        stats["track_err_cm"] = 100 * stats["err"] / n
        stats["samples"] = n
        return np.concatenate(slots), stats

    @torch.no_grad()
    def wm_error(self, slots: np.ndarray, horizon: int = EVAL_HORIZON, n: int = 256) -> float:
        """Mean body position error (cm) of the world model after `horizon` steps, on windows
        of the samples just collected (not yet trained on)."""
        starts = self.buffer.valid_starts(horizon + 1, slots)
        if len(starts) == 0:
            return float("nan")
        starts = starts[np.linspace(0, len(starts) - 1, min(n, len(starts))).astype(int)]
        w = self.buffer.windows(starts, horizon + 1)
        _, err = self.model.wm_loss([window_state(w, t) for t in range(horizon + 1)],
                                    [w["action"][:, t] for t in range(horizon)])
        return float(100 * err[-1])

    @torch.no_grad()
    def wm_action_fidelity(self, n: int = 24) -> float:
        """Does the world model answer a change of action as the simulator does? Mean cosine
        between the predicted and the real change of every body's velocities (linear and
        angular, one policy step) when the action moves by exploration-sized noise
        (action_scale x sigma_policy per muscle), over n states of tracking rollouts
        (Collector.action_response). 1: same direction; ~0: the model ignores the action,
        and the policy's gradients through it carry no information."""
        cfg, m = self.cfg, self.model
        arrays, meta = policy_file_arrays(m, cfg)
        r = self.pool.action_response(arrays, meta, n, cfg.action_scale * cfg.sigma_policy, [cfg.seed, 3, self.iteration])
        T = lambda v: torch.as_tensor(v, dtype=torch.float32)
        st = {k: T(r[k]) for k in ("pos", "rot", "linvel", "angvel", "MA", "MR", "MF")}
        w0, _ = m.world_step(st, T(r["action"]))
        w1, _ = m.world_step(st, T(r["action"] + r["delta"]))
        pred = torch.cat([(w1["linvel"] - w0["linvel"]).flatten(1), (w1["angvel"] - w0["angvel"]).flatten(1)], 1)
        real = torch.cat([T(r["dlinvel"]).flatten(1), T(r["dangvel"]).flatten(1)], 1)
        return float(torch.nn.functional.cosine_similarity(pred, real, dim=1, eps=1e-12).mean())

    def train_world_model(self) -> float:
        cfg, m = self.cfg, self.model
        starts = self.buffer.valid_starts(cfg.wm_rollout + 1)
        if len(starts) == 0:
            raise SinewError("no buffer window is long enough for wm_rollout; lower it or raise episode_seconds")
        pick = starts[self.rng.integers(0, len(starts), cfg.batch_size)]
        w = self.buffer.windows(pick, cfg.wm_rollout + 1)
        loss, _ = m.wm_loss([window_state(w, t) for t in range(cfg.wm_rollout + 1)],
                            [w["action"][:, t] for t in range(cfg.wm_rollout)])
        self.opt_wm.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.wm.parameters(), cfg.grad_clip)
        self.opt_wm.step()
        return float(loss.detach())

    def train_vae(self) -> tuple[float, float, float, float, float]:
        cfg, m = self.cfg, self.model
        starts = self.buffer.valid_starts(cfg.vae_rollout)
        if len(starts) == 0:
            raise SinewError("no buffer window is long enough for vae_rollout; lower it or raise episode_seconds")
        pick = starts[self.rng.integers(0, len(starts), cfg.batch_size)]
        w = self.buffer.windows(pick, cfg.vae_rollout)
        for p in m.wm.parameters():
            p.requires_grad_(False)
        try:
            rec, kl, act, tgt = m.vae_rollout(window_state(w, 0), [window_reference(w, t) for t in range(cfg.vae_rollout)],
                                         [w["ref_len"][:, t] for t in range(cfg.vae_rollout)], self.gen, self.weights)
            loss = rec + cfg.beta * kl + act + cfg.w_target * tgt
            self.opt_vae.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.vae.parameters(), cfg.grad_clip)
            self.opt_vae.step()
        finally:
            for p in m.wm.parameters():
                p.requires_grad_(True)
        return tuple(float(x.detach()) for x in (loss, rec, kl, act, tgt))

    def train_imitation(self) -> float:
        """One model-free update of the posterior and policy: L_target + beta L_kl
        (Model.imitation_loss) at real buffer states, no world model. Returns L_target."""
        cfg, m = self.cfg, self.model
        starts = self.buffer.valid_starts(1)
        w = self.buffer.windows(starts[self.rng.integers(0, len(starts), cfg.batch_size)], 1)
        tgt, kl = m.imitation_loss(window_state(w, 0), window_reference(w, 0), w["ref_len"][:, 0])
        loss = cfg.w_target * tgt + cfg.beta * kl
        self.opt_vae.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.vae.parameters(), cfg.grad_clip)
        self.opt_vae.step()
        return float(tgt.detach())

    def evaluate(self) -> dict:
        """The real-simulator tracking metric (Collector.evaluate): deterministic posterior
        tracking of the first clip from each of cfg.eval_starts, falls charged."""
        arrays, meta = policy_file_arrays(self.model, self.cfg)
        return self.pool.evaluate(arrays, meta, self.cfg.eval_seconds, 0, tuple(self.cfg.eval_starts),
                                  self.cfg.eval_early_s)

    @staticmethod
    def _eval_row(ev: dict) -> dict:
        return dict(eval_track_err_cm=100 * ev["track_err_m"], eval_fell_at_s=ev["fell_at_s"],
                    eval_joint_err_deg=ev.get("joint_err_deg", float("nan")),
                    eval_root_err_cm=100 * ev.get("root_err_m", float("nan")),
                    eval_falls=ev.get("falls", float("nan")),
                    eval_joint_err_early_deg=ev.get("joint_err_deg_early", float("nan")),
                    eval_track_err_early_cm=100 * ev.get("track_err_early_m", float("nan")))

    def step(self) -> dict:
        cfg = self.cfg
        row = {k: float("nan") for k in LOG_COLUMNS}
        t0 = time.perf_counter()
        if self.iteration == 0 and cfg.eval_every:
            ev = self.evaluate()  # the untrained policy, for comparison
            self.log_row({**row, "iteration": 0, "samples_total": 0, "seconds": 0.0, **self._eval_row(ev)})
        slots, st = self.collect()
        t1 = time.perf_counter()
        if not self.delta_ready:
            self._init_deltas()
        err8 = self.wm_error(slots)
        t2 = time.perf_counter()
        wm = [self.train_world_model() for _ in range(cfg.wm_updates)]
        t3 = time.perf_counter()
        vae = [self.train_vae() for _ in range(cfg.vae_updates if self.iteration >= cfg.vae_start else 0)]
        t4 = time.perf_counter()
        imit = [self.train_imitation() for _ in range(cfg.imitation_updates if cfg.w_target > 0 else 0)]
        self.iteration += 1
        vae_arr = np.array(vae) if vae else np.full((1, 5), np.nan)
        row.update(iteration=self.iteration, samples_total=self.buffer.count,
                   collect_s=t1 - t0, wm_s=t3 - t2, vae_s=t4 - t3,
                   samples_per_s=st["samples"] / max(t1 - t0, 1e-9),
                   wm_updates_per_s=cfg.wm_updates / max(t3 - t2, 1e-9),
                   vae_updates_per_s=len(vae) / (t4 - t3) if vae else float("nan"),
                   wm_loss=float(np.mean(wm)) if wm else float("nan"), wm_err8_cm=err8,
                   vae_loss=vae_arr[:, 0].mean(), rec=vae_arr[:, 1].mean(), kl=vae_arr[:, 2].mean(),
                   act=vae_arr[:, 3].mean(), target=vae_arr[:, 4].mean(),
                   imitation_target=float(np.mean(imit)) if imit else float("nan"), train_track_err_cm=st["track_err_cm"],
                   episodes=st["episodes"], falls=st["falls"])
        if cfg.eval_every and (self.iteration % cfg.eval_every == 0):
            ev = self.evaluate()
            row.update(self._eval_row(ev))
            row["wm_action_cos"] = self.wm_action_fidelity()
        self.seconds += time.perf_counter() - t0
        row["seconds"] = self.seconds
        row = {k: float(v) if v is not None else float("nan") for k, v in row.items()}
        self.log_row(row)
        self.last = row
        return row

    # ---- the run ---------------------------------------------------------------------------------
    def train(self, iterations: int | None = None, progress: bool = True, stop=None) -> dict:
        """Train up to `iterations`. `stop` (engine.interrupt.StopFlag), once requested, ends the
        run after the iteration under way, with a checkpoint that `--resume` continues."""
        cfg = self.cfg
        self.stop = stop or self.stop
        total = cfg.iterations if iterations is None else int(iterations)
        write_text(self.out / "config.json", json.dumps(cfg.to_dict(), indent=1))
        try:
            with Progress("training", max(total - self.iteration, 1)) as bar:
                start, piece_from = self.iteration, self.seconds  # max_seconds bounds this piece of the run
                while self.iteration < total and not self.stop.requested:
                    self.step()
                    bar.update(self.iteration - start)
                    out_of_time = config_out_of_time(cfg.max_seconds, self.seconds, piece_from, self.iteration)
                    if (self.iteration % cfg.checkpoint_every == 0 or self.iteration == total or out_of_time
                            or self.stop.requested):
                        self.save()
                        self.plot()
                    if out_of_time:
                        break
            if (cfg.task is not None and self.task_iteration < cfg.task.iterations and self.iteration >= total
                    and not self.stop.requested):
                from .task import train_task

                train_task(self, cfg.task.iterations)
                self.save()
                self.plot()
        finally:
            self.close()
        return self.summary()

    def summary(self) -> dict:
        r = self.last
        return dict(iterations=self.iteration, world_model_loss=r.get("wm_loss"), vae_loss=r.get("vae_loss"),
                    wm_err8_cm=r.get("wm_err8_cm"), seconds=round(self.seconds, 2),
                    task_iterations=self.task_iteration, out=str(self.out))

    # ---- log, plot, checkpoint ------------------------------------------------------------------
    def log_row(self, row: dict) -> None:
        """One row at the end of the run's log (training.log)."""
        append_row(self.out / LOG, row)

    def plot(self, path=None) -> Path:
        return plot_log(self.out / LOG, path or self.out / PLOT)

    def save(self) -> Path:
        m = self.model
        ck = dict(format="sinew-train-checkpoint", version=1, config=self.cfg.to_dict(),
                  iteration=self.iteration, task_iteration=self.task_iteration, seconds=self.seconds,
                  delta_ready=self.delta_ready,
                  vae=m.vae.state_dict(), wm=m.wm.state_dict(), task=m.task.state_dict() if m.task else None,
                  opt_wm=self.opt_wm.state_dict(), opt_vae=self.opt_vae.state_dict(),
                  opt_task=self.opt_task.state_dict() if self.opt_task else None,
                  norm=dict(state_mean=m.state_mean, state_std=m.state_std, target_mean=m.target_mean,
                            target_std=m.target_std, delta_std=m.delta_std, action_std=m.action_std,
                            wrench_std=m.wrench_std),
                  buffer=self.buffer.state_dict(), rng=_rng_state(self.rng),
                  torch_rng=torch.get_rng_state(), gen=self.gen.get_state(), last=self.last)
        with atomic_path(self.out / CHECKPOINT) as tmp:
            torch.save(ck, tmp)
        return self.out / CHECKPOINT

    @classmethod
    def resume(cls, run_dir, cfg: TrainConfig | None = None, truncate_log: bool = True,
               checkpoint: dict | None = None) -> "Trainer":
        """The run in `run_dir` as its checkpoint left it (`checkpoint`: that file already read
        by load_checkpoint, so a large replay buffer is not read twice)."""
        ck = load_checkpoint(run_dir) if checkpoint is None else checkpoint
        saved = config_from_dict(ck["config"])
        if cfg is not None:  # only the schedule may change on resume
            for k in ("iterations", "checkpoint_every", "eval_every", "workers", "max_seconds"):
                setattr(saved, k, getattr(cfg, k))
            if cfg.task is not None:
                saved.task = cfg.task
        tr = cls(saved, Path(run_dir) if Path(run_dir).is_dir() else Path(run_dir).parent, fresh=False)
        m = tr.model
        m.vae.load_state_dict(ck["vae"])
        m.wm.load_state_dict(ck["wm"])
        if ck["task"] is not None and m.task is not None:
            m.task.load_state_dict(ck["task"])
        tr.opt_wm.load_state_dict(ck["opt_wm"])
        tr.opt_vae.load_state_dict(ck["opt_vae"])
        if ck["opt_task"] is not None and tr.opt_task is not None:
            tr.opt_task.load_state_dict(ck["opt_task"])
        for k, v in ck["norm"].items():
            setattr(m, k, v)
        tr.buffer.load_state_dict(ck["buffer"])
        _set_rng_state(tr.rng, ck["rng"])
        torch.set_rng_state(ck["torch_rng"])
        tr.gen.set_state(ck["gen"])
        tr.iteration, tr.task_iteration = int(ck["iteration"]), int(ck["task_iteration"])
        tr.seconds, tr.delta_ready, tr.last = float(ck["seconds"]), bool(ck["delta_ready"]), ck["last"]
        if truncate_log:
            drop_rows_after(tr.out / LOG, tr.iteration, tr.task_iteration)
        return tr


def load_checkpoint(run_or_ckpt) -> dict:
    p = Path(run_or_ckpt)
    if p.is_dir():
        p = p / CHECKPOINT
    if not p.is_file():
        raise InputFileError(p, "no checkpoint here (train first, or give the run folder)")
    try:
        ck = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch's own text runs to pages and advises weights_only=False
        raise InputFileError(p, "not a readable training checkpoint: truncated, damaged or not one `sinew train` "
                                f"wrote ({type(e).__name__})") from None
    if not isinstance(ck, dict) or ck.get("format") != "sinew-train-checkpoint":
        raise InputFileError(p, "not a Sinew training checkpoint")
    if ck.get("version") != 1:
        raise InputFileError(p, f"checkpoint version {ck.get('version')!r}; this Sinew reads version 1")
    return ck
