"""Sinew's Blender extension (bpy only): retarget, Simulate Fatigued Take, muscle display.

Blender loads this package as bl_ext.<repo>.sinew; code here uses relative imports and
adapts engine code rather than duplicating it. The operators and panels arrive with the
Blender-extension issue; until then the extension registers nothing.
"""


def register() -> None:
    pass


def unregister() -> None:
    pass
