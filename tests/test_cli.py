"""The sinew command line as a user runs it: exit codes, one-line errors, --json summaries."""
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from .conftest import REPO


def sinew(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "engine", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def last_json(proc):
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_info_json():
    s = last_json(sinew("info", "--json"))
    assert (s["bodies"], s["joints"], s["muscles"], s["waypoints"]) == (23, 22, 284, 1212)
    assert s["mass_kg"] == pytest.approx(61.4) and 1.6 < s["height_m"] < 1.8


def test_info_unknown_rig_is_one_line():
    proc = sinew("info", "--rig", "nosuchrig", check=False)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "nosuchrig" in lines[0] and "not found" in lines[0]


def test_fatigue_curve_writes_the_plot_and_the_endurance(tmp_path):
    out = tmp_path / "fig.png"
    s = last_json(sinew("fatigue-curve", "--load", "0.5", "--on", "150", "--off", "60", "--out", str(out), "--json"))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert s["endurance_s"] == pytest.approx(114.1, abs=1.0)  # see tests/test_fatigue.py
    assert 0 < s["final_MF"] < s["peak_MF"]
    held = last_json(sinew("fatigue-curve", "--load", "0.1", "--on", "30", "--off", "10",
                           "--out", str(tmp_path / "b.png"), "--json"))
    assert held["endurance_s"] is None


@pytest.mark.parametrize("args, name", [
    (["--F", "nan"], "--F"), (["--load", "1.5"], "--load"), (["--on", "-3"], "--on"),
    (["--LD", "400"], "LD"),
])
def test_fatigue_curve_bad_parameters(tmp_path, args, name):
    proc = sinew("fatigue-curve", "--out", str(tmp_path / "x.png"), *args, check=False)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and name in lines[0]
    assert not (tmp_path / "x.png").exists()


def test_bench_json_reports_every_stage():
    s = last_json(sinew("bench", "--seconds", "0.2", "--tracking", "0.25", "--json"))
    assert set(s["step_us"]) >= {"lbs", "lengths", "hill_pd", "fatigue", "forces", "muscle_step_total",
                                 "muscle_step_numpy", "loop_mujoco", "loop_before_mujoco", "physics_before_mujoco"}
    assert s["muscle_path"] in ("compiled", "numpy") and s["speedup"]["muscle_step"] > 0  # old and new side by side
    assert all(np.isfinite(v) and v > 0 for v in s["step_us"].values())
    t = s["tracking"]["step_us"]
    assert {"tracking_prepare", "tracking_solve", "muscles_and_physics"} <= set(t)
    # the parts add up to (no more than) the whole loop
    parts = t["tracking_prepare"] + t["tracking_solve"] + t["muscles_and_physics"]
    assert 0 < parts <= t["tracking_total"] * 1.01
    st = s["stand"]  # the stand controller: its set-up and its steps, and it held the pose
    assert st["setup_s"] > 0 and 0 < st["step_us"]["stand_controller"] <= st["step_us"]["stand_total"]
    assert not st["fell"]


def test_the_commands_find_the_sample_motion_by_env_or_beside_the_checkout(tmp_path, monkeypatch):
    """engine/commands/sample_data.py: $SINEW_MOTION_DIR wins; else ../shared beside the
    checkout; with neither, one error naming both (and `sinew bench` says it in one line)."""
    from engine.commands import sample_data
    from engine.errors import InputFileError

    from .conftest import MOTION_DIR

    monkeypatch.delenv(sample_data.ENV, raising=False)
    assert sample_data.motion_dir() == sample_data.CHECKOUT_MOTION
    assert sample_data.CHECKOUT_MOTION.resolve() == MOTION_DIR.resolve()
    monkeypatch.setenv(sample_data.ENV, str(tmp_path))
    assert sample_data.motion_clip("walk.bvh") == tmp_path / "walk.bvh"
    monkeypatch.setenv(sample_data.ENV, str(tmp_path / "missing"))
    with pytest.raises(InputFileError, match="SINEW_MOTION_DIR names no folder"):
        sample_data.motion_dir()
    monkeypatch.delenv(sample_data.ENV)
    monkeypatch.setattr(sample_data, "CHECKOUT_MOTION", tmp_path / "shared" / "motion")
    with pytest.raises(InputFileError) as e:
        sample_data.motion_dir()
    assert "SINEW_MOTION_DIR" in str(e.value) and str(tmp_path / "shared" / "motion") in str(e.value)
    proc = subprocess.run([sys.executable, "-m", "engine", "bench", "--seconds", "0.05", "--backends",
                           "--tracking", "0.1"], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, sample_data.ENV: str(tmp_path / "missing")})
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith("sinew bench: error:")
    assert "SINEW_MOTION_DIR" in proc.stderr


