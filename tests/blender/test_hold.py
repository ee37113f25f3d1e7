"""A held pose from Blender: the Simulate panel's Hold a Pose and the batch script's
CLIP@AT reach the take as the clip's pose held still, and with Residual 0 the stand
controller holds it (engine.control.stand)."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from .conftest import ROOT, WALK, bpy, make_mixamo_armature, sub


def test_panel_holds_a_pose(sinew, fresh):
    arm = make_mixamo_armature(sub(sinew, "model").load_model())
    s = bpy.context.scene.sinew
    s.armature, s.clip_source, s.clip_path = arm, "FILE", str(WALK)
    s.length_mode, s.seconds, s.fatigue_scale, s.residual = "SECONDS", 0.5, 0.0, 0.0
    s.hold_pose, s.hold_at = True, 0.5
    _, job = sub(sinew, "prepare").settings_job(bpy.context, s)
    ref = job.clips[0][0]
    assert ref.meta["held_at_s"] == 0.5 and not ref.qvel.any() and np.ptp(ref.q, axis=0).max() == 0.0
    assert bpy.ops.sinew.simulate() == {"FINISHED"}
    assert "stood the pose on its muscles alone" in s.last_report, s.last_report


def test_batch_script_holds_a_pose(sinew, fresh, tmp_path):
    make_mixamo_armature(sub(sinew, "model").load_model())
    scene_path = tmp_path / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene_path))
    cmd = [sys.executable, str(ROOT / "scripts" / "sinew_bake.py"), "--scene", str(scene_path), "--armature", "Mixamo",
           "--fatigue-scale", "0", "--residual", "0", "--out", str(tmp_path / "o.blend"), "--json"]
    r = subprocess.run(cmd + ["--clip", f"{WALK}@0.5:0.5"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert not s["fell"], s
    r = subprocess.run(cmd + ["--clip", f"{WALK}@9:0.5"], capture_output=True, text=True)
    assert r.returncode != 0 and "outside the clip" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
