"""Mocap from another library in Blender (issue 44): a clip whose joint axes run along its
bones, imported with Blender's own BVH importer, rests as a line of bones, not a standing
pose. The Retarget button aligns it on its action's most upright frame, keeps that pose on the
armature, and the take simulates and bakes back through the same alignment."""
from __future__ import annotations

import json

import numpy as np
import pytest

from .conftest import WALK, bpy, sub


def _imported(path):
    """The armature Blender's own BVH importer makes of `path` (cm, Y up), the scene playing
    its action's own frames (the importer only lengthens a scene, and 7 s of a last pose are
    not the clip)."""
    import addon_utils

    addon_utils.enable("io_anim_bvh", default_set=True)
    bpy.ops.import_anim.bvh(filepath=str(path), global_scale=0.01, update_scene_fps=True,
                            update_scene_duration=True, axis_forward="-Z", axis_up="Y")
    arm = bpy.context.active_object
    bpy.context.scene.frame_end = int(arm.animation_data.action.frame_range[1])
    return arm


@pytest.fixture
def bone_axes_walk(tmp_path, sinew):
    """The bundled walk at 30 fps with bone-aligned axes, ZXY and position channels on every
    joint (tests/clips.py, made with the installed extension's engine)."""
    from ..clips import bone_aligned, resample
    from bl_ext.user_default.sinew.engine.motion import read_bvh, write_bvh

    path = tmp_path / "aligned_walk.bvh"
    write_bvh(path, bone_aligned(resample(read_bvh(WALK), 30)), channel_order="ZXY")
    return path


@pytest.mark.smoke
def test_an_armature_that_rests_as_a_line_retargets_simulates_and_bakes(sinew, fresh, bone_axes_walk):
    arm = _imported(bone_axes_walk)
    heads = np.array([b.head_local for b in arm.data.bones])[1:]  # the root bone is on the floor
    assert np.ptp(heads[:, 2]) < 0.2 and np.ptp(heads[:, 0]) + np.ptp(heads[:, 1]) > 1.0  # it rests lying down
    original = arm.animation_data.action
    s = bpy.context.scene.sinew
    s.armature = arm
    assert bpy.ops.sinew.retarget() == {"FINISHED"}
    pose = json.loads(arm[sub(sinew, "retarget").POSE_KEY])
    assert pose["frame"] >= 0 and len(pose["rotations"]) == len(arm.data.bones)
    s.clip_source, s.length_mode, s.seconds, s.fatigue_scale = "ACTION", "SECONDS", 0.5, 0.0
    assert bpy.ops.sinew.simulate() == {"FINISHED"}, s.last_report
    take = json.loads(arm.animation_data.action["sinew_take"])
    assert arm.animation_data.action != original and not take["summary"]["fell"]
    assert take["summary"]["joint_err_deg_mean"] < 8.0
    # the bake went back through the pose kept on the armature: the baked hips follow the clip's
    rt = sub(sinew, "retarget").retargeter(arm)
    assert rt.pose.frame == pose["frame"]


def test_an_action_exported_in_place_walks_where_its_feet_take_it(sinew, fresh, tmp_path):
    """A walk whose root's travel was taken out on export (Mixamo's "In Place"), imported with
    Blender's BVH importer: the take's hips travel as the feet step, and the report says the
    path was rebuilt from the feet."""
    from ..clips import in_place
    from bl_ext.user_default.sinew.engine.motion import read_bvh, write_bvh

    path = tmp_path / "walk_in_place.bvh"
    write_bvh(path, in_place(read_bvh(WALK)))
    arm = _imported(path)
    scene = bpy.context.scene
    hips = arm.pose.bones["Character1_Hips"]

    def hips_at(frame):
        scene.frame_set(frame)
        return np.array(arm.matrix_world @ hips.head)[:2]

    start, end = scene.frame_start, scene.frame_end
    assert np.linalg.norm(hips_at(end) - hips_at(start)) < 0.05  # the clip steps on the spot
    s = scene.sinew
    s.armature = arm
    assert bpy.ops.sinew.retarget() == {"FINISHED"}
    s.clip_source, s.length_mode, s.seconds, s.fatigue_scale = "ACTION", "SECONDS", 0.75, 0.0
    assert bpy.ops.sinew.simulate() == {"FINISHED"}, s.last_report
    assert "steps in place: its path rebuilt from its feet" in s.last_report
    take = json.loads(arm.animation_data.action["sinew_take"])
    assert not take["summary"]["fell"]
    baked_end = int(round(scene.frame_start + 0.7 * scene.render.fps))
    assert np.linalg.norm(hips_at(baked_end) - hips_at(scene.frame_start)) > 0.5  # ~1.1 m/s for 0.7 s


