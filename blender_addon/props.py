"""Properties stored in the .blend: the bone map and display settings on the armature object
(`Object.sinew`), the simulation settings on the scene (`Scene.sinew`)."""
from __future__ import annotations

import bpy
from bpy.props import (BoolProperty, CollectionProperty, EnumProperty, FloatProperty, IntProperty,
                       PointerProperty, StringProperty)

from .engine.options import panel_settings


# Armature settings live on the armature object, which may be a library override of a linked
# rig: they must be overridable, or Blender refuses the edit (and a reload would drop it).
OV = {"LIBRARY_OVERRIDABLE"}
OV_COLLECTION = {"LIBRARY_OVERRIDABLE", "USE_INSERTION"}


def _display_update(self, context):
    from . import display

    arm = self.id_data
    nm = display.names_for(arm.name)
    display.set_visibility(arm.name, self.show_bones, self.show_muscles)
    ob_m = bpy.data.objects.get(nm["muscles"])
    if ob_m is not None:
        mod = ob_m.modifiers.get("Sinew Muscles")
        # a display built by an older Sinew keeps its settings until it is retargeted again
        if mod is not None and mod.node_group is not None and \
                mod.node_group.get("sinew_version") == display.NODE_GROUP_VERSION:
            display.set_mode(mod, self.color_mode)
            display.set_input(mod, "Thickness", self.muscle_thickness)


def _is_armature(self, obj):
    return obj.type == "ARMATURE"


def _bone_changed(self, context):
    from .bonemap import save_state

    save_state(self.id_data)


class SINEW_PG_bone_map_item(bpy.types.PropertyGroup):
    body: StringProperty(override=OV, name="Model body")
    bone: StringProperty(override=OV, name="Bone", update=_bone_changed,
                         description="Armature bone driving this model body (empty: unmapped)")


class SINEW_PG_armature(bpy.types.PropertyGroup):
    bone_map: CollectionProperty(override=OV_COLLECTION, type=SINEW_PG_bone_map_item)
    bone_map_index: IntProperty(override=OV)
    map_source: StringProperty(override=OV, name="Map from", default="")
    preset: EnumProperty(
        override=OV, name="Preset", default="AUTO",
        items=[("AUTO", "Detect", "Best preset, else a guess from names and hierarchy"),
               ("MIXAMO", "Mixamo", ""), ("RIGIFY", "Rigify", ""), ("UNREAL", "Unreal", ""),
               ("MASS", "MASS / BVH", ""), ("CMU", "CMU", ""), ("SMPL", "SMPL", "")])
    retargeted: BoolProperty(override=OV, default=False)
    model_scale: FloatProperty(override=OV, name="Character scale", default=1.0,
                               description="Character size relative to the muscle model")
    show_muscles: BoolProperty(override=OV, name="Muscles", default=True, update=_display_update)
    show_bones: BoolProperty(override=OV, name="Bones", default=True, update=_display_update)
    color_mode: EnumProperty(
        override=OV, name="Colour by", default="ACTIVATION", update=_display_update,
        items=[("ACTIVATION", "Activation", "White to red with muscle activation"),
               ("FATIGUE", "Fatigue", "White to red with the fatigued fraction M_F"),
               ("FORCE", "Force", "White to red with force / maximum isometric force")])
    muscle_thickness: FloatProperty(override=OV, name="Thickness", default=1.0, min=0.1, max=5.0,
                                    update=_display_update)


class SINEW_PG_scene(bpy.types.PropertyGroup):
    armature: PointerProperty(name="Armature", type=bpy.types.Object, poll=_is_armature)
    clip_source: EnumProperty(
        name="Clip", default="FILE",
        items=[("FILE", "File", "A BVH file or a reference .npz"),
               ("ACTION", "Action", "The armature's current action over the scene range")])
    clip_path: StringProperty(name="Clip file", subtype="FILE_PATH")
    hold_pose: BoolProperty(name="Hold a Pose", default=False,
                            description="Hold the clip's pose at 'Pose At' still instead of playing the clip; with "
                                        "Residual 0 the character stands it on its muscles alone (an LQR about the "
                                        "nearest balanced pose) while they tire")
    hold_at: FloatProperty(name="Pose At", default=0.0, min=0.0, soft_max=60.0, unit="TIME_ABSOLUTE",
                           description="Time into the clip of the pose to hold (after a skipped calibration pose)")
    length_mode: EnumProperty(name="Length", default="SECONDS",
                              items=[("SECONDS", "Duration", ""), ("REPEAT", "Repetitions", "")])
    seconds: FloatProperty(name="Seconds", default=10.0, min=0.1, soft_max=600.0, unit="TIME_ABSOLUTE")
    # the take's options: label, default, bounds and tooltip from engine/options.py (the
    # command line's flags come from there too); the panel adds its own soft limits and units
    repetitions: IntProperty(**panel_settings("repetitions", soft_max=200))
    fatigue_scale: FloatProperty(**panel_settings("fatigue_scale", soft_max=200.0))
    F: FloatProperty(**panel_settings("F", precision=4))
    R: FloatProperty(**panel_settings("R", precision=4))
    r: FloatProperty(**panel_settings("r"))
    strength: FloatProperty(**panel_settings("strength", soft_max=5.0))
    controller: EnumProperty(**panel_settings("controller"))
    policy_path: StringProperty(**panel_settings("policy", subtype="FILE_PATH"))
    policy_mode: EnumProperty(**panel_settings("mode"))
    noise_scale: FloatProperty(**panel_settings("noise_scale", soft_max=2.0))
    headings: StringProperty(**panel_settings("heading"))
    speed: FloatProperty(**panel_settings("speed", soft_max=3.0, unit="VELOCITY"))
    residual: FloatProperty(**panel_settings("residual", soft_max=2.0))
    balance: BoolProperty(**panel_settings("balance"))
    pace: FloatProperty(**panel_settings("pace", soft_max=2.0))
    wait: BoolProperty(**panel_settings("wait"))
    seed: IntProperty(**panel_settings("seed"))
    keep_calibration: BoolProperty(**panel_settings("keep_calibration"))
    pushes: StringProperty(**panel_settings("push"))
    frame_start: IntProperty(name="Start frame", default=1)
    use_scene_start: BoolProperty(name="Scene start", default=True)
    last_report: StringProperty(default="")


CLASSES = (SINEW_PG_bone_map_item, SINEW_PG_armature, SINEW_PG_scene)


@bpy.app.handlers.persistent
def _restore_overrides(*_args):
    from .bonemap import restore_state

    for ob in bpy.data.objects:
        if ob.override_library is not None and ob.library is None and ob.sinew_saved:
            restore_state(ob)


def register():
    for c in CLASSES:
        bpy.utils.register_class(c)
    bpy.types.Object.sinew = PointerProperty(type=SINEW_PG_armature, override=OV)
    # The bone map and retarget state again, as one string (bonemap.save_state): a library
    # override loses the pointer's settings on reload (Blender 5.0 replays the pointer itself
    # and fails; 4.x keeps only some inserted bone-map items), a plain string survives.
    bpy.types.Object.sinew_saved = StringProperty(override=OV, options={"HIDDEN"})
    bpy.types.Scene.sinew = PointerProperty(type=SINEW_PG_scene)
    bpy.app.handlers.load_post.append(_restore_overrides)


def unregister():
    if _restore_overrides in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.remove(_restore_overrides)
    del bpy.types.Scene.sinew
    del bpy.types.Object.sinew_saved
    del bpy.types.Object.sinew
    for c in reversed(CLASSES):
        bpy.utils.unregister_class(c)
