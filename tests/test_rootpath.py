"""A clip exported "in place" gets its root path back from its feet (engine.motion.rootpath).

The copies are made the way exporters make them: the root's horizontal travel taken out
(all of it, or its steady part with the sway kept), from the bundled clips and from real
captures from outside MASS, also mirrored and at 30 fps. Each copy's rebuilt path is held
against the original's; the originals, which travel as their feet do, are left alone."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from engine.motion import rootpath
from engine.motion.reference import foot_tracks
from engine.motion.retarget import Retargeter, read_clip
from engine.transforms import matrix_to_quat, quat_angle
from tests.clips import MOCAP_DIR, bundled, curved, in_place, jitter, loop, mirror, resample, under_ground_root


def _ref(rig, m):
    return Retargeter.build(rig, m.skeleton, motion=m).to_model(m, with_muscles=False)


def _path(ref):
    return ref.root_pos[:, :2] - ref.root_pos[0, :2]


CLIPS = {
    "walk": lambda: bundled("walk"),
    "run": lambda: bundled("run"),
    "cmu walk (real)": lambda: read_clip(MOCAP_DIR / "cmu_07_01_walk.bvh")[0],
    "mixamo fixture (real, turns)": lambda: read_clip(MOCAP_DIR / "mixamo_test_freebvh.bvh")[0],
    "walk mirrored at 30 fps": lambda: resample(mirror(bundled("walk")), 30),
    "kick under a root bone on the floor": lambda: under_ground_root(bundled("kick")),
    "walk turning 80 deg to its left": lambda: curved(loop(bundled("walk"), 2), 80.0),
    "cmu walk (real) turning 90 deg to its right": lambda: curved(read_clip(MOCAP_DIR / "cmu_07_01_walk.bvh")[0], -90.0),
}
# how each clip is exported in place: the root's travel taken out (for a skeleton under a root
# bone on the floor, the hips' travel under it)
IN_PLACE = {"kick under a root bone on the floor": lambda: under_ground_root(in_place(bundled("kick"))),
            "cmu walk, jittery (0.5 deg a joint)": lambda: jitter(in_place(CLIPS["cmu walk (real)"]())),
            "walk, jittery (1 deg a joint)": lambda: jitter(in_place(bundled("walk")), 1.0)}
CLIPS["cmu walk, jittery (0.5 deg a joint)"] = CLIPS["cmu walk (real)"]
CLIPS["walk, jittery (1 deg a joint)"] = CLIPS["walk"]


@pytest.mark.parametrize("name", list(CLIPS))
def test_an_in_place_copy_walks_the_path_of_its_original(rig, name):
    """The copy is found in place and its rebuilt root path follows the original's: within
    15 cm on average over the clip (a jittery copy's too), the same distance travelled within 15 % (the gap is the
    capture's own foot skate, which the rebuilt path does not copy). The original is not
    touched: its root already travels as its feet give."""
    m = CLIPS[name]()
    orig = _ref(rig, m)
    copy = _ref(rig, IN_PLACE[name]() if name in IN_PLACE else in_place(m))
    assert not orig.meta["root_path"]["rebuilt"]
    assert 0.75 < orig.meta["root_path"]["root_mps"] / orig.meta["root_path"]["feet_mps"] < 1.35
    rp = copy.meta["root_path"]
    assert rp["rebuilt"] and rp["root_mps"] < 0.05 and rp["feet_mps"] > rootpath.MOVING_MPS
    a, b = _path(orig), _path(copy)
    n = min(len(a), len(b))
    assert np.linalg.norm(a[:n] - b[:n], axis=1).mean() < 0.15

    def length(p):  # along the path, in quarter seconds (the pelvis's sway counts little)
        return np.linalg.norm(np.diff(p[:n:30], axis=0), axis=1).sum()

    if rp["feet_mps"] > 0.5:  # a clip that travels (a kick's path is its sway)
        assert length(b) == pytest.approx(length(a), rel=0.15)
    assert np.linalg.norm(a[n - 1] - b[n - 1]) < 0.3
    # the joints are the original's, and so is the height (the floor is found from the feet's
    # stance frames, which the rebuilt path's own foot skate changes a little: within 6 mm; the
    # CMU walk's levelled soles meet the floor heel and toes at once, so which corner is lowest
    # changes with the frames counted: within 12 mm)
    if "jittery" not in name:
        assert np.allclose(orig.root_pos[:n, 2], copy.root_pos[:n, 2], atol=12e-3 if orig.meta["levelled_feet"] else 6e-3)
        # (feet levelled each on its own planted frames: alike within 0.5 deg)
        legs = [b for b, body in enumerate(rig.body_names)
                if body.startswith(("Talus", "FootThumb", "FootPinky"))] if orig.meta["levelled_feet"] else []
        others = np.concatenate([np.arange(rig.q_start[b], rig.q_start[b + 1]) for b in range(1, rig.num_bodies)
                                 if b not in legs])
        assert np.allclose(orig.q[:n, others], copy.q[:n, others], atol=1e-9)
        if legs:
            turn = quat_angle(matrix_to_quat(orig.body_rot[:n, legs]), matrix_to_quat(copy.body_rot[:n, legs]))
            assert np.degrees(turn).max() < 0.5
    assert "in place" in rootpath.describe(rp) and rootpath.describe(orig.meta["root_path"]) == ""


def test_root_motion_on_a_root_bone_of_its_own_is_travel(rig):
    """A skeleton whose root bone on the floor carries the travel and whose hips carry the rest
    (root motion, as game skeletons export it) retargets as the original: not in place."""
    m = bundled("walk")
    orig, copy = _ref(rig, m), _ref(rig, under_ground_root(m, carries_travel=True))
    assert not copy.meta["root_path"]["rebuilt"]
    assert np.allclose(orig.q, copy.q, atol=1e-9)


def test_a_copy_that_keeps_its_sway_is_found_too(rig):
    """A root-motion extraction that takes out the steady travel but leaves the pelvis's sway
    (the root swinging a few cm about the spot): still in place, rebuilt as the original."""
    m = bundled("walk")
    orig, copy = _ref(rig, m), _ref(rig, in_place(m, keep_sway_s=1.0))
    rp = copy.meta["root_path"]
    assert rp["rebuilt"] and 0 < rp["root_mps"] < 0.25 * rp["feet_mps"]
    a, b = _path(orig), _path(copy)
    assert np.linalg.norm(a - b, axis=1).mean() < 0.12


def test_a_clip_that_barely_steps_is_left_in_place(rig):
    """The one-leg balance clip with its root's travel taken out: its feet give 0.1 m/s of
    shuffling, not a walk; its root is left where the clip has it."""
    copy = _ref(rig, in_place(bundled("balance")))
    rp = copy.meta["root_path"]
    assert not rp["rebuilt"] and rp["feet_mps"] < rootpath.MOVING_MPS
    assert np.ptp(copy.root_pos[:, :2], axis=0).max() < 1e-9


def test_the_feet_give_the_root_velocity_whatever_the_roots_own_travel(rig):
    """Eq. (1) on the model's own trajectory: a foot planted for the whole clip while the body
    glides over it at a steady velocity gives that velocity exactly, and the same again once the
    root's travel is taken out of every body (the estimate is of the feet relative to the root)."""
    ref = _ref(rig, bundled("balance"))
    F, fps = ref.num_frames, ref.fps
    body_pos = ref.body_pos.copy()
    # freeze the trajectory's first pose and glide it: every body at 0.8 m/s along x, 0.3 along y
    glide = np.outer(np.arange(F) / fps, [0.8, 0.3, 0.0])
    rot = np.repeat(ref.body_rot[:1], F, 0)
    pos = np.repeat(body_pos[:1], F, 0) + glide[:, None]
    tracks = foot_tracks(rig, rot, pos)
    root = pos[:, 0]
    # the body glides while the feet stay: feet moved back by the glide, the root moved with it
    feet = [(low - glide, nxt - glide[1:]) for low, nxt in tracks]
    V = rootpath.feet_velocity(feet, root, fps)
    assert np.allclose(V, [0.8, 0.3], atol=1e-9)
    still = [(low - glide, nxt - glide[1:]) for low, nxt in feet]
    V0 = rootpath.feet_velocity(still, root - glide, fps)
    assert np.allclose(V0, V, atol=1e-9)


def test_the_take_and_the_retarget_say_the_path_was_rebuilt(rig, tmp_path):
    """The user hears of it where they look: `sinew retarget`'s summary, the take report's
    lines and the take's notes (the Blender panel's words); a clip that travels says nothing."""
    from engine.commands.retarget import _summary_lines
    from engine.commands.take_report import extra_lines
    from engine.control.tracking import TrackingParams
    from engine.motion import write_bvh
    from engine.take import simulate
    from engine.take_notes import notes

    path = tmp_path / "walk_in_place.bvh"
    write_bvh(path, in_place(bundled("walk")))
    said = {}
    for clip in (path, MOCAP_DIR.parent / "mass" / "motion" / "walk.bvh"):
        take = simulate(rig, [(clip, 0.1)], params=TrackingParams(residual=1.0), progress=lambda f: None)
        ref = _ref(rig, read_clip(clip)[0])
        said[clip.name] = ("\n".join(_summary_lines(ref, None)), "\n".join(extra_lines(take)), "; ".join(notes(take)))
    assert all("in place" in text for text in said["walk_in_place.bvh"][:2])
    out = subprocess.run([sys.executable, "-m", "engine", "retarget", str(path), "--out", str(tmp_path / "r.npz"), "--json"],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out.strip().splitlines()[-1])["root_path"]["rebuilt"] is True  # for scripts too
    assert "walk_in_place.bvh steps in place: its path rebuilt from its feet (1.14 m/s)" in said["walk_in_place.bvh"][2]
    assert not any("in place" in text for text in said["walk.bvh"])
