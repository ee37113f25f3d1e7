"""What the operators and the batch script share: bone maps, retarget, simulate, bake.

Everything that touches the engine goes through here, so the sidebar, the modal operator
and `scripts/sinew_bake.py` run one code path. Functions take plain values and bpy objects
and raise SinewError (engine.errors) with a one-line reason on bad input.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np

from .engine.errors import InputFileError, ParameterError, SinewError
from .engine.atomic import write_text
from .engine.interrupt import StopFlag
from .engine.motion.presets import MODEL_BODIES, PRESET_NAMES, guess_mapping, match_preset, resolve_mapping

_RIG = None


def package_root() -> Path:
    return Path(__file__).resolve().parent


def load_model():
    """The human284 rig (cached)."""
    global _RIG
    if _RIG is None:
        from .engine.rig import load_rig

        _RIG = load_rig("human284")
    return _RIG


def meshes_path() -> Path:
    from .engine.rig import RIGS_DIR

    return RIGS_DIR / "human284" / "meshes.npz"


# ---- bone maps ---------------------------------------------------------------------------
def detect_mapping(arm, preset: str = "AUTO") -> tuple[dict, str]:
    """(mapping, label): a named preset, or the best preset / structural guess ('AUTO')."""
    from .armature import armature_skeleton

    skel = armature_skeleton(arm)
    if preset and preset != "AUTO":
        return match_preset(skel, preset.lower()), preset.lower()
    try:
        return resolve_mapping(skel)
    except ParameterError:
        scored = [(len(match_preset(skel, p)), p) for p in PRESET_NAMES]
        n, best = max(scored)
        g = guess_mapping(skel)
        return (g, "guess") if len(g) >= n else (match_preset(skel, best), best)


def stored_mapping(arm) -> dict:
    return {it.body: it.bone for it in arm.sinew.bone_map if it.bone}


def store_mapping(arm, mapping: dict, label: str) -> None:
    s = arm.sinew
    # edited in place, never cleared: on a library override the items that came from the
    # library cannot be removed, only changed (and new ones appended)
    items = {it.body: it for it in s.bone_map}
    for it in s.bone_map:
        if it.body not in MODEL_BODIES:
            it.bone = ""
    for body in MODEL_BODIES:
        it = items.get(body)
        if it is None:
            it = s.bone_map.add()
            it.body = body
        it.bone = mapping.get(body, "")
    s.map_source = label
    save_state(arm)


def save_state(arm) -> None:
    """Mirror the bone map and retarget state into the string arm.sinew_saved (props)."""
    s = arm.sinew
    arm.sinew_saved = json.dumps(dict(mapping=stored_mapping(arm), source=s.map_source, retargeted=s.retargeted,
                                      model_scale=s.model_scale))


def restore_state(arm) -> bool:
    """Put the mirrored state back where a reload lost it (library overrides); True if it did."""
    try:
        saved = json.loads(arm.sinew_saved or "{}")
    except ValueError:
        return False
    s = arm.sinew
    if not saved or (stored_mapping(arm) == saved["mapping"] and s.retargeted == saved["retargeted"]):
        return False
    store_mapping(arm, saved["mapping"], saved["source"])
    s.retargeted, s.model_scale = saved["retargeted"], saved["model_scale"]
    save_state(arm)
    return True


def export_mapping(arm, path) -> Path:
    path = Path(path)
    data = dict(format="sinew-bone-map", version=1, armature=arm.name, source=arm.sinew.map_source,
                mapping=stored_mapping(arm))
    write_text(path, json.dumps(data, indent=2))
    return path


def import_mapping(arm, path) -> dict:
    from .engine.motion.presets import load_map

    mp = load_map(path)
    bad = [b for b in mp if b not in MODEL_BODIES]
    if bad:
        raise InputFileError(path, f"unknown model bodies {bad}")
    names = set(arm.data.bones.keys())
    missing = {b: s for b, s in mp.items() if s and s not in names}
    if missing:
        raise InputFileError(path, f"bones not in armature {arm.name!r}: {missing}")
    store_mapping(arm, mp, f"file {Path(path).name}")
    return mp


def retargeter(arm, mapping: dict | None = None):
    """The engine Retargeter for this armature (its stored map, else a detected one)."""
    from .armature import armature_skeleton
    from .engine.motion import Retargeter

    skel = armature_skeleton(arm)
    mp = mapping if mapping is not None else stored_mapping(arm)
    if not mp:
        mp, label = detect_mapping(arm)
    known = set(skel.names)
    outside = {b: s for b, s in mp.items() if s not in known}
    if outside:
        raise ParameterError("mapping", f"bones {outside} are not in the main bone tree of {arm.name!r}")
    try:
        return _aligned_retargeter(arm, skel, mp)
    except ParameterError as e:
        raise ParameterError("mapping", f"armature {arm.name!r} cannot be mapped to the muscle model: "
                             f"{str(e).split(': ', 1)[-1]} (edit the bone map in the Sinew tab or "
                             "import a JSON map)") from None


POSE_KEY = "sinew_source_pose"  # the pose an armature that does not rest standing is aligned on


def _aligned_retargeter(arm, skel, mp):
    """Retargeter.build for the armature. One whose rest pose does not stand (joint axes along
    the bones, as a BVH of some libraries imports) is aligned on its action's most upright
    frame (engine.motion.standing), and that pose is kept on the armature, so that the bake,
    after the new Action replaces the old, maps back through the same alignment."""
    import bpy

    from .engine.motion import Retargeter
    from .engine.motion.standing import RestPoseDoesNotStand, SourcePose

    stored = arm.get(POSE_KEY)
    pose = None
    if stored:
        try:
            pose = SourcePose.from_meta(json.loads(stored), skel)
        except (ValueError, KeyError, TypeError, ParameterError):
            pose = None  # the armature changed since: found again below
    try:
        return Retargeter.build(load_model(), skel, preset="map", mapping=mp, exact=True, pose=pose)
    except RestPoseDoesNotStand:
        from .armature import action_motion

        ad = arm.animation_data
        if ad is None or ad.action is None:
            raise
        start, end = (int(round(f)) for f in ad.action.frame_range)
        motion = action_motion(arm, skel, start, max(end, start + 1), scene_fps(bpy.context.scene))
        rt = Retargeter.build(load_model(), skel, preset="map", mapping=mp, exact=True, motion=motion)
        arm[POSE_KEY] = json.dumps(rt.pose.meta())
        return rt


def check_editable(arm) -> None:
    """The armature object must be local or an editable library override: Sinew stores the
    bone map on it and gives it a new Action. Linked data is never written."""
    if getattr(arm, "library", None) is not None:
        raise ParameterError("armature", f"{arm.name!r} is linked from {arm.library.filepath!r} and cannot be "
                             "edited: make a library override of it first (Object > Library Override > Make)")
    ov = getattr(arm, "override_library", None)
    if ov is not None and getattr(ov, "is_system_override", False):
        raise ParameterError("armature", f"{arm.name!r} is a non-editable (system) library override: make it "
                             "editable first (Object > Library Override > Make Editable)")


def retarget_to_model(context, arm, prefs=None) -> dict:
    """Detect (if needed) and store the bone map, then build the display. Returns a summary."""
    from . import display

    check_editable(arm)
    if not stored_mapping(arm):
        mp, label = detect_mapping(arm)
        store_mapping(arm, mp, label)
    rt = retargeter(arm)
    info = display.build_display(context, arm, rt, load_model(), meshes_path(), prefs)
    arm.sinew.model_scale = 1.0 / rt.scale
    arm.sinew.retargeted = True
    save_state(arm)
    info.update(mapped_bodies=len(rt.mapping), character_scale=round(1.0 / rt.scale, 4))
    return info


# ---- clips and simulation ------------------------------------------------------------------
def scene_fps(scene) -> float:
    """The scene's frame rate; 120 / 1.0000004 (what importers write) counts as 120."""
    fps = scene.render.fps / scene.render.fps_base
    return float(round(fps)) if abs(fps - round(fps)) < 1e-3 else fps


