"""All or nothing: a bake that fails midway takes back what it made.

    with all_or_nothing(arm):
        bake.bake_take(context, arm, take, start)

On an exception the block's new data-blocks (Action, display objects, meshes, node
groups, materials, ...) are removed, the armature's active Action, slot and NLA tracks
and its Sinew settings (bone map, retarget state, and their mirror arm.sinew_saved that a
file reload restores from) are put back, and the exception goes on
to the caller, which reports it. Nothing is written outside bpy.data."""
from __future__ import annotations

from contextlib import contextmanager

import bpy


def _id_collections():
    """Every bpy.data collection of data-blocks (objects, meshes, actions, ...), from RNA."""
    for prop in bpy.data.bl_rna.properties:
        kind = getattr(bpy.types, prop.fixed_type.identifier, None) if prop.type == "COLLECTION" else None
        if kind is not None and issubclass(kind, bpy.types.ID):
            yield getattr(bpy.data, prop.identifier)


def id_pointers() -> set[int]:
    """Every data-block now in the file, by address."""
    return {id_.as_pointer() for coll in _id_collections() for id_ in coll}


def _animation_state(arm) -> dict | None:
    ad = arm.animation_data
    if ad is None:
        return None
    return dict(action=ad.action, slot=getattr(ad, "action_slot", None),
                tracks={t.as_pointer() for t in ad.nla_tracks})


def _restore_animation(arm, state) -> None:
    ad = arm.animation_data
    if state is None:
        if ad is not None:
            arm.animation_data_clear()
        return
    if ad is None:
        ad = arm.animation_data_create()
    for t in [t for t in ad.nla_tracks if t.as_pointer() not in state["tracks"]]:
        ad.nla_tracks.remove(t)
    ad.action = state["action"]
    if state["slot"] is not None:
        try:
            ad.action_slot = state["slot"]
        except (AttributeError, TypeError, RuntimeError):
            pass


def _settings(arm) -> dict:
    s = arm.sinew
    return dict(retargeted=s.retargeted, model_scale=s.model_scale, map_source=s.map_source,
                bone_map=[(it.body, it.bone) for it in s.bone_map], saved=arm.sinew_saved)


def _restore_settings(arm, saved: dict) -> None:
    s = arm.sinew
    if [(it.body, it.bone) for it in s.bone_map] != saved["bone_map"]:
        s.bone_map.clear()
        for body, bone in saved["bone_map"]:
            it = s.bone_map.add()
            it.body, it.bone = body, bone
    s.retargeted, s.model_scale, s.map_source = saved["retargeted"], saved["model_scale"], saved["map_source"]
    arm.sinew_saved = saved["saved"]  # last: setting the bone map rewrites the mirror


@contextmanager
def all_or_nothing(arm):
    before = id_pointers()
    anim, settings = _animation_state(arm), _settings(arm)
    try:
        yield
    except BaseException:
        _restore_animation(arm, anim)
        _restore_settings(arm, settings)
        new = [id_ for coll in _id_collections() for id_ in coll if id_.as_pointer() not in before]
        if new:
            bpy.data.batch_remove(new)
        raise
