"""Training configuration: a TOML file read into TrainConfig (unknown keys are refused)."""
from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from engine.errors import InputFileError, ParameterError

CONFIG_DIR = Path(__file__).resolve().parent / "configs"
MOTION_TOKEN = "${shared_motion}"  # a clip path's stand-in for the reference motion folder (load_config)


@dataclass
class TaskConfig:
    """High-level heading/speed policy (MuscleVAE appendix B.3, Algorithm 2, eq. 44-45)."""

    iterations: int = 200
    batch_size: int = 512          # N_HL
    rollout: int = 16              # T_HL
    hidden: list = field(default_factory=lambda: [256, 256, 256])
    lr: float = 1e-4
    w_heading: float = 2.0
    w_speed: float = 1.0
    w_fall: float = 1.0
    w_z: float = 0.01
    fall_height: float = 0.55      # root height (m) below which L_fall counts
    speed_min: float = 0.0
    speed_max: float = 3.0


@dataclass
class DaggerConfig:
    """Teaching the policy from an expert controller (DAgger, Ross, Gordon and Bagnell 2011):
    training/dagger.py. The expert is the stand controller ("stand": the run's one clip must
    hold a pose, CLIP@SECONDS, that stands on its feet) or the tracking controller steered by
    the balance planner ("balance": the run's one clip is tracked, looped, with no residual)."""

    expert: str = "stand"
    rounds: int = 8
    episodes: int = 8              # per round, each from a start state with perturbed velocities
    episode_seconds: float = 4.0
    beta_decay: float = 0.5        # round r plays the expert's action with probability beta_decay^r (1 in round 0)
    velocity_noise: float = 0.03   # rad/s and m/s on every DOF at each episode's start (0.1: the expert falls in 4 of 6)
    action_noise: float = 0.03     # on the expert's activations in round 0 (states off its own path)
    snapshot_seconds: float = 120.0  # start episodes from the expert's own take, a state a second: the
                                     # muscles' fatigue grows along it, and a policy that never saw
                                     # it falls once its fatigue inputs leave what it was taught on
    fall_margin_seconds: float = 1.0  # labels of the last seconds before a fall are dropped
    push_force: float = 0.0        # N: each episode shoved at the pelvis (0.2 s, any horizontal direction, up to this)
    # x the squared joint-torque error (in units of 10 N m) that the policy's force errors make
    # through the moment arms, beside the per-muscle force error: the motion depends on the
    # torques, and muscles that share a joint may trade force (0: the force error alone)
    torque_weight: float = 0.0
    fit_steps: int = 3000          # gradient steps per round, on everything gathered so far
    fit_batch: int = 256
    lr: float = 1e-3
    # the fraction of each hidden layer's units dropped at every fit step (training/networks.py):
    # a label is in part the sampler's draw, and networks fit without it memorise that part (on
    # the walk's offset labels, rounds held out: RMS error 0.77 of 0.1 rad without, 0.58 with 0.5,
    # where predicting the labels' mean errs 0.75; policy_from_expert.md, thirty-seventh session)
    dropout: float = 0.5
    eval_seconds: float = 60.0     # the learner alone from the start, after each round ...
    eval_starts: int = 3           # ... this many times: unperturbed, then with velocity_noise
    period: int = 1                # physics steps per decision (1: 120 Hz, as the expert decides)
    snapshot_every: float = 1.0    # s between the start states taken along the expert's own take
    workers: int = 1               # processes playing a round's episodes (forked; the run is the same)
    # expert "balance": its answer is the mean of this many planners' (each its own seed and
    # plan): one planner's label is as noisy across seeds as the steering it carries
    # (research/label_noise.py); K times the cost a label
    planners: int = 1
    # expert "balance": the tracker's weight on (a - a_prev)^2 (CoordinationWeights.smooth; the
    # product's 10): each label also leans on the activation before, which the policy does not
    # see. 0 walks as well; its labels were not clearly easier to fit (policy_from_expert.md)
    smooth: float = 10.0
    # action "offset": the teacher's plan is its candidates' eq. (5) mean (engine.control.balance),
    # weights exp(-(C - C_min) / (weighting C_min)): 0.1 halves the argmin's share of the sampler's
    # draw in a label (docs/research/policy_from_expert.md, thirty-third session)
    weighting: float = 0.1
    # action "offset": each episode starts after this many seconds of the planner's own take
    # from a start state's, cycled over the episodes (later states: the thirty-third session's
    # rounds from 2-7 s in kept the walk longer than those from the start)
    after: list = field(default_factory=lambda: [0.0])
    # action "offset": every clip is played at each of these fatigue scales (its own start
    # states along the planner's own take at that scale, `snapshot_seconds` long), so the
    # policy, which observes its fatigue, is taught tired states too; [] plays fatigue_scale
    fatigue_scales: list = field(default_factory=list)