def action_reference(context, arm, frame_start: int, frame_end: int, keep_calibration: bool = False):
    """The armature's current animation retargeted to the model (a Reference at 120 Hz); a
    calibration pose at its start is skipped unless keep_calibration."""
    from .armature import action_motion

    rt = retargeter(arm)
    if arm.animation_data is None or arm.animation_data.action is None:
        raise ParameterError("clip", f"armature {arm.name!r} has no action to simulate; choose a clip file")
    if frame_end <= frame_start:
        raise ParameterError("clip", f"the action's frame range {frame_start}..{frame_end} is empty")
    motion = action_motion(arm, rt.skeleton, frame_start, frame_end, scene_fps(context.scene))
    return rt.to_model(motion, source=f"action {arm.animation_data.action.name}", keep_calibration=keep_calibration)


def split_hold(src: str) -> tuple[str, float | None]:
    """'walk.bvh@0.5' -> ('walk.bvh', 0.5), 'ACTION@0.5' -> ('ACTION', 0.5); else (src, None)."""
    if src.startswith("ACTION@"):
        try:
            return "ACTION", float(src[len("ACTION@"):])
        except ValueError:
            return src, None
    from .engine.control.plan import split_hold as split_path

    path, at = split_path(bpy_abspath(src))
    return (str(path), at) if at is not None else (src, None)


