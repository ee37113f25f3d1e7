"""A retargeted reference is checked before a take plays it (issue 44, engine.motion.checks):
the checks name the body and the frames at fault, on the defects real captures have, and
find nothing in clean clips."""
import numpy as np
import pytest

from engine.errors import ParameterError
from engine.motion import retarget
from engine.motion.checks import describe
from engine.transforms import axis_angle_to_quat, quat_multiply

from . import clips


def _turned(m, bone, axis, deg, frames):
    """m with `bone` turned by `deg` about `axis` (its own frame) in `frames`."""
    rot = m.rotations.copy()
    j = m.skeleton.index(bone)
    rot[frames, j] = quat_multiply(rot[frames, j], axis_angle_to_quat(np.asarray(axis, float) * np.radians(deg)))
    return type(m)(m.skeleton, rot, m.root_translation, m.frame_time, m.local_translations)


def _checks(rig, m):
    return retarget(m, rig)[0].meta["checks"]


@pytest.mark.parametrize("clip", ["walk", "run"])
@pytest.mark.parametrize("how", ["as read", "mirrored", "30 fps"])
def test_clean_gaits_pass(rig, clip, how):
    m = clips.bundled(clip)
    m = {"as read": m, "mirrored": clips.mirror(m), "30 fps": clips.resample(m, 30)}[how]
    assert _checks(rig, m) == []


def test_a_bad_frame_is_named_with_its_joint_and_time(rig):
    """One frame of the capture with the right knee flung 90 deg (a marker swap): the knee turns
    at ~100 rad/s for the frames around it, a walk's at under 11."""
    walk = clips.loop(clips.bundled("walk"), 2)
    found = _checks(rig, _turned(walk, "Character1_RightLeg", [1, 0, 0], 90, [100]))
    assert len(found) == 1
    f = found[0]
    assert f["check"] == "speed" and f["body"] == "TibiaR" and f["frames"] <= 3
    assert f["first_s"] <= 100 / 120 <= f["last_s"] + 1 / 120 and f["worst"] > 60
    assert describe(f).startswith("TibiaR turns at up to")


def test_a_knee_bent_backwards_and_a_foot_on_its_side_are_named(rig):
    walk = clips.loop(clips.bundled("walk"), 2)
    knee = _checks(rig, _turned(walk, "Character1_RightLeg", [1, 0, 0], -60, slice(50, 90)))
    rng = [f for f in knee if f["check"] == "range"]
    assert [f["body"] for f in rng] == ["TibiaR"] and rng[0]["frames"] == 40 and rng[0]["worst"] > 40
    assert "past the model's range" in describe(rng[0])
    foot = _checks(rig, _turned(walk, "Character1_RightFoot", [0, 1, 0], 70, slice(0, None)))
    tipped = [f for f in foot if f["check"] == "tipped foot"]
    assert [f["body"] for f in tipped] == ["TalusR"] and tipped[0]["worst"] > 60
    assert not any(f["body"].endswith("L") for f in foot)  # the left foot, untouched, passes


def test_a_root_no_body_can_move_is_an_error(rig):
    walk = clips.bundled("walk")
    root = walk.root_translation.copy()
    root[60:] += [1e30, 0.0, 0.0]
    broken = type(walk)(walk.skeleton, walk.rotations, root, walk.frame_time)
    with pytest.raises(ParameterError, match="root moves at .* m/s"):
        retarget(broken, rig)
