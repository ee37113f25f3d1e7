"""The plan puts a clip's stance feet on the floor (engine.control.grounding)."""
import mujoco
import numpy as np
import pytest

from .clips import MOCAP_DIR as MOCAP
from .conftest import MASS

WALK = MASS / "motion" / "walk.bvh"
RUN = MASS / "motion" / "run.bvh"


def _clips(rig, source, **kw):
    from engine.control.plan import CyclicClip, MotionPlan, load_clip

    ref, name = load_clip(rig, source)
    space = MotionPlan(rig, [(ref, 1.0, name)]).space
    return space, CyclicClip(space, ref, name, ground=False, **kw), CyclicClip(space, ref, name, **kw)


def _heights(rig, space, clip):
    """Lowest corner height of each foot and whether it is planted, in every frame."""
    from engine.control.grounding import stance_frames

    return stance_frames(space, clip.q, clip.cycle, 120.0)


@pytest.mark.parametrize("source", [WALK, RUN], ids=["walk", "sprint"])
def test_planted_feet_are_put_on_the_floor(rig, source):
    """As retargeted, the sprint's right foot lands 2-4 cm up and sinks 5 cm into the floor;
    the walk's hovers up to 2 cm. Grounded, every planted frame's lowest corner is within a
    few millimetres of PLANT_M, the pelvis went down only where a leg could not reach, no
    knee bends past its limit, and the rest of the body is the clip's."""
    from engine.control.grounding import PLANT_M

    space, raw, grounded = _clips(rig, source)
    h0, st0 = _heights(rig, space, raw)
    h1, st1 = _heights(rig, space, grounded)
    assert np.abs(h0[st0] - PLANT_M).max() > 0.015  # the retargeted clip is off the floor somewhere
    assert np.abs(h1[st0] - PLANT_M).mean() < 0.003 and np.abs(h1[st0] - PLANT_M).max() < 0.012
    assert 0 < grounded.grounding["pelvis_move_cm"] < 3.0
    assert np.all(grounded.q[:, 2] <= raw.q[:, 2] + 1e-12)
    for side in "RL":
        b = rig.body_index("Tibia" + side)
        knee, knee0 = grounded.q[:, rig.q_start[b]], raw.q[:, rig.q_start[b]]
        assert np.all(knee >= np.minimum(rig.joint_lower[b][0], knee0) - 1e-9)
    # only the legs and the pelvis height changed
    legs = [rig.body_index(n + s) for s in "RL" for n in ("Femur", "Tibia", "Talus")]
    dofs = np.concatenate([np.arange(rig.q_start[b], rig.q_start[b + 1]) for b in legs] + [[2]])
    same = np.setdiff1d(np.arange(raw.q.shape[1]), dofs)
    assert np.array_equal(raw.q[:, same], grounded.q[:, same])


def test_a_held_pose_is_left_as_it_is(rig):
    """A held pose never moves its feet: nothing is planted by the sliding rule and the
    stand controller places the feet (engine.control.stand)."""
    space, raw, grounded = _clips(rig, f"{WALK}@0.25")
    assert np.array_equal(raw.q, grounded.q)
    assert grounded.grounding["planted_share"] == [0.0, 0.0]


def test_grounding_finds_the_stance_of_transformed_clips(rig, tmp_path):
    """The stance is found by a share of each foot's own peak speed, not a speed: the walk
    mirrored, resampled to 30 fps and played at half speed plants each foot 55-75 % of the
    cycle as the walk does (measured 65 %), and each comes out on the floor."""
    from engine.control.grounding import PLANT_M
    from engine.motion.bvh import read_bvh, write_bvh
    from engine.motion.skeleton import SourceMotion
    from tests.clips import mirror, resample

    base = read_bvh(WALK)
    slow = SourceMotion(base.skeleton, base.rotations, base.root_translation, 2 * base.frame_time, base.local_translations)
    for name, motion in (("walk", base), ("mirror", mirror(base)), ("30fps", resample(base, 30.0)), ("slow", slow)):
        path = tmp_path / f"{name}.bvh"
        write_bvh(path, motion)
        space, raw, clip = _clips(rig, path)
        share = np.array(clip.grounding["planted_share"])
        assert np.all((share > 0.55) & (share < 0.75)), (name, share)
        h0, st0 = _heights(rig, space, raw)
        h1, _ = _heights(rig, space, clip)
        assert np.abs(h1[st0] - PLANT_M).mean() < 0.003, name