def check_clip_file(path: str, keep_calibration: bool = False):
    """Fail early and clearly on a missing or unreadable clip."""
    p = Path(bpy_abspath(path))
    if not p.is_file():
        raise InputFileError(p, "clip file not found")
    if p.suffix.lower() not in (".bvh", ".npz"):
        raise InputFileError(p, "unknown clip type: expected a .bvh file or a reference .npz")
    from .engine.control.plan import load_clip

    try:
        ref, _ = load_clip(load_model(), p, keep_calibration=keep_calibration)
    except SinewError:
        raise
    except Exception as e:  # a parser that failed in an unexpected way still names the file
        raise InputFileError(p, f"cannot read clip: {e}") from None
    return ref


def bpy_abspath(path: str) -> str:
    try:
        import bpy

        return bpy.path.abspath(path)
    except Exception:
        return path


class Cancelled(SinewError):
    """The user cancelled the simulation."""


class SimulationJob:
    """One engine.take.simulate call, run in a worker thread so a modal operator can poll it
    and cancel it. The worker never touches bpy; nothing is written to the scene until
    `bake_take` is called with the finished take, so a cancelled job leaves nothing behind.

    Cancelling sets the job's engine.interrupt.StopFlag, which the simulation reads once per
    step (the path Ctrl-C takes on the command line): the take stops there, and `run` raises
    Cancelled, or returns the partial take with keep_partial (the batch script on Ctrl-C).
    """

    def __init__(self, clips, fps: int, controller="tracking", fatigue=None, residual=0.0, seed=0,
                 backend="mujoco", policy=None, pushes=(), pace=1.0, mode="track", noise_scale=None, goals=(),
                 balance=None, strength=None):
        self.clips, self.fps, self.controller, self.balance = clips, int(fps), controller, balance
        self.strength = strength
        self.mode, self.noise_scale, self.goals = mode, noise_scale, list(goals)
        self.fatigue, self.residual, self.seed, self.pace = fatigue, residual, seed, pace
        self.backend, self.policy, self.pushes = backend, policy, list(pushes)
        self.fraction = 0.0
        self.take = None
        self.error: BaseException | None = None
        self.stop = StopFlag()
        self._thread: threading.Thread | None = None
        self.started = self.finished = None

    # the work
    def _progress(self, fraction: float) -> None:
        self.fraction = float(min(max(fraction, 0.0), 1.0))

    def run(self, keep_partial: bool = False):
        """Run to the end (or a cancel) in the calling thread; returns the take (or raises)."""
        from .engine import take as take_mod
        from .engine.control.tracking import TrackingParams

        self.started = time.perf_counter()
        params = TrackingParams(residual=float(self.residual), pace=float(self.pace), balance=self.balance)
        kwargs = dict(controller=self.controller, fatigue=self.fatigue, backend=self.backend,
                      seed=int(self.seed), fps=self.fps, params=params, pushes=self.pushes, mode=self.mode,
                      noise_scale=self.noise_scale, goals=self.goals, strength=self.strength)
        if self.policy:
            kwargs["policy"] = self.policy
        # the engine's simulate holds BLAS to one thread (threadpoolctl): Blender starts numpy
        # before any add-on, so OPENBLAS_NUM_THREADS set now would be too late
        take = take_mod.simulate(load_model(), self.clips, progress=self._progress, stop=self.stop, **kwargs)
        if self.stop.requested and not keep_partial:
            raise Cancelled(f"simulation cancelled at t = {take.meta['simulated_seconds']:.2f} s")
        self.take = take
        self.fraction = 1.0
        self.finished = time.perf_counter()
        return self.take

    def _worker(self):
        try:
            self.run()
        except BaseException as e:  # reported by poll()
            self.error = e

    # the modal side
    def start(self) -> None:
        self._thread = threading.Thread(target=self._worker, name="sinew-simulate", daemon=True)
        self._thread.start()

    def cancel(self, wait: bool = True) -> None:
        self.stop.request("cancelled")
        if wait and self._thread is not None:
            self._thread.join()

    @property
    def done(self) -> bool:
        return self._thread is not None and not self._thread.is_alive()


