"""The extension, installed from the built zip, on the bpy module (headless)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from .conftest import MIXAMO, ROOT, WALK, bpy, fcurve_snapshot, make_mixamo_armature, sub

SECONDS = 1.0


def _counts():
    return {k: len(getattr(bpy.data, k)) for k in ("objects", "actions", "meshes", "materials", "node_groups",
                                                   "collections", "armatures", "images")}


def test_zip_contents_and_registration(sinew):
    z = sorted((ROOT / "dist").glob("sinew-*-linux_x64.zip"))[-1]
    names = zipfile.ZipFile(z).namelist()
    assert "blender_manifest.toml" in names and "engine/take.py" in names
    assert "rigs/human284/human284.npz" in names and "rigs/human284/meshes.npz" in names
    assert not [n for n in names if n.startswith(("training/", "tests/")) or "torch" in n]
    assert any(n.startswith("wheels/mujoco") for n in names) and any(n.startswith("wheels/scipy") for n in names)
    manifest = zipfile.ZipFile(z).read("blender_manifest.toml").decode()
    assert 'blender_version_min = "4.2.0"' in manifest and "bl_info" not in manifest
    for op in ("detect_map", "retarget", "simulate", "import_map", "export_map"):
        assert hasattr(bpy.ops.sinew, op)
    assert {"SINEW_PT_retarget", "SINEW_PT_simulate", "SINEW_PT_display"} <= set(dir(bpy.types))
    assert sub(sinew, "core").package_root().parent.name == "user_default"


def test_bone_map_detect_edit_json(sinew, fresh, tmp_path):
    core = sub(sinew, "core")
    arm = make_mixamo_armature(core.load_model())
    bpy.context.scene.sinew.armature = arm
    arm.sinew.preset = "AUTO"
    assert bpy.ops.sinew.detect_map() == {"FINISHED"}
    mp = core.stored_mapping(arm)
    assert mp["Pelvis"] == "mixamorig:Hips" and mp["Torso"] == "mixamorig:Spine2" and len(mp) >= 20
    assert arm.sinew.map_source == "mixamo"
    # edit, export, clear, import
    next(it for it in arm.sinew.bone_map if it.body == "HandL").bone = ""
    path = tmp_path / "map.json"
    core.export_mapping(arm, path)
    assert json.loads(path.read_text())["mapping"].get("HandL") is None
    arm.sinew.bone_map.clear()
    core.import_mapping(arm, path)
    assert "HandL" not in core.stored_mapping(arm) and core.stored_mapping(arm)["HandR"] == "mixamorig:RightHand"


def test_retarget_simulate_bake(sinew, fresh):
    core, display = sub(sinew, "core"), sub(sinew, "display")
    from_engine = sub(sinew, "engine.kinematics")
    rig = core.load_model()
    arm = make_mixamo_armature(rig)
    original = arm.animation_data.action
    before = fcurve_snapshot(original)
    s = bpy.context.scene.sinew
    s.armature = arm
    assert bpy.ops.sinew.retarget() == {"FINISHED"}
    nm = display.names_for(arm.name)
    mus = bpy.data.objects[nm["muscles"]]
    assert mus.parent == arm and bpy.data.objects[nm["bones"]].parent == arm
    assert fcurve_snapshot(original) == before
    s.clip_source, s.clip_path, s.length_mode, s.seconds = "FILE", str(WALK), "SECONDS", SECONDS
    s.fatigue_scale = 50.0
    t0 = time.perf_counter()
    assert bpy.ops.sinew.simulate() == {"FINISHED"}
    wall = time.perf_counter() - t0
    ad = arm.animation_data
    new = ad.action
    assert new != original and new.name == f"{original.name}_fatigued_001"
    assert fcurve_snapshot(original) == before, "the original Action's F-curves changed"
    assert any(st.action == original for t in ad.nla_tracks for st in t.strips)
    if bpy.app.version >= (4, 4, 0):
        assert ad.action_slot is not None and ad.action_slot.handle == new.slots[0].handle
    # compare mapped bones with the take's model joints
    info = json.loads(new["sinew_take"])
    table = bpy.data.objects[nm["table"]]
    F = int(table["sinew_frames"])
    assert F == info["frames"] and F >= int(SECONDS * 30)
    job_take = LAST_TAKE(sinew)
    root, local = core.take_pose(job_take)
    _, x, _, _ = from_engine.forward_kinematics(rig, root, sub(sinew, "engine.transforms").quat_to_matrix(local))
    armature = sub(sinew, "armature")
    pairs = [(b, body) for b, (body, _) in MIXAMO.items() if body and not body.startswith("FootThumb")]
    errs = []
    for i in range(0, F, 3):
        bpy.context.scene.frame_set(bpy.context.scene.frame_start + i)
        heads = armature.bone_world_heads(arm, [b for b, _ in pairs])
        want = x[i, [rig.body_index(body) for _, body in pairs]]
        errs.append(np.linalg.norm(heads - want, axis=1).max())
    assert max(errs) < 0.02, f"bone heads differ from the model joints by up to {100 * max(errs):.2f} cm"
    # the display reads the table
    dg = bpy.context.evaluated_depsgraph_get()
    ev = mus.evaluated_get(dg).to_mesh()
    assert "sinew_value" in ev.attributes and len(ev.vertices) > 1212
    mus.evaluated_get(dg).to_mesh_clear()
    # a second run never clobbers the first
    assert bpy.ops.sinew.simulate() == {"FINISHED"}
    assert ad.action.name == f"{original.name}_fatigued_002" and new.name in bpy.data.actions
    print(f"\nsimulate+bake {SECONDS}s take: {wall:.2f}s wall")


def LAST_TAKE(sinew):
    """Recompute the take the operator baked (same inputs and seed give the same take)."""
    core = sub(sinew, "core")
    s = bpy.context.scene.sinew
    arm, job = core.settings_job(bpy.context, s)
    return job.run()


def test_cancel_leaves_nothing(sinew, fresh):
    core = sub(sinew, "core")
    arm = make_mixamo_armature(core.load_model())
    s = bpy.context.scene.sinew
    s.armature = arm
    s.clip_source, s.clip_path, s.length_mode, s.seconds = "FILE", str(WALK), "SECONDS", 30.0
    counts, frame = _counts(), bpy.context.scene.frame_current
    snap = fcurve_snapshot(arm.animation_data.action)
    arm_props = (len(arm.sinew.bone_map), arm.sinew.retargeted, arm.sinew.map_source)
    _, job = core.settings_job(bpy.context, s)
    job.start()
    t0 = time.time()
    while job.fraction < 0.02 and time.time() - t0 < 60:
        time.sleep(0.05)
    assert 0 < job.fraction < 1
    job.cancel()
    assert job.done and isinstance(job.error, core.Cancelled) and job.take is None
    assert _counts() == counts and bpy.context.scene.frame_current == frame
    assert fcurve_snapshot(arm.animation_data.action) == snap
    assert (len(arm.sinew.bone_map), arm.sinew.retargeted, arm.sinew.map_source) == arm_props


def test_render_active_muscle_redder(sinew, fresh, tmp_path):
    """Cycles (CPU, tiny): a fully active muscle renders redder than a relaxed one."""
    core, display = sub(sinew, "core"), sub(sinew, "display")
    rig = core.load_model()
    arm = make_mixamo_armature(rig, with_action=False)
    bpy.context.scene.sinew.armature = arm
    arm.sinew.show_bones = False
    core.retarget_to_model(bpy.context, arm)
    mus = bpy.data.objects[display.names_for(arm.name)["muscles"]]
    # two big thigh muscles, left active and right relaxed, everything else hidden by zero radius
    active, relaxed = rig.muscle_index("L_Rectus_Femoris"), rig.muscle_index("R_Rectus_Femoris")
    values = np.zeros((2, rig.num_muscles, 3), np.float32)
    values[:, active, 0] = 1.0
    display.write_take_table(bpy.context, arm, values, 1)
    scene = bpy.context.scene
    scene.frame_set(1)
    wp = np.array([v.co for v in mus.data.vertices])
    mid = {m: wp[rig.muscle_wp_start[m]:rig.muscle_wp_start[m + 1]].mean(0) for m in (active, relaxed)}
    cam_data = bpy.data.cameras.new("cam")
    cam = bpy.data.objects.new("cam", cam_data)
    scene.collection.objects.link(cam)
    target = 0.5 * (mid[active] + mid[relaxed])
    cam.location = (target[0], target[1] - 1.2, target[2])
    cam.rotation_euler = (np.pi / 2, 0, 0)
    cam_data.type = "ORTHO"
    cam_data.ortho_scale = 0.6
    scene.camera = cam
    world = bpy.data.worlds.new("w")
    world.color = (0.05, 0.05, 0.05)
    scene.world = world
    light = bpy.data.objects.new("sun", bpy.data.lights.new("sun", "SUN"))
    light.rotation_euler = (np.pi / 2, 0, 0)
    scene.collection.objects.link(light)
    r = scene.render
    r.engine = "CYCLES"
    scene.cycles.device = "CPU"
    scene.cycles.samples = 4
    r.resolution_x = r.resolution_y = 64
    r.resolution_percentage = 100
    r.filepath = str(tmp_path / "muscles.png")
    bpy.ops.render.render(write_still=True)
    img = bpy.data.images.load(r.filepath)
    px = np.array(img.pixels[:]).reshape(64, 64, 4)
    from bpy_extras.object_utils import world_to_camera_view
    from mathutils import Vector

    def redness(m):
        p = world_to_camera_view(scene, cam, Vector(mid[m]))
        x, y = int(p.x * 64), int(p.y * 64)
        patch = px[max(y - 1, 0):y + 2, max(x - 1, 0):x + 2, :3].reshape(-1, 3)
        return float(np.mean(patch[:, 0] - 0.5 * (patch[:, 1] + patch[:, 2])))

    ra, rr = redness(active), redness(relaxed)
    print(f"\nredness active {ra:.3f} relaxed {rr:.3f}")
    assert ra > rr + 0.1, f"active muscle redness {ra:.3f}, relaxed {rr:.3f}"


def _bake_cmd(*args):
    return [sys.executable, str(ROOT / "scripts" / "sinew_bake.py"), *args]


def test_batch_script(sinew, fresh, tmp_path):
    core = sub(sinew, "core")
    arm = make_mixamo_armature(core.load_model())
    scene_path = tmp_path / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene_path))
    out = tmp_path / "out.blend"
    env = dict(os.environ)
    r = subprocess.run(_bake_cmd("--scene", str(scene_path), "--armature", arm.name, "--clip", f"{WALK}:0.5",
                                 "--out", str(out), "--json"), capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["action"] == "MixamoIdle_fatigued_001" and summary["frames"] >= 15
    bpy.ops.wm.open_mainfile(filepath=str(out))
    a = bpy.data.objects["Mixamo"]
    assert a.animation_data.action.name == summary["action"]
    assert "Mixamo.sinew_muscles" in bpy.data.objects and "Mixamo.sinew_take" in bpy.data.objects
    assert bpy.data.objects["Mixamo.sinew_muscles"].modifiers["Sinew Muscles"].node_group is not None
    # failures: missing armature, unmappable rig, bad clip
    bad = tmp_path / "bad.bvh"
    bad.write_text("HIERARCHY\nROOT x\n{\n")
    for args, words in [(["--armature", "Nope", "--clip", str(WALK)], "no object named 'Nope'"),
                        (["--armature", "Mixamo", "--clip", str(bad)], "bad.bvh"),
                        (["--armature", "Mixamo", "--clip", str(tmp_path / "missing.bvh")], "not found")]:
        r = subprocess.run(_bake_cmd("--scene", str(scene_path), *args, "--out", str(tmp_path / "x.blend")),
                           capture_output=True, text=True, env=env)
        assert r.returncode != 0 and words in r.stderr, r.stderr
    # an armature that cannot be mapped
    bpy.ops.wm.read_homefile(use_empty=True)
    d = bpy.data.armatures.new("Blob")
    o = bpy.data.objects.new("Blob", d)
    bpy.context.scene.collection.objects.link(o)
    bpy.context.view_layer.objects.active = o
    bpy.ops.object.mode_set(mode="EDIT")
    b = d.edit_bones.new("thing")
    b.head, b.tail = (0, 0, 0), (0, 0, 1)
    bpy.ops.object.mode_set(mode="OBJECT")
    blob = tmp_path / "blob.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(blob))
    r = subprocess.run(_bake_cmd("--scene", str(blob), "--armature", "Blob", "--clip", str(WALK),
                                 "--out", str(tmp_path / "y.blend")), capture_output=True, text=True, env=env)
    assert r.returncode != 0 and "cannot be mapped" in r.stderr, r.stderr


def test_sinew_bake_command(sinew, fresh, tmp_path):
    """`sinew bake` (engine.bake_command) wraps the batch script and passes its JSON through."""
    import argparse

    sys.path.insert(0, str(ROOT))
    from engine.bake_command import add_bake_parser

    ap = argparse.ArgumentParser()
    add_bake_parser(ap.add_subparsers(dest="command"))
    make_mixamo_armature(sub(sinew, "core").load_model())
    scene_path = tmp_path / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene_path))
    out = tmp_path / "o.blend"
    args = ap.parse_args(["bake", str(scene_path), "--armature", "Mixamo", "--clip", f"{WALK}:0.3",
                          "--out", str(out), "--json", "--fatigue-scale", "10"])
    assert args.func(args) == 0 and out.is_file()
    args = ap.parse_args(["bake", str(scene_path), "--armature", "Nope", "--clip", str(WALK), "--out", str(out)])
    assert args.func(args) != 0
