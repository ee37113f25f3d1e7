"""Takes: determinism, the file format, checks before work, stopping on a fall, the CLI."""
import argparse
import json

import numpy as np
import pytest

from engine import fatigue as fat
from engine.errors import InputFileError, ParameterError

from .conftest import MASS

WALK = MASS / "motion" / "walk.bvh"


@pytest.fixture(scope="module")
def short_takes(rig):
    from engine.take import simulate

    a = simulate(rig, [(WALK, 0.6), (WALK, 0.4)], fatigue=fat.FatigueParams(scale=50), seed=3, fps=30)
    b = simulate(rig, [(WALK, 0.6), (WALK, 0.4)], fatigue=fat.FatigueParams(scale=50), seed=3, fps=30)
    return a, b


def test_same_inputs_and_seed_give_the_same_take_bit_for_bit(short_takes):
    a, b = short_takes
    from engine.take import _ARRAYS

    for k in _ARRAYS:
        assert np.array_equal(getattr(a, k), getattr(b, k)), k
    assert a.activation.max() > 0.05  # something happened
    assert a.meta["summary"]["joint_err_deg_mean"] == b.meta["summary"]["joint_err_deg_mean"]


def test_take_frames_at_the_scene_rate(short_takes):
    a, _ = short_takes
    assert a.num_frames == 31  # 0 .. 1.0 s at 30 fps
    assert np.allclose(np.diff(a.times), 1 / 30)
    assert a.body_pos.shape == (31, 23, 3) and a.body_quat.shape == (31, 23, 4)
    assert a.MF.shape == (31, 284) and a.residual_force.shape == (31, 3)
    assert np.allclose(a.MA + a.MR + a.MF, 1.0, atol=1e-5)
    assert list(np.unique(a.segment)) == [0, 1]
    assert a.meta["fatigue"]["scale"] == 50 and a.meta["seed"] == 3
    assert "mujoco" in a.meta["versions"]


def test_save_and_load_round_trip(short_takes, tmp_path):
    from engine.take import load_take

    a, _ = short_takes
    p = a.save(tmp_path / "take.npz")
    b = load_take(p)
    assert np.array_equal(a.q, b.q) and np.array_equal(a.MF, b.MF)
    assert b.meta["format"] == "sinew-take" and b.meta["version"] == 1
    with np.load(p, allow_pickle=False) as z:  # plain arrays, no pickle
        assert "meta" in z.files


