"""Takes: a simulated performance, sampled at the scene frame rate (DESIGN.md "Takes").

    take = simulate(rig, [("run.bvh", 60), ("walk.bvh", 20)], fatigue=FatigueParams(scale=50))
    take.save("out/take.npz"); take = load_take("out/take.npz")

The physics runs at 120 Hz; a frame is kept whenever the scene clock (24/25/30/60 fps)
passes a physics step, never by changing the step. A take that falls or diverges stops
there and keeps what it had, saying so in `meta` (`partial`, `stop_reason`); so does one
stopped by Ctrl-C / SIGTERM or a cancel (`interrupted`, engine.interrupt). The same inputs and seed give the same
take bit for bit (one thread, no randomness but the seeded generator).

Saved as a plain .npz (no pickle) with a JSON `meta` string: format "sinew-take",
version 1.
"""
from __future__ import annotations

import json
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from . import fatigue as fat
from .npzfile import read_npz, write_npz
from .errors import InputFileError, ParameterError
from .kinematics import joint_errors_deg
from .rig import DEFAULT_STRENGTH, GROUPS, Rig, valid_strength

FORMAT = "sinew-take"
FORMAT_VERSION = 1
SCENE_FPS = (24, 25, 30, 50, 60, 120)
# m: the pelvis joint this low, and FALL_DROP_M below the reference's, means the character is
# down (a clip that squats, kneels or lies down is followed there, not stopped as a fall)
FALL_ROOT_HEIGHT, FALL_DROP_M = 0.5, 0.4


def is_down(z: float, z_ref: float) -> bool:
    """Whether a pelvis joint at height z (m), its reference's at z_ref, is down (a fall)."""
    return z < FALL_ROOT_HEIGHT and z < z_ref - FALL_DROP_M

# name -> (trailing shape with None for "any", dtype kind)
_ARRAYS = {
    "times": ((), "f"),
    "body_pos": ((None, 3), "f"),
    "body_quat": ((None, 4), "f"),
    "q": ((None,), "f"),
    "q_ref": ((None,), "f"),
    "activation": ((None,), "f"),
    "force": ((None,), "f"),
    "MA": ((None,), "f"),
    "MR": ((None,), "f"),
    "MF": ((None,), "f"),
    "residual_force": ((3,), "f"),
    "residual_torque": ((3,), "f"),
    "joint_err_deg": ((), "f"),
    "root_err_cm": ((), "f"),
    "segment": ((), "i"),
}


@dataclass
class Take:
    """Per output frame (N): times (N,), body_pos (N, B, 3) and body_quat (N, B, 4, w x y z)
    body frames, q / q_ref (N, nq) simulated and reference generalised coordinates,
    activation / force / MA / MR / MF (N, M) per muscle (force in N), residual_force /
    residual_torque (N, 3) on the pelvis (world frame, N and N m), joint_err_deg (N,) mean
    joint-angle error, root_err_cm (N,) root position error, segment (N,) index of the clip
    playing. meta: parameters, seed, versions, clips, fell / diverged and when, summary."""

    times: np.ndarray
    body_pos: np.ndarray
    body_quat: np.ndarray
    q: np.ndarray
    q_ref: np.ndarray
    activation: np.ndarray
    force: np.ndarray
    MA: np.ndarray
    MR: np.ndarray
    MF: np.ndarray
    residual_force: np.ndarray
    residual_torque: np.ndarray
    joint_err_deg: np.ndarray
    root_err_cm: np.ndarray
    segment: np.ndarray
    meta: dict = field(default_factory=dict)

    @property
    def num_frames(self) -> int:
        return int(len(self.times))

    @property
    def fps(self) -> float:
        return float(self.meta.get("fps", 30))

    def save(self, path) -> Path:
        arrays = {k: np.ascontiguousarray(getattr(self, k)) for k in _ARRAYS}
        return write_npz(path, FORMAT, FORMAT_VERSION, self.meta, arrays, compress=True)

    def group_mean(self, key: str, rig: Rig) -> np.ndarray:
        """f0-weighted mean of a per-muscle series (MA, MR, MF, activation) per muscle group,
        (N, 5) in GROUPS order (MuscleVAE appendix B.4)."""
        x = getattr(self, key).astype(np.float64)
        out = np.empty((len(x), len(GROUPS)))
        for g in range(len(GROUPS)):
            idx = rig.muscle_group == g
            w = rig.muscle_f0[idx] / rig.muscle_f0[idx].sum()
            out[:, g] = x[:, idx] @ w
        return out