def fatigue_params(scale=1.0, F=0.01, R=0.002, r=2.0):
    from .engine.fatigue import FatigueParams

    return FatigueParams(F=float(F), R=float(R), r=float(r), scale=float(scale))


# ---- bake -----------------------------------------------------------------------------------
def clips_beyond_the_body(take) -> str:
    """A warning naming the take's clips that ask more than the muscles and the ground can
    give (engine.control.demands), or '' when none does."""
    from .engine.control.demands import demanding, figures

    parts = [f"{Path(d['clip']).name} asks more than this body can do ({figures(d)}): the root residual carries it"
             for d in take.meta.get("demands", []) if demanding(d)]
    return "; ".join(parts)


def tiring_note(take) -> str:
    """The muscle groups that tire out within the take (a quarter of their strength spent,
    engine.take.effort), e.g. 'tiring (3CC-r): right leg spent after ~5 s', or ''."""
    s = take.meta.get("summary", {})
    ends = s.get("exhausted_after_s_by_group") or {}
    soon = [(t, g) for g, t in ends.items() if t is not None and t < s.get("seconds", 0.0)]
    if not soon:
        return ""
    return "tiring (3CC-r): " + ", ".join(f"{g.replace('_', ' ')} spent after ~{t:.0f} s" for t, g in sorted(soon))


def stand_note(take) -> str:
    """For a held pose the stand controller stood (engine.control.stand), e.g. 'stood the pose
    on its muscles alone (the joints moved 3.5 deg on average to balance it)', or ''."""
    st = take.meta.get("stand")
    if not st:
        return ""
    return f"stood the pose on its muscles alone (the joints moved {st['joints_moved_deg_mean']:.1f} deg on average to balance it)"


def fall_note(take) -> str:
    """Which way the character fell, from when and why (engine.fall), e.g. 'it fell at 3.12 s,
    forward, going down from 2.61 s: tired legs (...)', or '' when it did not."""
    from .engine.fall import describe

    d = (take.meta.get("summary") or {}).get("fall")
    return f"it fell {describe(d)}" if d else ""


def balance_note(take) -> str:
    """For a take the balance planner steered (engine.control.balance), e.g. 'balanced on its
    muscles alone (planned ahead; offsets 1.4 deg on average)', or ''."""
    b = take.meta.get("balance")
    if not b:
        return ""
    return f"balanced on its muscles alone (planned ahead; offsets {b['offset_deg_mean']:.1f} deg on average)"


def pace_note(take) -> str:
    """How far the pace governor slowed the clip (engine.control.pace), e.g. 'slowed to 0.62x
    its pace as the legs tired', or '' when it played at its own pace (or held a still pose)."""
    pc = take.meta.get("pace") or {}
    if take.meta.get("stand") or not pc.get("strength") or pc.get("min_rate", 1.0) > 0.99:
        return ""
    return f"slowed to {pc['final_rate']:.2f}x its pace as the legs tired (lowest {pc['min_rate']:.2f}x)"


