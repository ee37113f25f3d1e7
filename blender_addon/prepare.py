"""One entry point for the Simulate operator and the batch script: a take's options checked
(by engine/options.py's schema and the engine's own checks) and its clips loaded before any
work, giving a SimulationJob ready to run; and the sidebar's settings (Scene.sinew) read as
those options. bpy is imported only through the functions it calls."""
from __future__ import annotations

from pathlib import Path

from .clips import action_reference, check_clip_file, split_hold
from .engine.errors import InputFileError, ParameterError
from .job import SimulationJob, fatigue_params
from .model import load_model
from .retarget import check_editable, retargeter
from .scene import bpy_abspath, scene_fps


def prepare_simulation(context, arm, clips, fps=None, controller="tracking", policy=None, fatigue_scale=1.0,
                       F=0.01, R=0.002, r=2.0, residual=0.0, seed=0, repetitions=None, keep_calibration=False,
                       pushes=(), pace=1.0, mode="track", noise_scale=None, headings=(), speed=None,
                       balance=None, strength=None, workers=None, wait=True) -> SimulationJob:
    """Check everything before any work and return a job ready to run.

    clips: [(path or "ACTION", seconds or None)]; None seconds = the clip's own length (times
    `repetitions` when given, at least 1); a calibration pose at a clip's start or end is skipped unless
    keep_calibration. pushes: engine.push specs (a text field's string, or a list). pace: the
    tracking controller's pace governor strength (engine.control.pace); wait: the clip waits for a
    body behind it (its eq. 2). mode, noise_scale,
    headings (TURN[@TIME] specs, a list or one text field) and speed: a policy's mode
    (engine.control.goals). balance: the tracking controller plans its balance without the
    residual (engine.control.balance; `residual` is then ignored); None (the default) plans it
    unless `residual` asks for a residual (an analysis take). workers: the planner's processes
    (None: planner_workers, the add-on's preference). strength: the muscles' f0 x this
    (engine.take.check_strength: None is the tracking default, and a policy's own). Nothing in
    the scene or the armature is changed. The defaults are engine/options.py's. The armature's
    Retargeter is built once, here: the action's clips are made with it and the job carries it
    to the bake (SimulationJob.retargeter)."""
    from .engine.control.goals import check_policy_options, goals_from_specs
    from .engine.control.tracking import TrackingParams
    from .engine.options import check_value
    from .engine.push import check_pushes, parse_pushes
    from .engine.take import check_balance, check_fps, check_strength

    planner = None
    workers = planner_workers(context) if workers is None else workers
    if balance:  # the panel's residual field is then out of play
        planner, residual = check_balance(controller, True, None, workers)
    elif balance is None:  # on unless a residual is asked for (engine.take.check_balance)
        planner, residual = check_balance(controller, None, residual or None, workers)
    TrackingParams(residual=residual, pace=pace, sync=bool(wait), balance=planner).validate()
    if controller == "tracking":
        strength = check_strength(controller, strength=strength)
    goals = goals_from_specs(mode, headings, speed)  # read now; checked below, once, against the take and policy
    check_value("repetitions", repetitions)  # as --repetitions is checked (engine/options.py)

    if arm is None or getattr(arm, "type", None) != "ARMATURE":
        raise ParameterError("armature", f"{getattr(arm, 'name', arm)!r} is not an armature")
    check_editable(arm)
    rt = retargeter(arm)  # the rig must map before any simulation work; built once for the run
    fps = check_fps(round(scene_fps(context.scene), 6) if fps is None else fps)
    out = []
    for src, seconds in clips:
        src, at = split_hold(src)  # "walk.bvh@0.5" / "ACTION@0.5": that pose held still
        if src == "ACTION":
            ref = action_reference(context, arm, context.scene.frame_start, context.scene.frame_end,
                                   keep_calibration, rt=rt)
        else:
            ref = check_clip_file(src, keep_calibration)
        if at is not None:
            ref = ref.held_at(at, "the action" if src == "ACTION" else Path(src).name)
        length = ref.seconds if seconds is None else float(seconds)
        if seconds is None and repetitions:
            length = ref.seconds * int(repetitions)
        out.append((ref, length))
    if controller == "policy":
        if not policy:
            raise ParameterError("policy", "the policy controller needs a policy file")
        if not Path(bpy_abspath(policy)).is_file():
            raise InputFileError(bpy_abspath(policy), "policy file not found")
        from .engine.control.policy import load_policy

        policy = load_policy(bpy_abspath(policy), load_model())  # another rig, a broken file: refused now
        strength = check_strength(controller, policy, strength)  # its own; another refused
    else:
        policy = None  # a path left in the panel's field: the tracking controller runs none
    seconds = sum(round(120 * s) for _, s in out) / 120.0
    pushes = check_pushes(parse_pushes(pushes) if isinstance(pushes, str) else pushes, load_model(), seconds)
    # the one check of the goals: engine.take.simulate hands these CheckedGoals back as they are
    goals = check_policy_options(controller, mode, noise_scale, goals, seconds, policy)
    return SimulationJob(out, fps, controller=controller, fatigue=fatigue_params(fatigue_scale, F, R, r),
                         residual=residual, seed=seed, policy=policy, pushes=pushes, pace=pace, wait=bool(wait),
                         mode=mode,
                         noise_scale=noise_scale, goals=goals, balance=planner, strength=strength, retargeter=rt)