def test_help_has_examples():
    for cmd in ("info", "fatigue-curve", "bench"):
        assert "examples:" in sinew(cmd, "--help").stdout


def test_no_command_writes_over_its_input_or_in_another_format(tmp_path, capsys):
    """Issue 46: `retarget X.bvh --out X.bvh` once replaced the mocap with the reference, `bake
    S.blend --out S.blend` rewrote the user's scene, `export-policy --out RUN/checkpoint.pt`
    the training checkpoint, and a figure named without a suffix ended in a matplotlib
    traceback. Each is now one line and exit 2, with the input untouched; a duration that is
    not a number is named as such, and a curve too long to hold is refused before any work."""
    import shutil

    from engine.commands.main import main
    from engine.control import policy
    from engine.motion import reference
    from engine.npzfile import write_npz

    from .conftest import MOTION_DIR

    clip = tmp_path / "walk.bvh"
    shutil.copyfile(MOTION_DIR / "walk.bvh", clip)
    scene = tmp_path / "shot.blend"
    scene.write_bytes(b"BLENDER-v405 not really")
    ref = write_npz(tmp_path / "walk_ref.npz", reference.FORMAT, reference.FORMAT_VERSION, {}, {})
    pol = write_npz(tmp_path / "policy.npz", policy.FORMAT, policy.FORMAT_VERSION, {}, {})
    mine = tmp_path / "mine.npz"
    np.savez(mine, x=np.arange(3))
    kept = (clip, scene, ref, pol, mine)
    before = [f.read_bytes() for f in kept]
    cases = [
        (["retarget", str(clip), "--out", str(clip)], "ending in .npz"),
        (["retarget", str(clip), "--out", str(tmp_path / "ref")], "ending in .npz"),
        (["retarget", str(clip), "--out", str(pol)], "holds a Sinew policy, and this command writes a reference"),
        (["retarget", str(clip), "--out", str(mine)], "is not a Sinew file, and this command writes a reference"),
        (["fatigue-curve", "--out", str(tmp_path / "f09")], "ending in .png"),
        (["fatigue-curve", "--out", str(tmp_path / "x.npz")], "ending in .png"),
        (["preview", str(clip), "--out", str(tmp_path / "sheet")], "ending in .png"),
        (["preview", str(ref), "--out", str(tmp_path / "f09")], "ending in .png"),
        (["preview", str(ref), "--out", str(tmp_path / "x.npz")], "ending in .png"),
        (["bake", str(scene), "--armature", "walk", "--clip", str(clip), "--out", str(scene)], "this command's input"),
        (["export-policy", str(tmp_path), "--out", str(tmp_path / "checkpoint.pt")], "ending in .npz"),
        (["export-policy", str(tmp_path), "--out", str(tmp_path / "config.json")], "ending in .npz"),
        (["export-policy", str(tmp_path), "--out", str(tmp_path / "log.csv")], "ending in .npz"),
        (["export-policy", str(tmp_path), "--out", str(clip)], "ending in .npz"),
        (["export-policy", str(tmp_path), "--out", str(ref)], "holds a Sinew reference, and this command writes a policy"),
        (["simulate", "--clip", f"{clip}:abc", "--out", str(tmp_path / "o")], "'abc' after the ':' is not a number"),
        (["fatigue-curve", "--on", "1e9", "--out", str(tmp_path / "f.png")], "at most 2e+07"),
        (["bake", str(clip), "--armature", "walk", "--clip", str(clip), "--out", str(tmp_path / "o.blend")],
         "not a Blender scene"),  # once hung, silent, until killed
        (["train", "--resume", "--out", str(tmp_path / "no_run")], "no run in"),  # once created it, empty
        # refused once the clip is read: the --out folder made for the take goes again
        (["simulate", "--clip", f"{clip}:0.5", "--push", "5:100,0,0:0.1", "--out", str(tmp_path / "o")],
         "after the take's end"),
    ]
    for argv, said in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0], (argv, err)
    assert [f.read_bytes() for f in kept] == before
    assert not (tmp_path / "o").exists() and not (tmp_path / "no_run").exists() and not list(tmp_path.glob("*.png"))


