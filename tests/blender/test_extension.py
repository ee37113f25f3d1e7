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

from .conftest import MIXAMO, ROOT, WALK, _zip, action_fcurves, bpy, fcurve_snapshot, make_mixamo_armature, sub

SECONDS = 1.0


def _counts():
    return {k: len(getattr(bpy.data, k)) for k in ("objects", "actions", "meshes", "materials", "node_groups",
                                                   "collections", "armatures", "images")}


@pytest.mark.smoke
def test_zip_contents_and_registration(sinew):
    z = _zip()  # the zip the session installed
    names = zipfile.ZipFile(z).namelist()
    assert "blender_manifest.toml" in names and "engine/take.py" in names
    assert "rigs/human284/human284.npz" in names and "rigs/human284/meshes.npz" in names
    assert not [n for n in names if n.startswith(("training/", "tests/")) or "torch" in n]
    assert {n.split("/")[1].split("-")[0] for n in names if n.startswith("wheels/")} >= {"mujoco", "scipy", "daqp"}
    manifest = zipfile.ZipFile(z).read("blender_manifest.toml").decode()
    assert 'blender_version_min = "4.2.0"' in manifest and "bl_info" not in manifest
    for op in ("detect_map", "retarget", "simulate", "import_map", "export_map"):
        assert hasattr(bpy.ops.sinew, op)
    assert {"SINEW_PT_retarget", "SINEW_PT_simulate", "SINEW_PT_display"} <= set(dir(bpy.types))
    assert Path(sinew.__file__).resolve().parent.parent.name == "user_default"


@pytest.mark.smoke
def test_installed_zip_runs_the_compiled_muscle_step(sinew):
    """The zip carries this platform's compiled muscle step (and no other platform's), and
    the installed engine loads it from the installed package, agreeing with numpy."""
    if os.environ.get("SINEW_COMPILED") == "0":
        pytest.skip("SINEW_COMPILED=0")
    native = [n for n in zipfile.ZipFile(_zip()).namelist() if n.startswith("engine/native/") and not n.endswith("/")]
    assert native == ["engine/native/sinew_muscle-linux-x64.so"]
    compiled = sub(sinew, "engine.compiled")
    assert compiled.status() == "compiled"
    assert compiled.library_path().resolve().is_relative_to(Path(os.environ["BLENDER_USER_RESOURCES"]).resolve())
    rig = sub(sinew, "model").load_model()
    fat = sub(sinew, "engine.fatigue")
    system = sub(sinew, "engine.muscle_step").MuscleSystem(rig)
    assert system.path == "compiled"
    rng = np.random.default_rng(3)
    body = (rig.body_rest_rot, rig.body_rest_pos, rng.normal(size=(23, 3)),
            rng.normal(size=(23, 3)))
    state = fat.FatigueState(np.full(284, 0.3), np.full(284, 0.6), np.full(284, 0.1))
    action = rng.uniform(-0.3, 0.3, 284)
    res, ref = system.step(*body, action, state), system.step_numpy(*body, action, state)
    for k in ("force", "body_force", "body_torque"):
        a, b = getattr(res, k), getattr(ref, k)
        assert np.abs(a - b).max() <= 1e-9 * np.abs(b).max()


def test_bone_map_detect_edit_json(sinew, fresh, tmp_path):
    stored_mapping = sub(sinew, "bonemap").stored_mapping
    arm = make_mixamo_armature(sub(sinew, "model").load_model())
    bpy.context.scene.sinew.armature = arm
    arm.sinew.preset = "AUTO"
    assert bpy.ops.sinew.detect_map() == {"FINISHED"}
    mp = stored_mapping(arm)
    assert mp["Pelvis"] == "mixamorig:Hips" and mp["Torso"] == "mixamorig:Spine2" and len(mp) >= 20
    assert arm.sinew.map_source == "mixamo"
    # edit, export, clear, import
    next(it for it in arm.sinew.bone_map if it.body == "HandL").bone = ""
    path = tmp_path / "map.json"
    sub(sinew, "bonemap").export_mapping(arm, path)
    assert json.loads(path.read_text())["mapping"].get("HandL") is None
    arm.sinew.bone_map.clear()
    sub(sinew, "bonemap").import_mapping(arm, path)
    assert "HandL" not in stored_mapping(arm) and stored_mapping(arm)["HandR"] == "mixamorig:RightHand"


