"""Blender tests, run in a Blender-like Python: a virtual environment that holds only the PyPI
bpy module (with what it pulls in, numpy pinned to the one that Blender bundles) and pytest,
one per bpy version (`make test-blender` builds them in .blender/ and runs this folder with
`python -I`, so neither the working directory nor PYTHONPATH reach it). The built linux zip is
installed once per session into a temporary BLENDER_USER_RESOURCES and every test drives that
installed copy: scipy, mujoco and daqp come from its wheels, the engine from inside it.

In any other Python (the project's .venv has scipy and the engine) these tests are skipped:
there the add-on could use packages its zip lacks.

pytest lives in that environment (with pluggy, iniconfig, packaging, pygments): driving bpy
in-process is what the tests need (frame_set, depsgraph reads, renders), and a subprocess
per check would cost a bpy start and a zip install each. What pytest brings cannot stand in
for the add-on's needs: test_runtime.py proves none of daqp, scipy, mujoco, threadpoolctl,
engine or sinew imports there outside the extension, that the environment holds nothing but
bpy's and pytest's packages, and that in the test process every one of those modules comes
from the installed zip and nothing from the source tree (--import-mode=importlib keeps the
repository off sys.path).

BLENDER_USER_RESOURCES must be set before bpy is first imported, so it is set when this
conftest is imported; the zip is built by tools/build_extension.py if dist/ has none
(set SINEW_EXTENSION_ZIP to test another one)."""
from __future__ import annotations

import atexit
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WALK = ROOT.parent / "shared" / "reference" / "mass" / "motion" / "walk.bvh"
if not WALK.is_file():
    WALK = Path("/work/shared/reference/mass/motion/walk.bvh")
# What the engine needs beyond numpy, none of it importable before the extension is installed
RUNTIME = ("daqp", "mujoco", "scipy", "threadpoolctl")
BLENDER_LIKE = not any(importlib.util.find_spec(m) for m in RUNTIME)
_USER = tempfile.mkdtemp(prefix="sinew-blender-user-")
os.environ.setdefault("BLENDER_USER_RESOURCES", _USER)
# the installed extension is ~200 MB (its wheels unpacked): gone with the session, or a few
# runs fill a CI disk (one did)
atexit.register(shutil.rmtree, _USER, ignore_errors=True)

bpy = pytest.importorskip("bpy")


def pytest_configure(config):
    config.addinivalue_line("markers", "smoke: the install -> retarget -> simulate -> bake path run on every "
                                       "bpy version (the whole folder runs on one)")


def pytest_collection_modifyitems(config, items):
    if BLENDER_LIKE:
        return
    here = Path(__file__).resolve().parent
    skip = pytest.mark.skip(reason="needs a Blender-like Python without scipy/mujoco/daqp (make test-blender)")
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(here):
            item.add_marker(skip)


def _zip() -> Path:
    env = os.environ.get("SINEW_EXTENSION_ZIP")
    if env:
        return Path(env)
    z = sorted((ROOT / "dist").glob("sinew-*-linux_x64.zip"))
    src_newest = max(p.stat().st_mtime for d in ("blender_addon", "engine") for p in (ROOT / d).rglob("*.py"))
    if not z or z[-1].stat().st_mtime < src_newest:
        subprocess.run([sys.executable, str(ROOT / "tools" / "build_extension.py"), "--platforms", "linux-x64"],
                       check=True, capture_output=True)
        z = sorted((ROOT / "dist").glob("sinew-*-linux_x64.zip"))
    return z[-1]


@pytest.fixture(scope="session")
def sinew():
    """The installed, enabled extension package (bl_ext.user_default.sinew)."""
    zp = _zip()
    res = bpy.ops.extensions.package_install_files(filepath=str(zp), repo="user_default", enable_on_install=True)
    assert res == {"FINISHED"}
    name = "bl_ext.user_default.sinew"
    assert name in bpy.context.preferences.addons.keys()
    mod = importlib.import_module(name)
    assert Path(mod.__file__).resolve().is_relative_to(Path(os.environ["BLENDER_USER_RESOURCES"]).resolve())
    return mod


def sub(pkg, name):
    return importlib.import_module(f"{pkg.__name__}.{name}")


@pytest.fixture
def fresh():
    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    scene.render.fps = 30
    scene.frame_start = 1
    return scene


