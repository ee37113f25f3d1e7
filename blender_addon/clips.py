"""The clips a take plays, as the engine's References at 120 Hz: the armature's own action
retargeted to the model, or a clip file (BVH or reference .npz), either one possibly a pose
held still ('walk.bvh@0.5', 'ACTION@0.5'). Each is checked before any simulation work."""
from __future__ import annotations

from pathlib import Path

from .engine.errors import InputFileError, ParameterError, SinewError
from .model import load_model
from .scene import bpy_abspath, scene_fps


def action_reference(context, arm, frame_start: int, frame_end: int, keep_calibration: bool = False, rt=None):
    """The armature's current animation retargeted to the model (a Reference at 120 Hz); a
    calibration pose at its start or its end is skipped unless keep_calibration. rt: the armature's
    Retargeter, where the run has built it (else built here)."""
    from .armature import action_motion

    if rt is None:
        from .retarget import retargeter

        rt = retargeter(arm)
    if arm.animation_data is None or arm.animation_data.action is None:
        raise ParameterError("clip", f"armature {arm.name!r} has no action to simulate; choose a clip file")
    if frame_end <= frame_start:
        raise ParameterError("clip", f"the action's frame range {frame_start}..{frame_end} is empty")
    motion = action_motion(arm, rt.skeleton, frame_start, frame_end, scene_fps(context.scene))
    ref = rt.to_model(motion, source=f"action {arm.animation_data.action.name}", keep_calibration=keep_calibration)
    if ref.meta.get("levelled_feet"):  # its feet rest turned from its soles (engine.motion.soles): the bake maps
        from .retarget import keep_pose  # back through the levelled pose, this run's and any later one

        keep_pose(arm, rt)
    return ref


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
