"""Nothing lost in Blender (issue 19), on the installed zip: Ctrl-Z after a bake returns the
scene to how it was; an error inside the simulate operator leaves no Action, object or
data-block behind and says why in the status bar and the sidebar; Ctrl-C stops a batch
bake at the next step and bakes what was simulated."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from .conftest import ROOT, WALK, bpy, fcurve_snapshot, make_mixamo_armature, sub


def _ids():
    """Every data-block in the file, by collection and name."""
    out = set()
    for prop in bpy.data.bl_rna.properties:
        kind = getattr(bpy.types, prop.fixed_type.identifier, None) if prop.type == "COLLECTION" else None
        if kind is not None and issubclass(kind, bpy.types.ID) and prop.identifier not in ("window_managers",
                                                                                             "screens", "workspaces"):
            out |= {(prop.identifier, id_.name) for id_ in getattr(bpy.data, prop.identifier)}
    return out


def _scene_state(name="Mixamo"):
    arm = bpy.data.objects[name]
    ad = arm.animation_data
    return dict(ids=_ids(), action=ad.action.name, curves=fcurve_snapshot(ad.action),
                tracks=[t.name for t in ad.nla_tracks], retargeted=arm.sinew.retargeted,
                bone_map=[(it.body, it.bone) for it in arm.sinew.bone_map], saved=arm.sinew_saved)


def _setup(sinew, seconds=0.5):
    arm = make_mixamo_armature(sub(sinew, "model").load_model())
    s = bpy.context.scene.sinew
    s.armature = arm
    s.clip_source, s.clip_path, s.length_mode, s.seconds = "FILE", str(WALK), "SECONDS", seconds
    s.last_report = ""
    return arm, s


def test_ctrl_z_after_a_bake_returns_the_scene_to_how_it_was(sinew, fresh):
    arm, s = _setup(sinew)
    bpy.ops.ed.undo_push(message="scene ready")
    before = _scene_state()
    assert bpy.ops.sinew.simulate("EXEC_DEFAULT", True) == {"FINISHED"}  # undo=True: as the button runs it
    after = _scene_state()
    assert after["action"] == "MixamoIdle_fatigued_001" and after["retargeted"]
    made = after["ids"] - before["ids"]
    assert ("actions", "MixamoIdle_fatigued_001") in made and ("objects", "Mixamo.sinew_muscles") in made
    assert bpy.ops.ed.undo() == {"FINISHED"}  # one Ctrl-Z
    assert _scene_state() == before
    assert bpy.ops.ed.redo() == {"FINISHED"}  # and Ctrl-Shift-Z brings the bake back
    assert _scene_state() == after


def _fails_and_leaves_nothing(words):
    before = _scene_state()
    with pytest.raises(RuntimeError) as e:  # an ERROR report (the status bar) reaches a script as RuntimeError
        bpy.ops.sinew.simulate()
    assert _scene_state() == before  # no Action, object or data-block left; the armature as it was
    s = bpy.context.scene.sinew
    assert s.last_report.startswith("Sinew: ") and all(w in s.last_report for w in words), s.last_report
    assert str(e.value).strip() == f"Error: {s.last_report}"  # the same reason in the status bar and the sidebar


def test_a_policy_for_another_rig_is_refused_before_any_work(sinew, fresh, tmp_path):
    npz, policy = sub(sinew, "engine.npzfile"), sub(sinew, "engine.control.policy")
    path = tmp_path / "tall_policy.npz"
    npz.write_npz(path, policy.FORMAT, policy.FORMAT_VERSION, dict(rig=dict(name="human284_tall", fingerprint="0")), {})
    arm, s = _setup(sinew)
    s.controller, s.policy_path = "policy", str(path)
    _fails_and_leaves_nothing(["tall_policy.npz", "trained for rig 'human284_tall'"])


def test_a_take_that_diverges_is_not_baked_and_says_where(sinew, fresh, monkeypatch):
    simulation = sub(sinew, "engine.simulation")
    check = simulation.Simulation.divergence

    def strict(self):  # the real divergence check, at a speed the walk exceeds
        self.max_speed = 0.3
        return check(self)

    monkeypatch.setattr(simulation.Simulation, "divergence", strict)
    arm, s = _setup(sinew)
    _fails_and_leaves_nothing(["simulation diverged at t = ", "speed", "nothing was baked"])


def test_a_bake_that_fails_midway_takes_back_what_it_made(sinew, fresh, monkeypatch):
    display, armature = sub(sinew, "display"), sub(sinew, "armature")
    made = []
    bake_action = armature.bake_action

    def spy(*a, **k):  # the new Action is made ...
        made.append(bake_action(*a, **k)[0].name)
        return bpy.data.actions[made[-1]], None

    def broken(*a, **k):  # ... then the display fails
        raise RuntimeError("the muscle display could not be written")

    monkeypatch.setattr(armature, "bake_action", spy)
    monkeypatch.setattr(display, "write_take_table", broken)
    arm, s = _setup(sinew)
    _fails_and_leaves_nothing(["RuntimeError", "could not be written"])
    assert made == ["MixamoIdle_fatigued_001"] and made[0] not in bpy.data.actions


def test_ctrl_c_stops_a_batch_bake_and_bakes_what_was_simulated(sinew, fresh, tmp_path):
    """`sinew bake` runs the batch script in its own session and forwards the signal."""
    arm = make_mixamo_armature(sub(sinew, "model").load_model())
    scene_path = tmp_path / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene_path))
    out = tmp_path / "out.blend"
    out.write_bytes(scene_path.read_bytes())  # an older bake: a .blend, which a bake replaces (no --force)
    p = subprocess.Popen([sys.executable, "-m", "engine", "bake", str(scene_path), "--armature", arm.name,
                          "--clip", f"{WALK}:60", "--out", str(out), "--json"], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True, env=dict(os.environ))
    time.sleep(20)  # bpy loaded, the scene opened, simulating
    os.killpg(p.pid, signal.SIGINT)  # a terminal's Ctrl-C
    stdout, stderr = p.communicate(timeout=300)
    assert p.returncode == 130 and "Traceback" not in stderr, stderr
    assert stderr.strip().splitlines()[-1].startswith("sinew bake: stopped by SIGINT ")
    s = json.loads(stdout.strip().splitlines()[-1])
    assert s["partial"] and s["seconds"] < 60 and s["frames"] < 60 * 30
    bpy.ops.wm.open_mainfile(filepath=str(out))
    assert bpy.data.objects["Mixamo"].animation_data.action.name == s["action"]
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out.blend", "scene.blend"]


def test_the_bake_refuses_an_unwritable_out_before_any_work(sinew, fresh, tmp_path):
    (tmp_path / "f").write_text("keep me")
    make_mixamo_armature(sub(sinew, "model").load_model())
    scene_path = tmp_path / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene_path))
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "sinew_bake.py"), "--scene", str(scene_path),
                        "--armature", "Mixamo", "--clip", str(WALK), "--out", str(tmp_path / "f" / "o.blend")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1] == (f"sinew bake: error: {tmp_path / 'f' / 'o.blend'}: cannot write "
                                                 f"here: {tmp_path / 'f'} is a file, not a folder"), r.stderr
    assert (tmp_path / "f").read_text() == "keep me"


@pytest.fixture(autouse=True)
def _no_pending_job(sinew):
    yield
    assert sub(sinew, "operators").RUN["job"] is None
