"""A fall's diagnosis (engine.fall): which way, from when, and why, in the take's summary,
the command line's report and report.md."""
import numpy as np
import pytest

from engine.fall import DIRECTIONS, describe, direction, heading_frame
from engine.control.tracking import TrackingParams

from .conftest import MOTION_DIR


def test_directions_in_the_heading_frame():
    """The rest pose faces -y with +x on its left; a 90 degree turn to the left faces +x."""
    fwd, left = heading_frame(np.array([1.0, 0, 0, 0]))
    assert np.allclose(fwd, [0, -1]) and np.allclose(left, [1, 0])
    for k, v in enumerate([(0, -1), (1, -1), (1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1)]):
        assert direction(np.array(v, float), fwd, left) == DIRECTIONS[k]
    turned = np.array([np.cos(np.pi / 4), 0, 0, np.sin(np.pi / 4)])  # 90 deg about +z
    fwd, left = heading_frame(turned)
    assert np.allclose(fwd, [1, 0]) and np.allclose(left, [0, 1])
    assert direction(np.array([0.0, 1.0]), fwd, left) == "to its left"


def _held(rig, pushes=(), seconds=3.0, **kw):
    from engine.take import simulate

    return simulate(rig, [(f"{MOTION_DIR / 'walk.bvh'}@0.25", seconds)], fps=60, progress=lambda f: None,
                    params=TrackingParams(residual=0.0), pushes=pushes, **kw)


@pytest.mark.parametrize("side", ["left", "right"])
def test_a_held_pose_shoved_sideways_falls_that_way_and_the_push_is_named(rig, side):
    """A held pose shoved at the pelvis along its own left (or right) - the line between its hip
    joints, not the module's heading frame - falls to that side, and the diagnosis says so,
    names the push and dates the onset after it."""
    from engine.push import Push

    start = _held(rig, seconds=0.05)
    lateral = start.body_pos[0, rig.body_index("FemurL"), :2] - start.body_pos[0, rig.body_index("FemurR"), :2]
    lateral /= np.linalg.norm(lateral)
    f = 400.0 * (lateral if side == "left" else -lateral)
    take = _held(rig, [Push(1.0, (f[0], f[1], 0.0), 0.3)])
    d = take.meta["summary"]["fall"]
    assert take.meta["fell"] and d is not None, "a 400 N shove for 0.3 s should topple the held pose"
    other = "right" if side == "left" else "left"
    assert side in d["direction"] and other not in d["direction"], d
    assert 1.0 <= d["onset_s"] <= d["time_s"] == round(take.meta["stopped_at_s"], 3)
    assert d["causes"][0].startswith("a push of 400 N") and f"to its {side}" in d["causes"][0], d
    assert describe(d).startswith(f"at {d['time_s']:.2f} s, {d['direction']}, going down from")


def test_the_tracker_alone_falls_with_nothing_to_balance_it_and_a_take_that_stands_has_no_diagnosis(rig, tmp_path):
    """The tracker without a residual or the planner falls within seconds (balance.md): the
    diagnosis says nothing balanced it, and the command line prints it under the take line;
    the held pose unshoved stands and has none."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "engine", "simulate", "--clip", f"{MOTION_DIR / 'walk.bvh'}:6",
                        "--no-balance", "--no-plots", "--out", str(tmp_path / "alone")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "STOPPED: fell" in lines[0] and lines[1].startswith("fall        at "), r.stdout[:400]
    assert "nothing to balance it" in lines[1]
    assert "**yes, at " in (tmp_path / "alone" / "report.md").read_text()
    assert _held(rig, seconds=1.0).meta["summary"]["fall"] is None


def _out_and_back(t, turn_s):
    """A root path along +x at 1 m/s that slows to a stop at turn_s and comes back at 1 m/s
    (the speed changing linearly over the half second either side of the turn)."""
    v = np.clip((turn_s - t) / 0.5, -1.0, 1.0)
    x = np.concatenate([[0.0], np.cumsum(0.5 * (v[1:] + v[:-1]) * np.diff(t))])
    return np.stack([x, np.zeros_like(x)], 1)


def test_a_body_that_runs_on_through_the_clips_turn_is_said_to_leave_its_path_there():
    """The Mixamo fixture's fall (seed 1: the body kept 1.2 m/s through the clip's turn at
    5.5 s and ran 4 m off its path) as a root path: the diagnosis names the turn, within the
    speeds' averaging, and the body's speed there; a body on the path, or one that left it
    little by little with no stop of the clip's, is named so or not at all."""
    from engine.fall import SPEED_S, path_left

    t = np.arange(0, 6.0, 1 / 30)
    clip = _out_and_back(t, 3.0)
    body = clip.copy()
    after = t > 2.5
    body[after, 0] = clip[after][0, 0] + 1.0 * (t[after] - 2.5)  # it keeps going at 1 m/s
    i0 = int(np.searchsorted(t, 5.0))
    said = path_left(t, body, clip, i0)
    off = np.linalg.norm(body[i0] - clip[i0])
    assert said.startswith(f"off the clip's path ({off:.1f} m at the onset, 0.0 m on average before): it ran on at 1.0 m/s")
    turn = float(said.split("turn at ")[1].split(" s")[0])
    assert abs(turn - 3.0) <= SPEED_S, said
    assert path_left(t, clip, clip, i0) is None
    drift = clip.copy()
    drift[:, 1] = 0.2 * t  # a steady sideways drift, 1 m by the onset: the path the take kept
    assert path_left(t, drift, clip, i0) is None
    drift[:, 1] = 0.008 * t ** 3  # one that runs away, 1 m by the onset, no stop run through
    before = f"{0.008 * (t[:i0] ** 3).mean():.1f}"
    assert path_left(t, drift, clip, i0) == f"off the clip's path (1.0 m at the onset, {before} m on average before)"


def test_a_take_with_no_clip_to_keep_to_is_not_said_to_lose_it(rig):
    """The tracker alone falls off the walk's path (0.6 m at the onset); the same frames read
    as a policy generating its own motion (--mode generate: no clip to keep to) name neither
    a lost clip nor a path left."""
    from engine.fall import diagnose
    from engine.take import simulate

    take = simulate(rig, [(MOTION_DIR / "walk.bvh", 6.0)], fps=30, progress=lambda f: None,
                    params=TrackingParams(residual=0.0))
    clip_causes = ("the clip lost", "off the clip's path")
    assert take.meta["fell"] and any(c.startswith(clip_causes) for c in diagnose(take, rig)["causes"])
    take.meta["policy"] = dict(mode="generate")
    assert not any(c.startswith(clip_causes) for c in diagnose(take, rig)["causes"])