@pytest.mark.smoke
def test_retarget_simulate_bake(sinew, fresh):
    pace_note = sub(sinew, "engine.take_notes").pace_note
    tiring_note = sub(sinew, "engine.take_notes").tiring_note
    display = sub(sinew, "display")
    from_engine = sub(sinew, "engine.kinematics")
    rig = sub(sinew, "model").load_model()
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
    s.pace = 0.7
    t0 = time.perf_counter()
    assert bpy.ops.sinew.simulate() == {"FINISHED"}
    wall = time.perf_counter() - t0
    ad = arm.animation_data
    new = ad.action
    assert new != original and new.name == f"{original.name}_fatigued_001"
    assert fcurve_snapshot(original) == before, "the original Action's F-curves changed"
    curves = action_fcurves(new)
    assert curves and {k.interpolation for fc in curves for k in fc.keyframe_points} == {"LINEAR"}
    assert any(st.action == original for t in ad.nla_tracks for st in t.strips)
    if bpy.app.version >= (4, 4, 0):
        assert ad.action_slot is not None and ad.action_slot.handle == new.slots[0].handle
    # compare mapped bones with the take's model joints
    info = json.loads(new["sinew_take"])
    table = bpy.data.objects[nm["table"]]
    F = int(table["sinew_frames"])
    assert F == info["frames"] and F >= int(SECONDS * 30)
    job_take = LAST_TAKE(sinew)
    assert job_take.meta["tracking"]["pace"] == pytest.approx(0.7) and job_take.meta["pace"]["strength"] == pytest.approx(0.7)
    assert pace_note(job_take) == "" and "slowed" not in s.last_report  # 1 s: the legs are not tired yet
    slowed = {"pace": {"strength": 1.0, "final_rate": 0.62, "min_rate": 0.6, "mean_rate": 0.8, "lag_s": 3.0}}
    assert pace_note(type("T", (), {"meta": slowed})()) == "slowed to 0.62x its pace as the legs tired (lowest 0.60x)"
    # the walk is within what the body can do: no warning about the clip
    assert job_take.meta["demands"] and "asks more" not in s.last_report
    sprint = dict(job_take.meta["demands"][0], clip="run.bvh", root_help_body_weights_mean=0.39)
    warning = sub(sinew, "engine.take_notes").clips_beyond_the_body(type("T", (), {"meta": {"demands": [sprint]}})())
    assert warning.startswith("run.bvh asks more than this body can do") and "0.39 body weights" in warning
    # groups that tire out within the take are named in the report, those that do not are not
    tired = {"summary": {"seconds": 20.0, "exhausted_after_s_by_group": {"trunk": None, "right_leg": 5.3, "left_arm": 30.0}}}
    assert tiring_note(type("T", (), {"meta": tired})()) == "tiring (3CC-r): right leg spent after ~5 s"
    assert (tiring_note(job_take) in s.last_report) and (
        bool(tiring_note(job_take)) == any(t is not None and t < job_take.meta["summary"]["seconds"]
                                           for t in job_take.meta["summary"]["exhausted_after_s_by_group"].values()))
    root, local = sub(sinew, "bake").take_pose(job_take)
    _, x, body_rot, body_pos = from_engine.forward_kinematics(rig, root,
                                                              sub(sinew, "engine.transforms").quat_to_matrix(local))
    armature = sub(sinew, "armature")
    pairs = [(b, body) for b, (body, _) in MIXAMO.items() if body and not body.startswith("FootThumb")]
    errs = []
    for i in range(0, F, 3):
        bpy.context.scene.frame_set(bpy.context.scene.frame_start + i)
        heads = armature.bone_world_heads(arm, [b for b, _ in pairs])
        want = x[i, [rig.body_index(body) for _, body in pairs]]
        errs.append(np.linalg.norm(heads - want, axis=1).max())
    assert max(errs) < 0.02, f"bone heads differ from the model joints by up to {100 * max(errs):.2f} cm"
    # the bone meshes follow the take: each model body's mesh where the take puts that body
    check_bone_meshes(sinew, rig, arm, body_rot, body_pos, [0, F // 2, F - 1])
    check_muscle_tubes(sinew, rig, arm, mus, job_take, body_rot, body_pos, [1, F // 2, F - 2])
    # the display reads the table
    dg = bpy.context.evaluated_depsgraph_get()
    ev = mus.evaluated_get(dg).to_mesh()
    assert "sinew_value" in ev.attributes and len(ev.vertices) > 1212
    mus.evaluated_get(dg).to_mesh_clear()
    # a second run never clobbers the first
    assert bpy.ops.sinew.simulate() == {"FINISHED"}
    assert ad.action.name == f"{original.name}_fatigued_002" and new.name in bpy.data.actions
    print(f"\nsimulate+bake {SECONDS}s take: {wall:.2f}s wall")


def check_bone_meshes(sinew, rig, arm, body_rot, body_pos, take_frames, tol=0.03):
    """Evaluated bone-mesh display vs the model's bone meshes posed by the take: every model
    body's mesh is shown once, no triangle spans two bodies (no stretched sheets), no vertex is
    left out of the triangles, and every vertex lies within `tol` of where the take's body
    transform puts it."""
    display = sub(sinew, "display")
    with np.load(ROOT / "rigs" / "human284" / "meshes.npz", allow_pickle=False) as z:
        V, vs = z["vertices"].astype(float), z["vertex_start"]
    parts = display.bone_parts(arm.name)
    shown = sorted(b for p in parts for b in p["sinew_bodies"])
    assert shown == sorted(rig.body_names), "each model body's bone mesh once"
    scene = bpy.context.scene
    for i in take_frames:
        scene.frame_set(scene.frame_start + i)
        dg = bpy.context.evaluated_depsgraph_get()
        for part in parts:
            bodies = [rig.body_index(n) for n in part["sinew_bodies"]]
            body_of_v = np.concatenate([np.full(vs[b + 1] - vs[b], b) for b in bodies])
            rest = np.concatenate([V[vs[b]:vs[b + 1]] for b in bodies])
            ev = part.evaluated_get(dg)
            me = ev.to_mesh()
            co = np.empty(3 * len(me.vertices))
            me.vertices.foreach_get("co", co)
            me.calc_loop_triangles()
            tri = np.empty(len(me.loop_triangles) * 3, np.int32)
            me.loop_triangles.foreach_get("vertices", tri)
            M = np.array(ev.matrix_world)
            ev.to_mesh_clear()
            co = co.reshape(-1, 3) @ M[:3, :3].T + M[:3, 3]
            tri = tri.reshape(-1, 3)
            assert len(co) == len(rest)
            same_body = body_of_v[tri] == body_of_v[tri[:, :1]]
            assert same_body.all(), f"{(~same_body.all(1)).sum()} bone-mesh triangles join two model bodies"
            assert np.isin(np.arange(len(co)), tri).all(), "bone-mesh vertices outside every triangle"
            want = np.einsum("vij,vj->vi", body_rot[i, body_of_v], rest) + body_pos[i, body_of_v]
            err = np.linalg.norm(co - want, axis=1)
            worst = rig.body_names[body_of_v[np.argmax(err)]]
            assert err.max() < tol, f"frame {i}: bone mesh of {worst} is {100 * err.max():.1f} cm off the take"


def check_muscle_tubes(sinew, rig, arm, mus, take, body_rot, body_pos, take_frames):
    """Evaluated muscle display at some take frames: waypoints where the take puts them, each
    ring around its waypoint with radius r (1 + 1.5 activation), the mirrored ring vertices
    opposite the skinned ones, and `sinew_value` = the take's activation of that muscle."""
    display = sub(sinew, "display")
    paths = sub(sinew, "engine.kinematics").MusclePaths(rig)
    W, R = rig.num_waypoints, display.RING
    r0 = display.RADIUS * arm.sinew.model_scale * arm.sinew.muscle_thickness
    scene = bpy.context.scene
    for i in take_frames:
        scene.frame_set(scene.frame_start + i)
        ev = mus.evaluated_get(bpy.context.evaluated_depsgraph_get())
        me = ev.to_mesh()
        co = np.empty(3 * len(me.vertices))
        me.vertices.foreach_get("co", co)
        val = np.empty(len(me.vertices))
        me.attributes["sinew_value"].data.foreach_get("value", val)
        ev.to_mesh_clear()
        co = co.reshape(-1, 3)
        assert len(co) == W * (1 + R)
        centre, ring = co[:W], co[W:].reshape(W, R, 3) - co[:W, None]
        want = paths.positions(body_rot[i], body_pos[i])
        err = np.linalg.norm(centre - want, axis=1)
        assert err.max() < 0.03, f"frame {i}: a muscle waypoint is {100 * err.max():.1f} cm off the take"
        act = np.asarray(take.activation[i], float)[rig.wp_muscle]
        assert np.allclose(val[:W], act, atol=1e-5) and np.allclose(val[W:], np.repeat(act, R), atol=1e-5)
        radius = np.linalg.norm(ring, axis=2)
        rel = radius / (r0 * (1 + 1.5 * act))[:, None]
        rigid = rig.wp_weight[:, 1] == 0  # blended waypoints' rings shrink a little, as LBS does
        assert np.allclose(rel[rigid], 1.0, atol=1e-3), f"ring radius / r (1 + 1.5 a) up to {rel[rigid].max()}"
        assert np.all((rel[~rigid] > 0.7) & (rel[~rigid] < 1.001)), f"blended rings {rel[~rigid].min()}"
        assert np.allclose(ring[:, 2], -ring[:, 0], atol=1e-6) and np.allclose(ring[:, 3], -ring[:, 1], atol=1e-6)
        assert act.max() - act.min() > 0.1  # the check saw both thin and thick muscles


def LAST_TAKE(sinew):
    """Recompute the take the operator baked (same inputs and seed give the same take)."""
    s = bpy.context.scene.sinew
    arm, job = sub(sinew, "prepare").settings_job(bpy.context, s)
    return job.run()


@pytest.mark.smoke
def test_cancel_leaves_nothing(sinew, fresh):
    arm = make_mixamo_armature(sub(sinew, "model").load_model())
    s = bpy.context.scene.sinew
    s.armature = arm
    s.clip_source, s.clip_path, s.length_mode, s.seconds = "FILE", str(WALK), "SECONDS", 30.0
    counts, frame = _counts(), bpy.context.scene.frame_current
    snap = fcurve_snapshot(arm.animation_data.action)
    arm_props = (len(arm.sinew.bone_map), arm.sinew.retargeted, arm.sinew.map_source)
    _, job = sub(sinew, "prepare").settings_job(bpy.context, s)
    job.start()
    t0 = time.time()
    while job.fraction < 0.02 and time.time() - t0 < 60:
        time.sleep(0.05)
    assert 0 < job.fraction < 1
    job.cancel()
    assert job.done and isinstance(job.error, sub(sinew, "job").Cancelled) and job.take is None
    assert _counts() == counts and bpy.context.scene.frame_current == frame
    assert fcurve_snapshot(arm.animation_data.action) == snap
    assert (len(arm.sinew.bone_map), arm.sinew.retargeted, arm.sinew.map_source) == arm_props


def test_one_retargeter_a_run(sinew, fresh, monkeypatch):
    """A run builds the armature's Retargeter once: the check before any work, the action's
    clips (two here), the bake and the display the bake makes all use that one."""
    Retargeter = sub(sinew, "engine.motion.retarget").Retargeter
    build, built = Retargeter.build.__func__, []
    monkeypatch.setattr(Retargeter, "build", classmethod(lambda cls, *a, **k: built.append(1) or build(cls, *a, **k)))
    arm = make_mixamo_armature(sub(sinew, "model").load_model())
    scene = bpy.context.scene
    scene.frame_end = 20
    job = sub(sinew, "prepare").prepare_simulation(bpy.context, arm, [("ACTION", 0.1), ("ACTION", 0.1)],
                                                   balance=False, residual=1.0, fatigue_scale=0.0)
    assert len(built) == 1 and job.retargeter is not None
    s = scene.sinew
    s.armature, s.clip_source, s.length_mode, s.seconds = arm, "ACTION", "SECONDS", 0.2
    s.fatigue_scale, s.balance, s.residual = 0.0, False, 1.0
    built.clear()
    assert not arm.sinew.retargeted  # the bake builds the display too
    assert bpy.ops.sinew.simulate() == {"FINISHED"}, s.last_report
    assert len(built) == 1 and arm.sinew.retargeted
    assert scene.frame_end == 20  # a take inside the scene's range leaves it
    s.seconds = 1.0  # a take longer than the scene: the range grows so that all of it plays
    assert bpy.ops.sinew.simulate() == {"FINISHED"}, s.last_report
    frames = json.loads(arm.animation_data.action["sinew_take"])["frames"]
    assert frames > 20 and scene.frame_end == scene.frame_start + frames - 1


def test_render_active_muscle_redder(sinew, fresh, tmp_path):
    """Cycles (CPU, tiny): a fully active muscle renders redder than a relaxed one."""
    display = sub(sinew, "display")
    rig = sub(sinew, "model").load_model()
    arm = make_mixamo_armature(rig, with_action=False)
    bpy.context.scene.sinew.armature = arm
    arm.sinew.show_bones = False
    sub(sinew, "retarget").retarget_to_model(bpy.context, arm)
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


@pytest.mark.smoke
def test_batch_script(sinew, fresh, tmp_path):
    arm = make_mixamo_armature(sub(sinew, "model").load_model())
    scene_path = tmp_path / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene_path))
    out = tmp_path / "out.blend"
    env = dict(os.environ)
    r = subprocess.run(_bake_cmd("--scene", str(scene_path), "--armature", arm.name, "--clip", f"{WALK}:0.5",
                                 "--out", str(out), "--json", "--pace", "0"), capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["action"] == "MixamoIdle_fatigued_001" and summary["frames"] >= 15
    assert summary["pace"]["strength"] == 0.0 and summary["pace"]["final_rate"] == 1.0
    assert any(n.startswith("balanced on its muscles alone") for n in summary["notes"])  # the panel's notes
    bpy.ops.wm.open_mainfile(filepath=str(out))
    a = bpy.data.objects["Mixamo"]
    assert a.animation_data.action.name == summary["action"]
    assert "Mixamo.sinew_muscles" in bpy.data.objects and "Mixamo.sinew_take" in bpy.data.objects
    assert bpy.data.objects["Mixamo.sinew_muscles"].modifiers["Sinew Muscles"].node_group is not None
    # failures: missing armature, unmappable rig, bad clip
    bad = tmp_path / "bad.bvh"
    bad.write_text("HIERARCHY\nROOT x\n{\n")
    for args, words in [(["--armature", "Nope", "--clip", str(WALK)], "no object named 'Nope'"),
                        (["--armature", "Mixamo", "--clip", str(WALK), "--pace", "-1"], "pace"),
                        (["--armature", "Mixamo", "--clip", str(bad)], "bad.bvh"),
                        (["--armature", "Mixamo", "--clip", str(tmp_path / "missing.bvh")], "not found"),
                        (["--armature", "Mixamo", "--clip", str(WALK), "--out", str(scene_path)], "this command's input"),
                        (["--armature", "Mixamo", "--clip", str(WALK), "--out", str(tmp_path / "x.npz")], ".blend")]:
        if "--out" not in args:
            args = args + ["--out", str(tmp_path / "x.blend")]
        before = scene_path.read_bytes()
        r = subprocess.run(_bake_cmd("--scene", str(scene_path), *args), capture_output=True, text=True, env=env)
        assert r.returncode != 0 and words in r.stderr, r.stderr
        assert scene_path.read_bytes() == before  # the user's scene is never rewritten
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
    """`sinew bake` (engine.commands.bake) wraps the batch script and passes its JSON through."""
    import importlib.util

    # the command's own module and the standard-library-only helpers it imports relatively
    # (atomic, errors, interrupt), from the source tree under a private package name, so that
    # `import engine` still fails in this Blender-like Python
    pkg = "_sinew_source_engine"
    spec = importlib.util.spec_from_file_location(pkg, ROOT / "engine" / "__init__.py",
                                                  submodule_search_locations=[str(ROOT / "engine")])
    sys.modules[pkg] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules[pkg])
    try:
        _bake_command_checks(importlib.import_module(f"{pkg}.commands.bake").add_bake_parser, sinew, tmp_path)
    finally:  # leave nothing of the source tree loaded (test_runtime checks the process)
        for name in [m for m in sys.modules if m == pkg or m.startswith(pkg + ".")]:
            del sys.modules[name]


def _bake_command_checks(add_bake_parser, sinew, tmp_path):
    import argparse

    ap = argparse.ArgumentParser()
    add_bake_parser(ap.add_subparsers(dest="command"))
    make_mixamo_armature(sub(sinew, "model").load_model())
    scene_path = tmp_path / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene_path))
    out = tmp_path / "o.blend"
    args = ap.parse_args(["bake", str(scene_path), "--armature", "Mixamo", "--clip", f"{WALK}:0.3",
                          "--out", str(out), "--json", "--fatigue-scale", "10"])
    assert args.func(args) == 0 and out.is_file()
    args = ap.parse_args(["bake", str(scene_path), "--armature", "Nope", "--clip", str(WALK), "--out", str(out)])
    assert args.func(args) != 0


