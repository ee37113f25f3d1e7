"""A clip asked for longer than it lasts (issue 44): a capture whose ends do not meet loops
where it loops best, or is played once (its part of the take ends with it); a clip played
once is played as it is
(engine.control.loops, engine.control.plan)."""
import numpy as np
import pytest

from engine.motion import retarget

from . import clips


def _ref(rig, motion):
    return retarget(motion, rig)[0]


def _plan(rig, ref, seconds):
    from engine.control.plan import MotionPlan

    return MotionPlan(rig, [(ref, seconds, "clip")])


def _step_changes(plan, steps):
    """Velocity-space size of the reference's change from each physics step to the next."""
    qs = [plan.sample(k)[0] for k in range(steps)]
    return np.array([np.linalg.norm(plan.space.diff(a, b)[6:]) for a, b in zip(qs[:-1], qs[1:])])


@pytest.mark.parametrize("clip,cycles,cuts", [("walk", 3, (0.13, 0.81)), ("walk", 3, (0.3, 0.95)),
                                              ("run", 5, (0.1, 0.75))])
def test_a_cut_capture_loops_at_its_own_period(rig, clip, cycles, cuts):
    """Three cycles of a bundled gait cut at odd phases at both ends, as a capture is: its ends
    are far apart, and the best loop inside it closes within a few degrees and spans whole
    cycles of the gait (the bundled cycle's length, give or take 3 frames)."""
    from engine.control.loops import best_loop, seam_deg

    cycle = clips.bundled(clip)
    m = clips.loop(cycle, cycles)
    a, b = (int(round(c * m.num_frames)) for c in cuts)
    part = type(m)(m.skeleton, m.rotations[a:b], m.root_translation[a:b], m.frame_time)
    ref = _ref(rig, part)
    i, j, seam = best_loop(ref)
    assert seam < 5.0 and seam <= seam_deg(ref, 0, ref.num_frames - 1)
    period = cycle.num_frames
    assert min((j - i) % period, period - (j - i) % period) <= 3, (i, j, period)


def test_a_walk_that_is_not_a_loop_walks_on_without_a_jump(rig):
    """The CMU walk (2.6 s, a capture, not a cycle) asked for 10 s: looped where it loops best
    with a seam under 10 deg (its own ends are 31 deg apart), and the step from the loop's last
    frame to its first is no bigger than the clip's own steps from one frame to the next."""
    from engine.motion import read_bvh

    ref = _ref(rig, read_bvh(clips.MOCAP_DIR / "cmu_07_01_walk.bvh"))
    plan = _plan(rig, ref, 10.0)
    clip = plan.segments[0].clip
    assert clip.loop["kind"] == "loop" and clip.loop["ends_deg"] > 25 and clip.loop["seam_deg"] < 10
    assert clip.loop["end_s"] - clip.loop["start_s"] >= 0.5 * ref.seconds
    assert "looped" in clip.describe() and "seam" in clip.describe()
    from engine.control.plan import CyclicClip

    raw = CyclicClip(plan.space, ref, ground=False, loops=True)  # the loop before the feet are grounded
    q = raw.q
    steps = [np.linalg.norm(plan.space.diff(a, b)[6:]) for a, b in zip(q[:-1], q[1:])]
    seam = np.linalg.norm(plan.space.diff(q[-1], raw.cycle.apply_q(q[0]))[6:])
    assert seam <= 1.25 * max(steps), (seam, max(steps))


def test_a_clip_played_once_is_played_as_it_is(rig):
    """Played for its own length, a capture whose ends do not meet is not bent to close a loop
    (the seam was spread over the whole clip before issue 44: every frame moved)."""
    from engine.control.plan import CyclicClip, QSpace
    from engine.motion import read_bvh

    ref = _ref(rig, read_bvh(clips.MOCAP_DIR / "cmu_07_01_walk.bvh"))
    space = QSpace(rig)
    once = CyclicClip(space, ref, ground=False, loops=False)
    assert once.once and np.allclose(once.q, ref.q)
    bent = CyclicClip(space, ref, ground=False)  # as a cycle
    assert np.abs(bent.q[-1, 7:] - ref.q[-1, 7:]).max() > 0.1
    # the bundled walk is a cycle: it loops as it always did
    walk = _ref(rig, clips.bundled("walk"))
    assert CyclicClip(space, walk, ground=False, loops=True).loop is None


def test_real_motion_with_no_seam_is_played_once_and_the_take_ends_with_it(rig):
    """The MASS dance has no pair of frames close enough to loop (its ends 19 deg apart, the
    best pair 18): asked for 6 s (its own 3.2), it plays once and its segment ends with it (a
    held last pose fell on the muscles), and the note says so and how to hold the pose;
    chained before another clip, that clip follows it. (The kick's ends meet within 15 deg
    once its repeated last frames are dropped: it loops whole.)"""
    ref = _ref(rig, clips.bundled("dance"))
    plan = _plan(rig, ref, 6.0)
    clip = plan.segments[0].clip
    assert clip.once and clip.loop["kind"] == "ended"
    assert plan.total_steps == clip.frames == ref.num_frames and abs(ref.seconds - 3.2) < 0.1
    note = clip.describe()
    assert "played once" in note and f"@{clip.seconds:.2f}:" in note
    q, v, a = plan.sample(plan.total_steps - 1)
    assert np.allclose(q[7:], clip.q[-1][7:])
    walk = _ref(rig, clips.bundled("walk"))
    from engine.control.plan import MotionPlan

    chained = MotionPlan(rig, [(ref, 6.0, "dance"), (walk, 2.0, "walk")])
    assert chained.segments[1].start == clip.frames and chained.total_steps == clip.frames + 240


def test_a_cycle_written_at_60_fps_loops_whole(rig):
    """The bundled run (66 frames at 120 fps, a 0.55 s cycle) written at 60 fps is 33 frames
    (0 .. 32/60 s, every interval 1/60 s: a last sample clamped to the source's last frame ran
    the clip's end at a fraction of its speed), and 65 at 120 fps again. Its ends then meet
    within 14 deg, more than a cycle's 12 but the best seam it has: asked for longer, it loops
    whole rather than playing once, at the run's own speed."""
    ref = _ref(rig, clips.variant("run", fps=60))
    assert ref.num_frames == 65
    plan = _plan(rig, ref, 3.0)
    clip = plan.segments[0].clip
    assert clip.loop["kind"] == "loop" and clip.loop["start_s"] == 0 and 12.0 < clip.loop["seam_deg"] <= 15.0
    assert clip.describe().endswith("looped whole") and plan.total_steps == 360
    speed = np.linalg.norm(np.array([plan.sample(k)[1][:2] for k in range(360)]), axis=1)
    assert abs(speed.mean() - 5.4) < 0.2 and speed.min() > 4.0  # no stall where the loop closes
