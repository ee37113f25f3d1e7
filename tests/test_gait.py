"""Gait figures (engine.gait) against values known another way: synthetic takes played
straight from a reference (its walk cycle is one stride, two steps, of known length and
duration), retimed by 0.8x, and chained into a slow-down."""
from types import SimpleNamespace

import numpy as np
import pytest

from engine.gait import foot_contacts, gait_summary, take_gait, touchdowns
from engine.motion import SourceMotion, retarget
from engine.transforms import matrix_to_quat

from . import clips


def _played(rig, refs, fps=60):
    """A take-like record of the reference chain played exactly (no physics): times,
    body_pos, body_quat, q at `fps`, the clips looped by engine.control.plan."""
    from engine.control.plan import MotionPlan
    from engine.physics.base import q_to_state

    plan = MotionPlan(rig, [(r, s, f"clip{i}") for i, (r, s) in enumerate(refs)])
    steps = np.arange(0, plan.total_steps, 120 // fps)
    q = np.stack([plan.sample(int(s))[0] for s in steps])
    st = q_to_state(rig, q, np.zeros((len(q), rig.num_dofs)))
    return SimpleNamespace(times=steps / 120.0, body_pos=st.pos, body_quat=matrix_to_quat(st.rot), q=q)


def _retimed(motion: SourceMotion, speed: float) -> SourceMotion:
    """The same frames played `speed` times as fast (0.8: slower)."""
    return SourceMotion(motion.skeleton, motion.rotations, motion.root_translation, motion.frame_time / speed,
                        motion.local_translations)


@pytest.fixture(scope="module")
def walks(rig):
    walk = clips.bundled("walk")
    return retarget(walk, rig)[0], retarget(_retimed(walk, 0.8), rig)[0]


def _known(ref):
    """Cadence, speed and stride from the clip itself: one cycle = one stride = two steps,
    lasting F / 120 s, over the root's travel from its first to its last frame (scaled by
    F / (F - 1) frames)."""
    F = ref.num_frames
    period = F / ref.fps
    stride = np.linalg.norm(ref.root_pos[-1, :2] - ref.root_pos[0, :2]) * F / (F - 1)
    return 120.0 / period, stride / period, stride


@pytest.mark.parametrize("clip,kw", [("walk", {}), ("walk", dict(names="mixamo", fps=30, mirrored=True)),
                                     ("run", {}), ("run", dict(names="cmu", fps=60))],
                         ids=["walk", "walk-mixamo-30-mirrored", "run", "run-cmu-60"])
def test_cadence_speed_and_stride_of_a_played_clip_match_the_clip(rig, clip, kw):
    """The sprint's retargeted feet skate up to ~1.6 m/s in stance: contacts still count."""
    ref = retarget(clips.variant(clip, **kw), rig)[0]
    rec = _played(rig, [(ref, 16.0)])
    g = gait_summary(rig, rec.times, rec.body_pos, rec.body_quat, rec.q)
    cadence, speed, stride = _known(ref)
    knees = (40, 80) if clip == "walk" else (80, 110)
    for window in ("early", "late"):
        m = g[window]
        assert m["cadence_spm"] == pytest.approx(cadence, rel=0.02)
        assert m["forward_speed_mps"] == pytest.approx(speed, rel=0.03)
        assert m["stride_m"] == pytest.approx(stride, rel=0.03)
        assert knees[0] < m["knee_range_deg"] < knees[1] and m["trunk_lean_deg"] < 15
        assert 0.85 < m["root_height_m"] < 1.05
    assert abs(g["change"]["cadence_spm"]) < 0.02 and not g["overlap"]


def test_retimed_by_0_8_the_cadence_and_speed_scale_by_0_8(rig, walks):
    fast, slow = (gait_summary(rig, r.times, r.body_pos, r.body_quat, r.q)["early"]
                  for r in (_played(rig, [(w, 6.0)]) for w in walks))
    assert slow["cadence_spm"] / fast["cadence_spm"] == pytest.approx(0.8, rel=0.02)
    assert slow["forward_speed_mps"] / fast["forward_speed_mps"] == pytest.approx(0.8, rel=0.02)
    assert slow["stride_m"] / fast["stride_m"] == pytest.approx(1.0, rel=0.02)
    assert slow["knee_range_deg"] == pytest.approx(fast["knee_range_deg"], rel=0.02)


def test_a_walk_that_slows_down_is_reported_slowing(rig, walks):
    """6 s of the walk, then 10 s of it at 0.8x: early against late, speed and cadence drop
    by ~20 %, the stride stays; the report names speed or cadence."""
    rec = _played(rig, [(walks[0], 6.0), (walks[1], 10.0)])
    g = gait_summary(rig, rec.times, rec.body_pos, rec.body_quat, rec.q)
    assert g["change"]["cadence_spm"] == pytest.approx(-0.2, abs=0.02)
    assert g["change"]["forward_speed_mps"] == pytest.approx(-0.2, abs=0.03)
    assert abs(g["change"]["stride_m"]) < 0.03
    assert g["most_changed"] in ("cadence_spm", "forward_speed_mps") and g["fell_most"] in ("cadence_spm", "forward_speed_mps")
    assert g["early_s"] == [0.0, 5.0] and g["late_s"][0] == pytest.approx(rec.times[-1] - 10.0)


def test_feet_take_turns_and_every_step_is_found(rig, walks):
    rec = _played(rig, [(walks[0], 5.5)])  # five cycles
    c = foot_contacts(rig, rec.times, rec.body_pos, rec.body_quat)
    steps = touchdowns(c)
    assert [len(s) for s in steps] in ([5, 5], [5, 4], [4, 5])
    both = np.sort(np.concatenate(steps))
    side = np.concatenate([np.zeros(len(steps[0])), np.ones(len(steps[1]))])[np.argsort(np.concatenate(steps))]
    assert np.all(np.diff(side) != 0)  # right, left, right, ...
    assert np.diff(rec.times[both]).std() < 0.05
    assert 0.3 < c.mean() < 0.7  # each foot down for the still, flat part of its ~60 % stance


def test_a_foot_pivoting_on_the_floor_is_no_step_a_low_shuffle_is(rig, walks):
    """A simulated stance foot that pivots on the floor slides its lowest corner fast for a
    few frames: faked here by jittering one stance foot 5 cm to and fro over 0.13 s (the slide
    rule then breaks the contact for longer than GAP_S). It stays one contact: the foot never
    rose and its ankle ended where it began. The same break with the ankle carried 20 cm on
    (a tired foot shuffling forward low) is a step."""
    rec = _played(rig, [(walks[0], 3.3)])
    c = foot_contacts(rig, rec.times, rec.body_pos, rec.body_quat)
    steps = touchdowns(c)
    start = steps[0][0]  # the right foot's first touchdown; its stance lasts ~0.5 s
    feet = [rig.body_index(b) for b in ("TalusR", "FootThumbR", "FootPinkyR")]
    for shove, extra in ((None, 0), (np.array([0.0, -0.2, 0.0]), 1)):
        pos = rec.body_pos.copy()
        if extra:  # carried on: from the break's last frames the foot is 20 cm further along, and stays
            pos[start + 12:, feet] += shove
        jitter = start + 6 + np.arange(0, 8, 2)  # every other frame, 8 frames at 60 fps
        pos[np.ix_(jitter, feet)] += 0.05 * np.array([1.0, 0.0, 0.0])
        broken = foot_contacts(rig, rec.times, pos, rec.body_quat)
        assert [len(s) for s in touchdowns(broken)] == [len(steps[0]) + extra, len(steps[1])]


def test_a_take_too_short_to_measure_gives_none_not_an_error(rig, walks):
    rec = _played(rig, [(walks[0], 0.3)])
    g = gait_summary(rig, rec.times[:1], rec.body_pos[:1], rec.body_quat[:1], rec.q[:1])
    assert g["early"]["cadence_spm"] is None and g["most_changed"] is None
    g = gait_summary(rig, rec.times, rec.body_pos, rec.body_quat, rec.q)
    assert g["early"]["cadence_spm"] is None and g["early"]["forward_speed_mps"] is not None


def test_a_still_take_has_no_pace_to_lose(rig):
    """A held pose drifting a few mm/s (as a character standing on its muscles does): no
    relative change of speed (2 -> 0.3 mm/s would read -85 %), and no pace figure named."""
    ref = retarget(clips.hold(clips.bundled("walk"), 60), rig)[0]
    rec = _played(rig, [(ref, 20.0)])
    drift = np.where(rec.times < 5.0, 0.002 * rec.times, 0.01 + 0.0003 * (rec.times - 5.0))
    rec.body_pos = rec.body_pos + drift[:, None, None] * np.array([1.0, 0.0, 0.0])
    g = gait_summary(rig, rec.times, rec.body_pos, rec.body_quat, rec.q)
    assert 0.001 < g["early"]["forward_speed_mps"] < 0.003 and g["change"]["forward_speed_mps"] is None
    assert g["change"]["knee_range_deg"] is None and g["most_changed"] is None
    assert g["change"]["trunk_lean_deg"] is not None  # posture still compares


def test_take_gait_adds_mf_by_group_over_the_same_windows(rig, walks):
    from engine.rig import GROUPS

    rec = _played(rig, [(walks[0], 16.0)])
    N = len(rec.times)
    mf = np.linspace(0, 1, N)[:, None] * np.ones((1, rig.num_muscles))
    take = SimpleNamespace(**vars(rec), MF=mf, group_mean=lambda k, r: mf[:, :len(GROUPS)])
    g = take_gait(take, rig)
    early = mf[rec.times <= 5.0, 0].mean()
    assert g["MF_early"]["left_leg"] == pytest.approx(early, abs=1e-4)
    assert g["MF_late"]["trunk"] == pytest.approx(mf[rec.times >= rec.times[-1] - 10, 0].mean(), abs=1e-4)
