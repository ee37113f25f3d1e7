"""The armature's bone map (model body -> bone): detected from a preset or the bone tree,
stored on the armature (arm.sinew.bone_map, mirrored into the string arm.sinew_saved that a
library override's reload restores from), imported and exported as JSON. No bpy import:
the armature's data is reached through the objects handed in."""
from __future__ import annotations

import json
from pathlib import Path

from .engine.atomic import write_text
from .engine.errors import InputFileError, ParameterError
from .engine.motion.presets import MODEL_BODIES, PRESET_NAMES, guess_mapping, match_preset, resolve_mapping


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