def _file_digest(path):
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.mark.smoke
def test_library_override_rig(sinew, fresh, tmp_path):
    """A rig linked from another .blend as a library override: retarget, simulate and bake
    work on the override; the library file and its linked data are left exactly as they were,
    and the bake survives a save and reload."""
    stored_mapping = sub(sinew, "bonemap").stored_mapping
    display = sub(sinew, "display")
    arm = make_mixamo_armature(sub(sinew, "model").load_model(), name="LinkedRig")
    coll = bpy.data.collections.new("RigCollection")
    bpy.context.scene.collection.children.link(coll)
    coll.objects.link(arm)
    bpy.context.scene.collection.objects.unlink(arm)
    lib_path = tmp_path / "rig_library.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(lib_path))
    digest = _file_digest(lib_path)

    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    scene.render.fps, scene.frame_start = 30, 1
    with bpy.data.libraries.load(str(lib_path), link=True) as (src, dst):
        dst.collections = ["RigCollection"]
    linked = dst.collections[0]
    assert linked.library is not None
    root = linked.override_hierarchy_create(scene, bpy.context.view_layer, do_fully_editable=True)
    assert root is not None and root.override_library is not None
    arm = next(o for o in root.all_objects if o.type == "ARMATURE")
    assert arm.override_library is not None and arm.override_library.reference.library is not None
    linked_action = arm.animation_data.action
    assert linked_action.library is not None
    before = fcurve_snapshot(linked_action)
    lib_arm = arm.override_library.reference
    lib_matrix = [list(r) for r in lib_arm.matrix_world]

    # the linked original itself is refused with a clear message, and nothing is written
    errors = sub(sinew, "engine.errors")
    with pytest.raises(errors.ParameterError, match="library override"):
        sub(sinew, "retarget").retarget_to_model(bpy.context, lib_arm)
    with pytest.raises(errors.ParameterError, match="library override"):
        sub(sinew, "prepare").prepare_simulation(bpy.context, lib_arm, [(str(WALK), 0.5)])
    s = scene.sinew
    s.armature = arm
    assert bpy.ops.sinew.retarget() == {"FINISHED"}
    s.clip_source, s.clip_path, s.length_mode, s.seconds = "FILE", str(WALK), "SECONDS", SECONDS
    assert bpy.ops.sinew.simulate() == {"FINISHED"}
    new = arm.animation_data.action
    assert new.library is None and new.name == f"{linked_action.name}_fatigued_001"
    assert fcurve_snapshot(linked_action) == before, "the linked Action changed"
    assert [list(r) for r in lib_arm.matrix_world] == lib_matrix
    assert not [a for a in bpy.data.actions if a.library is not None and a.is_evaluated]
    nm = display.names_for(arm.name)
    assert bpy.data.objects[nm["muscles"]].parent == arm and nm["table"] in bpy.data.objects
    # the pose follows the new action
    scene.frame_set(10)
    pb = arm.pose.bones["mixamorig:LeftUpLeg"]
    assert abs(pb.rotation_quaternion[0] - 1.0) > 1e-4
    # saved and reopened: the override keeps the new action and the bone map
    out, new_name = tmp_path / "shot.blend", new.name
    mapping, scale = stored_mapping(arm), arm.sinew.model_scale
    assert len(mapping) >= 20
    bpy.ops.wm.save_as_mainfile(filepath=str(out))
    bpy.ops.wm.open_mainfile(filepath=str(out))
    arm = next(o for o in bpy.data.objects if o.type == "ARMATURE" and o.override_library is not None)
    assert arm.animation_data.action.name == new_name
    assert stored_mapping(arm) == mapping and arm.sinew.retargeted  # all of it (4.x kept 2 of 23, 5.0 none)
    assert arm.sinew.model_scale == pytest.approx(scale)
    assert _file_digest(lib_path) == digest, "the library .blend was written"


