"""The pace governor (engine.control.pace): tired legs play the reference slower.

Checked against its equation (the rate law and its first-order lag in closed form), against
the plan sampled on whole frames (a fractional lag interpolates), and on a tired walk, where
the take must slow down as the legs' M_F rises; an unfatigued take plays exactly as without it.
"""
import numpy as np
import pytest

from engine import fatigue as fat
from engine.control import pace as pc
from engine.control.tracking import TrackingParams
from engine.errors import ParameterError

from .conftest import MOTION_DIR

WALK = MOTION_DIR / "walk.bvh"
WALK_S = 20.0


@pytest.fixture(scope="module")
def walk_ref(rig):
    from engine.control.plan import load_clip

    return load_clip(rig, WALK)[0]


def test_rate_law_is_eq_1():
    assert pc.target_rate(0.0, 1.0) == 1.0  # fresh legs: the recorded pace
    assert pc.target_rate(pc.THRESHOLD, 1.0) == 1.0
    assert pc.target_rate(0.3, 1.0) == pytest.approx(1 - (0.3 - pc.THRESHOLD))
    assert pc.target_rate(0.3, 2.0) == pytest.approx(1 - 2 * (0.3 - pc.THRESHOLD))
    assert pc.target_rate(0.95, 1.0) == pc.FLOOR  # never slower than the floor
    assert pc.target_rate(0.95, 0.0) == 1.0  # strength 0: off


def test_rate_follows_a_first_order_lag_and_the_lag_sums_what_it_leaves_out():
    dt, n, mf = 1 / 120, 240, 0.5
    p = pc.Pace(1.0, dt)
    for _ in range(n):
        p.update(mf, 0)
    target, a = pc.target_rate(mf, 1.0), dt / pc.TAU_S
    k = np.arange(1, n + 1)
    rates = target + (1 - target) * (1 - a) ** k  # closed form of rate += a (target - rate)
    assert p.rate == pytest.approx(rates[-1], rel=1e-12)
    assert p.lag == pytest.approx(np.sum(1 - rates), rel=1e-10)
    s = p.summary()
    assert s["min_rate"] == pytest.approx(rates[-1], abs=1e-4) and s["lag_s"] == pytest.approx(p.lag * dt, abs=1e-3)


def test_a_new_clip_starts_at_its_own_clock_and_the_old_one_plays_on_at_the_same_rate():
    p = pc.Pace(1.0, 1 / 120)
    for _ in range(120):
        assert not p.update(0.6, 0)
    lag = p.lag
    assert lag > 10
    assert p.update(0.6, 1)  # the switch step: the old clip's lag grows once more, the new one starts at 0
    assert p.lag == 0.0 and p.prev_lag == pytest.approx(lag + 1 - p.rate)
    before = p.prev_lag
    p.update(0.6, 1)
    assert p.lag == pytest.approx(1 - p.rate) and p.prev_lag == pytest.approx(before + 1 - p.rate)


def test_a_cross_fade_between_slowed_clips_keeps_the_pace(rig, walk_ref):
    """Both clips of a cross-fade play at the governor's rate: the reference's root moves as
    fast through the fade as it did before it (a fade that let the old clip run at full pace
    swung the root's speed between a third and twice its slowed value)."""
    from engine.control.plan import MotionPlan

    plan = MotionPlan(rig, [(walk_ref, 2.0, "a"), (walk_ref, 2.0, "b")], blend=0.4)
    p = pc.Pace(1.0, 1 / 120)
    p.rate = pc.target_rate(0.6, 1.0)  # settled at half pace
    start = plan.segments[1].start
    speed = []
    prev = None
    for step in range(start - 60, start + plan.blend_steps + 10):
        if p.update(0.6, plan.segment_index(step)):
            plan.rebase(1, p.prev_lag)
        q = plan.sample(step, p.lag, p.prev_lag)[0]
        if prev is not None:
            speed.append(np.linalg.norm(q[:2] - prev[:2]) * 120)
        prev = q
    speed = np.array(speed)
    before, fade = speed[:50], speed[60:60 + plan.blend_steps]
    assert fade.min() > 0.7 * before.mean() and fade.max() < 1.3 * before.mean()