def test_grounded_clips_ask_less_root_help(rig):
    """What the grounding is for, measured another way (engine.control.demands: the force on
    the pelvis that no contact or muscle gives along the clip): the walk's falls by a third or
    more (measured 0.032 -> 0.018 body weights, peak 0.28 -> 0.08), the sprint's by a
    quarter or more (0.39 -> 0.21)."""
    from engine import fatigue as fat
    from engine.control import TrackingController
    from engine.control.demands import reference_demands
    from engine.control.plan import MotionPlan, load_clip
    from engine.simulation import Simulation

    for source, drop in ((WALK, 0.7), (RUN, 0.75)):
        space, raw, grounded = _clips(rig, source)
        ref, name = load_clip(rig, source)
        sim = Simulation(rig, "mujoco", fatigue=fat.FatigueParams(scale=0.0))
        ctrl = TrackingController(sim, MotionPlan(rig, [(ref, 1.0, name)]))
        before, after = (reference_demands(ctrl, sim, c)["root_help_body_weights_mean"] for c in (raw, grounded))
        assert after < drop * before, (source.name, before, after)


def test_feet_are_moved_in_any_direction(rig):
    """move_feet with an offset per foot (2, 3): each talus goes where it is sent, turned as
    it was, the pelvis where it was (MuJoCo's own kinematics of the result)."""
    from engine.control.grounding import move_feet

    space, raw, _ = _clips(rig, WALK)
    data = mujoco.MjData(space.model)
    q = raw.q[40]
    tali = [rig.body_index("Talus" + s) + 1 for s in "RL"]  # MuJoCo body 0 is the world

    def feet(qi):
        data.qpos[:] = qi
        mujoco.mj_kinematics(space.model, data)
        return data.xipos[tali].copy(), data.ximat[tali].copy()

    offset = np.array([[0.02, -0.01, 0.01], [-0.015, 0.005, 0.01]])  # raised: no leg is at full stretch
    (p0, R0), (p1, R1) = feet(q), feet(move_feet(space, data, q, offset, 0.0))
    np.testing.assert_allclose(p1 - p0, offset, atol=1e-4)
    np.testing.assert_allclose(R1, R0, atol=1e-3)
    assert np.array_equal(move_feet(space, data, q, offset, 0.0)[:7], q[:7])


def test_the_planted_feet_slide_is_reported(rig):
    """The summary gives each planted foot's slide across the floor, computed another way here
    (MuJoCo's own foot boxes, the same planted frames): the bundled walk's feet slide 16-19
    cm/s as retargeted (a capture's foot skate; the physics' feet cannot follow it)."""
    from engine.control.grounding import _foot_tracks
    from engine.motion.reference import planted

    space, raw, grounded = _clips(rig, WALK)
    tracks = _foot_tracks(space, raw.q, raw.cycle)
    _, stance = planted(tracks, 120.0)
    for k, (low, nxt) in enumerate(tracks):
        slide = np.linalg.norm(nxt[:, :2] - low[:-1, :2], axis=1)[stance[:, k]].mean() * 120 * 100
        assert grounded.grounding["slide_cm_per_s"][k] == pytest.approx(slide, abs=0.06)
        assert 10 < slide < 30


def test_corrections_raise_a_foot_in_the_air_above_the_floor():
    """corrections() (the pure rule): planted frames go to PLANT_M, frames between plantings
    follow the line between them, and a foot in the air that would then pass below
    SWING_CLEAR_M is raised to it, and only there."""
    from engine.control.grounding import PLANT_M, SWING_CLEAR_M, corrections

    F = 60
    h = np.full((F, 1), 0.05)
    stance = np.zeros((F, 1), bool)
    stance[:20] = True
    h[:20] = 0.01  # planted 1 cm up: lowered by 1.5 cm
    h[40:50] = -0.02  # in the air 2 cm into the floor
    air = np.zeros((F, 1), bool)
    air[25:55] = True
    plain, lifted = corrections(h, stance), corrections(h, stance, air)
    assert np.allclose(plain[5:15, 0], PLANT_M - 0.01)
    assert np.allclose(lifted[5:15, 0], plain[5:15, 0])  # the stance as before
    assert np.allclose(lifted[25:35, 0], plain[25:35, 0])  # in the air above the floor: untouched
    assert np.allclose(h[42:48, 0] + lifted[42:48, 0], SWING_CLEAR_M, atol=3e-4)  # the dip raised (smoothed at its ends)
    assert np.all(h[42:48, 0] + plain[42:48, 0] < 0)  # the line between plantings alone left it in the floor