# Mixamo bone -> (model body whose joint is its head, parent bone)
MIXAMO = {
    "mixamorig:Hips": ("Pelvis", None),
    "mixamorig:Spine": ("Spine", "mixamorig:Hips"),
    "mixamorig:Spine1": (None, "mixamorig:Spine"),
    "mixamorig:Spine2": ("Torso", "mixamorig:Spine1"),
    "mixamorig:Neck": ("Neck", "mixamorig:Spine2"),
    "mixamorig:Head": ("Head", "mixamorig:Neck"),
}
for side, S in (("Right", "R"), ("Left", "L")):
    MIXAMO.update({
        f"mixamorig:{side}Shoulder": (f"Shoulder{S}", "mixamorig:Spine2"),
        f"mixamorig:{side}Arm": (f"Arm{S}", f"mixamorig:{side}Shoulder"),
        f"mixamorig:{side}ForeArm": (f"ForeArm{S}", f"mixamorig:{side}Arm"),
        f"mixamorig:{side}Hand": (f"Hand{S}", f"mixamorig:{side}ForeArm"),
        f"mixamorig:{side}UpLeg": (f"Femur{S}", "mixamorig:Hips"),
        f"mixamorig:{side}Leg": (f"Tibia{S}", f"mixamorig:{side}UpLeg"),
        f"mixamorig:{side}Foot": (f"Talus{S}", f"mixamorig:{side}Leg"),
        f"mixamorig:{side}ToeBase": (f"FootThumb{S}", f"mixamorig:{side}Foot"),
    })


def make_mixamo_armature(rig, name="Mixamo", with_action=True):
    """A Mixamo-named armature whose bone heads sit on the model's joints (T-pose, facing -Y)."""
    import numpy as np

    J = {n: rig.joint_pos[i] for i, n in enumerate(rig.body_names)}
    heads = {}
    for bone, (body, parent) in MIXAMO.items():
        heads[bone] = J[body] if body else 0.5 * (J["Spine"] + J["Torso"])
    data = bpy.data.armatures.new(name)
    obj = bpy.data.objects.new(name, data)
    bpy.context.scene.collection.objects.link(obj)
    bpy.context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    eb = {}
    for bone, (body, parent) in MIXAMO.items():
        b = data.edit_bones.new(bone)
        b.head = heads[bone]
        eb[bone] = b
    for bone, (body, parent) in MIXAMO.items():
        kids = [k for k, (_, p) in MIXAMO.items() if p == bone]
        h = np.array(heads[bone])
        if len(kids) == 1:
            tail = np.array(heads[kids[0]])
        elif bone.endswith("Spine2") or bone.endswith("Hips"):
            tail = h + [0, 0, 0.1]
        elif "Head" in bone:
            tail = h + [0, 0, 0.15]
        elif "Hand" in bone:
            tail = h + np.sign(h[0]) * np.array([0.08, 0, 0])
        else:  # toes
            tail = h + [0, -0.05, 0]
        if np.linalg.norm(tail - h) < 1e-3:
            tail = h + [0, 0, 0.05]
        eb[bone].tail = tail
        eb[bone].roll = 0.3 if "Arm" in bone else 0.0
        if parent:
            eb[bone].parent = eb[parent]
    bpy.ops.object.mode_set(mode="OBJECT")
    for pb in obj.pose.bones:
        pb.rotation_mode = "QUATERNION"
    obj.pose.bones["mixamorig:LeftForeArm"].rotation_mode = "XYZ"  # a Euler bone too
    if with_action:
        act = bpy.data.actions.new(f"{name}Idle")
        obj.animation_data_create().action = act
        pb = obj.pose.bones["mixamorig:LeftArm"]
        pb.rotation_quaternion = (1, 0, 0, 0)
        pb.keyframe_insert("rotation_quaternion", frame=1)
        pb.rotation_quaternion = (0.9, 0.0, 0.3, 0.0)
        pb.keyframe_insert("rotation_quaternion", frame=20)
        obj.pose.bones["mixamorig:Hips"].keyframe_insert("location", frame=1)
    return obj


def action_fcurves(action) -> list:
    """The Action's F-curves (slotted 4.4+ or legacy 4.2-4.3 actions)."""
    curves = []
    if hasattr(action, "layers") and len(action.layers):
        for layer in action.layers:
            for strip in layer.strips:
                for bag in strip.channelbags:
                    curves += list(bag.fcurves)
    else:
        curves = list(action.fcurves)
    return curves


def fcurve_snapshot(action):
    """Every F-curve's keys, handles and settings, as bytes (slotted or legacy actions)."""
    import numpy as np

    out = []
    for fc in action_fcurves(action):
        n = len(fc.keyframe_points)
        arrs = []
        for prop in ("co", "handle_left", "handle_right"):
            a = np.empty(2 * n, np.float32)
            fc.keyframe_points.foreach_get(prop, a)
            arrs.append(a.tobytes())
        interp = [k.interpolation for k in fc.keyframe_points]
        out.append((fc.data_path, fc.array_index, fc.extrapolation, tuple(interp), *arrs))
    return sorted(out)