def load_take(path) -> Take:
    """Read a take.npz; InputFileError naming the file on anything malformed."""
    path = Path(path)
    meta, data = read_npz(path, FORMAT, FORMAT_VERSION, "take", hint="simulate it again with this Sinew")
    missing = [k for k in _ARRAYS if k not in data]
    if missing:
        raise InputFileError(path, f"missing arrays {missing}")
    N = data["times"].shape[0] if data["times"].ndim == 1 else -1
    if N < 0:
        raise InputFileError(path, f"'times' must be 1-D, got shape {data['times'].shape}")
    for k, (tail, kind) in _ARRAYS.items():
        a = data[k]
        if a.dtype.kind not in ("fi" if kind == "f" else "iu"):
            raise InputFileError(path, f"array {k!r} has dtype {a.dtype}, expected {'floats' if kind == 'f' else 'integers'}")
        ok = a.ndim == 1 + len(tail) and a.shape[0] == N and all(t is None or t == d for t, d in zip(tail, a.shape[1:]))
        if not ok:
            want = "(" + ", ".join(["N"] + ["*" if t is None else str(t) for t in tail]) + ")"
            raise InputFileError(path, f"array {k!r} has shape {a.shape}, expected {want} with N={N}")
        if kind == "f" and not np.all(np.isfinite(a)):
            raise InputFileError(path, f"array {k!r} contains NaN or infinite values")
    M = data["activation"].shape[1]
    for k in ("force", "MA", "MR", "MF"):
        if data[k].shape[1] != M:
            raise InputFileError(path, f"array {k!r} has {data[k].shape[1]} muscles, activation has {M}")
    if data["q"].shape != data["q_ref"].shape:
        raise InputFileError(path, "q and q_ref differ in shape")
    return Take(meta=meta, **data)


# ---- simulate ---------------------------------------------------------------------------------
def check_clips(clips) -> list[tuple[object, float]]:
    """[(path or Reference, seconds)] checked before any work: files exist, durations are
    positive and finite. One clear error per problem."""
    from .motion.reference import Reference

    if not clips:
        raise ParameterError("clips", "give at least one clip (e.g. --clip walk.bvh:20)")
    out = []
    for i, item in enumerate(clips):
        try:
            src, seconds = item
        except (TypeError, ValueError):
            raise ParameterError("clips", f"entry {i} must be (clip, seconds), got {item!r}") from None
        if not isinstance(src, Reference):
            from .control.plan import split_hold

            p = split_hold(src)[0]
            if not p.is_file():
                raise InputFileError(p, "clip file not found")
            if p.suffix.lower() not in (".bvh", ".npz"):
                raise InputFileError(p, "unknown clip type: expected a .bvh file or a reference .npz")
        try:
            seconds = float(seconds)
        except (TypeError, ValueError):
            raise ParameterError("seconds", f"clip {i + 1}: duration {seconds!r} is not a number") from None
        if not (np.isfinite(seconds) and seconds > 0):
            raise ParameterError("seconds", f"clip {i + 1}: duration must be > 0 seconds, got {seconds:g}")
        if seconds > 24 * 3600:
            raise ParameterError("seconds", f"clip {i + 1}: {seconds:g} s is more than a day")
        out.append((src, seconds))
    return out


def check_fps(fps) -> int:
    try:
        f = float(fps)
    except (TypeError, ValueError):
        raise ParameterError("fps", f"{fps!r} is not a number") from None
    if f not in SCENE_FPS:
        raise ParameterError("fps", f"{fps!r}: choose one of {', '.join(map(str, SCENE_FPS))} (a divisor "
                             "of the 120 Hz physics rate or a common scene rate)")
    return int(f)


