"""Pushes and calibration poses in Blender: the Simulate panel's settings and the batch
script reach the take; bad pushes are refused in one line before any work."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import ROOT, WALK, bpy, make_mixamo_armature, sub


@pytest.fixture
def calibrated(tmp_path, sinew):
    """The bundled walk as Mixamo-named 30 fps mocap with a T-pose on its first frame (made
    with the installed extension's engine: nothing of the project is importable here)."""
    from ..clips import variant_file

    return variant_file(tmp_path, "walk", names="mixamo", fps=30, pose="T", pose_frames=1)


def test_panel_settings_reach_the_take(sinew, fresh, calibrated):
    settings_job = sub(sinew, "prepare").settings_job
    errors = sub(sinew, "engine.errors")
    arm = make_mixamo_armature(sub(sinew, "model").load_model())
    s = bpy.context.scene.sinew
    s.armature, s.clip_source, s.clip_path = arm, "FILE", str(calibrated)
    s.length_mode, s.seconds, s.fatigue_scale = "SECONDS", 0.8, 0.0
    _, job = settings_job(bpy.context, s)
    cal = job.clips[0][0].meta["calibration"]
    assert cal["frames"] == 1 and cal["pose"] == "T-pose" and cal["skipped"] and job.pushes == []
    s.keep_calibration = True
    _, kept = settings_job(bpy.context, s)
    assert not kept.clips[0][0].meta["calibration"]["skipped"]
    assert kept.clips[0][0].num_frames == job.clips[0][0].num_frames + 4  # one frame at 30 fps = 4 at 120 Hz
    for bad, says in (("0.2:0,-150:0.2", "3 components"), ("0.2:0,-150,0:0.2:Hips", "bodies: Pelvis"),
                      ("0.7:0,-150,0:0.2", "after the take's end")):
        s.pushes = bad
        with pytest.raises(errors.ParameterError, match=says):
            settings_job(bpy.context, s)
    s.keep_calibration = False
    s.pushes = "0.3:0,-150,0:0.2; 0.5:20,0,0:0.1:Torso"
    _, job = settings_job(bpy.context, s)
    assert [(p.time, p.body) for p in job.pushes] == [(0.3, "Pelvis"), (0.5, "Torso")]
    assert bpy.ops.sinew.simulate() == {"FINISHED"}
    assert "push at 0.3 s: " in s.last_report and "push at 0.5 s: " in s.last_report
    assert f"skipped a T-pose at the start of {calibrated.name} (1 frame)" in s.last_report


def test_batch_script_pushes_and_keeps_calibration(sinew, fresh, tmp_path, calibrated):
    make_mixamo_armature(sub(sinew, "model").load_model())
    scene_path = tmp_path / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene_path))
    cmd = [sys.executable, str(ROOT / "scripts" / "sinew_bake.py"), "--scene", str(scene_path), "--armature", "Mixamo",
           "--fatigue-scale", "0", "--out", str(tmp_path / "o.blend")]
    r = subprocess.run(cmd + ["--clip", f"{calibrated}:0.6", "--push", "0.2:0,-150,0:0.2", "--keep-calibration",
                              "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["pushes"][0]["force"] == [0.0, -150.0, 0.0] and s["pushes"][0]["reached"]
    r = subprocess.run(cmd + ["--clip", f"{WALK}:0.6", "--push", "0.2:0,-150,0:0.2:Nope"], capture_output=True, text=True)
    assert r.returncode != 0 and "no body 'Nope'" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
