"""A retargeted pose is brought inside the model's ball-joint cones (engine.motion.limits):
what is past a cone goes to a single-child parent that can take it, or is dropped, and the
retarget says which joints and how far."""
import numpy as np
import pytest

from engine.kinematics import BALL
from engine.motion import retarget
from engine.motion.limits import describe, within_range
from engine.motion.retarget import world_rotations
from engine.physics.base import ball_cone
from engine.transforms import axis_angle_to_quat, quat_angle, quat_to_axis_angle

from . import clips


def _pose(rig, frames=5):
    local = np.zeros((frames, rig.num_bodies, 4))
    local[..., 0] = 1.0
    return local


def test_a_pose_inside_every_range_is_left_as_it_is(rig):
    """The bundled walk is inside every cone: bit for bit the same. The sprint leans its torso
    0.6 deg past its cone in 3 frames: only the spine below takes that, every other body's
    world rotation is the clip's."""
    ref = retarget(clips.bundled("walk"), rig)[0]
    out, moved = within_range(rig, ref.local_rot)
    assert moved == [] and np.array_equal(out, ref.local_rot) and ref.meta["limited"] == []
    run = retarget(clips.bundled("run"), rig)[0]
    assert [(m["body"], m["to"]) for m in run.meta["limited"]] == [("Torso", "parent")]
    assert run.meta["limited"][0]["worst_deg"] < 1.0


def test_a_trunk_bent_past_its_cone_bends_the_vertebra_below(rig):
    """The torso bent 40 deg forward (cone 23 deg): it keeps 23 deg about the same axis, the
    spine (its only child's parent, with room) takes 17, and the torso's world rotation, and
    so the head's and arms', is the clip's."""
    local = _pose(rig)
    torso, spine = rig.body_index("Torso"), rig.body_index("Spine")
    cone = np.degrees(ball_cone(rig)[torso])
    local[:, torso] = axis_angle_to_quat(np.radians([40.0, 0.0, 0.0]))
    out, moved = within_range(rig, local)
    np.testing.assert_allclose(np.degrees(quat_to_axis_angle(out[:, torso]))[:, 0], cone, atol=1e-9)
    np.testing.assert_allclose(np.degrees(quat_to_axis_angle(out[:, spine]))[:, 0], 40 - cone, atol=1e-9)
    others = [b for b in range(rig.num_bodies) if b != spine]
    np.testing.assert_allclose(quat_angle(world_rotations(rig, out)[:, others], world_rotations(rig, local)[:, others]), 0.0, atol=1e-7)
    assert moved == [dict(body="Torso", frames=5, worst_deg=pytest.approx(40 - cone, abs=0.05), to="parent")]


def test_a_wrist_twisted_past_its_cone_is_held_at_it(rig):
    """The pirouette's forearm pronation lands in the wrist (the model's elbow is a hinge):
    a hand turned 120 deg about the forearm is held at the 40 deg cone and the rest is
    dropped (a hinge parent cannot take it); the forearm is untouched, and a second pass
    finds nothing."""
    local = _pose(rig)
    hand, fore = rig.body_index("HandR"), rig.body_index("ForeArmR")
    local[:, hand] = axis_angle_to_quat(np.radians([-120.0, 0.0, 0.0]))
    out, moved = within_range(rig, local)
    assert np.degrees(np.linalg.norm(quat_to_axis_angle(out[:, hand]), axis=-1)) == pytest.approx(
        np.degrees(ball_cone(rig)[hand]), abs=1e-9)
    assert np.array_equal(out[:, fore], local[:, fore])
    assert [(m["body"], m["to"]) for m in moved] == [("HandR", "dropped")]
    again, none = within_range(rig, out)
    assert none == [] and np.array_equal(again, out)
    assert describe(moved).startswith("joints held at the model's range: HandR up to 80 deg in 5 frames")


def test_a_retargeted_pirouette_is_inside_every_cone(rig):
    """The MASS pirouette as retargeted: both hands were past their cones for most of the clip
    (the right one by up to 109 deg); now the retarget says so and no ball joint is past its
    cone, which the reference checks confirm."""
    from engine.motion import read_bvh

    from .conftest import MASS

    ref = retarget(read_bvh(MASS / "motion" / "pirouette.bvh"), rig)[0]
    limited = {m["body"]: m for m in ref.meta["limited"]}
    assert limited["HandR"]["worst_deg"] > 90 and limited["HandR"]["to"] == "dropped"
    cone = ball_cone(rig)
    balls = [b for b in range(1, rig.num_bodies) if rig.joint_type[b] == BALL]
    angle = np.linalg.norm(quat_to_axis_angle(ref.local_rot[:, balls]), axis=-1)
    assert np.all(angle <= cone[balls] + 1e-6)
    assert not [f for f in ref.meta["checks"] if f["check"] == "range" and rig.joint_type[rig.body_index(f["body"])] == BALL]


def test_sinew_retarget_says_what_it_limited_and_how_the_feet_slide(tmp_path, capsys):
    """The command's summary names the joints held at their range (the pirouette's hands)
    and the planted feet's slide."""
    from engine.commands.main import main

    from .conftest import MASS

    assert main(["retarget", str(MASS / "motion" / "pirouette.bvh"), "--out", str(tmp_path / "p.npz")]) == 0
    out = capsys.readouterr().out
    limited = [line for line in out.splitlines() if line.startswith("limited")]
    assert len(limited) == 1 and "HandR" in out and "joints held at the model's range" in limited[0]
    skate = [line for line in out.splitlines() if line.startswith("foot skate")]
    assert len(skate) == 1 and "cm/s while planted" in skate[0]
