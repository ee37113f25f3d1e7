"""Sinew's Blender extension (bpy only): retarget, Simulate Fatigued Take, muscle display.

Blender loads this package as bl_ext.<repo>.sinew; code here uses relative imports. The
engine travels inside the package (sinew/engine, sinew/rigs, copied there by
tools/build_extension.py) and is adapted, never duplicated. Files are written only where
the user asks (exported bone maps, batch output); the extension keeps nothing on disk.
"""
from __future__ import annotations

_MODULES = ("props", "prefs", "operators", "ui")


def _modules():
    import importlib

    return [importlib.import_module(f"{__package__}.{m}") for m in _MODULES]


def register() -> None:
    from pathlib import Path

    from . import runtime

    runtime.check(Path(__file__).resolve().parent)  # wrong platform or a missing wheel: say so now
    for m in _modules():
        m.register()


def unregister() -> None:
    for m in reversed(_modules()):
        m.unregister()