def test_force_replaces_an_output_of_another_kind_never_an_input(tmp_path, capsys):
    """Issue 46: a file of another kind where the output goes (a policy where a reference
    would go, a folder's take.npz that is no take, a .blend that is no scene) is refused in one
    line ending with the way to replace it, --force; with --force it is replaced by a correct
    output (for the bake, the batch script it runs gets the flag too). An input is never
    written over, --force or not. Every command that writes a file or folder offers it."""
    import argparse
    import shutil

    from engine.commands.main import build_parser, main
    from engine.control import policy
    from engine.motion import reference
    from engine.npzfile import file_format, write_npz
    from engine.rig import load_rig
    from engine.take import load_take

    from .conftest import MOTION_DIR

    clip = tmp_path / "walk.bvh"
    shutil.copyfile(MOTION_DIR / "walk.bvh", clip)
    pol = write_npz(tmp_path / "policy.npz", policy.FORMAT, policy.FORMAT_VERSION, {}, {})
    out = tmp_path / "take"
    write_npz(out / "take.npz", policy.FORMAT, policy.FORMAT_VERSION, {}, {})  # not a take
    notes = tmp_path / "notes.blend"
    notes.write_text("meeting notes, not a scene\n")
    scene = tmp_path / "shot.blend"
    scene.write_bytes(b"BLENDER-v405 not really")
    rig = shutil.copyfile(load_rig("human284").path, tmp_path / "rig.npz")
    held = tmp_path / "held"
    held.mkdir()
    main(["retarget", str(clip), "--out", str(held / "take.npz")])  # a reference named as a take
    capsys.readouterr()
    take = ["simulate", "--clip", f"{clip}:0.2", "--no-balance", "--no-plots", "--out", str(out)]
    bake = ["bake", str(scene), "--armature", "A", "--clip", f"{clip}:0.2"]
    kept = (pol, out / "take.npz", notes, scene, rig, held / "take.npz")
    before = [f.read_bytes() for f in kept]
    for argv, said in [
        (["retarget", str(clip), "--out", str(pol)], "holds a Sinew policy, and this command writes a reference"),
        (take, "holds a Sinew policy, and this command writes a take"),
        (bake + ["--out", str(notes)], "is not a Blender file, and this command writes a scene"),
    ]:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0] and err[0].endswith("or --force to replace it"), (argv, err)
    for argv in (["retarget", str(clip), "--rig", str(rig), "--out", str(rig), "--force"],
                 ["simulate", "--clip", f"{held / 'take.npz'}:0.2", "--out", str(held), "--force"],
                 bake + ["--out", str(scene), "--force"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "is this command's input, never written over, not even with --force" in err[0], err
    assert [f.read_bytes() for f in kept] == before

    assert main(["retarget", str(clip), "--out", str(pol), "--force"]) == 0
    assert file_format(pol) == reference.FORMAT and reference.load_reference(pol).num_frames > 100
    assert main(take + ["--force"]) == 0
    assert load_take(out / "take.npz").meta["summary"]["seconds"] == pytest.approx(0.2, abs=0.01)
    capsys.readouterr()
    # the bake's check passes on --force and so does the batch script's (handed on): Blender then
    # finds the scene is no scene, and nothing was written
    if importlib.util.find_spec("bpy") is not None:
        p = sinew(*bake, "--out", str(notes), "--force", check=False)
        assert p.returncode == 2 and "Blender cannot open this scene" in p.stderr.strip().splitlines()[-1], p.stderr
        assert notes.read_text() == "meeting notes, not a scene\n"

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in sub.choices.items():
        flags = {f for a in parser._actions for f in a.option_strings}
        assert ("--force" in flags) == ("--out" in flags), name


def test_broken_training_inputs_are_one_line(tmp_path, capsys):
    """Issue 46: a training config with `hidden = "big"` ended in torch's TypeError, and a
    corrupt checkpoint in six lines of torch's text advising weights_only=False. Each wrong
    value of a config (a string, true or a list where a number goes, a layer size below 1)
    and each unreadable checkpoint is one line naming it and exit 2, before any run folder."""
    import re

    pytest.importorskip("torch")
    from engine.commands.main import main

    tiny = (REPO / "training" / "configs" / "tiny.toml").read_text()
    for key, value, said in [("hidden", '"big"', "parameter 'task.hidden': must list the layer sizes"),
                             ("vae_hidden", "[32, -1]", "parameter 'vae_hidden': must list the layer sizes"),
                             ("experts", "true", "parameter 'experts': must be a whole number, got True"),
                             ("w_target", '"x"', "parameter 'w_target': must be a number"),
                             ("rollout", "0", "parameter 'task.rollout': must be an integer >= 1"),
                             ("clips", '"walk.bvh"', "parameter 'clips': must be a list of clip paths")]:
        config = tmp_path / f"{key}.toml"
        config.write_text(re.sub(rf"(?m)^{key} = .*$", f"{key} = {value}", tiny))
        assert main(["train", "--config", str(config), "--out", str(tmp_path / "run")]) == 2, key
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0], (key, err)
    run = tmp_path / "broken"
    run.mkdir()
    for garbage in (b"not a checkpoint", b"PK\x03\x04 a zip cut short"):
        (run / "checkpoint.pt").write_bytes(garbage)
        for argv in (["train", "--resume", "--out", str(run)], ["export-policy", str(run), "--out", str(tmp_path / "p.npz")]):
            assert main(argv) == 2, argv
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and "not a readable training checkpoint" in err[0] and "weights_only" not in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken", "clips.toml", "experts.toml", "hidden.toml",
                                                           "rollout.toml", "vae_hidden.toml", "w_target.toml"]


