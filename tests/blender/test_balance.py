"""The balance planner from the Simulate panel and the batch script (issue 16): the panel's
Balance setting reaches the take (played in Blender's process, no residual) and the bake says
it balanced; the batch script refuses it beside a policy in one line."""
from __future__ import annotations

import subprocess
import sys

import pytest

from .conftest import ROOT, WALK, action_fcurves, bpy, make_mixamo_armature, sub


@pytest.mark.smoke
def test_panel_balance_plans_without_the_residual(sinew, fresh):
    core = sub(sinew, "core")
    arm = make_mixamo_armature(core.load_model())
    s = bpy.context.scene.sinew
    s.armature, s.clip_source, s.clip_path = arm, "FILE", str(WALK)
    s.length_mode, s.seconds, s.fatigue_scale = "SECONDS", 0.25, 0.0
    s.balance, s.residual = True, 1.0  # the residual field is out of play once Balance is on
    _, job = core.settings_job(bpy.context, s)
    assert job.residual == 0.0 and job.balance.workers == 0 and job.balance.candidates >= 2
    assert bpy.ops.sinew.simulate() == {"FINISHED"}
    assert "balanced on its muscles alone" in s.last_report and "fell" not in s.last_report
    assert len(action_fcurves(arm.animation_data.action)) > 0


def test_batch_script_refuses_balance_beside_a_policy(sinew, fresh, tmp_path):
    make_mixamo_armature(sub(sinew, "core").load_model())
    scene_path = tmp_path / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene_path))
    policy = ROOT / "docs" / "results" / "dagger_stand_2026-11-24" / "stand.npz"
    cmd = [sys.executable, str(ROOT / "scripts" / "sinew_bake.py"), "--scene", str(scene_path), "--armature", "Mixamo",
           "--out", str(tmp_path / "o.blend"), "--clip", f"{WALK}:0.5", "--balance",
           "--controller", "policy", "--policy", str(policy)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode != 0 and "--balance" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