def _tracking_option(controller: str, value: float | None, flag: str, default: float, policy_does: str) -> float:
    """A tracking controller's option: the given value or `default`; a policy has no such
    option, so asking for one is refused (naming the flag) and it runs with 0."""
    if controller == "policy":
        if value is not None:
            raise ParameterError(flag, f"the policy controller {policy_does}; leave {flag} out, or use "
                                 "--controller tracking")
        return 0.0
    return default if value is None else value


def check_pace(controller: str, pace: float | None) -> float:
    """The pace governor strength a take runs with (default 1); a policy plays at its own pace."""
    return _tracking_option(controller, pace, "--pace", 1.0, "plays at its own pace")


def check_wait(controller: str, wait: bool | None) -> bool:
    """Whether the clip waits for a body behind it (pace eq. 2; default on); a policy plays at
    its own pace, so asking is refused."""
    if controller == "policy":
        if wait is not None:
            raise ParameterError("--wait", "the policy controller plays at its own pace; leave --wait / --no-wait "
                                 "out, or use --controller tracking")
        return True
    return True if wait is None else bool(wait)


def check_policy_given(controller: str, policy) -> None:
    """A policy file goes with the policy controller, which needs one: beside the tracking
    controller it would be ignored (a missing file too), so it is refused, as --workers is
    where nothing uses it."""
    if controller == "policy" and not policy:
        raise ParameterError("--policy", "--controller policy needs --policy P.npz")
    if controller != "policy" and policy:
        raise ParameterError("--policy", f"only for --controller policy (the {controller} controller would ignore "
                             f"{policy}); leave --policy out, or add --controller policy")


def check_residual(controller: str, residual: float | None) -> float:
    """The root residual strength a take runs with (default 0: none); a policy applies none."""
    return _tracking_option(controller, residual, "--residual", 0.0, "applies no root residual")


def check_strength(controller: str, policy=None, strength: float | None = None) -> float:
    """The muscles' strength a take runs at (x the model's f0, Rig.with_strength).

    Tracking: `strength`, or DEFAULT_STRENGTH. MASS's f0 are literature forces, and tracking
    the bundled walk with them asks the legs for 0.23 of their strength on average, above
    the 1/6 that 3CC-r sustains (R / (F + R)): at fatigue scale 50 the walk gives way within
    ~8 s whatever the balance layer does. At 3x it asks 0.14 fresh, and tired it walks on,
    the legs' M_F levelling off near 0.3 (docs/research/balance.md, fourteenth session). The
    MuscleVAE release, whose run-walk this reproduces, runs its legs at ~5x MASS's f0.
    Policy: the strength it was trained at (its file says; 1 before files said), and another
    is refused: its muscles would answer its actions otherwise than they did in training."""
    if controller == "policy":
        from .control.policy import trained_strength

        trained = trained_strength(policy.meta)
        if strength is not None and float(strength) != trained:
            raise ParameterError("--strength", f"{strength:g}: the policy was trained at strength {trained:g}; "
                                 "leave --strength out (a policy runs at its own) or train one at this strength")
        return trained
    return DEFAULT_STRENGTH if strength is None else valid_strength(strength, "--strength")


def check_balance(controller: str, balance: bool | None, residual: float | None, workers: int = 0,
                  backend: str = "mujoco"):
    """The balance planner's settings (engine.control.balance.BalanceParams, or None without
    `balance`) and the residual strength the take then runs with: the planner balances
    without the residual, so it runs with 0, and a residual asked for beside it is refused.
    `balance` None (the command line's, the panel's and the batch script's default) plans the
    tracking controller's balance unless a residual is asked for (an analysis take, OpenSim
    practice) or the backend is not MuJoCo (the planner copies MuJoCo's state); a take
    without either stands only a still pose (the stand controller) and lets a moving clip fall.
    `workers`: processes that play its candidates (0: the calling process)."""
    if balance is None:
        balance = controller == "tracking" and not residual and backend == "mujoco"
    if not balance:
        return None, check_residual(controller, residual)
    if controller == "policy":
        raise ParameterError("--balance", "plans the tracking controller's balance; a policy balances by itself. "
                             "Leave --balance out, or use --controller tracking")
    if residual:
        raise ParameterError("--residual", f"{residual:g}: --balance carries the character without the root "
                             "residual; leave --residual out (or 0)")
    from .control.balance import BalanceParams

    most = BalanceParams().candidates  # each worker plays at least one candidate a plan
    if int(workers) > most:
        print(f"sinew: --workers {int(workers)}: the balance planner plays {most} candidates a plan, so "
              f"{most} processes are the most it can use; using {most}", file=sys.stderr)
        workers = most
    return BalanceParams(workers=int(workers)).validate(), 0.0


