"""Pushes (--push TIME:FX,FY,FZ:SECONDS[:BODY]): parsed and checked in one line, applied on
both physics backends as an external force at the body's centre of mass, kept apart from
the root residual, and the report's recovery figures."""
import argparse
import json
from types import SimpleNamespace

import numpy as np
import pytest

from engine import fatigue as fat
from engine.control.tracking import TrackingParams
from engine.errors import ParameterError
from engine.push import BACK_DEG, Push, came_back, check_pushes, describe, parse_push, recovery

from .conftest import MOTION_DIR

WALK = MOTION_DIR / "walk.bvh"


def test_push_syntax():
    assert parse_push("3:120,0,0:0.2") == Push(3.0, (120.0, 0.0, 0.0), 0.2, "Pelvis")
    assert parse_push("1.5:0,-80,10:0.3:Torso") == Push(1.5, (0.0, -80.0, 10.0), 0.3, "Torso")
    for bad, says in (("3:120,0:0.2", "3 components"), ("3:120,0,0", "expected TIME:FX,FY,FZ:SECONDS"),
                      ("x:1,0,0:0.2", "start time 'x' is not a number"), ("3:1,nan,0:0.2", "must be finite"),
                      ("3:1,0,0:0.2:Pelvis:x", "expected TIME")):
        with pytest.raises(ParameterError, match="--push") as e:
            parse_push(bad)
        assert says in str(e.value) and "\n" not in str(e.value)


def test_pushes_are_checked_against_the_rig_and_the_take(rig):
    with pytest.raises(ParameterError, match="no body 'Hips' in rig 'human284'; bodies: Pelvis, FemurR"):
        check_pushes(["1:10,0,0:0.2:Hips"], rig)
    with pytest.raises(ParameterError, match="ends at 5.2 s, after the take's end at 5 s"):
        check_pushes(["5:10,0,0:0.2"], rig, 5.0)
    with pytest.raises(ParameterError, match="duration > 0"):
        check_pushes(["1:10,0,0:0"], rig)
    with pytest.raises(ParameterError, match="start >= 0"):
        check_pushes([Push(-1.0, (1.0, 0, 0), 0.2)], rig)
    with pytest.raises(ParameterError, match="finite"):
        check_pushes([Push(1.0, (np.inf, 0, 0), 0.2)], rig)
    for bad, says in (((1.0, (1, 0, 0), 0.2), "expected TIME:FX,FY,FZ:SECONDS"),
                      (dict(time=1, seconds=0.2), "expected TIME:FX,FY,FZ:SECONDS"),
                      (dict(time=1, force=[1, 0], seconds=0.2), r"force \(3 components\)")):
        with pytest.raises(ParameterError, match=says):
            check_pushes([bad], rig)
    ok = check_pushes(["1:10,0,0:0.2", Push(2.0, (0, 5, 0), 0.1, "Head"), dict(time=3, force=[1, 2, 3], seconds=1)],
                      rig, 4.0)
    assert [p.body for p in ok] == ["Pelvis", "Head", "Pelvis"]


def test_pushes_checked_before_a_take_are_not_checked_again(rig, monkeypatch):
    """Issue 46: each input checked once. The Blender add-on checks a take's pushes before its
    job starts (blender_addon/prepare.py) and the take receives them: checked for the same
    bodies and a take as long, they come back as they are, through engine.take.simulate too.
    Another length, or a push added since, is checked again."""
    import engine.push

    checked = check_pushes(["0.2:10,0,0:0.1"], rig, 0.5)
    fresh = check_pushes(["0.2:10,0,0:0.1"], rig)

    def again(p):
        raise AssertionError(f"{p} checked a second time")

    with monkeypatch.context() as m:
        m.setattr(engine.push, "as_push", again)
        assert check_pushes(checked, rig.with_strength(3.0), 0.5) is checked  # the take's rig, at its strength
        assert check_pushes(checked, rig, 0.75) is checked and check_pushes(fresh, rig) is fresh
    from engine.take import simulate

    passed = []

    def spy(pushes, rig, seconds=None):
        out = check_pushes(pushes, rig, seconds)
        passed.append(out is pushes)
        return out

    monkeypatch.setattr(engine.push, "check_pushes", spy)
    take = simulate(rig, [(WALK, 0.5)], params=TrackingParams(residual=1.0), pushes=checked, fps=30,
                    progress=lambda f: None)
    assert passed == [True]  # the take's one look at them handed them back as they were
    assert take.meta["pushes"] == [dict(time=0.2, force=[10.0, 0.0, 0.0], seconds=0.1, body="Pelvis")]
    with pytest.raises(ParameterError, match="after the take's end at 0.25 s"):
        check_pushes(checked, rig, 0.25)  # a shorter take
    checked.append(Push(0.1, (1.0, 0, 0), 0.1, "Hips"))  # added since
    with pytest.raises(ParameterError, match="no body 'Hips'"):
        check_pushes(checked, rig, 0.5)