@dataclass
class TrainConfig:
    """Everything a run depends on. Sizes default to the paper's (appendix B)."""

    name: str = "run"
    seed: int = 0
    rig: str = "human284"
    clips: list = field(default_factory=list)
    backend: str = "mujoco"
    fatigue_scale: float = 1.0
    # the muscles' f0 x this (Rig.with_strength); the policy file records it and runs at it.
    # 1 (MASS's forces) keeps the committed runs as they were; tracked takes default to 3
    strength: float = 1.0
    stiffness: float = 20.0        # PDGains.for_rig
    damping: float = 2.0
    # networks (appendix B.1)
    latent_dim: int = 64
    vae_hidden: list = field(default_factory=lambda: [512, 512])
    policy_hidden: list = field(default_factory=lambda: [512, 512, 512])
    experts: int = 6
    gate_hidden: list = field(default_factory=lambda: [64, 64])
    wm_hidden: list = field(default_factory=lambda: [512, 512, 512, 512])
    sigma_prior: float = 0.3
    sigma_policy: float = 0.05
    # what the policy outputs (engine.control.policy.ACTIONS): "pd_target", MuscleVAE's
    # muscle-space PD target (eq. 11), "activation", the activations themselves, or "offset",
    # an offset plan on the tracker's reference with the coordination solve below
    # (engine.control.offset_policy; taught by the balance planner). The last two are for
    # [dagger] runs only: the world model's rollouts assume the PD action
    action: str = "pd_target"
    # The policy network's output (and its noise sigma_policy) times action_scale is the action
    # a of eq. 11 (target length (a + 1) l_tpose). With the engine's PD gains (stiffness 20: a
    # strain of 5 % asks for f0) the useful actions are a few hundredths; 1 keeps the paper's a.
    action_scale: float = 1.0
    # Algorithm 1 (appendix B.2)
    buffer_size: int = 50000       # N_B
    samples_per_iter: int = 2048   # N'_B
    chunks_per_iter: int = 4       # collection jobs per iteration (seeded by iteration and index)
    wm_rollout: int = 8            # T_W
    vae_rollout: int = 24          # T_VAE
    batch_size: int = 512          # N_batch
    wm_updates: int = 8            # world-model gradient steps per iteration
    vae_updates: int = 8           # VAE gradient steps per iteration
    vae_start: int = 0             # iterations of world-model training before the VAE updates begin
    imitation_updates: int = 0     # model-free updates (w_target L_target + beta L_kl at real states) per iteration
    lr_wm: float = 1e-3
    lr_vae: float = 3e-4
    grad_clip: float = 10.0
    iterations: int = 2000
    # losses (eq. 13-17)
    beta: float = 0.01
    gamma: float = 0.95
    w_act1: float = 0.01
    w_act2: float = 0.01
    act_cap: float = 2.0           # alpha_pd is compressed (log) above about this in L_act (it diverges where f_l f_v -> 0)
    w_height: float = 1.0
    w_pos: float = 1.0
    w_rot: float = 1.0
    w_vel: float = 0.3
    w_angvel: float = 0.3
    w_heading: float = 1.0
    w_muscle: float = 1.0
    w_target: float = 0.0          # L_target (Model.target_error): PD targets against the reference's
                                   # muscle lengths, model-free; not in MuscleVAE, so 0 (off) by default
    muscle_scale: float = 0.02     # relative muscle-length error counted as one unit
    w_root_wm: float = 1.0
    # rollouts in the simulator
    workers: int = 2
    episode_seconds: float = 10.0
    switch_prob: float = 0.02      # per policy step: jump to a random clip and frame (sec. 4.1.1)
    fall_height: float = 0.55      # root height (m) that ends an episode
    init_fatigue: bool = True
    # bookkeeping
    threads: int = 2
    checkpoint_every: int = 50
    eval_every: int = 25
    eval_seconds: float = 4.0
    eval_starts: list = field(default_factory=lambda: [0.0])  # start phases (fractions of the clip)
    eval_early_s: float = 1.0  # s: the "early" tracking figures average the first seconds of each start
    # s: stop (and checkpoint) before a round or iteration, as long as the mean one so far, would
    # take this piece of the run past this long; each `--resume` starts a new piece; 0: no limit
    max_seconds: float = 0.0
    task: TaskConfig | None = None
    dagger: DaggerConfig | None = None
    path: str | None = None

    def validate(self, resume: bool = False) -> "TrainConfig":
        """Each value checked, one ParameterError naming the first wrong one. `resume`: this
        config adds to a run (`sinew train --resume`, as heading.toml does), which keeps its own
        clips, so none need be listed here (Trainer.resume takes only the schedule and [task])."""
        _check_types(self)
        pos_int = ("buffer_size", "samples_per_iter", "chunks_per_iter", "wm_rollout", "vae_rollout",
                   "batch_size", "latent_dim", "experts", "threads", "checkpoint_every")
        for k in pos_int:
            v = getattr(self, k)
            if not isinstance(v, int) or v < 1:
                raise ParameterError(k, f"must be an integer >= 1, got {v!r}")
        for k in ("wm_updates", "vae_updates", "vae_start", "imitation_updates", "workers", "eval_every", "iterations"):
            v = getattr(self, k)
            if not isinstance(v, int) or v < 0:
                raise ParameterError(k, f"must be an integer >= 0, got {v!r}")
        if self.samples_per_iter > self.buffer_size:
            raise ParameterError("samples_per_iter", "must not exceed buffer_size")
        for k in ("sigma_prior", "sigma_policy", "action_scale", "lr_wm", "lr_vae", "episode_seconds"):
            if not (getattr(self, k) > 0):
                raise ParameterError(k, f"must be > 0, got {getattr(self, k)!r}")
        if not self.eval_starts or not all(_number(x) and 0.0 <= x <= 1.0 for x in self.eval_starts):
            raise ParameterError("eval_starts", f"list start phases in [0, 1], got {self.eval_starts!r}")
        if not (self.w_target >= 0):
            raise ParameterError("w_target", f"must be >= 0, got {self.w_target!r}")
        if not (self.eval_early_s > 0):
            raise ParameterError("eval_early_s", f"must be > 0 seconds, got {self.eval_early_s!r}")
        if not (self.max_seconds >= 0):
            raise ParameterError("max_seconds", f"must be >= 0, got {self.max_seconds!r}")
        if not self.clips and not resume:
            raise ParameterError("clips", "list at least one clip (BVH or reference .npz); a config without "
                                 "clips adds to a run: --out RUN --resume")
        from engine.rig import valid_strength

        valid_strength(self.strength)
        from engine.control.plan import split_hold

        for c in self.clips:
            if not split_hold(c)[0].is_file():
                raise InputFileError(c, "clip not found")
        from engine.control.policy import ACTIONS

        if self.action not in ACTIONS:
            raise ParameterError("action", f"{self.action!r}: choose one of {', '.join(ACTIONS)}")
        if self.action != "pd_target" and self.dagger is None:
            raise ParameterError("action", f"{self.action!r} is for a [dagger] run; the world model trains PD targets")
        if self.task is not None:
            t = self.task
            _check_types(t, "task.")
            for k in ("batch_size", "rollout"):
                if getattr(t, k) < 1:
                    raise ParameterError(f"task.{k}", f"must be an integer >= 1, got {getattr(t, k)!r}")
            if t.iterations < 0:
                raise ParameterError("task.iterations", f"must be an integer >= 0, got {t.iterations!r}")
            if not (t.lr > 0):
                raise ParameterError("task.lr", f"must be > 0, got {t.lr!r}")
            for k in ("w_heading", "w_speed", "w_fall", "w_z"):
                if not (getattr(t, k) >= 0):
                    raise ParameterError(f"task.{k}", f"must be >= 0, got {getattr(t, k)!r}")
            if not (0 <= t.speed_min <= t.speed_max < float("inf")):
                raise ParameterError("task.speed_min", f"speed_min {t.speed_min!r} and speed_max {t.speed_max!r} m/s: "
                                     "need 0 <= speed_min <= speed_max, finite")
        if self.dagger is not None:
            d = self.dagger
            _check_types(d, "dagger.")
            if d.expert not in ("stand", "balance"):
                raise ParameterError("dagger.expert", f"{d.expert!r}: choose stand or balance")
            for k in ("rounds", "episodes", "fit_steps", "fit_batch", "period", "eval_starts", "workers", "planners"):
                v = getattr(d, k)
                if not isinstance(v, int) or v < 1:
                    raise ParameterError(f"dagger.{k}", f"must be an integer >= 1, got {v!r}")
            for k in ("episode_seconds", "lr", "eval_seconds", "snapshot_every"):
                if not (getattr(d, k) > 0):
                    raise ParameterError(f"dagger.{k}", f"must be > 0, got {getattr(d, k)!r}")
            for k in ("velocity_noise", "action_noise", "snapshot_seconds", "fall_margin_seconds", "push_force",
                      "torque_weight", "smooth"):
                if not (getattr(d, k) >= 0):
                    raise ParameterError(f"dagger.{k}", f"must be >= 0, got {getattr(d, k)!r}")
            if not (0 <= d.dropout < 1):
                raise ParameterError("dagger.dropout", f"must be in [0, 1), got {d.dropout!r}")
            if not (0 <= d.beta_decay <= 1):
                raise ParameterError("dagger.beta_decay", f"must be in [0, 1], got {d.beta_decay!r}")
            if d.expert == "stand" and not resume and (len(self.clips) != 1 or split_hold(self.clips[0])[1] is None):
                raise ParameterError("clips", "a [dagger] run learns from the stand controller: give one clip "
                                     "with the pose to hold, as CLIP@SECONDS")
            if d.planners > 1 and d.expert != "balance":
                raise ParameterError("dagger.planners", f"{d.planners}: averages balance planners; the {d.expert} "
                                     "expert is one controller (use 1)")
            if not (d.weighting > 0):
                raise ParameterError("dagger.weighting", f"must be > 0, got {d.weighting!r}")
            if not (isinstance(d.after, list) and d.after and all(_number(x) and x >= 0 for x in d.after)):
                raise ParameterError("dagger.after", f"list seconds >= 0, got {d.after!r}")
            if not all(_number(x) and x >= 0 for x in d.fatigue_scales):
                raise ParameterError("dagger.fatigue_scales", f"list fatigue scales >= 0, got {d.fatigue_scales!r}")
            if d.fatigue_scales and self.action != "offset":
                raise ParameterError("dagger.fatigue_scales", "for an offset policy's run; this run plays fatigue_scale")
            if self.action == "offset":
                from engine.control.balance import BalanceParams

                replan = BalanceParams().replan
                if d.expert != "balance" or d.planners != 1:
                    raise ParameterError("action", "an offset policy is taught by one balance planner: "
                                         "dagger.expert = \"balance\", dagger.planners = 1")
                if d.period != replan:
                    raise ParameterError("dagger.period", f"{d.period}: an offset policy decides as the planner "
                                         f"replans, every {replan} physics steps")
                if d.torque_weight:
                    raise ParameterError("dagger.torque_weight", "weighs activation or PD-force errors; an offset "
                                         "policy's labels are offsets (use 0)")
            if d.expert == "balance":
                if len(self.clips) != 1 and not resume and self.action != "offset":
                    raise ParameterError("clips", "a [dagger] run with the balance expert tracks one clip (looped); "
                                         "an offset policy's run may list several")
                if d.period != 1 and self.action != "offset":
                    raise ParameterError("dagger.period", "the balance planner decides every physics step: period 1")
                if self.backend != "mujoco":
                    raise ParameterError("backend", "the balance planner plays its rollouts on mujoco")
        return self

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("task", "dagger"):
            if d[k] is None:
                d.pop(k)
        d.pop("path")
        return d


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_types(cfg, prefix: str = "") -> None:
    """Each of `cfg`'s values of its field's type, before any is used (a TOML string, true or
    list where a number goes once failed deep inside torch): a whole number for an int, any
    number for a float, true/false for a bool, a list for a list, and each network's layer
    sizes (the *hidden lists) whole numbers >= 1."""
    for f in fields(cfg):
        v, key = getattr(cfg, f.name), prefix + f.name
        ok = {"int": isinstance(v, int) and not isinstance(v, bool), "float": _number(v),
              "bool": isinstance(v, bool), "str": isinstance(v, str), "list": isinstance(v, list)}.get(f.type, True)
        if f.name.endswith("hidden") and not (ok and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1
                                                         for n in v)):
            raise ParameterError(key, f"must list the layer sizes, whole numbers >= 1 (e.g. [256, 256]), got {v!r}")
        if not ok:
            raise ParameterError(key, f"must be {TYPE_WORDS[f.type]}, got {v!r}")