def test_a_policy_takes_no_pace():
    from engine.take import check_pace

    assert check_pace("tracking", None) == 1.0 and check_pace("tracking", 0.0) == 0.0
    assert check_pace("policy", None) == 0.0
    with pytest.raises(ParameterError, match="--pace"):
        check_pace("policy", 1.0)


def test_pace_strength_is_checked():
    with pytest.raises(ParameterError, match="pace"):
        TrackingParams(pace=-1.0).validate()
    with pytest.raises(ParameterError, match="pace"):
        TrackingParams(pace=float("nan")).validate()


def test_a_fractional_lag_interpolates_the_plan_and_a_whole_one_shifts_it(rig, walk_ref):
    from engine.control.plan import MotionPlan

    plan = MotionPlan(rig, [(walk_ref, 3.0, "walk")])
    for step in (40, 200):
        shifted = plan.sample(step, lag=7.0)
        for got, want in zip(shifted, plan.sample(step - 7)):
            np.testing.assert_array_equal(got, want)
        qa, va, aa = plan.sample(step - 8)
        qb, vb, ab = plan.sample(step - 7)
        q, v, a = plan.sample(step, lag=7.25)
        np.testing.assert_allclose(q, plan.space.interp(qa, qb, 0.75), atol=1e-12)
        np.testing.assert_allclose(v, 0.25 * va + 0.75 * vb, atol=1e-12)
        np.testing.assert_allclose(a, 0.25 * aa + 0.75 * ab, atol=1e-12)


@pytest.fixture(scope="module")
def tired_walk(rig):
    from engine.take import simulate

    # the model's own forces (strength 1): the legs tire past the governor's threshold within
    # seconds and far enough to halve the pace; at the default 3 they level off near 0.3
    return simulate(rig, [(WALK, WALK_S)], fatigue=fat.FatigueParams(scale=50), fps=30, strength=1.0)


def test_a_tired_walk_slows_down_as_its_legs_tire(rig, tired_walk):
    """At fatigue scale 50 the legs' M_F passes the threshold within seconds: the governor
    slows the reference, and the take's own gait (measured from the bodies, engine.gait)
    slows by more than 15 % from its first 5 s to its last 10 s."""
    m = tired_walk.meta
    assert not m["partial"]
    s = m["summary"]
    assert s["pace"]["strength"] == 1.0 and s["pace"]["min_rate"] < 0.8 and s["pace"]["lag_s"] > 1.0
    g = s["gait"]
    assert g["late"]["forward_speed_mps"] < 0.85 * g["early"]["forward_speed_mps"]
    mf_legs = np.mean([s["MF_final_by_group"]["right_leg"], s["MF_final_by_group"]["left_leg"]])
    # the final rate is eq. 1 at the legs' M_F, a second's lag behind (the M_F barely moves in a second)
    assert s["pace"]["final_rate"] == pytest.approx(pc.target_rate(mf_legs, 1.0), abs=0.06)
    # the recorded joint error is against the reference as played: tracking holds as it slows
    late = tired_walk.times > WALK_S - 10
    assert tired_walk.joint_err_deg[late].mean() < 25.0


def test_an_unfatigued_take_plays_exactly_as_without_the_governor(rig):
    from engine.take import simulate

    kw = dict(fatigue=fat.FatigueParams(scale=1), fps=30)
    on = simulate(rig, [(WALK, 1.0)], params=TrackingParams(pace=1.0), **kw)
    off = simulate(rig, [(WALK, 1.0)], params=TrackingParams(pace=0.0), **kw)
    np.testing.assert_array_equal(on.q, off.q)
    np.testing.assert_array_equal(on.activation, off.activation)
    assert on.meta["summary"]["pace"]["final_rate"] == 1.0 and on.meta["summary"]["pace"]["lag_s"] == 0.0


def test_a_clip_after_a_slowed_one_continues_from_where_that_one_got_to(rig, walk_ref):
    """plan.rebase: the next clip is matched again to the previous one as it was played (lag
    steps behind), so the reference does not jump at the switch."""
    from engine.control.plan import MotionPlan, load_clip

    run_ref = load_clip(rig, MOTION_DIR / "run.bvh")[0]
    plan = MotionPlan(rig, [(walk_ref, 2.0, "walk"), (run_ref, 2.0, "run")], blend=0.0)
    seg = plan.segments[1]
    lag = 37.0
    prev = plan._sample_segment(plan.segments[0], seg.start, lag)[0]
    before = plan._sample_segment(seg, seg.start)[0]
    plan.rebase(1, lag)
    after = plan._sample_segment(seg, seg.start)[0]
    assert seg.phase == plan._best_phase(seg.clip, prev)
    np.testing.assert_allclose(after[:2], prev[:2], atol=1e-9)  # the root carries on from the slowed walk
    assert np.linalg.norm(before[:2] - prev[:2]) > 0.2  # where the plan had put it: 37 steps of walking away