@pytest.mark.skipif(importlib.util.find_spec("bpy") is None, reason="needs the bpy module")
def test_a_scene_blender_cannot_open_is_one_line_not_a_hang(tmp_path):
    """Issue 46: `sinew bake notes.txt ...` hung, silent, until killed: Blender could not open
    it, and the batch script's error left past the exit that spares the bpy module's teardown.
    A file named .blend that is no scene did the same. Now one line and exit 2, from `sinew
    bake` and from the batch script alike (a timeout here, so a hang fails rather than waits)."""
    from .conftest import MOTION_DIR

    scene = tmp_path / "notes.blend"
    scene.write_text("meeting notes, not a scene\n")
    args = ["--armature", "walk", "--clip", f"{MOTION_DIR / 'walk.bvh'}:0.5", "--out", str(tmp_path / "o.blend")]
    said = f"sinew bake: error: {scene}: Blender cannot open this scene (File format is not supported"
    for cmd in ([sys.executable, "-m", "engine", "bake", str(scene), *args],
                [sys.executable, str(REPO / "scripts" / "sinew_bake.py"), "--scene", str(scene), *args]):
        p = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _, stderr = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.terminate()  # `sinew bake` passes it on to the batch script it started
            p.communicate(timeout=30)
            pytest.fail(f"hung: {cmd}")
        assert p.returncode == 2 and "Traceback" not in stderr, stderr
        assert stderr.strip().splitlines()[-1].startswith(said), stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.blend"]


def test_take_options_that_would_be_ignored_are_refused_naming_the_flags(tmp_path, capsys, addon):
    """Issue 46: `--repetitions 0` played one pass, and `--policy` beside the tracking
    controller was ignored, even for a file that does not exist (while --workers in the same
    place was refused). Each is now one line naming the flags and exit 2, before any work, in
    `sinew simulate`, `sinew bake` and the batch script alike."""
    import importlib

    from engine.commands.main import main

    from .conftest import MOTION_DIR

    clip = str(MOTION_DIR / "walk.bvh")
    scene = tmp_path / "shot.blend"
    scene.write_bytes(b"BLENDER-v405 not really")
    missing = str(tmp_path / "missing.npz")
    bake = ["bake", str(scene), "--armature", "A", "--clip", clip, "--out", str(tmp_path / "o.blend")]
    batch = importlib.import_module(f"{addon}.batch")
    batch_args = ["--armature", "A", "--clip", clip, "--out", str(tmp_path / "o.blend")]
    for run, argv, said in [
        (main, bake + ["--repetitions", "0"], "--repetitions must be >= 1, got 0"),
        (batch.run, batch_args + ["--repetitions", "0"], "--repetitions must be >= 1, got 0"),
        (main, ["simulate", "--clip", clip, "--policy", missing, "--out", str(tmp_path / "t")],
         "'--policy': only for --controller policy"),
        (main, ["simulate", "--clip", clip, "--controller", "tracking", "--policy", missing, "--out",
                str(tmp_path / "t")], "'--policy': only for --controller policy"),
        (batch.run, batch_args + ["--policy", missing], "'--policy': only for --controller policy"),
        (main, bake + ["--policy", missing], "'--policy': only for --controller policy"),  # before Blender starts
        (main, ["simulate", "--clip", clip, "--controller", "policy", "--out", str(tmp_path / "t")],
         "--controller policy needs --policy"),
        (main, ["simulate", "--clip", clip, "--no-balance", "--workers", "2", "--out", str(tmp_path / "t")],
         "'--workers': sets the processes of the balance planner"),
        (main, bake + ["--workers", "-1"], "--workers must be >= 0, got -1"),  # once handed on unchecked
        (main, bake + ["--speed", "nan"], "--speed must be finite"),  # a flag the bake lacked
    ]:
        try:
            code = run(argv)
        except SystemExit as e:  # refused by the parser
            code = e.code
        assert code == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0], (argv, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shot.blend"]