def calibration_note(take) -> str:
    """The calibration poses skipped at the start of the take's clips, e.g. 'skipped a T-pose
    at the start of walk.bvh (1 frame)', or ''."""
    parts = [f"skipped {'an' if c['calibration']['pose'] == 'A-pose' else 'a'} {c['calibration']['pose']} at the start "
             f"of {Path(c['source']).name} ({c['calibration']['frames']} frame{'s' if c['calibration']['frames'] > 1 else ''})"
             for c in take.meta.get("clips", []) if (c.get("calibration") or {}).get("skipped")]
    return "; ".join(parts)


def heading_note(take) -> str:
    """How a heading-mode policy take met its heading goals (engine.control.goals), e.g.
    'heading +90 deg: reached after 3.2 s', or ''."""
    rows = take.meta.get("summary", {}).get("headings") or []
    return "; ".join(f"heading {r['goal']['turn_deg']:+g} deg: "
                     + ("not reached" if r["reached_after_s"] is None else f"reached after {r['reached_after_s']:.1f} s")
                     for r in rows if r["goal"]["time"] > 0 or r["goal"]["turn_deg"])


def push_note(take) -> str:
    """How the character came through each push (engine.push), e.g. 'push at 2 s: back
    after 0.8 s', or ''."""
    from .engine.push import came_back

    rows = take.meta.get("summary", {}).get("pushes") or []
    parts = []
    for r in rows:
        how = "not reached" if not r["reached"] else "fell" if r["fell"] else came_back(r, digits=1)
        parts.append(f"push at {r['time']:g} s: {how}")
    return "; ".join(parts)


def check_bakeable(take) -> None:
    """A take whose physics diverged is not baked (its last frames are the blow-up): a
    SinewError saying where, so the operator reports it and leaves the scene alone."""
    if take.meta.get("diverged"):
        raise SimulationError(f"{take.meta['stop_reason']}; nothing was baked (a lower fatigue scale, "
                              "another seed or clip may hold)")


class SimulationError(SinewError):
    """The simulation could not give a take worth baking."""


def take_pose(take):
    """(root_pos (N, 3), local_rot (N, B, 4)) of a take's simulated model pose."""
    from .engine.kinematics import q_to_pose
    from .engine.transforms import matrix_to_quat

    root, local = q_to_pose(load_model(), np.asarray(take.q, float))
    return root, matrix_to_quat(local)


def take_table(take) -> np.ndarray:
    """(N, M, 3) display values: activation, M_F, force / f0 (the take's f0: its strength)."""
    f0 = load_model().with_strength(float(take.meta.get("strength", 1.0))).muscle_f0
    return np.stack([np.asarray(take.activation, np.float32), np.asarray(take.MF, np.float32),
                     (np.asarray(take.force, float) / f0).astype(np.float32)], -1)


def bake_take(context, arm, take, frame_start: int | None = None, action_name: str | None = None) -> dict:
    """Bake a take onto the armature as a new Action and write the display's take table.

    The armature's current Action is never modified: the new Action becomes the active one
    and the old one is stashed on a muted NLA track. Returns a summary."""
    from . import display
    from .armature import assign_action, bake_action, unique_action_name

    check_bakeable(take)
    t0 = time.perf_counter()
    scene = context.scene
    if frame_start is None:
        frame_start = scene.frame_start
    rt = retargeter(arm)
    root, local = take_pose(take)
    motion = rt.to_source(root, local, 1.0 / take.fps, 0.0)
    ad = arm.animation_data
    base = ad.action.name if ad is not None and ad.action is not None else arm.name
    base = base.split("_fatigued_")[0]
    name = action_name or unique_action_name(base)
    action, slot = bake_action(arm, motion, int(frame_start), name)
    action["sinew_take"] = json.dumps(dict(fps=take.fps, frames=take.num_frames,
                                           summary=take.meta.get("summary", {}), seed=take.meta.get("seed"),
                                           fatigue=take.meta.get("fatigue"), clips=take.meta.get("clips")),
                                      default=str)
    action.use_fake_user = True
    assign_action(arm, action, slot)
    if not arm.sinew.retargeted or display.names_for(arm.name)["muscles"] not in __import__("bpy").data.objects:
        retarget_to_model(context, arm)
    table = display.write_take_table(context, arm, take_table(take), int(frame_start))
    end = int(frame_start) + take.num_frames - 1
    return dict(action=action.name, frames=take.num_frames, frame_start=int(frame_start), frame_end=end,
                fps=take.fps, table=table.name, bake_s=round(time.perf_counter() - t0, 3),
                slotted=slot is not None)