def test_a_capture_swinging_its_heels_through_the_floor_is_raised(rig):
    """The CMU walk on the model's proportions swings each heel 1-2 cm into the floor at 4-5
    m/s just before it lands (a 20 s take stumbled on it and fell at 12 s); grounded, no foot
    in the air is lower than a planted one, nine in ten at SWING_CLEAR_M or above, while the
    bundled walk's feet, which clear the floor, move by less than 3 mm more than before."""
    from engine.control.grounding import PLANT_M, SWING_CLEAR_M, _foot_tracks, corrections, in_the_air
    from engine.motion.reference import planted, slides
    from .conftest import SHARED

    cmu = SHARED / "reference" / "mocap" / "cmu_07_01_walk.bvh"
    space, raw, grounded = _clips(rig, cmu, loops=True)
    tracks = _foot_tracks(space, raw.q, raw.cycle)
    air = in_the_air(slides(tracks) * 120.0)
    h0, _ = planted(tracks, 120.0)
    h1, _ = _heights(rig, space, grounded)
    assert h0[air].min() < -0.02 and grounded.grounding["lowest_in_air_cm"] < 0  # (the latter after the lift below)
    assert h1[air].min() > PLANT_M  # no lower than a planted foot, even where the smoothing meets a landing
    # clear of the floor in 71 % of the frames in the air before, 92 % after (measured): the rest
    # within a few mm, where the smoothing meets a landing or a near-straight knee stops the IK
    assert np.mean(h0[air] > SWING_CLEAR_M - 0.001) < 0.8 < 0.9 < np.mean(h1[air] > SWING_CLEAR_M - 0.001)
    space, raw, _ = _clips(rig, WALK)
    tracks = _foot_tracks(space, raw.q, raw.cycle)
    h0, st0 = planted(tracks, 120.0)
    lifted = corrections(h0, st0, in_the_air(slides(tracks) * 120.0))
    assert np.abs(lifted - corrections(h0, st0)).max() < 0.003


def test_a_capture_standing_in_the_floor_is_raised_whole(rig):
    """The CMU walk on the model stands 1.6 (left) and 2.8 cm (right) into the floor through
    its stances: raising each foot with its near-straight leg bent the stance knees 11 deg
    on average (right; a leg near straight bends ~17 deg to raise its foot 1 cm). The clip is
    raised whole first: the planted feet still end at PLANT_M, with the stance knees bent
    about half as much (measured 5.9 and 2.5 deg against 10.8 and 5.4). The bundled walk,
    whose stance is above the floor, is not raised."""
    from engine.control.grounding import PLANT_M
    from .conftest import SHARED

    cmu = SHARED / "reference" / "mocap" / "cmu_07_01_walk.bvh"
    space, raw, grounded = _clips(rig, cmu, loops=True)
    h0, st0 = _heights(rig, space, raw)
    h1, _ = _heights(rig, space, grounded)
    assert grounded.grounding["lift_cm"] == pytest.approx(100 * (PLANT_M - h0[st0].mean()), abs=0.006)
    assert grounded.grounding["lift_cm"] > 1.0
    assert np.abs(h1[st0] - PLANT_M).mean() < 0.003
    for side, most in (("R", 7.0), ("L", 4.0)):
        k, s = rig.q_start[rig.body_index("Tibia" + side)], "RL".index(side)
        assert np.degrees(np.abs(grounded.q[:, k] - raw.q[:, k])[st0[:, s]].mean()) < most, side
    assert _clips(rig, WALK)[2].grounding["lift_cm"] == 0.0


def test_a_clip_played_once_is_grounded_on_its_own_frames(rig):
    """A clip that is not a loop (the CMU walk at its own length) is judged on its own frames:
    followed by its first frame, as a loop's last is, its feet jumped 75-95 m/s at its end,
    which became their peak speed, so every frame near the floor counted planted and none in
    the air. Played once, its feet's peak speed is a walk's (< 10 m/s), fewer frames are
    planted, a foot swinging into the floor is raised, and the corrections hold each foot's
    first and last planting out to the clip's ends instead of blending its two ends."""
    from engine.control.grounding import PLANT_M, _foot_tracks, corrections, in_the_air
    from engine.motion.reference import planted, slides

    space, raw, grounded = _clips(rig, MOCAP / "cmu_07_01_walk.bvh", loops=False)
    assert raw.once and grounded.once
    as_loop, once = (_foot_tracks(space, raw.q, raw.cycle, o) for o in (False, True))
    assert (slides(as_loop) * 120).max() > 50 and (slides(once) * 120).max() < 10
    planted_as_loop, planted_once = planted(as_loop, 120.0)[1], planted(once, 120.0)[1]
    assert planted_once.mean() < planted_as_loop.mean() - 0.1
    assert in_the_air(slides(once) * 120).any() and not in_the_air(slides(as_loop) * 120)[:-1].any()
    assert grounded.grounding["slide_cm_per_s"][0] < 40  # planted feet slide a little, not at a swing's speed
    F = 100
    h, stance = np.zeros((F, 1)), np.zeros((F, 1), bool)
    stance[20:30], h[20:30] = True, 0.02
    stance[70:80], h[70:80] = True, -0.03
    ends = corrections(h, stance, once=True)
    assert np.allclose(ends[:15, 0], PLANT_M - 0.02) and np.allclose(ends[-15:, 0], PLANT_M + 0.03)
    wrapped = corrections(h, stance)  # a loop: its end runs on into its start
    assert PLANT_M - 0.02 < wrapped[5, 0] < PLANT_M + 0.03
