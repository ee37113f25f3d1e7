"""A retargeted reference is checked before a take plays it (issue 44, engine.motion.checks):
the checks name the body and the frames at fault, on the defects real captures have, and
find nothing in clean clips."""
import numpy as np
import pytest

from engine.errors import ParameterError
from engine.motion import retarget
from engine.motion.checks import describe
from engine.transforms import axis_angle_to_quat, quat_angle, quat_multiply

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


@pytest.mark.parametrize("fps", [None, 30])
def test_a_bad_frame_is_repaired_and_said(rig, fps):
    """One frame of the capture with the right knee flung 90 deg (a marker swap), and one with
    the root thrown 1 m: each is blended over from its neighbours before retargeting and
    said; the reference then matches the clean clip's and the checks find nothing."""
    from engine.motion.cleanup import describe as repaired

    walk = clips.loop(clips.bundled("walk"), 2)
    if fps:
        walk = clips.resample(walk, fps)
    k = walk.num_frames // 3
    bad = _turned(walk, "Character1_RightLeg", [1, 0, 0], 90, [k])
    root = bad.root_translation.copy()
    root[2 * k] += [1.0, 0.0, 0.0]
    bad = type(bad)(bad.skeleton, bad.rotations, root, bad.frame_time)
    ref, clean = retarget(bad, rig)[0], retarget(walk, rig)[0]
    fixed = ref.meta["repaired"]
    assert [(r["bone"], r["frames"]) for r in fixed] == [("Character1_RightLeg", 1), ("root", 1)]
    assert fixed[0]["first_s"] == pytest.approx(k * walk.frame_time, abs=1e-3) and fixed[0]["size"] == pytest.approx(90, abs=1)
    assert repaired(fixed).startswith("2 bad frames blended over") and "Character1_RightLeg" in repaired(fixed)
    assert ref.meta["checks"] == []
    i = int(round(k * walk.frame_time * 120))
    knee = rig.q_start[rig.body_index("TibiaR")]
    assert abs(ref.q[i, knee] - clean.q[i, knee]) < np.radians(10)  # near the clean clip's knee
    assert clean.meta["repaired"] == []


def _repeated(m, frames):
    """m with each of `frames` written as the frame before it again (a lost capture sample)."""
    idx = np.arange(m.num_frames)
    for k in frames:
        idx[k] = idx[k - 1]
    return m.frames(idx)


def test_repeated_frames_are_interpolated_and_a_repeated_end_dropped(rig):
    """A lost sample written again (every 7th frame, two in a row once) is interpolated over,
    and the last frame written twice more is dropped, so the reference moves as the clean
    clip's does; the report says so. Repeated frames at the start (a calibration pose) and a
    pose held for longer are left as they are."""
    from engine.motion.cleanup import describe as repaired, repair_held

    walk = clips.loop(clips.bundled("walk"), 2)
    F = walk.num_frames
    # (not across the loop's seam at 132, where the tiled walk jumps)
    lost = sorted([k for k in range(6, F - 10, 7) if abs(k - 132) > 2] + [98])  # 97 and 98 repeat 96
    bad = _repeated(walk.frames(np.r_[np.arange(F), F - 1, F - 1]), lost)
    ref, clean = retarget(bad, rig)[0], retarget(walk, rig)[0]
    fixed = ref.meta["repaired"]
    assert [(r["kind"], r["frames"]) for r in fixed if r["frames"] > 1] == [("held", 2), ("end", 2)]
    assert sum(r["frames"] for r in fixed if r["kind"] == "held") == len(lost)
    assert repaired(fixed).startswith(f"{len(lost)} repeated frames interpolated over") and \
        repaired(fixed).endswith("2 repeated last frames dropped")
    assert ref.num_frames == clean.num_frames
    # the slerp between neighbours lands near the lost pose: a fifth of the held frame's error
    fixed_src, _ = repair_held(bad)
    err = [quat_angle(m.rotations[lost], walk.rotations[lost]).mean() for m in (fixed_src, bad)]
    assert err[0] < 0.2 * err[1]
    np.testing.assert_allclose(ref.qvel[-1, :2], clean.qvel[-1, :2], atol=0.02)  # the clip's last velocity
    # a calibration pose held at the start, and a pose held on purpose, are left
    for still in (clips.insert_pose(walk, "T", frames=3), clips.hold(walk, 10, 40)):
        assert repair_held(still) == (still, [])


def test_a_real_captures_repeated_last_frames_are_dropped():
    from engine.motion.cleanup import repair_held

    kick = clips.bundled("kick")  # its last two frames repeat the third-last
    fixed, found = repair_held(kick)
    assert found == [dict(bone="all frames", first_s=round(229 / 120, 4), frames=2, kind="end")]
    assert fixed.num_frames == kick.num_frames - 2


def test_a_knee_thrown_for_longer_is_named_with_its_joint_and_time(rig):
    """Held 90 deg off for 0.1 s the knee is no spike: it is left as it is, and the check names
    the knee and the frames where it turns faster than a body can."""
    walk = clips.loop(clips.bundled("walk"), 2)
    found = _checks(rig, _turned(walk, "Character1_RightLeg", [1, 0, 0], 90, slice(100, 112)))
    speed = [f for f in found if f["check"] == "speed"]
    assert [f["body"] for f in speed] == ["TibiaR"] and speed[0]["worst"] > 60
    assert speed[0]["first_s"] <= 100 / 120 and speed[0]["last_s"] >= 110 / 120
    assert describe(speed[0]).startswith("TibiaR turns at up to")


def test_a_knee_bent_backwards_and_a_foot_on_its_side_are_named(rig):
    walk = clips.loop(clips.bundled("walk"), 2)
    knee = _checks(rig, _turned(walk, "Character1_RightLeg", [1, 0, 0], -60, slice(50, 90)))
    rng = [f for f in knee if f["check"] == "range"]
    assert [f["body"] for f in rng] == ["TibiaR"] and rng[0]["frames"] == 40 and rng[0]["worst"] > 40
    assert "past the model's range" in describe(rng[0])
    foot = _checks(rig, _turned(walk, "Character1_RightFoot", [0, 1, 0], 70, slice(0, None)))
    tipped = [f for f in foot if f["check"] == "tipped foot"]
    assert [f["body"] for f in tipped] == ["TalusR"] and tipped[0]["worst"] > 50  # the ankle's 57 deg cone holds it
    assert not any(f["body"].endswith("L") for f in foot)  # the left foot, untouched, passes


def test_a_root_no_body_can_move_is_an_error(rig):
    walk = clips.bundled("walk")
    root = walk.root_translation.copy()
    root[60:] += [1e30, 0.0, 0.0]
    broken = type(walk)(walk.skeleton, walk.rotations, root, walk.frame_time)
    with pytest.raises(ParameterError, match="root moves at .* m/s"):
        retarget(broken, rig)


def test_a_root_held_far_beyond_any_scene_is_an_error(rig):
    """Issue 46: a file whose root sits at 1e30 (a still root: no speed to catch) was accepted;
    float64 keeps no millimetres there."""
    walk = clips.bundled("walk")
    far = type(walk)(walk.skeleton, walk.rotations, walk.root_translation + [1e30, 0.0, 0.0], walk.frame_time)
    with pytest.raises(ParameterError, match="from the origin at 0.00 s"):
        retarget(far, rig)
    near = type(walk)(walk.skeleton, walk.rotations, walk.root_translation + [900.0, 0.0, 0.0], walk.frame_time)
    retarget(near, rig)  # a scene's far corner is fine
