"""The muscle model the add-on drives: the human284 rig (loaded once per Blender session)
and its bone meshes. No bpy here."""
from __future__ import annotations

from pathlib import Path

_RIG = None


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