def _versions() -> dict:
    import mujoco
    import scipy

    v = dict(python=platform.python_version(), numpy=np.__version__, scipy=scipy.__version__,
             mujoco=mujoco.__version__)
    try:
        import importlib
        from importlib.metadata import version

        importlib.import_module("daqp")  # its version only where it imports
        v["daqp"] = version("daqp")
    except Exception:
        pass
    try:
        from importlib.metadata import version

        v["sinew"] = version("sinew")
    except Exception:
        v["sinew"] = "dev"
    return v


def one_blas_thread(fn):
    """fn run with numpy's and scipy's BLAS held to one thread (threadpoolctl; the counts are
    restored after). The engine's matrices are small (the solve's 56 x ~330): extra BLAS
    threads only contend with the balance planner's worker processes and each other.
    Measured, `sinew simulate` of the walk with the planner on this 2-core machine: 11.8 ->
    7.8 s of computing a simulated second with two workers, 15.9 -> 14.0 with one."""
    import functools

    @functools.wraps(fn)
    def run(*args, **kw):
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            return fn(*args, **kw)
    return run


@dataclass
class _Options:
    """simulate's options, each checked once; pushes and goals as given, checked against the
    plan in _prepare (where the take's length is known)."""

    controller: str
    fatigue: fat.FatigueParams
    backend: str
    seed: int
    fps: int
    params: object  # engine.control.tracking.TrackingParams
    policy: object  # engine.control.policy.PolicyFile, or None
    strength: float
    blend: float
    mode: str
    noise_scale: float | None
    pushes: object  # as given: engine.push.Push objects, specs or dicts (CheckedPushes: not checked again)
    goals: object  # as given: engine.control.goals.Goal objects or dicts (CheckedGoals: not checked again)


@dataclass
class _Prepared:
    """A take ready to run (_prepare)."""

    rig: Rig  # at the take's strength
    refs: list  # [(Reference, seconds, name)]
    plan: object  # engine.control.plan.MotionPlan
    pushes: list  # engine.push.Push, checked
    goals: list  # engine.control.goals.Goal, checked
    sim: object  # engine.simulation.Simulation
    ctrl: object  # engine.control.controller.Controller
    demands: list


@one_blas_thread
def simulate(rig: Rig, clips, controller: str = "tracking", fatigue: fat.FatigueParams | None = None,
             backend: str = "mujoco", seed: int = 0, fps: int = 30, params=None, policy=None,
             label: str = "simulating", blend: float = 0.4, progress=None, pushes=(), stop=None,
             mode: str = "track", noise_scale: float | None = None, goals=(),
             strength: float | None = None) -> Take:
    """Simulate a take of clips [(path or Reference, seconds), ...] played in order (each
    looped for its duration, cross-faded into the next) under a controller; see Take.
    controller "tracking" uses `params` (TrackingParams: gains, root residual); "policy" runs
    the exported `policy` in track mode along the same chain and applies no residual (the
    take's meta then has tracking = None); `mode` "generate" or "heading" runs it from the
    prior or the high-level policy instead, with `noise_scale` and heading `goals`
    (engine.control.goals: the clips then set the start and the length). `strength` multiplies
    every muscle's f0 (Rig.with_strength; meta["strength"]): the tracking controller's default
    is DEFAULT_STRENGTH, a policy's the strength it was trained at. `pushes`: engine.push Push objects or
    'TIME:FX,FY,FZ:SECONDS[:BODY]' strings, external forces kept apart from the residual
    (meta["pushes"]; the summary says how the character recovered from each).

    `progress(fraction)`, when given, is called about 100 times during the run (and replaces
    the terminal bar); an exception it raises stops the run and propagates. `stop`, an
    engine.interrupt.StopFlag, is read once per step: once requested (Ctrl-C, SIGTERM, the
    Blender operator's cancel) the run stops there and the take keeps what it had, like a
    fall or a divergence (meta: interrupted, partial, stopped_at_s, stop_reason)."""
    from .control.factory import KINDS
    from .control.tracking import TrackingParams

    clips = check_clips(clips)
    fps = check_fps(fps)
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ParameterError("seed", f"must be a whole number >= 0, got {seed!r}")
    if controller not in KINDS:
        raise ParameterError("controller", f"{controller!r}: choose tracking or policy")
    if controller == "policy" and policy is None:
        raise ParameterError("policy", "controller 'policy' needs a policy file (sinew export-policy)")
    params = params or TrackingParams()
    if controller == "tracking" and params.balance is not None:  # before any backend is built
        from .control.balance import check_backend

        check_backend(backend)
    if controller == "policy" and not hasattr(policy, "meta"):
        from .control.policy import load_policy

        policy = load_policy(policy)  # its strength first; checked against the rig in _prepare
    options = _Options(controller=controller, fatigue=fatigue or fat.FatigueParams(), backend=backend, seed=int(seed),
                       fps=fps, params=params, policy=policy, strength=check_strength(controller, policy, strength),
                       blend=blend, mode=mode, noise_scale=noise_scale, pushes=pushes, goals=goals)
    return _run_take(rig, clips, options, label, progress, stop)