def test_a_daz_skeleton_with_twist_bones_in_its_limbs_maps_simulates_and_bakes(sinew, fresh, tmp_path):
    """A walk on Daz Genesis's skeleton (tests/clips.py daz_chains: Daz's names, a "pelvis"
    under the "hip", the limbs' twist in ThighTwist, ShldrTwist and ForearmTwist bones inside
    their chains), imported with Blender's BVH importer: the Retarget button maps it by the
    name guess, the take walks, and the bake turns each limb through its bend bone, the twist
    bones left at rest (the take's world rotations are the bend and twist bones' together)."""
    from ..clips import daz_chains
    from bl_ext.user_default.sinew.engine.motion import read_bvh, write_bvh

    path = tmp_path / "daz_walk.bvh"
    write_bvh(path, daz_chains(read_bvh(WALK)))
    arm = _imported(path)
    scene = bpy.context.scene
    s = scene.sinew
    s.armature = arm
    assert bpy.ops.sinew.retarget() == {"FINISHED"}
    mapping = {it.body: it.bone for it in arm.sinew.bone_map if it.bone}
    assert mapping["Pelvis"] == "pelvis" and mapping["Spine"] == "abdomenLower" and mapping["FemurL"] == "lThighBend"
    assert mapping["ArmR"] == "rShldrBend" and mapping["ForeArmR"] == "rForearmBend"
    s.clip_source, s.length_mode, s.seconds, s.fatigue_scale = "ACTION", "SECONDS", 0.5, 0.0
    assert bpy.ops.sinew.simulate() == {"FINISHED"}, s.last_report
    take = json.loads(arm.animation_data.action["sinew_take"])
    assert not take["summary"]["fell"] and take["summary"]["joint_err_deg_mean"] < 6.0
    scene.frame_set(scene.frame_start + 10)
    bones = arm.pose.bones
    for twist, bend in (("lThighTwist", "lThighBend"), ("rShldrTwist", "rShldrBend")):
        rest = np.array(bones[twist].rotation_quaternion) if bones[twist].rotation_mode == "QUATERNION" \
            else np.array(bones[twist].rotation_euler.to_quaternion())
        bent = bones[bend].rotation_quaternion if bones[bend].rotation_mode == "QUATERNION" \
            else bones[bend].rotation_euler.to_quaternion()
        assert np.allclose(np.abs(rest[0]), 1.0, atol=1e-6), (twist, rest)
        assert abs(bent[0]) < 0.9999, bend


def test_feet_that_rest_turned_stand_flat_and_bake_back_as_the_capture_holds_them(sinew, fresh, tmp_path):
    """A capture whose foot bones rest turned 25 deg about their length from its soles (as the
    CMU captures' do; tests/clips.py rolled_bones), imported with Blender's BVH importer: the
    take stands on flat soles, the levelled pose is kept on the armature, and the bake maps
    the feet back as the capture holds them (not 25 deg off them, as the rest pose would)."""
    from ..clips import rolled_bones
    from bl_ext.user_default.sinew.engine.motion import read_bvh, write_bvh

    path = tmp_path / "walk_feet_turned.bvh"
    write_bvh(path, rolled_bones(read_bvh(WALK), {"Character1_RightFoot": 25.0, "Character1_LeftFoot": -25.0}))
    arm = _imported(path)
    scene = bpy.context.scene
    frames = range(scene.frame_start, scene.frame_start + int(0.5 * scene.render.fps))

    def feet():
        out = []
        for f in frames:
            scene.frame_set(f)
            out.append([np.array((arm.matrix_world @ arm.pose.bones[f"Character1_{s}Foot"].matrix).to_3x3())
                        for s in ("Right", "Left")])
        return np.array(out)  # (F, 2, 3, 3)

    captured = feet()
    s = scene.sinew
    s.armature = arm
    s.clip_source, s.length_mode, s.seconds, s.fatigue_scale = "ACTION", "SECONDS", 0.5, 0.0
    assert bpy.ops.sinew.simulate() == {"FINISHED"}, s.last_report
    assert not json.loads(arm.animation_data.action["sinew_take"])["summary"]["fell"]
    pose = json.loads(arm[sub(sinew, "retarget").POSE_KEY])
    assert len(pose["rolled"]) == 2 and all(20.0 < abs(d) < 30.0 for d in pose["rolled"].values()), pose["rolled"]
    assert sub(sinew, "retarget").retargeter(arm).pose.rolled == {int(k): v for k, v in pose["rolled"].items()}
    baked = feet()
    turn = np.einsum("fsji,fsjk->fsik", captured, baked)
    off = np.degrees(np.arccos(np.clip((np.trace(turn, axis1=2, axis2=3) - 1) / 2, -1, 1)))
    assert off[0].max() < 1.0, off[0]  # the take starts in the clip's pose: back as the capture's (25 deg off unlevelled)
    assert off.mean() < 15.0, off.mean(axis=0)  # then the take's own foot error (the feet track worst of all joints)