def test_the_tracker_samples_the_reference_afresh_when_the_pace_or_the_plan_moved(rig, walk_ref):
    """TrackingController.reference returns its last sample again when asked for the same step
    at the same pace (a balance rollout's cost and its next decision do): through a slowing
    pace, a clip switch (rebase) and a restore it gives what a fresh sample gives, bit for bit."""
    from engine.control.plan import MotionPlan
    from engine.control.tracking import TrackingController
    from engine.simulation import Simulation

    sim = Simulation(rig)
    plan = MotionPlan(rig, [(walk_ref, 0.5, "a"), (walk_ref, 0.5, "b")], blend=0.2)
    ctl = TrackingController(sim, plan, TrackingParams())
    sim.fatigue.MF[:] = 0.6  # tired legs: the pace slows every step

    def fresh(step):
        q, v, a = plan.sample(step, ctl.pace.lag, ctl.pace.prev_lag)
        return q, ctl.pace.rate * v, ctl.pace.rate ** 2 * a

    snap = None
    for step in range(plan.segments[1].start + 30):
        sim.steps = step
        ctl.advance_pace(sim)
        for _ in range(2):  # asked twice at a step: the second is the kept sample
            for got, want in zip(ctl.reference(step), fresh(step)):
                assert np.array_equal(got, want), step
        if step == 40:
            snap = ctl.snapshot()
    assert ctl.pace.rate < 0.9 and ctl.pace.lag > 1.0
    ctl.restore(snap)  # back before the switch: the rebased segment is put back
    for got, want in zip(ctl.reference(41), fresh(41)):
        assert np.array_equal(got, want)

@pytest.mark.parametrize("value", ["-1", "nan", "fast"])
def test_a_bad_pace_is_one_line_naming_the_flag(tmp_path, value):
    from .test_cli import sinew

    proc = sinew("simulate", "--clip", f"{WALK}:0.2", "--pace", value, "--out", str(tmp_path / "t"), check=False)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--pace" in lines[0]
    assert not (tmp_path / "t").exists()


def test_the_report_says_how_the_reference_was_played(tmp_path):
    from .test_cli import last_json, sinew

    proc = sinew("simulate", "--clip", f"{WALK}:0.3", "--pace", "0", "--no-plots", "--out", str(tmp_path / "t"), "--json")
    assert "pace        the recorded pace throughout (governor off)" in proc.stdout + proc.stderr
    assert "- Pace: the recorded pace throughout (governor off)" in (tmp_path / "t" / "report.md").read_text()
    assert last_json(proc)["pace"] == dict(strength=0.0, final_rate=1.0, min_rate=1.0, mean_rate=1.0, lag_s=0.0,
                                           waited_s=0.0, ran_on_s=0.0)



def test_sync_is_eq_2():
    """The clip plays at the floor's pace where it was clearly nearer the body earlier."""
    assert pc.sync_rate([0.02]) == 1.0  # near the clip: no search
    assert pc.sync_rate([0.5, 0.49, 0.48]) == 1.0  # 2 cm nearer: not worth waiting for
    assert pc.sync_rate([0.5, 0.45, 0.48]) == pc.FLOOR
    assert pc.sync_rate([0.1, 0.2, 0.3]) == 1.0  # the body ahead of the clip: it does not wait
    assert pc.heading([np.cos(0.2), 0, 0, np.sin(0.2)]) == pytest.approx(0.4)  # 0.4 rad about z