def _run_take(rig: Rig, clips, o: _Options, label: str, progress, stop) -> Take:
    """The take of checked `clips` under options `o`: prepared, run through Simulation.run
    with a recorder of its frames that ends it at a fall, and kept (see simulate)."""
    from .simulation import SimulationDiverged

    p = _prepare(rig, clips, o)
    frames = _frame_recorder(p, o.fps)
    wall0, cpu0 = time.perf_counter(), time.thread_time()  # CPU time: a speed a busy machine does not skew
    diverged = ""
    try:
        rec = p.sim.run(p.ctrl, p.plan.total_steps * p.sim.dt, label=label, stop=stop, progress=progress, recorder=frames,
                        before_decision=_steering(p), before_step=_pushes(p), until=p.ctrl.take_steps)
    except SimulationDiverged as e:
        rec, diverged = e.recording, e.reason
    finally:
        p.ctrl.close()  # the balance planner's worker processes
    timing = dict(wall_s=time.perf_counter() - wall0, cpu_s=time.thread_time() - cpu0)
    return _build_take(p, clips, o, rec, diverged, timing)


def _prepare(rig: Rig, clips, o: _Options) -> _Prepared:
    """The take's rig at its strength, its clips read once and planned, the pushes and goals
    checked against the plan, the simulation at the first pose and the controller started."""
    from .control.demands import reference_demands
    from .control.factory import make_controller
    from .control.goals import check_policy_options
    from .control.plan import MotionPlan, load_clip
    from .push import check_pushes
    from .simulation import Simulation

    rig = rig.with_strength(o.strength)
    refs = []
    for src, seconds in clips:
        ref, name = load_clip(rig, src)
        refs.append((ref, seconds, name))
    plan = MotionPlan(rig, refs, blend=o.blend)
    seconds = plan.total_steps / 120.0
    pushes = check_pushes(o.pushes, rig, seconds)  # inside the take
    goals = check_policy_options(o.controller, o.mode, o.noise_scale, o.goals, seconds, o.policy)
    gains = None
    if o.controller == "policy":
        from .control.policy import check_policy_rig
        from .muscle_step import PDGains

        check_policy_rig(o.policy.meta, rig, o.policy.path or "policy")
        # The muscles must respond as they did in training.
        gains = PDGains.for_rig(rig, o.policy.meta["stiffness"], o.policy.meta["damping"])
    sim = Simulation(rig, o.backend, fatigue=o.fatigue, gains=gains)
    q0, v0, _ = plan.sample(0)
    q0 = sim.start_at(q0, v0)
    ctrl = make_controller(o.controller, sim, plan, o.params, o.policy, o.mode, o.noise_scale, o.seed)
    demands = []
    if o.controller == "tracking":  # what each clip asks of the body (engine.control.demands)
        unique = {id(seg.clip): seg.clip for seg in plan.segments}  # a clip chained twice is one clip
        demands = [reference_demands(ctrl, sim, clip) for clip in unique.values()]
        sim.physics.set_q(q0, v0)
        sim.state = sim.physics.body_state()
        ctrl.start(sim)  # the stand controller starts in its balanced pose
    return _Prepared(rig, refs, plan, pushes, goals, sim, ctrl, demands)