def test_the_addons_job_hands_its_checked_pushes_on_as_they_are(rig, addon):
    """The add-on's SimulationJob keeps prepare's checked pushes (a copy would be checked again)."""
    import importlib

    checked = importlib.import_module(f"{addon}.engine.push").check_pushes(["0.2:10,0,0:0.1"], rig, 0.5)
    assert importlib.import_module(f"{addon}.job").SimulationJob([], 30, pushes=checked).pushes is checked


@pytest.mark.parametrize("name", ["mujoco", "ode"])
def test_a_push_adds_exactly_its_impulse_on_both_backends(rig, name):
    """A character in the air (no ground): joints, damping and gravity are internal or
    vertical, so the horizontal momentum changes by the push's impulse F * time alone,
    held on every step until it is set back to zero, with or without a one-step wrench."""
    if name == "ode":
        pytest.importorskip("ode")
    from engine.physics import make_backend

    be = make_backend(name, rig, ground=False)
    F = np.array([60.0, -90.0, 0.0])
    force = np.zeros((rig.num_bodies, 3))
    force[rig.body_index("Pelvis")] = F

    def momentum():
        return rig.body_mass @ be.body_state().linvel

    p0 = momentum()
    be.set_external_force(force)
    for k in range(24):
        if k % 2:  # the muscles' wrench on top of the push (equal and opposite: no net force)
            w = np.zeros((rig.num_bodies, 3))
            w[1], w[2] = 5.0, -5.0
            be.apply_wrench(w, np.zeros((rig.num_bodies, 3)))
        be.step()
    p1 = momentum()
    # to 1e-3: MuJoCo's masses are the rig's as written to its XML; one step more or less is 4 %
    assert np.allclose((p1 - p0)[:2], F[:2] * 24 * be.dt, rtol=1e-3)
    be.set_external_force(np.zeros((rig.num_bodies, 3)))
    for _ in range(12):
        be.step()
    assert np.allclose(momentum()[:2], p1[:2], atol=1e-2)
    with pytest.raises(ParameterError, match="external force"):
        be.set_external_force(np.full((rig.num_bodies, 3), np.nan))


def test_a_pushed_take_moves_the_way_it_was_pushed_and_keeps_the_push_apart(rig):
    from engine.take import simulate

    kw = dict(fatigue=fat.FatigueParams(scale=0), fps=30)
    a = simulate(rig, [(WALK, 1.6)], **kw)
    b = simulate(rig, [(WALK, 1.6)], pushes=["0.5:0,-400,0:0.2"], **kw)
    i = np.searchsorted(a.times, 0.5)
    assert np.array_equal(a.q[:i + 1], b.q[:i + 1])  # nothing before the push
    j = np.searchsorted(a.times, 0.75)
    assert b.q[j, 1] - a.q[j, 1] < -0.01  # pushed along -y
    assert b.meta["pushes"] == [dict(time=0.5, force=[0.0, -400.0, 0.0], seconds=0.2, body="Pelvis")]
    assert "pushes" not in a.meta or a.meta["pushes"] == []
    r = b.meta["summary"]["pushes"][0]
    assert r["reached"] and not r["fell"] and r["peak_err_deg"] >= r["baseline_err_deg"]
    assert r["peak_pelvis_cm"] > 1.0 and r["err_after_deg"] is None  # the take ends within 3 s of the push
    with pytest.raises(ParameterError, match="after the take's end"):
        simulate(rig, [(WALK, 1.0)], pushes=["0.9:1,0,0:0.2"], **kw)


