"""The balance planner from the Simulate panel and the batch script (issue 16): the panel's
Balance setting reaches the take (no residual; its candidates played in processes forked from
Blender's, one per core, or in Blender's own) and the bake says it balanced; the batch script
refuses it beside a policy, and --workers where it does not fit, in one line."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from .conftest import ROOT, WALK, action_fcurves, bpy, make_mixamo_armature, sub


@pytest.mark.smoke
def test_panel_balance_plans_without_the_residual(sinew, fresh):
    arm = make_mixamo_armature(sub(sinew, "model").load_model())
    s = bpy.context.scene.sinew
    s.armature, s.clip_source, s.clip_path = arm, "FILE", str(WALK)
    s.length_mode, s.seconds, s.fatigue_scale = "SECONDS", 0.25, 0.0
    s.balance, s.residual = True, 1.0  # the residual field is out of play once Balance is on
    _, job = sub(sinew, "prepare").settings_job(bpy.context, s)
    assert job.residual == 0.0 and job.balance.workers == sub(sinew, "prepare").planner_workers(bpy.context) and job.balance.candidates >= 2
    assert bpy.ops.sinew.simulate() == {"FINISHED"}
    assert "balanced on its muscles alone" in s.last_report and "fell" not in s.last_report
    assert len(action_fcurves(arm.animation_data.action)) > 0


def test_panel_take_that_falls_says_which_way_from_when_and_why(sinew, fresh):
    """Balance off and no residual: the tracker alone lets the walk fall within seconds; the
    bake keeps it up to the fall and the report says when, which way and why (engine.fall)."""
    arm = make_mixamo_armature(sub(sinew, "model").load_model())
    s = bpy.context.scene.sinew
    s.armature, s.clip_source, s.clip_path = arm, "FILE", str(WALK)
    s.length_mode, s.seconds, s.fatigue_scale, s.balance, s.residual = "SECONDS", 6.0, 0.0, False, 0.0
    assert bpy.ops.sinew.simulate() == {"FINISHED"}
    assert "the character fell; kept up to the fall" in s.last_report, s.last_report
    assert "it fell at " in s.last_report and "going down from" in s.last_report, s.last_report
    assert "nothing to balance it" in s.last_report, s.last_report


def test_panel_balance_on_every_core_forks_from_blender_and_gives_the_same_take(sinew, fresh):
    """With the preference on (the default) the planner's workers are forked from Blender's
    process, from the simulation's thread as the modal operator runs it: one per core on Linux,
    and the take is the one planned in Blender's process, bit for bit, with no worker left."""
    import multiprocessing as mp
    import time

    prefs = sub(sinew, "prefs").get(bpy.context)
    arm = make_mixamo_armature(sub(sinew, "model").load_model())
    s = bpy.context.scene.sinew
    s.armature, s.clip_source, s.clip_path = arm, "FILE", str(WALK)
    s.length_mode, s.seconds, s.fatigue_scale, s.balance = "SECONDS", 0.2, 0.0, True
    takes, kids = [], []
    try:
        for on in (False, True):
            prefs.balance_on_every_core = on
            _, job = sub(sinew, "prepare").settings_job(bpy.context, s)
            assert job.balance.workers == (len(os.sched_getaffinity(0)) if on else 0)
            job.start()
            while not job.done:
                kids.append((on, len(mp.active_children())))
                time.sleep(0.05)
            assert job.error is None, job.error
            takes.append(job.take)
    finally:
        prefs.balance_on_every_core = True
    assert max(n for on, n in kids if on) == len(os.sched_getaffinity(0)) and max(n for on, n in kids if not on) == 0
    assert np.array_equal(takes[0].q, takes[1].q) and np.array_equal(takes[0].activation, takes[1].activation)
    assert takes[1].meta["balance"]["workers_lost"] is None and not mp.active_children()


@pytest.mark.parametrize("extra, named", [(["--balance", "--controller", "policy", "--policy", "POLICY"], "--balance"),
                                          (["--residual", "0.5", "--workers", "2"], "--workers"),
                                          (["--workers", "-1"], "--workers")])
def test_batch_script_refuses_balance_options_that_do_not_fit(sinew, fresh, tmp_path, extra, named):
    """--balance beside a policy, --workers beside a residual take (no planner) or below 0:
    one line naming the option, before any work."""
    make_mixamo_armature(sub(sinew, "model").load_model())
    scene_path = tmp_path / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene_path))
    policy = ROOT / "docs" / "results" / "dagger_stand_2026-11-24" / "stand.npz"
    cmd = [sys.executable, str(ROOT / "scripts" / "sinew_bake.py"), "--scene", str(scene_path), "--armature", "Mixamo",
           "--out", str(tmp_path / "o.blend"), "--clip", f"{WALK}:0.5"] + [str(policy) if a == "POLICY" else a for a in extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode != 0 and named in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "o.blend").exists()