def _steering(p: _Prepared):
    """Before each decision, a heading-mode policy's goal as the take reaches it (or None)."""
    if not p.goals:
        return None
    from .control.goals import GoalSchedule
    from .control.policy import facing_angle

    steer = GoalSchedule(p.goals)
    return lambda sim: steer.apply(p.ctrl, sim.time, facing_angle(sim.state.rot))


def _pushes(p: _Prepared):
    """Before each physics step, the external force of the pushes active in it (or None)."""
    if not p.pushes:
        return None
    from .push import PushSchedule

    return PushSchedule(p.rig, p.pushes, p.sim.dt).apply


def _frame_recorder(p: _Prepared, fps: int):
    """A Sampler of the take's arrays at each output frame (the scene clock passing a physics
    step), that ends the take once the pelvis is down (is_down); frame 0, the start
    pose, is kept here."""
    from .simulation import Sampler
    from .transforms import matrix_to_quat

    rig, plan, sim, reference = p.rig, p.plan, p.sim, p.ctrl.reference_now  # the reference as played

    frame_step = lambda k: round(k * (1.0 / fps) * 120)  # output frame k's physics step (np.round's half-even)
    upcoming = [1]  # the next frame's number: the steps come in order, and a take may run on
    # past its plan (Controller.take_steps), so the frames are not listed up front

    def at_frame(step: int) -> bool:
        while frame_step(upcoming[0]) < step:
            upcoming[0] += 1
        return frame_step(upcoming[0]) == step

    def frame(sim, fatigue, activation, force) -> dict:
        q, _ = sim.physics.get_q()
        q_ref = reference(sim)[0]
        s = sim.state
        return dict(body_pos=s.pos, body_quat=matrix_to_quat(s.rot), q=q, q_ref=q_ref,
                    activation=activation.astype(np.float32), force=force.astype(np.float32),
                    MA=fatigue.MA.astype(np.float32), MR=fatigue.MR.astype(np.float32),
                    MF=fatigue.MF.astype(np.float32),
                    residual_force=sim.residual_force, residual_torque=sim.residual_torque,
                    joint_err_deg=joint_errors_deg(rig, plan.space.diff(q, q_ref)),
                    root_err_cm=100.0 * float(np.linalg.norm(q[:3] - q_ref[:3])), segment=plan.segment_index(sim.steps))

    def fell(sim, f) -> str | None:
        z, z_ref = f["q"][2], f["q_ref"][2]
        return (f"fell at t = {sim.time:.2f} s (pelvis {z:.2f} m above the floor, the clip's {z_ref:.2f})"
                if is_down(z, z_ref) else None)

    rec = Sampler(lambda sim, res: frame(sim, res.fatigue, res.activation, res.force), at=at_frame, ends=fell)
    zeros = np.zeros(rig.num_muscles)
    rec.recording.add(sim.time, frame(sim, sim.fatigue, zeros, zeros))
    return rec