def test_the_sync_factor_follows_its_target_and_the_lag_counts_the_wait():
    dt = 1 / 120
    p = pc.Pace(0.0, dt)  # no fatigue slowing: the sync alone
    p.sync_target = 0.5
    for _ in range(60):
        p.update(0.0, 0)
    a = dt / pc.SYNC_TAU_S
    syncs = 0.5 + 0.5 * (1 - a) ** np.arange(1, 61)
    assert p.sync == pytest.approx(syncs[-1], rel=1e-12) and p.rate == p.sync
    assert p.lag == pytest.approx(np.sum(1 - syncs), rel=1e-10) and p.waited == pytest.approx(p.lag, rel=1e-12)
    assert p.summary()["waited_s"] == pytest.approx(p.lag * dt, abs=1e-3)


def test_the_clip_waits_for_a_body_behind_it_in_time(rig, walk_ref):
    """A body where the clip was 0.4 s ago (the clip played 0.4 s ahead of it): the gaps
    found by the tracker put the clip nearest then, and the clip is slowed to the floor; a
    body at the clip's own place makes no search."""
    from engine.control.plan import MotionPlan
    from engine.control.tracking import TrackingController
    from engine.simulation import Simulation

    plan = MotionPlan(rig, [(walk_ref, 2.0, "walk")])
    sim = Simulation(rig)
    q0, v0, _ = plan.sample(0)
    sim.start_at(q0, v0)
    ctl = TrackingController(sim, plan, TrackingParams())
    assert ctl._sync_gaps(sim) == [pytest.approx(0.0, abs=0.03)]
    ctl.pace.lag = -48.0  # the clip 48 steps (0.4 s) ahead of the body
    gaps = ctl._sync_gaps(sim)
    assert gaps[0] > 0.4 and gaps[-1] < gaps[0] - pc.SYNC_GAIN_M and 2 <= len(gaps) <= 5  # stops once decided
    from engine.control.pace import SYNC_EVERY

    # the search itself, positions only: the clip was at the body 48 steps back
    full = []
    for k in range(7):
        qr = plan.sample(0, -48.0 + k * SYNC_EVERY)[0]
        full.append(float(np.hypot(*(qr[:2] - sim.physics.get_q()[0][:2]))))
    assert int(np.argmin(full)) == 4 and full[4] < 0.03 and gaps == pytest.approx(full[:len(gaps)], abs=0.02)
    assert pc.sync_rate(gaps) == pc.FLOOR
    ctl.advance_pace(sim)
    assert ctl.pace.sync_target == pc.FLOOR
    off = TrackingController(sim, plan, TrackingParams(sync=False))
    off.pace.lag = -48.0
    off.advance_pace(sim)
    assert off.pace.sync_target == 1.0
    # a clip with no foot planted where it is played (a flight) does not wait: it cannot be held back
    flight = TrackingController(sim, MotionPlan(rig, [(walk_ref, 2.0, "walk")]), TrackingParams())
    flight.plan.segments[0].clip.supported[:] = False
    flight.pace.lag = -48.0
    flight.advance_pace(sim)
    assert flight.pace.sync_target == 1.0


def test_a_clip_is_supported_where_a_foot_is_planted(rig, walk_ref):
    """CyclicClip.supported: the bundled walk always has a foot on the floor; the bundled run's
    flights (both feet up, ~a quarter of its frames) do not, and MotionPlan.supported reads the
    frame played, looped, `lag` steps behind."""
    from engine.control.plan import MotionPlan, load_clip

    walk = MotionPlan(rig, [(walk_ref, 2.0, "walk")])
    assert walk.segments[0].clip.supported.all()
    ref, _ = load_clip(rig, WALK.parent / "run.bvh")
    run = MotionPlan(rig, [(ref, 3 * ref.seconds, "run")])
    clip = run.segments[0].clip
    assert 0.1 < 1 - clip.supported.mean() < 0.4
    k = int(np.flatnonzero(~clip.supported)[0])
    assert not run.supported(k) and not run.supported(k + clip.frames) and not run.supported(k + 7, 7.0)
    assert run.supported(int(np.flatnonzero(clip.supported)[0]))


def test_wait_is_a_tracking_option():
    from engine.take import check_wait

    assert check_wait("tracking", None) is True and check_wait("tracking", False) is False
    assert check_wait("policy", None) is True  # a policy's own tracker (an offset policy's) keeps its default
    with pytest.raises(ParameterError, match="--wait.*own pace"):
        check_wait("policy", False)