TYPE_WORDS = dict(int="a whole number", float="a number", bool="true or false", str="a string",
                  list="a list [...]")


def _build(cls, table: dict, where: str):
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(table) - names)
    if unknown:
        raise InputFileError(where, f"unknown config key(s) {unknown}; known: {sorted(names - {'path'})}")
    return cls(**table)


def load_config(path, motion_dir=None, resume: bool = False) -> TrainConfig:
    """Read a TOML config; clip paths are relative to the config file's folder (or absolute);
    the token ${shared_motion} stands for `motion_dir`, the reference motion folder (a path,
    or a function that finds it, called only when a clip names the token; `sinew train`
    passes engine/commands/sample_data.py's). `resume`: the config adds to a run, which
    keeps its own clips (TrainConfig.validate)."""
    p = Path(path)
    if not p.is_file():
        alt = CONFIG_DIR / f"{path}.toml"
        if alt.is_file():
            p = alt
        else:
            raise InputFileError(p, "config file not found")
    try:
        table = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as e:
        raise InputFileError(p, f"not valid TOML ({e})") from None
    if "base" in table:  # inherit from another config in the same folder
        base = load_config(p.parent / table.pop("base"), motion_dir).to_dict()
        for section in ("task", "dagger"):  # a table inherits key by key
            inherited = base.pop(section, None)
            if inherited:
                table[section] = {**inherited, **table.get(section, {})}
        table = {**base, **table}
    task = table.pop("task", None)
    dagger = table.pop("dagger", None)
    if not isinstance(table.get("clips", []), list):
        raise ParameterError("clips", f"must be a list of clip paths, e.g. [\"walk.bvh\"], got {table['clips']!r}")
    clips = []
    for c in table.get("clips", []):
        c = str(c)
        if MOTION_TOKEN in c:
            if motion_dir is None:
                raise InputFileError(p, f"clip {c!r} names {MOTION_TOKEN}, but no reference motion folder was "
                                        "given (load_config's motion_dir; `sinew train` finds it)")
            folder = motion_dir() if callable(motion_dir) else motion_dir
            c = c.replace(MOTION_TOKEN, str(folder))
        cp = Path(c)
        clips.append(str(cp if cp.is_absolute() else (p.parent / cp).resolve()))
    if "clips" in table:
        table["clips"] = clips
    cfg = _build(TrainConfig, table, str(p))
    if task is not None:
        cfg.task = _build(TaskConfig, task, str(p) + " [task]")
    if dagger is not None:
        cfg.dagger = _build(DaggerConfig, dagger, str(p) + " [dagger]")
    cfg.path = str(p)
    # the keys the file (and its base) sets, for resume_ignores: a config that adds to a run
    # (heading.toml) leaves the rest at their defaults, which are not changes
    cfg.explicit = frozenset(set(table) | {f"task.{k}" for k in task or {}} | {f"dagger.{k}" for k in dagger or {}})
    return cfg.validate(resume)


