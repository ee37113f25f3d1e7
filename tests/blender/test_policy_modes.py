"""A policy's modes from the Simulate panel and the batch script (issue 20): the mode, its
noise and heading goals reach the take; a heading goal a policy cannot steer to is refused
before any work."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import ROOT, WALK, action_fcurves, bpy, make_mixamo_armature, sub

STAND_POLICY = ROOT / "docs" / "results" / "dagger_stand_2026-11-24" / "stand.npz"


@pytest.mark.smoke
def test_panel_policy_modes_reach_the_take(sinew, fresh):
    settings_job = sub(sinew, "prepare").settings_job
    errors = sub(sinew, "engine.errors")
    arm = make_mixamo_armature(sub(sinew, "model").load_model())
    s = bpy.context.scene.sinew
    s.armature, s.clip_source, s.clip_path = arm, "FILE", str(WALK)
    s.hold_pose, s.hold_at = True, 0.5
    s.length_mode, s.seconds, s.fatigue_scale = "SECONDS", 1.0, 0.0
    s.controller, s.policy_path = "policy", str(STAND_POLICY)
    s.policy_mode, s.noise_scale = "generate", 0.0
    _, job = settings_job(bpy.context, s)
    assert (job.mode, job.noise_scale, job.goals) == ("generate", 0.0, [])
    s.policy_mode, s.headings = "heading", "90@0.5"
    with pytest.raises(errors.ParameterError, match="no heading"):  # the stand policy has no high-level policy
        settings_job(bpy.context, s)
    s.headings = "left"
    with pytest.raises(errors.ParameterError, match="--heading"):
        settings_job(bpy.context, s)
    s.policy_mode = "generate"
    assert bpy.ops.sinew.simulate() == {"FINISHED"}
    assert "baked" in s.last_report and "fell" not in s.last_report
    action = arm.animation_data.action
    assert action is not None and len(action_fcurves(action)) > 0


def test_batch_script_policy_mode(sinew, fresh, tmp_path):
    make_mixamo_armature(sub(sinew, "model").load_model())
    scene_path = tmp_path / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene_path))
    cmd = [sys.executable, str(ROOT / "scripts" / "sinew_bake.py"), "--scene", str(scene_path), "--armature", "Mixamo",
           "--fatigue-scale", "0", "--out", str(tmp_path / "o.blend"), "--clip", f"{WALK}@0.5:0.5",
           "--controller", "policy", "--policy", str(STAND_POLICY)]
    r = subprocess.run(cmd + ["--mode", "generate", "--noise-scale", "0.5", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert not json.loads(r.stdout.strip().splitlines()[-1])["fell"]
    r = subprocess.run(cmd + ["--speed", "1.2"], capture_output=True, text=True)
    assert r.returncode != 0 and "--speed" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
