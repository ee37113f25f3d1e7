"""Operators: bone map detection / import / export, Retarget to Muscle Model, Simulate Fatigued
Take (modal, timer-driven, ESC cancels), display helpers."""
from __future__ import annotations

import bpy
from bpy.props import StringProperty
from bpy_extras.io_utils import ExportHelper, ImportHelper

from . import bake, bonemap, prepare, retarget
from .engine import take_notes
from .engine.errors import SinewError

# The running simulation (one at a time); kept out of the .blend so a cancel leaves no trace.
RUN = dict(job=None, fraction=0.0, label="")


def _armature(context):
    s = context.scene.sinew
    arm = s.armature or context.active_object
    return arm if arm is not None and arm.type == "ARMATURE" else None


class _ArmatureOp:
    @classmethod
    def poll(cls, context):
        return _armature(context) is not None


class SINEW_OT_detect_map(_ArmatureOp, bpy.types.Operator):
    """Detect the bone map from bone names and the hierarchy"""
    bl_idname = "sinew.detect_map"
    bl_label = "Detect Bone Map"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context):
        arm = _armature(context)
        try:
            mp, label = bonemap.detect_mapping(arm, arm.sinew.preset)
        except SinewError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        bonemap.store_mapping(arm, mp, label)
        self.report({"INFO"}, f"Sinew: {len(mp)} model bodies mapped ({label})")
        return {"FINISHED"}


class SINEW_OT_export_map(_ArmatureOp, bpy.types.Operator, ExportHelper):
    """Save the bone map as a JSON preset"""
    bl_idname = "sinew.export_map"
    bl_label = "Export Bone Map"
    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={"HIDDEN"})

    def execute(self, context):
        bonemap.export_mapping(_armature(context), self.filepath)
        return {"FINISHED"}


class SINEW_OT_import_map(_ArmatureOp, bpy.types.Operator, ImportHelper):
    """Load a bone map from a JSON preset"""
    bl_idname = "sinew.import_map"
    bl_label = "Import Bone Map"
    bl_options = {"REGISTER", "UNDO"}
    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={"HIDDEN"})

    def execute(self, context):
        try:
            bonemap.import_mapping(_armature(context), self.filepath)
        except SinewError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        return {"FINISHED"}


class SINEW_OT_retarget(_ArmatureOp, bpy.types.Operator):
    """Align and scale the muscle model to the armature and add the bone and muscle display"""
    bl_idname = "sinew.retarget"
    bl_label = "Retarget to Muscle Model"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context):
        from . import prefs

        try:
            info = retarget.retarget_to_model(context, _armature(context), prefs.get(context))
        except SinewError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Sinew: {info['mapped_bodies']} bodies mapped, character scale "
                              f"{info['character_scale']}")
        return {"FINISHED"}


class SINEW_OT_simulate(_ArmatureOp, bpy.types.Operator):
    """Simulate a fatigued take of the clip and bake it into a new Action (ESC cancels)"""
    bl_idname = "sinew.simulate"
    bl_label = "Simulate Fatigued Take"
    bl_options = {"REGISTER", "UNDO"}

    _timer = None

    @classmethod
    def poll(cls, context):
        return _armature(context) is not None and RUN["job"] is None

    def _finish(self, context, arm, job):
        from .rollback import all_or_nothing

        s = context.scene.sinew
        if bpy.ops.ed.undo_push.poll():  # Ctrl-Z after the bake returns the scene to this state
            bpy.ops.ed.undo_push(message="Before Sinew bake")
        with all_or_nothing(arm):  # a bake that fails midway takes back what it made
            info = bake.bake_take(context, arm, job.take, prepare.frame_start_for(context, s), rt=job.retargeter)
        # the whole take plays, as the batch script's does (a take may be longer than the scene:
        # asked so, or run on while a clip waited for the body)
        context.scene.frame_end = max(context.scene.frame_end, info["frame_end"])
        msg, warns = take_notes.bake_message(job.take, info)
        s.last_report = msg
        self.report({"WARNING"} if warns else {"INFO"}, msg)
        return info

    def _fail(self, context, error) -> set:
        """Say why in the status bar and the sidebar's last report; nothing was changed."""
        msg = str(error) if isinstance(error, SinewError) else f"{type(error).__name__}: {error}"
        msg = f"Sinew: {msg}" if not msg.startswith("Sinew") else msg
        context.scene.sinew.last_report = msg
        self.report({"ERROR"}, msg)
        return {"CANCELLED"}

    def execute(self, context):  # blocking: background mode, scripts
        s = context.scene.sinew
        try:
            arm, job = prepare.settings_job(context, s)
            job.run()
            self._finish(context, arm, job)
        except Exception as e:  # noqa: BLE001 - any failure is reported and leaves the scene as it was
            return self._fail(context, e)
        return {"FINISHED"}

    def invoke(self, context, event):
        s = context.scene.sinew
        try:
            self.arm, self.job = prepare.settings_job(context, s)
        except Exception as e:  # noqa: BLE001
            return self._fail(context, e)
        RUN.update(job=self.job, fraction=0.0, label="starting")
        self.job.start()
        wm = context.window_manager
        self._timer = wm.event_timer_add(0.2, window=context.window)
        wm.progress_begin(0, 100)
        wm.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def _cleanup(self, context):
        wm = context.window_manager
        if self._timer is not None:
            wm.event_timer_remove(self._timer)
            self._timer = None
        wm.progress_end()
        if context.workspace is not None:
            context.workspace.status_text_set(None)
        RUN.update(job=None, fraction=0.0, label="")
        for area in context.screen.areas if context.screen else []:
            area.tag_redraw()

    def modal(self, context, event):
        job = self.job
        if event.type == "ESC":
            job.cancel()
            self._cleanup(context)
            context.scene.sinew.last_report = "Sinew: simulation cancelled; nothing was changed"
            self.report({"WARNING"}, context.scene.sinew.last_report)
            return {"CANCELLED"}
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        RUN["fraction"] = job.fraction
        context.window_manager.progress_update(int(100 * job.fraction))
        if context.workspace is not None:
            context.workspace.status_text_set(f"Sinew: simulating {100 * job.fraction:.0f}%  (Esc to cancel)")
        for area in context.screen.areas:
            if area.type == "VIEW_3D":
                area.tag_redraw()
        if not job.done:
            return {"RUNNING_MODAL"}
        self._cleanup(context)
        if job.error is not None:
            return self._fail(context, job.error)
        try:
            self._finish(context, self.arm, job)
        except Exception as e:  # noqa: BLE001
            return self._fail(context, e)
        return {"FINISHED"}


class SINEW_OT_select_display(_ArmatureOp, bpy.types.Operator):
    """Select the muscle display objects of the armature"""
    bl_idname = "sinew.select_display"
    bl_label = "Select Display"

    def execute(self, context):
        from . import display

        name = _armature(context).name
        nm = display.names_for(name)
        obs = [bpy.data.objects.get(nm[key]) for key in ("bones", "muscles")] + display.bone_parts(name)
        for ob in obs:
            if ob is not None and ob.visible_get():
                ob.select_set(True)
        return {"FINISHED"}


CLASSES = (SINEW_OT_detect_map, SINEW_OT_export_map, SINEW_OT_import_map, SINEW_OT_retarget,
           SINEW_OT_simulate, SINEW_OT_select_display)


def register():
    for c in CLASSES:
        bpy.utils.register_class(c)


def unregister():
    job = RUN.get("job")
    if job is not None:
        job.cancel()
        RUN.update(job=None)
    for c in reversed(CLASSES):
        bpy.utils.unregister_class(c)
