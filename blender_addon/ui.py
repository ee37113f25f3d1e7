"""The "Sinew" sidebar tab in the 3D view: Retarget, Simulate and Display panels."""
from __future__ import annotations

import bpy


class SINEW_UL_bone_map(bpy.types.UIList):
    def draw_item(self, context, layout, data, item, icon, active_data, active_propname, index):
        arm = data.id_data
        row = layout.split(factor=0.4)
        row.label(text=item.body, icon="CHECKMARK" if item.bone else "BLANK1")
        row.prop_search(item, "bone", arm.data, "bones", text="")


class _Panel:
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Sinew"


def _arm(context):
    s = context.scene.sinew
    arm = s.armature or context.active_object
    return arm if arm is not None and arm.type == "ARMATURE" else None


class SINEW_PT_retarget(_Panel, bpy.types.Panel):
    bl_label = "Retarget"

    def draw(self, context):
        lay = self.layout
        s = context.scene.sinew
        lay.prop(s, "armature")
        arm = _arm(context)
        if arm is None:
            lay.label(text="Choose an armature", icon="INFO")
            return
        row = lay.row(align=True)
        row.prop(arm.sinew, "preset", text="")
        row.operator("sinew.detect_map", text="Detect", icon="VIEWZOOM")
        lay.template_list("SINEW_UL_bone_map", "", arm.sinew, "bone_map", arm.sinew, "bone_map_index", rows=6)
        if arm.sinew.map_source:
            lay.label(text=f"Map: {arm.sinew.map_source}")
        row = lay.row(align=True)
        row.operator("sinew.import_map", text="Import", icon="IMPORT")
        row.operator("sinew.export_map", text="Export", icon="EXPORT")
        lay.operator("sinew.retarget", icon="ARMATURE_DATA")
        if arm.sinew.retargeted:
            lay.label(text=f"Character scale {arm.sinew.model_scale:.3f}")


class SINEW_PT_simulate(_Panel, bpy.types.Panel):
    bl_label = "Simulate"

    def draw(self, context):
        from .operators import RUN

        lay = self.layout
        s = context.scene.sinew
        lay.prop(s, "clip_source", expand=True)
        if s.clip_source == "FILE":
            lay.prop(s, "clip_path")
        lay.prop(s, "keep_calibration")
        row = lay.row(align=True)
        row.prop(s, "hold_pose")
        sub = row.row()
        sub.enabled = s.hold_pose
        sub.prop(s, "hold_at")
        lay.prop(s, "length_mode", expand=True)
        lay.prop(s, "seconds" if s.length_mode == "SECONDS" else "repetitions")
        col = lay.column(align=True)
        col.prop(s, "fatigue_scale")
        row = col.row(align=True)
        row.prop(s, "F")
        row.prop(s, "R")
        row.prop(s, "r")
        lay.prop(s, "controller")
        if s.controller == "tracking":  # a policy runs at the strength it was trained at
            lay.prop(s, "strength")
        if s.controller == "policy":
            lay.prop(s, "policy_path")
            lay.prop(s, "policy_mode", expand=True)
            if s.policy_mode == "generate":
                lay.prop(s, "noise_scale")
            elif s.policy_mode == "heading":
                lay.prop(s, "headings")
                lay.prop(s, "speed")
        else:  # a policy applies no root residual and plays at its own pace
            lay.prop(s, "balance")
            row = lay.row()
            row.enabled = not s.balance  # the planner balances without the residual
            row.prop(s, "residual")
            lay.prop(s, "pace")
            lay.prop(s, "wait")
        lay.prop(s, "pushes")
        lay.prop(s, "seed")
        row = lay.row(align=True)
        row.prop(s, "use_scene_start")
        sub = row.row()
        sub.enabled = not s.use_scene_start
        sub.prop(s, "frame_start")
        if RUN["job"] is not None:
            lay.progress(factor=RUN["fraction"], text=f"Simulating {100 * RUN['fraction']:.0f}% (Esc cancels)")
        else:
            lay.operator("sinew.simulate", icon="PLAY")
        if s.last_report:
            lay.label(text=s.last_report)


class SINEW_PT_display(_Panel, bpy.types.Panel):
    bl_label = "Display"

    def draw(self, context):
        lay = self.layout
        arm = _arm(context)
        if arm is None:
            return
        d = arm.sinew
        row = lay.row(align=True)
        row.prop(d, "show_muscles", toggle=True)
        row.prop(d, "show_bones", toggle=True)
        lay.prop(d, "color_mode")
        lay.prop(d, "muscle_thickness")
        lay.operator("sinew.select_display", icon="RESTRICT_SELECT_OFF")


CLASSES = (SINEW_UL_bone_map, SINEW_PT_retarget, SINEW_PT_simulate, SINEW_PT_display)


def register():
    for c in CLASSES:
        bpy.utils.register_class(c)


def unregister():
    for c in reversed(CLASSES):
        bpy.utils.unregister_class(c)