def test_load_take_refuses_malformed_files(short_takes, tmp_path):
    from engine.take import load_take

    a, _ = short_takes
    with pytest.raises(InputFileError, match="not found"):
        load_take(tmp_path / "none.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(InputFileError, match="junk.npz"):
        load_take(tmp_path / "junk.npz")
    p = a.save(tmp_path / "t.npz")
    with np.load(p) as z:
        data = {k: z[k] for k in z.files}
    meta = json.loads(str(data["meta"]))
    for change, match in [
        (lambda d: d.update(meta=np.array(json.dumps(dict(meta, version=99)))), "version"),
        (lambda d: d.update(meta=np.array(json.dumps(dict(meta, format="other")))), "not a Sinew take"),
        (lambda d: d.pop("MF"), "missing"),
        (lambda d: d.update(MF=d["MF"][:, :10]), "MF"),
        (lambda d: d.update(q=np.full_like(d["q"], np.nan)), "NaN"),
    ]:
        bad = dict(data)
        change(bad)
        path = tmp_path / "bad.npz"
        with open(path, "wb") as f:
            np.savez(f, **bad)
        with pytest.raises(InputFileError, match=match):
            load_take(path)


def test_clips_and_parameters_are_checked_before_any_work(rig, tmp_path):
    from engine.take import check_clips, check_fps, simulate

    with pytest.raises(InputFileError, match="nope.bvh"):
        check_clips([(tmp_path / "nope.bvh", 10)])
    with pytest.raises(ParameterError, match="duration"):
        check_clips([(WALK, 0)])
    with pytest.raises(ParameterError, match="duration"):
        check_clips([(WALK, float("nan"))])
    with pytest.raises(ParameterError, match="fps"):
        check_fps(29)
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(InputFileError, match="clip type"):
        check_clips([(tmp_path / "x.txt", 1)])
    with pytest.raises(ParameterError, match="seed"):
        simulate(rig, [(WALK, 1)], seed=-1)
    with pytest.raises(ParameterError, match="policy file"):
        simulate(rig, [(WALK, 1)], controller="policy")
    with pytest.raises(InputFileError, match="walk.bvh"):  # not a policy file
        simulate(rig, [(WALK, 1)], controller="policy", policy=WALK)


def test_a_take_that_falls_is_kept_up_to_that_point(rig, monkeypatch):
    import engine.take as take_mod

    monkeypatch.setattr(take_mod, "FALL_ROOT_HEIGHT", 5.0)  # every pose counts as fallen
    monkeypatch.setattr(take_mod, "FALL_DROP_M", -5.0)
    t = take_mod.simulate(rig, [(WALK, 2.0)], fatigue=fat.FatigueParams(scale=0))
    assert t.meta["fell"] and t.meta["summary"]["fell"]
    assert t.num_frames == 2 and t.meta["stopped_at_s"] == pytest.approx(1 / 30)
    assert "fell" in t.meta["stop_reason"]


def test_a_take_holds_blas_to_one_thread_and_gives_it_back(rig):
    """simulate (every entry point's take) runs with numpy's and scipy's BLAS at one thread,
    whatever the caller had, and restores the caller's count after."""
    import scipy.linalg  # noqa: F401  (its BLAS loaded before the caller's count is set)
    from threadpoolctl import threadpool_info, threadpool_limits

    from engine.take import simulate

    def counts():
        return {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

    seen = []
    with threadpool_limits(limits=2, user_api="blas"):  # make test runs with one: raise it first
        before = counts()
        simulate(rig, [(WALK, 0.2)], fatigue=fat.FatigueParams(scale=0), progress=lambda f: seen.append(counts()))
        after = counts()
    assert max(before.values()) == 2, "the caller's BLAS could not be given two threads: the test proves nothing"
    assert seen and all(set(c.values()) == {1} for c in seen)
    assert after == before


def _parser():
    from engine.commands.simulate import add_simulate_parser

    ap = argparse.ArgumentParser(prog="sinew")
    sub = ap.add_subparsers(dest="command")
    add_simulate_parser(sub)
    return ap, sub


def test_cli_help_has_examples():
    ap, sub = _parser()
    text = sub.choices["simulate"].format_help()
    assert "examples:" in text and "--clip run.bvh:60 --clip walk.bvh:20" in text


def test_cli_refuses_bad_input_with_one_line(tmp_path):
    from engine.control.plan import parse_clip_arg

    assert parse_clip_arg("walk.bvh:20") == ("walk.bvh", 20.0)
    assert parse_clip_arg("walk.bvh") == ("walk.bvh", None)
    assert parse_clip_arg("C:\\clips\\walk.bvh") == ("C:\\clips\\walk.bvh", None)
    ap, _ = _parser()
    args = ap.parse_args(["simulate", "--clip", str(tmp_path / "missing.bvh:10"), "--out", str(tmp_path)])
    with pytest.raises(InputFileError, match="missing.bvh"):
        args.func(args)
    args = ap.parse_args(["simulate", "--clip", f"{WALK}:10", "--fps", "29", "--out", str(tmp_path)])
    with pytest.raises(ParameterError, match="fps"):
        args.func(args)
    args = ap.parse_args(["simulate", "--clip", f"{WALK}:10", "--controller", "policy", "--policy",
                          str(WALK), "--out", str(tmp_path)])
    with pytest.raises(InputFileError, match="not a readable policy"):
        args.func(args)
    args = ap.parse_args(["simulate", "--clip", f"{WALK}:10", "--controller", "policy", "--policy",
                          str(WALK), "--residual", "0.5", "--out", str(tmp_path)])
    with pytest.raises(ParameterError, match="--residual"):  # a policy applies none: said, not ignored
        args.func(args)


def test_residual_strength_is_the_trackers_alone():
    """One check for the CLI and the Blender batch script: the tracker's residual defaults to
    none (issue 16: no take leans on a force nobody sees unless asked to) and keeps a given
    one; a policy runs with none and refuses one by name."""
    from engine.take import check_residual

    assert check_residual("tracking", None) == 0.0 and check_residual("tracking", 0.5) == 0.5
    assert check_residual("policy", None) == 0.0
    with pytest.raises(ParameterError, match="--residual"):
        check_residual("policy", 0.5)


def test_cli_writes_take_report_and_plots(tmp_path, capsys):
    ap, _ = _parser()
    out = tmp_path / "o"
    args = ap.parse_args(["simulate", "--clip", f"{WALK}:0.5", "--fatigue-scale", "50", "--out", str(out), "--json"])
    assert args.func(args) == 0
    s = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for k in ("seconds", "realtime_factor", "joint_err_deg_mean", "root_err_cm_mean", "fell", "residual_mean_N",
              "MF_mean_by_group"):
        assert k in s
    for f in ("take.npz", "report.json", "report.md", "activation.png", "fatigue.png"):
        assert (out / f).is_file() and (out / f).stat().st_size > 100


def test_effort_is_the_opening_f0_weighted_activation(short_takes, rig):
    """summary effort: the f0-weighted mean activation per group over the first 2 s (here the
    whole 1 s take); a group is exhausted when muscles with a quarter of its f0 are, each by
    the 3CC-r closed form at its own opening activation."""
    from engine.rig import GROUPS

    a, _ = short_takes
    s = a.meta["summary"]
    p = fat.FatigueParams(**a.meta["fatigue"])
    act = a.activation[a.times > 0].astype(float).mean(0)
    for g, name in enumerate(GROUPS):
        idx = rig.muscle_group == g
        f0 = rig.muscle_f0[idx]
        assert s["effort_by_group"][name] == pytest.approx(np.average(act[idx], weights=f0), abs=1e-4)
        ends = np.array([fat.exhaustion_time(x, p) or np.inf for x in act[idx]])
        out = [f0[ends <= t].sum() / f0.sum() for t in ends]  # share of strength gone by each muscle's end
        first = min((t for t, share in zip(ends, out) if share >= 0.25), default=np.inf)
        t_end = s["exhausted_after_s_by_group"][name]
        assert (t_end is None) if not np.isfinite(first) else t_end == pytest.approx(first, abs=0.01)
    assert s["endurance_limit"] == pytest.approx(1 / 6, abs=1e-4)


def test_tired_walk_gives_way_when_the_effort_says(rig):
    """Fatigue scale 50 at the model's own forces (strength 1): half the legs' muscles walk
    above what 3CC-r holds for ever (1/6 of their strength), so the opening effort predicts
    when a quarter of the legs' strength runs out (measured 5.3 s); the gait holds before
    that (~5 deg) and gives way after (~17 deg). At the default strength (3) the legs work
    below that limit (~0.12), the effort gives them more than the take's 12 s (right leg
    ~18 s, left never; measured), and the gait holds to the end."""
    from engine.take import simulate

    strong = simulate(rig, [(WALK, 12.0)], fatigue=fat.FatigueParams(scale=50), fps=30)
    s = strong.meta["summary"]
    assert s["strength"] == 3.0 and s["effort_by_group"]["right_leg"] < s["endurance_limit"]
    assert all((s["exhausted_after_s_by_group"][g] or 1e9) > 12.0 for g in ("right_leg", "left_leg"))
    err, t = strong.joint_err_deg, strong.times
    assert err[t > 8.0].mean() < err[(t > 0.5) & (t < 4.0)].mean() + 2.0
    take = simulate(rig, [(WALK, 12.0)], fatigue=fat.FatigueParams(scale=50), fps=30, strength=1.0)
    s = take.meta["summary"]
    legs = [s["exhausted_after_s_by_group"][g] for g in ("right_leg", "left_leg")]
    assert all(t is not None for t in legs), s["effort_by_group"]
    t_end = float(np.mean(legs))
    assert 3.0 < t_end < 8.0
    err, t = take.joint_err_deg, take.times
    before = err[(t > 0.5) & (t < 0.6 * t_end)].mean()
    after = err[(t > t_end + 1.0) & (t < t_end + 5.0)].mean()
    assert after > before + 5.0, (before, after, t_end)