def planner_workers(context) -> int:
    """The balance planner's processes for a take made in Blender: as on the command line, one
    per CPU core on Linux (forked from Blender's process, from the simulation's thread: the
    workers only play rollouts, never touch bpy, and the take is the same bit for bit), 0 (in
    Blender's process) elsewhere or when the preference "Balance on every core" is off."""
    from . import prefs
    from .engine.control.balance import default_workers

    p = prefs.get(context)
    return default_workers() if p is None or p.balance_on_every_core else 0


def settings_job(context, s) -> tuple[object, SimulationJob]:
    """The armature and job for the sidebar's settings (Scene.sinew)."""
    arm = s.armature or context.active_object
    if arm is None or arm.type != "ARMATURE":
        raise ParameterError("armature", "choose an armature in the Sinew tab (or make one active)")
    if s.clip_source == "FILE":
        if not s.clip_path:
            raise ParameterError("clip", "choose a clip file (BVH or reference .npz)")
        src = bpy_abspath(s.clip_path)
    else:
        src = "ACTION"
    if s.hold_pose:
        src = f"{src}@{s.hold_at!r}"
    seconds = None if s.length_mode == "REPEAT" else s.seconds
    policy = s.policy_path
    if s.controller == "policy" and not policy:
        from . import prefs

        p = prefs.get(context)
        policy = p.default_policy if p is not None else ""
    job = prepare_simulation(context, arm, [(src, seconds)], controller=s.controller, policy=policy,
                             fatigue_scale=s.fatigue_scale, F=s.F, R=s.R, r=s.r, residual=s.residual,
                             seed=s.seed, repetitions=s.repetitions if s.length_mode == "REPEAT" else None,
                             keep_calibration=s.keep_calibration, pushes=s.pushes, pace=s.pace, wait=s.wait,
                             balance=s.balance and s.controller == "tracking",
                             strength=s.strength if s.controller == "tracking" else None, **policy_mode_options(s))
    return arm, job


def policy_mode_options(s) -> dict:
    """The panel's policy mode settings as prepare_simulation takes them (only what the mode uses)."""
    if s.controller != "policy":
        return {}
    mode = s.policy_mode
    return dict(mode=mode, noise_scale=s.noise_scale if mode == "generate" else None,
                headings=s.headings if mode == "heading" else (), speed=s.speed if mode == "heading" else None)


def frame_start_for(context, s) -> int:
    return context.scene.frame_start if s.use_scene_start else s.frame_start