def _fake_take(times, err, fell_at=None):
    N = len(times)
    return SimpleNamespace(times=np.asarray(times), joint_err_deg=np.asarray(err), fps=30,
                           q=np.zeros((N, 7)), q_ref=np.zeros((N, 7)),
                           meta=dict(fell=fell_at is not None, diverged=False, stopped_at_s=fell_at))


def test_recovery_figures_on_a_known_error_curve():
    """Joint error 4 deg before a push at 5 s (0.2 s), 14 deg at its end, falling linearly
    by 4.7 deg/s to 4 deg: back (within 2 deg, 0.5 s mean, for 1 s) once the half-second
    window's mean is <= 6 deg. A window of 15 frames is the line's value at its centre,
    7 frames in: 6 deg at 5.2 + 8 / 4.7 = 6.902 s, between frames 207 and 208, so the first
    window back is centred on frame 208 and starts at frame 201, 6.7 s (a slope of 5 deg/s
    put the crossing on a frame exactly, where rounding decided it). An error that rises
    only after the push ends is not back at its end."""
    t = np.arange(0, 12 + 1e-9, 1 / 30)
    err = np.where(t < 5.0, 4.0, np.where(t < 5.2, 14.0, np.clip(14.0 - (t - 5.2) * 4.7, 4.0, None)))
    r = recovery(_fake_take(t, err), Push(5.0, (120.0, 0, 0), 0.2))
    assert r["baseline_err_deg"] == pytest.approx(4.0) and r["peak_err_deg"] == pytest.approx(14.0)
    assert r["recovered_after_s"] == pytest.approx(6.7 - 5.2, abs=1e-3)
    after = err[(t >= 5.2) & (t < 8.2)].mean()
    assert r["err_after_deg"] == pytest.approx(after, abs=1e-3)
    assert r["back_within_3s"] == bool(after <= 4.0 + BACK_DEG) and not r["fell"]
    stuck = recovery(_fake_take(t, np.where(t < 5.0, 4.0, 14.0), fell_at=9.0), Push(5.0, (120.0, 0, 0), 0.2))
    assert stuck["recovered_after_s"] is None and stuck["fell"] and stuck["back_within_3s"] is False
    # the push shows half a second after it ends, for a second: back when a half-second
    # window holds at most 3 of its 14 deg frames (mean 6 deg), from 6.4 s
    late = np.where((t >= 5.5) & (t < 6.5), 14.0, 4.0)
    assert recovery(_fake_take(t, late), Push(5.0, (120.0, 0, 0), 0.2))["recovered_after_s"] == pytest.approx(
        6.4 - 5.2, abs=1.5 / 30)
    early = recovery(_fake_take(t[:60], err[:60], fell_at=2.0), Push(5.0, (120.0, 0, 0), 0.2))
    assert not early["reached"] and not early["fell"]


def test_cli_push_errors_are_one_line_and_the_report_says_how_it_recovered(tmp_path, capsys):
    from engine.commands.simulate import add_simulate_parser

    ap = argparse.ArgumentParser(prog="sinew")
    add_simulate_parser(ap.add_subparsers(dest="command"))
    for push, says in (("1:1,2:0.2", "3 components"), ("0.2:1,0,0:0.2:Hip", "bodies: Pelvis"),
                       ("0.9:1,0,0:0.2", "after the take's end")):
        args = ap.parse_args(["simulate", "--clip", f"{WALK}:1", "--push", push, "--out", str(tmp_path)])
        with pytest.raises(ParameterError, match=says):
            args.func(args)
    out = tmp_path / "o"
    args = ap.parse_args(["simulate", "--clip", f"{WALK}:1", "--push", "0.3:0,-150,0:0.2", "--no-plots",
                          "--out", str(out), "--json"])
    assert args.func(args) == 0
    cap = capsys.readouterr()
    s = json.loads(cap.out.strip().splitlines()[-1])
    assert s["pushes"][0]["force"] == [0.0, -150.0, 0.0] and "peak_err_deg" in s["pushes"][0]
    assert "push        0.3 s: (0,-150,0) N for 0.2 s on Pelvis: peak joint error" in cap.err
    md = (out / "report.md").read_text()
    assert "| 0.3 | 0, -150, 0 | 0.2 | Pelvis | no |" in md
    # the report opens with the fall and the residual (none: the default take balances on its
    # own), and sets the gait early against late
    assert md.splitlines()[2] == "- Fell: no" and md.splitlines()[3].startswith("- Root residual: none")
    assert "| cadence (steps/min) |" in md and "| M_F, right leg |" in md and "gait        first " in cap.err