def test_display_settings(sinew, fresh):
    """The sidebar's display settings drive the plain data: colour channel, thickness, and the
    visibility of the muscles and of every bone-mesh part (viewport and render)."""
    display = sub(sinew, "display")
    rig = sub(sinew, "model").load_model()
    arm = make_mixamo_armature(rig, with_action=False)
    sub(sinew, "retarget").retarget_to_model(bpy.context, arm)
    values = np.random.default_rng(1).random((3, rig.num_muscles, 3)).astype(np.float32)
    values[..., 0] = 0.0  # relaxed: every ring at the base radius
    display.write_take_table(bpy.context, arm, values, 1)
    mus = bpy.data.objects[display.names_for(arm.name)["muscles"]]
    W = rig.num_waypoints

    def evaluated():
        bpy.context.scene.frame_set(2)
        ev = mus.evaluated_get(bpy.context.evaluated_depsgraph_get())
        me = ev.to_mesh()
        co = np.array([v.co for v in me.vertices])
        val = np.array([a.value for a in me.attributes["sinew_value"].data])
        ev.to_mesh_clear()
        return np.linalg.norm(co[W:W + 4] - co[0], axis=1), val[:W]

    radius, val = evaluated()
    assert np.allclose(val, 0.0)
    arm.sinew.color_mode = "FATIGUE"
    _, val = evaluated()
    assert np.allclose(val, values[1, rig.wp_muscle, 1], atol=1e-6)
    arm.sinew.color_mode = "FORCE"
    _, val = evaluated()
    assert np.allclose(val, values[1, rig.wp_muscle, 2], atol=1e-6)
    arm.sinew.muscle_thickness = 2.0
    radius2, _ = evaluated()
    assert np.allclose(radius2, 2 * radius, rtol=1e-4)
    parts = display.bone_parts(arm.name)
    assert len(parts) >= 20 and all(p.visible_get() for p in parts)
    arm.sinew.show_bones = False
    assert all(p.hide_render and not p.visible_get() for p in parts) and mus.visible_get()
    arm.sinew.show_muscles = False
    assert mus.hide_render and not mus.visible_get()