def _build_take(p: _Prepared, clips, o: _Options, rec, diverged: str, timing: dict) -> Take:
    """The Take of a run: its arrays and meta (parameters, clips, how it ended, timing)."""
    rig, plan, sim, ctrl = p.rig, p.plan, p.sim, p.ctrl
    arrays = dict(rec.data, times=rec.times)
    arrays["segment"] = arrays["segment"].astype(np.int32)
    fell = bool(rec.stop_reason) and not rec.interrupted
    interrupted = rec.interrupted
    partial = fell or bool(diverged) or interrupted
    n = plan.total_steps
    meta = dict(
        fps=o.fps, seed=o.seed, controller=o.controller, backend=o.backend, rig=rig.name, strength=rig.strength,
        clips=[dict(name=name, seconds=float(sec), frames=int(ref.num_frames),
                    source=str(src) if not hasattr(src, "meta") else name,
                    calibration=ref.meta.get("calibration"), calibration_end=ref.meta.get("calibration_end"),
                    checks=ref.meta.get("checks") or [],
                    repaired=ref.meta.get("repaired") or [], root_path=ref.meta.get("root_path"),
                    levelled_feet=ref.meta.get("levelled_feet") or {})
               for (ref, sec, name), (src, _) in zip(p.refs, clips)],
        fatigue=asdict(o.fatigue), tracking=_params_dict(o.params) if o.controller == "tracking" else None,
        policy=dict(mode=o.mode, noise_scale=ctrl.noise_scale, goals=[g.as_dict() for g in p.goals],
                    period=ctrl.period) if o.controller == "policy" else None,
        blend_s=o.blend, demands=p.demands, pushes=[push.as_dict() for push in p.pushes],
        # ground_force_gap_N: mean |ground force the physics gave - the one the tracker planned|
        # (N); pace: the pace governor; stand: the balanced pose the stand controller held;
        # balance: the planner's figures (Controller.report; None where a controller has none)
        **{**dict.fromkeys(("ground_force_gap_N", "pace", "stand", "balance")), **ctrl.report()},
        segments=[dict(label=s.label, start_s=s.start / 120.0, seconds=s.steps / 120.0, phase_frame=s.phase,
                       loop=s.clip.loop, loop_note=s.clip.describe() or None)
                  for s in plan.segments],
        planned_seconds=n / 120.0, simulated_seconds=sim.time,
        fell=fell, diverged=bool(diverged), interrupted=interrupted, partial=partial,
        stopped_at_s=sim.time if partial else None, stop_reason=diverged or rec.stop_reason,
        versions=_versions(), muscle_names=list(rig.muscle_names), groups=list(GROUPS),
        timing=dict(timing, controller_s=rec.controller_s,
                    prepare_s=ctrl.stats.get("prepare_s", 0.0),
                    solve_s=ctrl.stats.get("solve_s", 0.0), muscles_and_physics_s=rec.step_s,
                    decisions=ctrl.stats.get("decisions", (sim.steps + ctrl.period - 1) // ctrl.period),
                    solver_steps=ctrl.stats.get("solver_steps", 0),
                    solver_fallbacks=ctrl.stats.get("solver_fallbacks", 0),
                    steps=sim.steps),
    )
    take = Take(meta=meta, **arrays)
    take.meta["summary"] = summarize(take, rig)
    return take


def is_partial(meta: dict) -> bool:
    """The take stopped before its planned end (fell, diverged or interrupted); takes saved
    before `partial` existed say it through fell / diverged."""
    return bool(meta.get("partial", meta.get("fell") or meta.get("diverged")))


def _params_dict(params) -> dict:
    d = asdict(params)
    return json.loads(json.dumps(d, default=float))


EFFORT_WINDOW_S = 2.0  # s: the take's opening, where the effort the clip takes is measured
EXHAUSTED_SHARE = 0.25  # a group counts as exhausted once muscles with this share of its f0 are


def effort(take: Take, rig: Rig, p: fat.FatigueParams) -> tuple[dict, dict]:
    """What the take asks of each muscle group, and how long 3CC-r lets it keep that up.

    Each muscle's effort is its mean activation over the first EFFORT_WINDOW_S seconds; a
    constant load that size empties its M_R after fatigue.exhaustion_time (never at or below
    fatigue.endurance_limit). Per group: the f0-weighted mean effort, and the time by which
    muscles holding EXHAUSTED_SHARE of the group's strength have run out (None: never, or
    fatigue off). The group mean alone hides the hardest-working muscles: on the walk at
    fatigue scale 50 it predicts 13-16 s for the legs, this quartile 5.3 s, and the gait
    gives way at 6 s (measured, tests/test_take.py). `p`: the take's fatigue rates."""
    sel = (take.times > 0) & (take.times <= EFFORT_WINDOW_S)
    if not sel.any():
        sel = np.ones(take.num_frames, bool)
    a = take.activation[sel].astype(np.float64).mean(0)
    group_effort = take.group_mean("activation", rig)[sel].mean(0)
    ends = np.array([fat.exhaustion_time(float(x), p) or np.inf for x in a])
    by_group, exhausted = {}, {}
    for g, name in enumerate(GROUPS):
        idx = np.flatnonzero(rig.muscle_group == g)
        w = rig.muscle_f0[idx]
        by_group[name] = round(float(group_effort[g]), 4)
        order = np.argsort(ends[idx], kind="stable")
        share = np.cumsum(w[order]) / w.sum()
        t_end = float(ends[idx][order][np.searchsorted(share, EXHAUSTED_SHARE)])
        exhausted[name] = round(t_end, 2) if np.isfinite(t_end) else None
    return by_group, exhausted


def headings(take: Take) -> list[dict]:
    """How a heading-mode policy take met each heading goal (engine.control.goals)."""
    from .control.goals import Goal, heading_report
    from .control.policy import facing_angle
    from .transforms import quat_to_matrix

    goals = [Goal(**g) for g in ((take.meta.get("policy") or {}).get("goals") or [])]
    if not goals:
        return []
    facing = facing_angle(quat_to_matrix(take.body_quat[:, :1]))  # the root's, as the policy sees it
    return heading_report(take.times, facing, goals, float(take.meta["planned_seconds"]))


def summarize(take: Take, rig: Rig) -> dict:
    """The figures `sinew simulate --json` prints."""
    from .fall import diagnose
    from .gait import take_gait
    from .push import recoveries

    m = take.meta
    fatigue = fat.FatigueParams(**m["fatigue"])
    effort_by_group, exhausted_s = effort(take, rig, fatigue)
    t = m["timing"]
    sim_s = float(m["simulated_seconds"])
    skip = take.times > 0  # frame 0 is the start pose
    mf = take.group_mean("MF", rig)
    rf = np.linalg.norm(take.residual_force, axis=1)
    rt = np.linalg.norm(take.residual_torque, axis=1)
    return dict(
        seconds=round(sim_s, 4),
        planned_seconds=m["planned_seconds"],
        realtime_factor=round(sim_s / t["wall_s"], 3) if t["wall_s"] > 0 else None,
        joint_err_deg_mean=round(float(take.joint_err_deg[skip].mean()), 3) if skip.any() else 0.0,
        root_err_cm_mean=round(float(take.root_err_cm[skip].mean()), 3) if skip.any() else 0.0,
        fell=bool(m["fell"]), diverged=bool(m["diverged"]), stopped_at_s=m["stopped_at_s"],
        fall=diagnose(take, rig),  # which way, from when and why (None: it did not fall)
        interrupted=bool(m.get("interrupted")), partial=is_partial(m),
        residual_strength=(m.get("tracking") or {}).get("residual", 0.0),  # a policy applies none
        strength=m.get("strength", 1.0),  # the muscles' f0 x this (takes before it: 1)
        residual_mean_N=round(float(rf[skip].mean()), 3) if skip.any() else 0.0,
        residual_max_N=round(float(rf.max()), 3),
        residual_torque_mean_Nm=round(float(rt[skip].mean()), 3) if skip.any() else 0.0,
        residual_mean_body_weights=round(float(rf[skip].mean()) / (rig.mass_kg * 9.81), 4) if skip.any() else 0.0,
        ground_force_gap_body_weights=(round(m["ground_force_gap_N"] / (rig.mass_kg * 9.81), 4)
                                       if m.get("ground_force_gap_N") is not None else None),
        MF_mean_by_group={g: round(float(mf[:, i].mean()), 5) for i, g in enumerate(GROUPS)},
        MF_final_by_group={g: round(float(mf[-1, i]), 5) for i, g in enumerate(GROUPS)},
        effort_by_group=effort_by_group, exhausted_after_s_by_group=exhausted_s,
        endurance_limit=round(fat.endurance_limit(fatigue), 4),
        pace=m.get("pace"),
        pushes=recoveries(take), gait=take_gait(take, rig), headings=headings(take),
        frames=take.num_frames, fps=m["fps"],
        step_ms=dict(
            controller_per_step=round(1e3 * t["controller_s"] / max(t["steps"], 1), 4),
            solve_per_step=round(1e3 * t["solve_s"] / max(t["steps"], 1), 4),
            muscles_and_physics_per_step=round(1e3 * t["muscles_and_physics_s"] / max(t["steps"], 1), 4),
        ),
    )