# what `sinew train --resume --config C` takes from C: the schedule (and, for a run without a
# [dagger] table, a [task] table: the heading policy added to a trained run); a resumed run
# keeps every other setting of its own
RESUME_TAKES = ("iterations", "checkpoint_every", "eval_every", "workers", "max_seconds", "dagger.rounds",
                "dagger.workers")


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def resume_ignores(saved: TrainConfig, given: TrainConfig) -> list[str]:
    """'key: the run's -> the config's' for each setting `given` (the config handed to a
    resumed run; load_config's, of the keys its file sets) changes that the run keeps its own
    of: neither the schedule (RESUME_TAKES), nor a [task] table a run without [dagger] takes,
    nor the config's name or clips (a run keeps its clips)."""
    a, b = _flat(saved.to_dict()), _flat(given.to_dict())
    takes = set(RESUME_TAKES) | {"name", "clips"}
    set_keys = getattr(given, "explicit", None)
    out = []
    for k in sorted(set(a) | set(b)):
        if set_keys is not None and k not in set_keys:
            continue
        if k in takes or (k.startswith("task.") and saved.dagger is None):
            continue
        if a.get(k) != b.get(k):
            out.append(f"{k}: {a.get(k, '-')} -> {b.get(k, '-')}")
    return out


def config_from_dict(d: dict) -> TrainConfig:
    d = dict(d)
    task, dagger = d.pop("task", None), d.pop("dagger", None)
    cfg = TrainConfig(**d)
    if task:
        cfg.task = TaskConfig(**task)
    if dagger:
        cfg.dagger = DaggerConfig(**dagger)
    return cfg


def out_of_time(limit: float, seconds: float, piece_from: float, done: int) -> bool:
    """Whether one more round (or iteration) of a run, as long as the mean of the `done` so far
    (`seconds` in all), would take this piece of it (begun when the run had taken `piece_from`
    seconds: a `--resume` starts a new piece) past `limit` seconds (max_seconds; 0: never)."""
    return bool(limit) and done > 0 and (seconds - piece_from) + seconds / done > limit