def test_a_clip_on_its_own_clock_plays_to_its_end_and_the_take_runs_on(rig, walk_ref):
    """A clip at its own length that the pace held back L steps is not cut: at its segment's
    end the take gives it the steps it lacks (the next clip, and the take's end, move on by L),
    its last frame is played, and the clip after it continues from there. A looped clip ends on
    the take's clock. A snapshot taken before the run-on puts the plan back."""
    from engine.control.plan import MotionPlan
    from engine.control.tracking import TrackingController
    from engine.simulation import Simulation

    own = walk_ref.num_frames
    for clips, runs_on in (([(walk_ref, walk_ref.seconds, "walk")], True),
                           ([(walk_ref, walk_ref.seconds, "walk"), (walk_ref, 0.5, "walk")], True),
                           ([(walk_ref, 3 * walk_ref.seconds, "walk")], False)):
        plan = MotionPlan(rig, clips)
        assert plan.segments[0].repeats is not runs_on
        sim = Simulation(rig)
        q0, v0, _ = plan.sample(0)
        sim.start_at(q0, v0)
        ctl = TrackingController(sim, plan, TrackingParams(sync=False, pace=0.0))
        snap = ctl.snapshot()
        asked, end = plan.total_steps, plan.segment_end(0)
        ctl.pace.lag = 30.0  # held back 30 steps (as the fatigue governor or the wait do)
        sim.steps = end  # the pace brought up to the first segment's end, no physics needed
        got = ctl.take_steps(sim)
        if not runs_on:
            assert got == asked and plan.segment_end(0) == end
            continue
        assert got == asked + 30 and plan.segment_end(0) == end + 30
        # the clip's last frame is played at the new end's last step, not before
        last = plan.segments[0].clip.sample(own - 1, plan.segments[0].place)[0]
        np.testing.assert_array_equal(plan.sample(end + 29, 30.0)[0], last)
        assert ctl.report()["pace"]["ran_on_s"] == pytest.approx(0.25)
        ctl.restore(snap)
        assert plan.total_steps == asked and plan.segment_end(0) == end


def test_a_tired_clip_at_its_own_length_plays_to_its_end(tmp_path):
    """The bundled walk at its own length with legs that tire within a second (fatigue scale
    3000, pace strength 5): the governor slows it, and the take runs on by exactly what the
    clip fell behind its own clock, its frames recorded at the take's rate to the new end."""
    from .test_cli import last_json, sinew

    proc = sinew("simulate", "--clip", str(WALK), "--residual", "1", "--no-balance", "--fatigue-scale", "3000",
                 "--pace", "5", "--no-plots", "--out", str(tmp_path / "t"), "--json")
    s = last_json(proc)
    clip_s = 132 / 120.0  # the bundled walk's frames at 120 Hz
    assert s["pace"]["min_rate"] < 0.8 and s["pace"]["ran_on_s"] > 0.1
    assert s["seconds"] == pytest.approx(clip_s + s["pace"]["ran_on_s"], abs=1.5 / 120)
    assert s["pace"]["ran_on_s"] == pytest.approx(s["pace"]["lag_s"], abs=1.5 / 120)  # played to its last frame
    assert s["frames"] == int(s["seconds"] * 30 + 1e-6) + 1 and not s["partial"]
    assert "the take ran on 0.2 s so that its clips played to their ends" in proc.stdout + proc.stderr


def test_the_report_says_how_long_the_clip_waited():
    from types import SimpleNamespace

    from engine.commands.take_report import pace

    base = dict(strength=1.0, final_rate=0.9, min_rate=0.5, mean_rate=0.95, lag_s=0.4)
    take = lambda **kw: SimpleNamespace(meta=dict(pace=dict(base, **kw)))
    assert "waited" not in pace(take(waited_s=0.0)) and "waited" not in pace(take())  # older takes lack it
    assert pace(take(waited_s=1.24)).endswith("; the clip waited 1.2 s in all for a body behind it (at its turns and stops)")
    assert "waited 0.6 s" in pace(take(strength=0.0, waited_s=0.6))  # governor off, waiting on
    assert "ran on" not in pace(take(waited_s=0.6, ran_on_s=0.0)) and "ran on" not in pace(take(waited_s=0.6))
    assert pace(take(waited_s=0.6, ran_on_s=0.55)).endswith("; the take ran on 0.6 s so that its clips played to their ends")