# ---- one entry point for the operator and the batch script -----------------------------------
def prepare_simulation(context, arm, clips, fps=None, controller="tracking", policy=None, fatigue_scale=1.0,
                       F=0.01, R=0.002, r=2.0, residual=0.0, seed=0, repetitions=None, keep_calibration=False,
                       pushes=(), pace=1.0, mode="track", noise_scale=None, headings=(), speed=None,
                       balance=None, strength=None, workers=None) -> SimulationJob:
    """Check everything before any work and return a job ready to run.

    clips: [(path or "ACTION", seconds or None)]; None seconds = the clip's own length (times
    `repetitions` when given, at least 1); a calibration pose at a clip's start is skipped unless
    keep_calibration. pushes: engine.push specs (a text field's string, or a list). pace: the
    tracking controller's pace governor strength (engine.control.pace). mode, noise_scale,
    headings (TURN[@TIME] specs, a list or one text field) and speed: a policy's mode
    (engine.control.goals). balance: the tracking controller plans its balance without the
    residual (engine.control.balance; `residual` is then ignored); None (the default) plans it
    unless `residual` asks for a residual (an analysis take). workers: the planner's processes
    (None: planner_workers, the add-on's preference). strength: the muscles' f0 x this
    (engine.take.check_strength: None is the tracking default, and a policy's own). Nothing in
    the scene or the armature is changed. The defaults are engine/options.py's."""
    from .engine.control.goals import check_policy_options, goals_from_specs
    from .engine.control.tracking import TrackingParams
    from .engine.push import check_pushes, parse_pushes
    from .engine.take import check_balance, check_fps, check_strength

    planner = None
    workers = planner_workers(context) if workers is None else workers
    if balance:  # the panel's residual field is then out of play
        planner, residual = check_balance(controller, True, None, workers)
    elif balance is None:  # on unless a residual is asked for (engine.take.check_balance)
        planner, residual = check_balance(controller, None, residual or None, workers)
    TrackingParams(residual=residual, pace=pace, balance=planner).validate()
    if controller == "tracking":
        strength = check_strength(controller, strength=strength)
    goals = check_policy_options(controller, mode, noise_scale, goals_from_specs(mode, headings, speed))
    pushes = check_pushes(parse_pushes(pushes) if isinstance(pushes, str) else pushes, load_model())
    if repetitions is not None and not (isinstance(repetitions, int) and repetitions >= 1):
        raise ParameterError("repetitions", f"{repetitions!r}: play each clip at least once (a whole number >= 1)")

    if arm is None or getattr(arm, "type", None) != "ARMATURE":
        raise ParameterError("armature", f"{getattr(arm, 'name', arm)!r} is not an armature")
    check_editable(arm)
    retargeter(arm)  # the rig must map before any simulation work
    fps = check_fps(round(scene_fps(context.scene), 6) if fps is None else fps)
    out = []
    for src, seconds in clips:
        src, at = split_hold(src)  # "walk.bvh@0.5" / "ACTION@0.5": that pose held still
        if src == "ACTION":
            ref = action_reference(context, arm, context.scene.frame_start, context.scene.frame_end,
                                   keep_calibration)
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
    seconds = sum(round(120 * s) for _, s in out) / 120.0
    pushes = check_pushes(pushes, load_model(), seconds)  # inside the take
    goals = check_policy_options(controller, mode, noise_scale, goals, seconds,
                                 policy if controller == "policy" else None)
    return SimulationJob(out, fps, controller=controller, fatigue=fatigue_params(fatigue_scale, F, R, r),
                         residual=residual, seed=seed, policy=policy, pushes=pushes, pace=pace, mode=mode,
                         noise_scale=noise_scale, goals=goals, balance=planner, strength=strength)


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
                             keep_calibration=s.keep_calibration, pushes=s.pushes, pace=s.pace,
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
