"""Add-on preferences: default policy file, the muscle colour map, and where the balance
planner plays."""
from __future__ import annotations

import bpy
from bpy.props import BoolProperty, EnumProperty, StringProperty


class SINEW_AP_preferences(bpy.types.AddonPreferences):
    bl_idname = __package__

    default_policy: StringProperty(name="Default policy", subtype="FILE_PATH",
                                   description="MuscleVAE policy (.npz from `sinew export-policy`)")
    color_map: EnumProperty(name="Colour map", default="WHITE_RED",
                            items=[("WHITE_RED", "White to red", "MuscleVAE appendix C.3"),
                                   ("BLUE_RED", "Blue to red", ""), ("GREY_ORANGE", "Grey to orange", "")])
    balance_on_every_core: BoolProperty(
        name="Balance on every core", default=True,
        description="Play the balance planner's candidate plans in one process per CPU core, forked from "
                    "Blender's (Linux; elsewhere it plans in Blender's process). The take is the same either "
                    "way; off, it plans on one core, several times slower")

    def draw(self, context):
        col = self.layout.column()
        col.prop(self, "default_policy")
        col.prop(self, "color_map")
        col.prop(self, "balance_on_every_core")


def get(context=None):
    ctx = context or bpy.context
    addon = ctx.preferences.addons.get(__package__)
    return addon.preferences if addon is not None else None


def register():
    bpy.utils.register_class(SINEW_AP_preferences)


def unregister():
    bpy.utils.unregister_class(SINEW_AP_preferences)
