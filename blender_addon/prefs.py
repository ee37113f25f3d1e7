"""Add-on preferences: default policy file and the muscle colour map."""
from __future__ import annotations

import bpy
from bpy.props import EnumProperty, StringProperty


class SINEW_AP_preferences(bpy.types.AddonPreferences):
    bl_idname = __package__

    default_policy: StringProperty(name="Default policy", subtype="FILE_PATH",
                                   description="MuscleVAE policy (.npz from `sinew export-policy`)")
    color_map: EnumProperty(name="Colour map", default="WHITE_RED",
                            items=[("WHITE_RED", "White to red", "MuscleVAE appendix C.3"),
                                   ("BLUE_RED", "Blue to red", ""), ("GREY_ORANGE", "Grey to orange", "")])

    def draw(self, context):
        col = self.layout.column()
        col.prop(self, "default_policy")
        col.prop(self, "color_map")


def get(context=None):
    ctx = context or bpy.context
    addon = ctx.preferences.addons.get(__package__)
    return addon.preferences if addon is not None else None


def register():
    bpy.utils.register_class(SINEW_AP_preferences)


def unregister():
    bpy.utils.unregister_class(SINEW_AP_preferences)
