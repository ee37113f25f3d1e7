"""The armature retargeted to the muscle model: the engine's Retargeter for an armature
(engine/motion/retarget.py), built from its stored bone map, and the Retarget operator's
work (store the map, build the display). A run builds the Retargeter once
(prepare.prepare_simulation) and hands it to the clips and the bake."""
from __future__ import annotations

import json

from .bonemap import detect_mapping, save_state, store_mapping, stored_mapping
from .engine.errors import ParameterError
from .model import load_model, meshes_path
from .scene import scene_fps

POSE_KEY = "sinew_source_pose"  # the pose an armature is aligned on where its rest pose does not stand or its feet rest turned


def retargeter(arm, mapping: dict | None = None):
    """The engine Retargeter for this armature (its stored map, else a detected one)."""
    from .armature import armature_skeleton

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
        keep_pose(arm, rt)
        return rt


def keep_pose(arm, rt) -> None:
    """Keep the pose `rt` aligns on, on the armature (read back by `retargeter`)."""
    arm[POSE_KEY] = json.dumps(rt.pose.meta())


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


def retarget_to_model(context, arm, prefs=None, rt=None) -> dict:
    """Detect (if needed) and store the bone map, then build the display. Returns a summary.
    rt: the armature's Retargeter where the caller has it already (the bake's run)."""
    from . import display

    check_editable(arm)
    if not stored_mapping(arm):
        mp, label = detect_mapping(arm)
        store_mapping(arm, mp, label)
    if rt is None:
        rt = retargeter(arm)
    info = display.build_display(context, arm, rt, load_model(), meshes_path(), prefs)
    arm.sinew.model_scale = 1.0 / rt.scale
    arm.sinew.retargeted = True
    save_state(arm)
    info.update(mapped_bodies=len(rt.mapping), character_scale=round(1.0 / rt.scale, 4))
    return info
