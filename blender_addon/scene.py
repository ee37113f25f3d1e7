"""What the add-on reads from Blender's scene and paths: the frame rate, and a path that may
be blend-file relative ('//walk.bvh'). bpy is imported only when called."""
from __future__ import annotations


def scene_fps(scene) -> float:
    """The scene's frame rate; 120 / 1.0000004 (what importers write) counts as 120."""
    fps = scene.render.fps / scene.render.fps_base
    return float(round(fps)) if abs(fps - round(fps)) < 1e-3 else fps


def bpy_abspath(path: str) -> str:
    try:
        import bpy

        return bpy.path.abspath(path)
    except Exception:
        return path