def test_sinew_bake_passes_pushes_pace_and_keep_calibration_to_the_batch_script(tmp_path, monkeypatch):
    from engine.commands import bake

    seen = {}

    class FakeBake:  # the batch bake as a process: what it was asked, and its JSON line
        def __init__(self, cmd, **kw):
            seen["cmd"] = cmd
            self.returncode, self.pid = 0, 0

        def communicate(self):
            return '{"frames": 3, "action": "A", "out": "o.blend"}\n', ""

    monkeypatch.setattr(bake.subprocess, "Popen", FakeBake)
    ap = argparse.ArgumentParser()
    bake.add_bake_parser(ap.add_subparsers(dest="command"))
    scene = tmp_path / "s.blend"
    scene.write_bytes(b"BLENDER")
    args = ap.parse_args(["bake", str(scene), "--armature", "A", "--clip", "walk.bvh:2", "--out", "o.blend",
                          "--push", "0.5:0,-120,0:0.2", "--push", "1:10,0,0:0.1:Torso", "--keep-calibration",
                          "--pace", "0.5", "--blender", "/usr/bin/blender"])
    assert args.func(args) == 0
    tail = seen["cmd"][seen["cmd"].index("--") + 1:]
    assert tail.count("--push") == 2 and "0.5:0,-120,0:0.2" in tail and "1:10,0,0:0.1:Torso" in tail
    assert "--keep-calibration" in tail
    assert tail[tail.index("--pace") + 1] == "0.5"


def test_a_moments_peak_reads_as_never_off_the_gait():
    """A 14 deg spike only while the push acts (0.2 s) leaves the half-second averages from
    its end on at the baseline: recovered_after_s is 0, which the line says in words rather
    than 'back after 0.00 s' beside the peak; a slower recovery keeps its seconds."""
    t = np.arange(0, 12 + 1e-9, 1 / 30)
    spike = np.where((t >= 5.0) & (t < 5.2), 14.0, 4.0)
    r = recovery(_fake_take(t, spike), Push(5.0, (120.0, 0, 0), 0.2))
    assert r["recovered_after_s"] == 0 and r["peak_err_deg"] == pytest.approx(14.0)
    line = describe(r)
    assert f"never off by more than {BACK_DEG:g} deg" in line and "back after" not in line
    assert came_back(dict(r, recovered_after_s=1.35)) == "back after 1.35 s"
    assert came_back(dict(r, recovered_after_s=None)) == "not back within the take"


def test_a_push_no_body_takes_ends_the_take_as_diverged(rig, tmp_path, monkeypatch):
    """Issue 46: a push of 1e12 N once reported "complete": MuJoCo met the bad acceleration,
    reset its state to the start pose (the pelvis jumped 2 m) and the take went on from there.
    MuJoCo's own warning now ends the take as diverged, at the push, keeping what came before."""
    from engine.take import simulate

    monkeypatch.chdir(tmp_path)
    take = simulate(rig, [(MOTION_DIR / "walk.bvh", 0.6)], params=TrackingParams(residual=1.0),
                    pushes=["0.3:1e12,0,0:0.1"], fps=30, progress=lambda f: None)
    s = take.meta["summary"]
    assert s["diverged"] and 0.3 <= s["stopped_at_s"] <= 0.35
    assert "MuJoCo found the state unsound" in take.meta["stop_reason"]
    assert "QACC" in take.meta["stop_reason"]  # MuJoCo's own words, kept rather than logged
    assert not list(tmp_path.iterdir())  # no MUJOCO_LOG.TXT in the user's folder
    assert take.num_frames >= 9 and np.isfinite(take.q).all()
    assert np.abs(np.diff(take.q[:, :2], axis=0)).max() < 0.1  # no jump back to the start pose
