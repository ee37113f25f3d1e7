"""Issue 16's must-hold checks for a character that carries itself (root residual 0), and
the balance planner (engine.control.balance).

The 60 s walk without the residual on the tracker alone is an expected failure, kept so the
day a balance layer carries it turns it into a pass (strict: an unexpected pass fails the
run, so the marker cannot outlive the fix): with the root's accelerations in the solve it
falls after ~3 s (docs/research/balance.md). The balance planner walks past that point
(checked here over 4.5 s; 60 s runs are in balance.md, too slow for CI). A held pose stands,
on the stand controller (engine.control.stand).
"""
import copy
import json

import numpy as np
import pytest

from engine import fatigue as fat
from engine.rig import GROUPS
from engine.control.tracking import TrackingParams

from . import clips
from .conftest import MOTION_DIR


def speeds_from(take, t0: float) -> tuple[float, float]:
    """Horizontal speed of the pelvis and of the reference from t0 to the take's end (m/s),
    over the same frames."""
    late = take.times >= t0
    span = take.times[late][-1] - take.times[late][0]
    go = lambda q: float(np.linalg.norm(q[late][-1, :2] - q[late][0, :2]) / span)
    return go(take.q), go(take.q_ref)


def assert_same_take(a, b) -> None:
    """Two takes of the same planner, one with worker processes: every rollout starts from
    the snapshot, so the same plans are chosen and the take is the same to the bit. (CI once
    saw q differ at round-off: the retarget's strided arctan2 took numpy's libm or SIMD path
    by where the output landed, DESIGN.md 'Same bits'; tests/test_same_bits.py guards it.)"""
    for k in ("q", "activation"):
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k), err_msg=k)
    assert a.meta["balance"]["mean_best_cost"] == b.meta["balance"]["mean_best_cost"]


@pytest.mark.xfail(reason="the tracker alone does not balance without the root residual: the walk falls "
                   "after ~3 s (docs/research/balance.md); the balance planner is too slow for a 60 s CI take", strict=True)
def test_fresh_walk_60_s_on_its_own_muscles(rig):
    from engine.take import simulate

    take = simulate(rig, [(MOTION_DIR / "walk.bvh", 60.0)], params=TrackingParams(residual=0.0), fps=30)
    s = take.meta["summary"]
    assert not s["fell"]
    assert s["joint_err_deg_mean"] <= 6.0


@pytest.mark.parametrize("frame", [0, 30, 120])
def test_a_held_pose_stands_120_s_at_fatigue_scale_50(rig, tmp_path, frame):
    """Issue 16's standing must-hold, on the stand controller (engine.control.stand: an LQR
    about the frame's nearest balanced pose, re-designed every 2 s for the muscles' fatigue).
    Frame 0 is a toe-off (the right heel 11 cm up), frame 30 mid-stride with the right foot
    landing; both settle flat-footed. Frame 120 fell after ~8-20 s at the model's own forces
    (its balanced pose kept single ankle muscles near 0.4); at the default strength 3 every
    frame tried stands (0, 30, 45, 60, 92, 120: docs/research/balance.md, fourteenth
    session)."""
    from engine.motion import write_bvh
    from engine.take import simulate

    path = tmp_path / f"hold{frame}.bvh"
    write_bvh(path, clips.hold(clips.bundled("walk"), frame))
    take = simulate(rig, [(path, 120.0)], params=TrackingParams(residual=0.0),
                    fatigue=fat.FatigueParams(scale=50), fps=30)
    assert take.meta["stand"]["mode"] == "stand"
    assert not take.meta["summary"]["fell"]
    assert np.abs(take.residual_force).max() == 0.0
    # the muscles settle: the legs' mean M_F changes by < 0.02 over the last minute
    legs = np.isin(rig.muscle_group, [GROUPS.index("right_leg"), GROUPS.index("left_leg")])
    mf = take.MF[:, legs].mean(1)
    late = take.times >= 60.0
    assert np.ptp(mf[late]) < 0.02


def test_offset_plans_are_piecewise_linear_and_shift_in_time():
    from engine.control.balance import offsets_at, shift_plan

    U = np.array([[0.0, 1.0], [1.0, 1.0], [3.0, -1.0]])
    assert np.allclose(offsets_at(U, 24, 12, 24), [0, 1]) and np.allclose(offsets_at(U, 24, 12, 30), [0.5, 1])
    assert np.allclose(offsets_at(U, 24, 12, 42), [2.0, 0.0])
    assert np.allclose(offsets_at(U, 24, 12, 0), U[0]) and np.allclose(offsets_at(U, 24, 12, 500), U[-1])  # held
    V = shift_plan(U, 24, 12, 30)  # the plan resampled at knots 6 steps later: the same at those knots
    for step in (30, 42, 54, 66):
        assert np.allclose(offsets_at(V, 30, 12, step), offsets_at(U, 24, 12, step))
    assert np.allclose(V[-1], U[-1])


def test_the_planners_offsets_pitch_roll_and_yaw_the_legs_as_named(rig):
    """Each offset DOF turns its body about the axis its name says: the hips' and ankles' pitch
    about the character's left-right (world x at rest), roll about its forward axis (y) and the
    hips' yaw about the vertical (z), which turns the foot's toe line (a turning step)."""
    from engine.control.balance import offset_dofs
    from engine.control.plan import QSpace
    from engine.kinematics import forward_kinematics, q_to_pose, rest_q
    from engine.transforms import matrix_to_axis_angle

    plain, yawed = offset_dofs(rig), offset_dofs(rig, hips_yaw=True)
    assert len(plain) == 10 and list(yawed[:10]) == list(plain) and len(yawed) == 12
    space, q0 = QSpace(rig), rest_q(rig)
    rest_rot = forward_kinematics(rig, *q_to_pose(rig, q0))[2]
    bodies = ["FemurR", "FemurL", "TalusR", "TalusL"]
    names = [(b, k) for b in bodies for k in (0, 1)] + [("Spine", 0), ("Spine", 1), ("FemurR", 2), ("FemurL", 2)]
    for dof, (body, axis) in zip(yawed, names):
        dv = np.zeros(rig.num_dofs)
        dv[dof] = 0.2
        rot = forward_kinematics(rig, *q_to_pose(rig, space.add(q0, dv)))[2]
        foot = rig.body_index("Talus" + body[-1]) if body != "Spine" else rig.body_index("Head")
        w = matrix_to_axis_angle(rot[foot] @ rest_rot[foot].T)
        assert np.linalg.norm(w) == pytest.approx(0.2, abs=1e-9)
        assert abs(w[axis]) == pytest.approx(0.2, abs=1e-9), (body, axis, w)


def _walk_sim(rig, seconds):
    from engine.control.plan import MotionPlan, load_clip
    from engine.simulation import Simulation

    sim = Simulation(rig, "mujoco")
    ref, name = load_clip(rig, MOTION_DIR / "walk.bvh")
    plan = MotionPlan(rig, [(ref, seconds, name)])
    q0, v0, _ = plan.sample(0)
    q0[2] += 0.02
    sim.physics.set_q(q0, v0)
    sim.state = sim.physics.body_state()
    return sim, plan


def test_a_squat_in_the_clip_is_not_a_fall(rig):
    """MASS's one-leg balance squats on one leg to a pelvis 0.55 m up. A rollout that follows
    it there is not a fall (the planner's fall_height, 0.7 m, alone made every plan that
    followed the squat one, and the planner held the body up until it fell at 1.5 s), nor is
    the take stopped there (engine.take.is_down); 0.4 m below a walk's pelvis is."""
    from engine.control.balance import FALL_COST, BalanceParams, BalancePlanner, Shadow, snapshot
    from engine.control.plan import MotionPlan, load_clip
    from engine.simulation import Simulation
    from engine.take import is_down

    ref, name = load_clip(rig, MOTION_DIR / "balance.bvh")
    plan = MotionPlan(rig, [(ref, 0.5, name)])
    plan.segments[0].phase = int(1.3 * 120)  # the bottom of the squat
    q, v, _ = plan.sample(0)
    sim = Simulation(rig, "mujoco")
    sim.physics.set_q(q, v)
    sim.state = sim.physics.body_state()
    params, b = TrackingParams(residual=0.0), BalanceParams(horizon=24)
    planner = BalancePlanner(sim, plan, params, b)
    shadow = Shadow(sim, plan, params, b)
    shadow.load(snapshot(sim, planner))
    cost = shadow.play(np.zeros_like(planner.U), 0)
    assert q[2] < 0.6 < b.fall_height and shadow.trace is not None and cost < FALL_COST
    assert not is_down(q[2] - 0.1, q[2]) and is_down(0.1, q[2])
    assert is_down(0.45, 0.93) and not is_down(0.52, 0.93)


def test_offset_tracker_without_offsets_is_the_tracker(rig):
    """The planner's tracker with a zero plan makes the tracker's decisions bit for bit, and an
    offset plan changes its reference at the planned DOFs only (the swing-foot law off: it
    moves the reference wherever the body's velocity is not the clip's)."""
    from engine.control.balance import BalanceParams, OffsetTracker
    from engine.control.tracking import TrackingController

    params = TrackingParams(residual=0.0)
    runs = []
    for cls in (TrackingController, OffsetTracker):
        sim, plan = _walk_sim(rig, 1.0)
        ctl = (cls(sim, plan, params) if cls is TrackingController
               else cls(sim, plan, params, BalanceParams(feedback=0.0)))
        acts = []
        for _ in range(12):
            cmd = ctl.act(sim, sim.state)
            acts.append(cmd.activation)
            sim.step(cmd)
        runs.append(np.array(acts))
    assert np.array_equal(runs[0], runs[1])
    q, qd = sim.physics.get_q()
    ctl.U = np.full_like(ctl.U, 0.05)
    a_off, q_off = ctl.wanted_acceleration(q, qd, sim.steps)
    ctl.U = np.zeros_like(ctl.U)
    a0, q0 = ctl.wanted_acceleration(q, qd, sim.steps)
    moved = np.flatnonzero(np.abs(plan.space.diff(q0, q_off)) > 1e-9)
    assert set(moved) == set(ctl.dofs)
    assert np.allclose((a_off - a0)[ctl.dofs], params.kp * 0.05, rtol=0.05)  # ball joints: not quite additive


@pytest.mark.parametrize("widen, keep_below", [(0, 0.0), (3, 0.0), (0, 1.0)])
def test_balance_planner_is_the_same_in_workers_and_in_process(rig, widen, keep_below):
    """Candidates played in two forked workers or in this process pick the same plans: the
    take is the same (assert_same_take: each rollout starts from the snapshot, nothing else),
    also where eq. (6) widens the search (the workers prune against the bound it hands them)
    and where eq. (7) keeps the last plan or hands its cost to the workers as their bound."""
    from engine.control.balance import BalanceParams
    from engine.take import simulate

    seconds = 0.8 if keep_below else 0.3  # eq. (7) from the sixth decision on
    takes = [simulate(rig, [(MOTION_DIR / "walk.bvh", seconds)], seed=1, fps=120, progress=lambda f: None,
                      params=TrackingParams(residual=0.0, balance=BalanceParams(candidates=5, horizon=24, workers=w,
                                                                                 widen=widen, keep_below=keep_below)))
             for w in (0, 2)]  # 5 candidates: dealt 3 and 2 to the workers
    assert_same_take(*takes)
    b = takes[0].meta["balance"]
    assert b["widened"] == takes[1].meta["balance"]["widened"] == (3 if widen else 0)  # the first decisions widen
    assert b["kept_cheap"] == takes[1].meta["balance"]["kept_cheap"]
    assert b["plans"] == round(seconds / 0.1) and takes[0].meta["tracking"]["balance"]["candidates"] == 5
    assert b["mean_best_cost"] == takes[1].meta["balance"]["mean_best_cost"]
    assert b["offset_deg_max"] > 0  # it steered


def test_the_chosen_plans_rollout_is_continued_not_played_again(rig, monkeypatch):
    """The plan chosen at a decision is the next one's nominal candidate: where the take has
    followed it to the bit, its rollout's last steps are that candidate's first, so only the
    last `replan` steps are played. The take is the same bit for bit as with every candidate
    played afresh in this process (and the same plans in workers: assert_same_take), a push included (while it acts, the take's
    state is not the rollout's, and the candidate is played afresh)."""
    from engine.control import balance as bal
    from engine.take import simulate

    def take(workers):
        return simulate(rig, [(MOTION_DIR / "walk.bvh", 0.6)], seed=5, fps=120, progress=lambda f: None,
                        pushes=["0.25:0,80,0:0.1"],
                        params=TrackingParams(residual=0.0, balance=bal.BalanceParams(candidates=5, horizon=36, workers=workers)))

    continued = {w: take(w) for w in (0, 2)}
    monkeypatch.setattr(bal.BalancePlanner, "followed", lambda self, snap, now: None)
    afresh = take(0)
    b, b0 = continued[0].meta["balance"], afresh.meta["balance"]
    t = continued[0]
    assert np.array_equal(t.q, afresh.q) and np.array_equal(t.activation, afresh.activation)
    assert t.meta["balance"]["mean_best_cost"] == b0["mean_best_cost"]
    assert_same_take(continued[2], afresh)
    # 6 decisions: the first has no last plan, the push's (0.25-0.35 s) starts at 3 and 4 differ
    assert b0["continued_share"] == 0 and 0 < b["continued_share"] < 1 and b["continued_share"] <= 3 / 6
    assert b["rollout_steps"] < b0["rollout_steps"]


def test_successive_halving_keeps_the_plans_its_rule_names(rig):
    """BalanceParams.halving at one decision, against the rule applied to every plan's costs
    played to the end: after round r (every 24 steps of 96) the best halving[r] sampled plans
    by running cost go on, less those already past the nominal's cost; the survivors' costs
    are their full sums to the bit, every other plan costs inf, and the argmin is the rule's."""
    from engine.control.balance import BalanceParams, BalancePlanner, Shadow, snapshot

    sim, plan = _walk_sim(rig, 2.0)
    params = TrackingParams(residual=0.0)
    b = BalanceParams(candidates=8, halving=(4, 2, 1))
    planner = BalancePlanner(sim, plan, params, b, seed=2)
    planner.U = np.full_like(planner.U, 0.03)  # a nominal that is not the no-offset plan
    snap, plans = snapshot(sim, planner), planner.candidates(0)
    got = planner.halved(snap, plans, 0, None)
    shadow = Shadow(sim, plan, params, b)
    full, running = [], []
    for U in plans:
        shadow.load(snap)
        full.append(shadow.play(U, 0))
        sums, total = [], 0.0
        for c in shadow.trace.costs:
            total += c
            sums.append(total)
        running.append(sums)
    alive, bound = list(range(1, 8)), full[0]
    for r, n in enumerate(b.halving):
        at = lambda j: running[j][24 * (r + 1) - 1]
        alive = sorted((j for j in alive if r == 0 or at(j) <= bound), key=lambda j: (at(j), j))[:n]
    assert alive and all(got[j] == full[j] for j in [0] + alive if got[j] < np.inf)
    assert all(got[j] == np.inf for j in range(1, 8) if j not in alive)
    assert int(np.argmin(got)) == min([0] + alive, key=lambda j: (full[j], j))
    assert planner.rollout_steps < 8 * 96 - 100  # 96 + 7 x 24 + 4 x 24 + 2 x 24 + 24 at most: 432


def test_successive_halving_is_the_same_in_workers_and_in_process(rig, monkeypatch):
    """Halving plays its rounds in the take's process whatever the workers (on the workers its
    takes once differed at round-off, DESIGN.md "Same bits"): a take with halving chooses the same plans
    with two workers as without, and plays fewer rollout steps than a take without halving
    (both stopping a rollout at the plain bound: with the offsets' term ahead as well, the
    whole search of this small set costs about what halving does). The take is twice the
    horizon: its last 0.4 s plays no rollout step past its end (eq. 8), which leaves halving's
    last rounds less to drop."""
    from engine.control import balance as bal
    from engine.control.balance import BalanceParams
    from engine.take import simulate

    def take(workers, halving):
        return simulate(rig, [(MOTION_DIR / "walk.bvh", 0.8)], seed=4, fps=120, progress=lambda f: None,
                        params=TrackingParams(residual=0.0, balance=BalanceParams(candidates=7, horizon=48, halving=halving, widen=0,
                                                                                  workers=workers)))

    monkeypatch.setattr(bal, "offset_costs_ahead", lambda U, start, knot, w, until: np.zeros(until))
    here, forked, whole = take(0, (3,)), take(2, (3,)), take(0, ())
    assert_same_take(here, forked)
    assert here.meta["balance"]["rollout_steps"] < whole.meta["balance"]["rollout_steps"]
    assert 0 < here.meta["balance"]["continued_share"] < 1
    from engine.commands.take_report import balance

    assert "7 candidates 0.4 s ahead, halved to 3 of them every 0.2 s;" in balance(here.meta["balance"])
    assert "ahead; the last plan" in balance(whole.meta["balance"])


def test_a_killed_planner_worker_does_not_lose_the_take(rig, capfd):
    """A worker process killed from outside mid-take (the OOM killer, a user's kill -9): the
    planner plans on in the take's process and the take ends as it would have (the same plans),
    saying so in its metadata and on stderr (a multiprocessing Pool waited for ever)."""
    import multiprocessing as mp
    import os
    import signal

    from engine.control.balance import BalanceParams
    from engine.take import simulate

    killed = []

    def kill_one(fraction):
        if fraction > 0.4 and not killed:
            procs = mp.active_children()
            assert procs, "the planner's workers should be running"
            os.kill(procs[0].pid, signal.SIGKILL)
            killed.append(procs[0].pid)

    takes = [simulate(rig, [(MOTION_DIR / "walk.bvh", 0.3)], seed=3, fps=120, progress=p,
                      params=TrackingParams(residual=0.0, balance=BalanceParams(candidates=4, horizon=12, workers=w)))
             for w, p in ((0, lambda f: None), (2, kill_one))]
    assert killed
    assert_same_take(*takes)
    lost = takes[1].meta["balance"]["workers_lost"]
    assert "worker process ended" in lost and takes[0].meta["balance"]["workers_lost"] is None
    assert "planned on in the take's process" in capfd.readouterr().err
    from engine.commands.take_report import balance

    assert balance(takes[1].meta["balance"]).endswith(lost) and "ended" not in balance(takes[0].meta["balance"])
    assert not takes[1].meta["partial"] and not mp.active_children()  # whole, and no worker left behind


def test_a_worker_prunes_against_the_cheapest_plan_any_worker_played(rig):
    """The workers share the cheapest cost played so far in a decision: a rollout stops as soon
    as its running sum passes it (it cannot win), and a worker's finished plan lowers it for
    the others - never raises it."""
    import multiprocessing as mp

    from engine.control.balance import BalanceParams, Shadow, snapshot
    from engine.control.tracking import TrackingController

    sim, plan = _walk_sim(rig, 1.0)
    params, b = TrackingParams(residual=0.0), BalanceParams(horizon=12)
    snap = snapshot(sim, TrackingController(sim, plan, params))
    shadow = Shadow(sim, plan, params, b)
    U = np.zeros((b.knots, 10))
    (alone,), n_alone, _ = shadow.play_all(snap, [U], 0)
    assert np.isfinite(alone) and alone > 0 and n_alone == 12
    shadow.shared_best = mp.get_context("fork").RawValue("d", alone / 2)  # another worker found a cheaper plan
    (cut,), n_cut, _ = shadow.play_all(snap, [U], 0)
    assert cut == np.inf and 1 <= n_cut < 12 and shadow.shared_best.value == alone / 2
    shadow.shared_best.value = np.inf  # a new decision
    (again,), _, _ = shadow.play_all(snap, [U], 0)
    assert again == alone and shadow.shared_best.value == alone  # the same rollout, and it now bounds the rest


def test_a_rollouts_tail_counts_its_last_steps_mean_for_the_steps_beyond_the_horizon(rig, monkeypatch):
    """Eq. (3): with a tail, a rollout's cost is its horizon's sum plus `tail` times the mean
    cost of its last `replan` steps; and a fall counts FALL_COST for every step the cost stands
    for, the tail's too. The per-step cost is replaced by the step count so the sum is known."""
    from engine.control import balance as bal

    sim, plan = _walk_sim(rig, 1.0)
    params = TrackingParams(residual=0.0)
    monkeypatch.setattr(bal, "rollout_cost", lambda sim, ctl: float(sim.steps))
    costs = {}
    for tail in (0, 30):
        b = bal.BalanceParams(horizon=24, replan=12, tail=tail)
        snap = bal.snapshot(sim, bal.OffsetTracker(sim, plan, params, b))
        shadow = bal.Shadow(sim, plan, params, b)
        (costs[tail],), played, _ = shadow.play_all(snap, [np.zeros((b.knots, 10))], 0)
        assert played == 24
    assert costs[0] == sum(range(1, 25))
    assert costs[30] == pytest.approx(costs[0] + 30 * np.mean(range(13, 25)))
    b = bal.BalanceParams(horizon=24, tail=30, fall_height=5.0, fall_drop=-5.0)  # every state a fall (not validated)
    shadow = bal.Shadow(sim, plan, params, b)
    (fallen,), _, _ = shadow.play_all(bal.snapshot(sim, bal.OffsetTracker(sim, plan, params, b)), [np.zeros((b.knots, 10))], 0)
    assert fallen == 1.0 + bal.FALL_COST * 54


def test_the_swing_hip_is_placed_by_the_centre_of_mass_velocity_error(rig):
    """engine.control.feedback eq. (1): at the reference's own state nothing moves; a body
    0.5 m/s faster than the reference along the pelvis's forward swings the swing leg (the
    higher foot's in the reference) forward by gain x 0.5 rad, and to the left when faster to
    the left; the stance hip is left alone; a large error is capped at the limit."""
    import mujoco

    from engine.control import feedback as fb
    from engine.control.plan import MotionPlan, load_clip
    from engine.simulation import Simulation

    sim = Simulation(rig, "mujoco")
    ref, name = load_clip(rig, MOTION_DIR / "walk.bvh")
    plan = MotionPlan(rig, [(ref, 2.0, name)])
    law = fb.SwingPlacement(rig, plan.space.model, gain=0.2)
    m, d = sim.physics.model, sim.physics.data
    (hip_r, hip_l), swung = law.hips, []
    for frame in range(0, 130, 13):
        q, v, _ = plan.sample(frame)
        sim.physics.set_q(q, v)
        assert np.abs(law(m, d, q, v)).max() < 1e-9
        R = d.xmat[1].reshape(3, 3)
        forward = -R[:2, 1] / np.linalg.norm(R[:2, 1])
        left = np.array([-forward[1], forward[0]])
        law.gain = 0.2
        rd = mujoco.MjData(plan.space.model)
        rd.qpos[:] = q
        mujoco.mj_kinematics(plan.space.model, rd)
        w_right = 1.0 / (1.0 + np.exp(-(rd.xpos[law.feet[0], 2] - rd.xpos[law.feet[1], 2]) / fb.SWING_BLEND_M))
        swung.append(w_right)
        for direction, dof in ((forward, 0), (left, 1)):
            faster = v.copy()
            faster[:2] += 0.5 * direction
            sim.physics.set_q(q, faster)
            dv = law(m, d, q, v)
            assert np.count_nonzero(dv) <= 4 and abs(dv.sum() - dv[list(hip_r) + list(hip_l)].sum()) < 1e-12
            for hip, w in ((hip_r, w_right), (hip_l, 1.0 - w_right)):
                assert dv[hip[dof]] == pytest.approx(-0.1 * w, abs=1e-6) and abs(dv[hip[1 - dof]]) < 1e-6
        law.gain = 100.0  # capped
        assert np.abs(law(m, d, q, v)).max() <= fb.LIMIT_RAD + 1e-12
    assert min(swung) < 0.05 and max(swung) > 0.95  # each leg swung in the frames tried


def test_planner_resumed_at_a_checkpoint_plays_on_bit_for_bit(rig):
    """BalancePlanner.checkpoint / resume (the start states of a DAgger run): a planner put back
    at a checkpoint from another state plays the same steps again, bit for bit: the same
    activations and the same physics."""
    from engine.control.balance import BalanceParams, BalancePlanner
    from engine.control.plan import MotionPlan, load_clip
    from engine.simulation import Simulation

    ref, name = load_clip(rig, MOTION_DIR / "walk.bvh")
    plan = MotionPlan(rig, [(ref, 2.0, name)])
    sim = Simulation(rig)
    q0, v0, _ = plan.sample(0)
    sim.start_at(q0, v0)
    planner = BalancePlanner(sim, plan, TrackingParams(residual=0.0), BalanceParams(candidates=4, horizon=24), seed=1)

    def play(n):
        acts = []
        for _ in range(n):
            cmd = planner.act(sim, sim.state)
            sim.step(cmd)
            acts.append(cmd.activation.copy())
        return np.array(acts), sim.physics.get_q()[0].copy()

    play(18)  # mid-plan: the checkpoint holds a plan made 6 steps ago, set here to steer for sure
    planner.U = np.full_like(planner.U, 0.05)
    cp = planner.checkpoint(sim)
    planner.resume(sim, cp, seed=5)
    first, q_first = play(30)  # two replans: the plan, the solver's warm start, the pace, the contacts carried
    play(7)  # on, elsewhere
    planner.resume(sim, cp, seed=5)
    again, q_again = play(30)
    assert np.array_equal(first, again) and np.array_equal(q_first, q_again)
    assert np.isfinite(q_again).all() and q_first[2] > 0.8


def test_candidates_spread_their_noise_from_sigma_min_to_sigma(rig):
    """The candidates: the last plan shifted, no offsets, then the shifted plan x decay plus
    Gaussian noise whose scale runs evenly from sigma_min to sigma over them."""
    from engine.control.balance import BalanceParams, BalancePlanner

    sim, plan = _walk_sim(rig, 1.0)
    b = BalanceParams(candidates=42, sigma_min=0.02, sigma=0.12, hips_yaw=1.0)
    ctl = BalancePlanner(sim, plan, TrackingParams(residual=0.0, balance=b), b, seed=1)
    ctl.U = np.full_like(ctl.U, 0.2)
    plans = np.array(ctl.candidates(0))
    assert np.array_equal(plans[0], ctl.U) and not plans[1].any()
    noise = plans[2:] - b.decay * ctl.U
    spread = noise.reshape(len(noise), -1).std(axis=1)
    want = np.linspace(0.02, 0.12, 40)
    assert np.all(np.abs(spread / want - 1) < 0.35)  # 120 draws each (10 knots x 12 DOFs): ~6 % sampling error
    slope = np.polyfit(want, spread, 1)[0]
    assert 0.85 < slope < 1.15
    ctl.close()
    # the hips' yaw (the last two DOFs) at hips_yaw times the others' scale, the same draws
    half = BalanceParams(candidates=42, sigma_min=0.02, sigma=0.12, hips_yaw=0.5)
    ctl = BalancePlanner(sim, plan, TrackingParams(residual=0.0, balance=half), half, seed=1)
    ctl.U = np.full_like(ctl.U, 0.2)
    halved = np.array(ctl.candidates(0))[2:] - half.decay * ctl.U
    assert np.array_equal(halved[..., :-2], noise[..., :-2]) and np.allclose(halved[..., -2:], 0.5 * noise[..., -2:])
    ctl.close()


def test_the_planner_steers_the_root_back_onto_the_clips_path():
    """Eq. (2): the velocity the cost asks for is the clip's, plus what closes the root's
    horizontal error in path_time, capped at path_speed."""
    from engine.control.balance import BalanceParams, path_velocity

    b = BalanceParams(path_time=0.5, path_speed=0.3)
    v_ref = np.array([1.2, 0.1])
    assert np.allclose(path_velocity(np.zeros(2), np.zeros(2), v_ref, b), v_ref)
    assert np.allclose(path_velocity(np.array([0.0, 0.0]), np.array([0.1, 0.0]), v_ref, b), [1.4, 0.1])  # 0.1 m / 0.5 s
    far = path_velocity(np.array([1.0, 1.0]), np.zeros(2), v_ref, b)  # 1.4 m off: capped, pointing back
    assert np.linalg.norm(far - v_ref) == pytest.approx(0.3)
    assert np.allclose((far - v_ref) / 0.3, [-np.sqrt(0.5), -np.sqrt(0.5)])


def test_the_costs_pelvis_tilt_is_the_rotation_vectors_roll_and_pitch():
    """Eq. (1)'s tilt term, written in floats for the rollouts, equals |(roll, pitch)|^2 of the
    rotation vector of q_ref q^-1 from engine.transforms, for random and nearly equal
    orientations (angles near 0 and near pi, quaternions of either sign)."""
    from engine.control.balance import pelvis_tilt_sq
    from engine.transforms import quat_conjugate, quat_multiply, quat_normalize, quat_to_axis_angle

    rng = np.random.default_rng(5)
    for i in range(200):
        a = quat_normalize(rng.normal(size=4))
        b = a * (-1) ** i + (rng.normal(scale=10.0 ** -rng.integers(1, 9), size=4) if i % 2 else rng.normal(size=4))
        b = quat_normalize(b)
        want = quat_to_axis_angle(quat_multiply(a, quat_conjugate(b)))[:2]
        assert pelvis_tilt_sq(a, b) == pytest.approx(float(want @ want), rel=1e-9, abs=1e-18)


@pytest.mark.parametrize("turn", [None, -90.0])
def test_a_real_capture_walks_on_its_path(rig, tmp_path, turn):
    """The CMU walk (another person, another skeleton, 120 fps) played for its own length with
    no residual: the root stays on the clip's path. With the clip's velocity alone in the
    planner's cost the take fell 10 % behind the clip's stride and ended 38 cm off it (24 on
    average); eq. (2) steers it back. Bent onto an arc that turns it 90 deg to its right over
    its 2.6 s (a curved path, ~2.5 m in radius on the model) it stays on the arc on average
    (the issue's bar) and ends near it: four draws end 2-30 cm off the arc, 5-14 cm on
    average, since the clip is grounded on its own frames (forty-fourth session; 2-19 and
    5-9 before)."""
    from engine.control.balance import BalanceParams
    from engine.motion import read_bvh, write_bvh
    from engine.take import simulate

    path = clips.MOCAP_DIR / "cmu_07_01_walk.bvh"
    if turn is not None:
        write_bvh(tmp_path / "curved.bvh", clips.curved(read_bvh(path), turn))
        path = tmp_path / "curved.bvh"
    take = simulate(rig, [(path, 2.6)],
                    params=TrackingParams(residual=0.0, balance=BalanceParams(workers=2)), progress=lambda f: None)
    s = take.meta["summary"]
    assert not s["fell"] and np.abs(take.residual_force).max() == 0.0
    assert s["joint_err_deg_mean"] <= 6.0
    off = np.linalg.norm(take.q[:, :2] - take.q_ref[:, :2], axis=1)
    assert off.mean() <= 0.15 and off[-1] <= (0.15 if turn is None else 0.4)


def test_balance_options_are_checked(rig):
    from engine.control.balance import BalanceParams
    from engine.errors import ParameterError
    from engine.take import check_balance

    with pytest.raises(ParameterError, match="residual"):
        TrackingParams(residual=1.0, balance=BalanceParams()).validate()
    with pytest.raises(ParameterError, match="balance.candidates"):
        TrackingParams(residual=0.0, balance=BalanceParams(candidates=1)).validate()
    with pytest.raises(ParameterError, match="balance.sigma_min"):
        TrackingParams(residual=0.0, balance=BalanceParams(sigma_min=0.2, sigma=0.1)).validate()
    for halving, says in (((4, 8), "none more than the last"), ((8,), "under the 7 sampled plans"),
                          ((0,), "whole numbers >= 1"), ((6, 4), "not a multiple of replan")):
        with pytest.raises(ParameterError, match=f"balance.halving.*{says}"):
            BalanceParams(halving=halving).validate()
    for bad, says in ((dict(extra=-1), "whole number >= 0"), (dict(extra=2.5), "whole number"),
                      (dict(extra_above=0.5), ">= 1"), (dict(extra_above=float("inf")), "finite"),
                      (dict(extra_sigma=-0.1), ">= 0"), (dict(keep_below=-1.0), ">= 0"),
                      (dict(keep_below=float("nan")), "finite"), (dict(hips_yaw=-0.5), ">= 0"),
                      (dict(rescue=-1), "whole number >= 0"), (dict(rescue_sigma=float("nan")), "finite")):
        with pytest.raises(ParameterError, match=f"'balance.{next(iter(bad))}': .*{says}"):
            BalanceParams(**bad).validate()
    with pytest.raises(ParameterError, match="--residual"):
        check_balance("tracking", True, 0.5)
    with pytest.raises(ParameterError, match="--balance"):
        check_balance("policy", True, None)
    assert check_balance("tracking", True, None)[1] == 0.0 and check_balance("tracking", False, None) == (None, 0.0)
    # the default (None): the planner for the tracker, unless a residual is asked for or the backend is ODE
    planned, residual = check_balance("tracking", None, None)
    assert isinstance(planned, BalanceParams) and residual == 0.0
    assert check_balance("tracking", None, 0.0)[0] is not None
    assert check_balance("tracking", None, 0.5) == (None, 0.5)
    assert check_balance("tracking", None, None, backend="ode") == (None, 0.0)
    assert check_balance("policy", None, None) == (None, 0.0)
    from engine.take import simulate

    with pytest.raises(ParameterError, match="--balance.*--backend mujoco"):
        simulate(rig, [(MOTION_DIR / "walk.bvh", 0.1)], backend="ode",
                 params=TrackingParams(residual=0.0, balance=BalanceParams()))
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "engine", "simulate", "--clip", str(MOTION_DIR / "walk.bvh"),
                        "--residual", "1", "--workers", "2"], capture_output=True, text=True)
    assert r.returncode == 2 and "--workers" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_workers_beyond_the_candidates_are_capped_with_a_note(capsys):
    """A worker plays at least one candidate a plan: --workers 1000 once forked 1,000 processes
    (11 GB) for 16 candidates."""
    from engine.control.balance import BalanceParams
    from engine.take import check_balance

    balance, _ = check_balance("tracking", True, None, 1000)
    assert balance.workers == BalanceParams().candidates == 8
    assert "--workers 1000" in capsys.readouterr().err
    assert check_balance("tracking", True, None, 3)[0].workers == 3


def test_workers_are_forked_by_default_on_linux_only(monkeypatch):
    """One planner process per core where forking is safe (Linux); 0 on Windows (no fork) and
    macOS (system libraries not fork-safe); workers asked for where there is no fork are
    refused by name."""
    import multiprocessing as mp
    import os
    import sys

    from engine.control.balance import BalanceParams, default_workers
    from engine.errors import ParameterError

    monkeypatch.setattr(sys, "platform", "linux")
    assert default_workers() == len(os.sched_getaffinity(0))
    for other in ("win32", "darwin"):
        monkeypatch.setattr(sys, "platform", other)
        assert default_workers() == 0
    monkeypatch.setattr(mp, "get_all_start_methods", lambda: ["spawn"])
    with pytest.raises(ParameterError, match="balance.workers.*cannot fork"):
        BalanceParams(workers=2).validate()
    assert BalanceParams(workers=0).validate().workers == 0


def test_balanced_walk_outlasts_the_tracker_alone(tmp_path):
    """Residual 0 from the walk's first frame: the tracker alone (`--no-balance`) falls after
    ~3 s; `sinew simulate`, which plans its balance by default, walks on (4.5 s here) near the
    reference's joints and speed, and the report says how it balanced."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "engine", "simulate", "--clip", f"{MOTION_DIR / 'walk.bvh'}:4.5", "--no-plots",
           "--json"]
    alone = subprocess.run(cmd + ["--no-balance", "--out", str(tmp_path / "alone")], capture_output=True, text=True)
    assert alone.returncode == 0, alone.stderr
    assert json.loads(alone.stdout.strip().splitlines()[-1])["fell"]
    r = subprocess.run(cmd + ["--out", str(tmp_path / "balanced")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert not s["fell"] and s["residual_max_N"] == 0.0
    assert s["joint_err_deg_mean"] <= 6.0
    from engine.take import load_take

    take = load_take(tmp_path / "balanced" / "take.npz")
    speed, ref = speeds_from(take, 2.5)  # two strides
    assert abs(speed - ref) <= 0.1 * ref
    assert "balance     planned ahead without the residual" in r.stderr


def test_balanced_walk_of_a_transformed_capture(rig, tmp_path):
    """The planner is tuned on no clip: a copy of the bundled walk mirrored (left and right
    swapped), played at 0.8 of its pace and captured at 30 fps walks like the original (4 s
    here; 10 s of the mirrored, 0.65x and 1.25x copies in benchmarks/balance_takes.py:
    3.3-3.7 deg against the original's 3.4), at the reference's speed."""
    from engine.control.balance import BalanceParams
    from engine.take import simulate

    path = clips.variant_file(tmp_path, "walk", mirrored=True, tempo=0.8, fps=30)
    take = simulate(rig, [(path, 4.0)], params=TrackingParams(residual=0.0, balance=BalanceParams(workers=2)),
                    progress=lambda f: None)
    s = take.meta["summary"]
    assert not s["fell"] and np.abs(take.residual_force).max() == 0.0
    assert s["joint_err_deg_mean"] <= 6.0
    speed, ref = speeds_from(take, 2.0)
    assert abs(speed - ref) <= 0.1 * ref
    assert ref == pytest.approx(0.8 * 1.25, rel=0.1)  # the bundled walk's 1.25 m/s at 0.8 of its pace


def test_a_shove_makes_the_planner_search_more_and_the_report_says_so(rig):
    """Eq. (4): where the cheapest plan costs extra_above x the recent median, `extra` more are
    tried. A 300 N shove sideways sends the costs up: the pushed take searches more than the
    same take unpushed, and plays the same plans until the push; with extra 0 it never does."""
    from engine.commands.take_report import balance
    from engine.control.balance import BalanceParams
    from engine.take import simulate

    def take(pushes=(), extra=4):
        return simulate(rig, [(MOTION_DIR / "walk.bvh", 1.2)], seed=2, fps=30, progress=lambda f: None, pushes=pushes,
                        params=TrackingParams(residual=0.0, balance=BalanceParams(candidates=5, horizon=24, extra=extra,
                                                                                  widen=0)))

    calm, pushed, never = take(), take(("0.6:300,0,0:0.2",)), take(extra=0)
    c, p = calm.meta["balance"], pushed.meta["balance"]
    assert p["searched_more"] >= c["searched_more"] + 2 and 0 < p["found_more"] <= p["searched_more"]
    i = np.searchsorted(calm.times, 0.6)
    np.testing.assert_array_equal(calm.q[:i + 1], pushed.q[:i + 1])
    assert never.meta["balance"]["searched_more"] == 0
    assert f", 4 more tried at {p['searched_more']} hard decisions (a cheaper plan at {p['found_more']})" in balance(p)
    assert "more tried" not in balance(never.meta["balance"])


def test_where_every_plan_falls_the_planner_searches_wider_and_the_report_says_so(rig):
    """Eq. (9): a 1500 N shove sideways leaves no candidate of five standing within their
    0.2 s; the planner then plays `rescue` more, wider. The same plans up to the shove as the
    take without the rescue, which never does it; the same take to the bit with two worker
    processes; and the report says how many found a plan that stays up."""
    from engine.commands.take_report import balance
    from engine.control.balance import BalanceParams
    from engine.take import simulate

    def take(rescue, workers=0):
        return simulate(rig, [(MOTION_DIR / "walk.bvh", 1.2)], seed=2, fps=30, progress=lambda f: None,
                        pushes=("0.6:0,1500,0:0.2",),
                        params=TrackingParams(residual=0.0, balance=BalanceParams(candidates=5, horizon=24,
                                                                                  rescue=rescue, workers=workers)))

    rescued, never = take(6), take(0)
    assert_same_take(rescued, take(6, workers=2))
    r, n = rescued.meta["balance"], never.meta["balance"]
    assert r["rescues"] >= 1 and 0 <= r["rescued"] <= r["rescues"] and n["rescues"] == 0
    i = np.searchsorted(rescued.times, 0.6)
    np.testing.assert_array_equal(rescued.q[:i + 1], never.q[:i + 1])
    assert f", 6 wider where every plan fell, at {r['rescues']} decision" in balance(r)
    assert "wider where" not in balance(n)


def test_no_rollout_step_is_played_past_the_takes_end(rig):
    """Eq. (8): a plan is judged by what the take shows. A 0.3 s take decides at 0, 0.1 and
    0.2 s with three candidates 0.8 s ahead: played past the end that is ~700 rollout steps,
    within it at most 3 x (36 + 24 + 12) (the nominal continued where it was followed: fewer),
    and the take ends on its own step with no fall."""
    from engine.control.balance import BalanceParams
    from engine.take import simulate

    take = simulate(rig, [(MOTION_DIR / "walk.bvh", 0.3)], seed=0, progress=lambda f: None,
                    params=TrackingParams(residual=0.0, balance=BalanceParams(candidates=3, extra=0, rescue=0, widen=0)))
    b = take.meta["balance"]
    assert b["plans"] == 3 and 0 < b["rollout_steps"] <= 3 * (36 + 24 + 12)
    assert not take.meta["summary"]["fell"] and take.times[-1] == pytest.approx(0.3, abs=1 / 60)


def test_the_planner_bench_times_a_long_takes_steady_cost(rig):
    """`sinew bench --balance S` times the first S seconds of a take one horizon longer, so no
    timed rollout is cut by the take's end (eq. 8): it stops at S and plays more rollout steps a
    take step than a take S long, whose last 0.8 s eq. (8) cuts."""
    from engine.commands.bench_controllers import bench_balance
    from engine.control.balance import BalanceParams
    from engine.take import simulate

    summary, lines = bench_balance(0.2)
    short = simulate(rig, [(MOTION_DIR / "walk.bvh", 0.2)], fatigue=fat.FatigueParams(scale=0.0), progress=lambda f: None,
                     params=TrackingParams(residual=0.0, balance=BalanceParams()))
    per_step = short.meta["balance"]["rollout_steps"] / short.meta["timing"]["steps"]
    assert lines[0].startswith("balance planner, fresh walk without the residual, 0.2 s (one core)")
    assert summary["rollout_steps_per_step"] > per_step + 10 and not summary["fell"]


def test_a_costly_decision_widens_the_search_and_prunes_against_its_best(rig):
    """Eq. (6): where the candidates' cheapest costs more than widen_above x the recent median
    (or fewer than 5 decisions are behind), `widen` more plans of the same kind are played,
    each either costed as it is alone (eq. 1 over the horizon) or stopped once past that
    cheapest one; a decision under the bar plays the candidates alone, and the report says
    how often it widened."""
    from engine.commands.take_report import balance
    from engine.control.balance import BalanceParams, BalancePlanner, snapshot
    from engine.take import simulate

    sim, plan = _walk_sim(rig, 1.0)
    b = BalanceParams(candidates=3, widen=4, horizon=24)
    ctl = BalancePlanner(sim, plan, TrackingParams(residual=0.0, balance=b), b, seed=4)
    snap, plans = snapshot(sim, ctl), ctl.candidates(0)
    costs = ctl.costs(snap, plans, 0)
    alone, played = ctl._local_shadow(), 0
    for k, first in enumerate((costs, [100 * c for c in costs])):  # as played; as if they had cost 100x more
        rng = copy.deepcopy(ctl.rng.bit_generator.state)
        wide, wide_costs = ctl.widened(snap, plans, first, 0)  # no decision behind yet: widened
        ctl.rng.bit_generator.state = rng  # the same plans both times
        assert len(wide) == 7 and wide_costs[:3] == first and ctl.widened_n == k + 1
        spread = (np.array(wide[3:]) - b.decay * plans[0]).reshape(4, -1).std(axis=1)
        assert np.all((spread > 0.7 * b.sigma_min) & (spread < 1.3 * b.sigma))  # about the shifted plan
        found = min(first)
        for U, c in zip(wide[3:], wide_costs[3:]):
            alone.load(snap)
            full = alone.play(U, 0)
            if np.isfinite(c):  # played to its horizon
                assert c == pytest.approx(full, rel=1e-12)
                played += 1
            else:  # stopped once past the cheapest found this decision: it could not have been chosen
                assert full >= found
            found = min(found, full)
        assert min(wide_costs) == pytest.approx(found, rel=1e-12)
    assert played >= 1  # (100x: the first at least)
    ctl._recent = [min(costs)] * 5  # the recent median: this decision's cheapest is under 1.5 x it
    assert ctl.widened(snap, plans, costs, 0) == (plans, costs) and ctl.widened_n == 2
    ctl.close()

    take = simulate(rig, [(MOTION_DIR / "walk.bvh", 1.0)], seed=2, fps=30, progress=lambda f: None,
                    params=TrackingParams(residual=0.0, balance=BalanceParams(candidates=3, widen=4, horizon=24)))
    m = take.meta["balance"]
    assert 5 <= m["widened"] < m["plans"]  # the first five always, then only the costly ones
    assert f"plans of 3 candidates (4 more at {m['widened']} of them)" in balance(m)


def test_a_cheap_last_plan_is_kept_without_playing_the_others(rig):
    """Eq. (7): where the last plan, continued, costs at most keep_below x the recent median,
    it is chosen and no other candidate is played (its cost: the same to the bit as played
    afresh); above the bar every candidate is played as before, each costed as it is alone or
    stopped once past the last plan's cost. A take kept so from its sixth decision on plays
    only `replan` rollout steps at each of them and is the searched take's until then."""
    from engine.commands.take_report import balance
    from engine.control.balance import BalanceParams, BalancePlanner, snapshot
    from engine.take import simulate

    sim, plan = _walk_sim(rig, 1.0)
    b = BalanceParams(candidates=4, horizon=24, keep_below=1.0)
    ctl = BalancePlanner(sim, plan, TrackingParams(residual=0.0, balance=b), b, seed=4)
    for _ in range(b.replan):  # one decision (at 0, searched: nothing behind it), followed to the next
        sim.step(ctl.act(sim, sim.state))
    ctl.advance_pace(sim)
    snap, plans, trace = snapshot(sim, ctl), ctl.candidates(b.replan), ctl._trace
    alone = ctl._local_shadow()
    full = []
    for U in plans:
        alone.load(snap)
        full.append(alone.play(U, b.replan))
    for median, kept in ((10 * full[0], True), (0.5 * full[0], False)):
        ctl._recent, ctl._trace, before = [median] * 5, trace, ctl.rollout_steps
        got = ctl.costs(snap, plans, b.replan)
        assert got[0] == pytest.approx(full[0], rel=1e-12)
        assert ctl.kept_cheap == 1
        if kept:
            assert got[1:] == [np.inf] * 3 and ctl.rollout_steps - before == b.replan
            continue
        found = got[0]  # the bound the others are played against, in order
        for c, f in zip(got[1:], full[1:]):
            if np.isfinite(c):
                assert c == pytest.approx(f, rel=1e-12)
            else:  # stopped once past the cheapest found: it could not have been chosen
                assert f >= found
            found = min(found, f)
    ctl.close()

    def take(keep_below):
        return simulate(rig, [(MOTION_DIR / "walk.bvh", 1.0)], seed=2, fps=120, progress=lambda f: None,
                        params=TrackingParams(residual=0.0, balance=BalanceParams(candidates=3, horizon=24, widen=0,
                                                                                  keep_below=keep_below)))
    searched, kept = take(0.0), take(1e6)
    m, m0 = kept.meta["balance"], searched.meta["balance"]
    assert m["kept_cheap"] == m["plans"] - 5 and m0["kept_cheap"] == 0  # every followed decision from the sixth
    i = 5 * b.replan
    np.testing.assert_array_equal(kept.q[:i + 1], searched.q[:i + 1])
    assert m["rollout_steps"] < m0["rollout_steps"]
    assert f"unsearched at {m['kept_cheap']}" in balance(m) and "unsearched" not in balance(m0)


def test_antithetic_candidates_come_in_mirrored_pairs_about_the_decayed_plan(rig):
    """BalanceParams.antithetic: the noisy candidates are decay x the shifted plan plus n_k and
    minus n_k, a pair at each scale from sigma_min to sigma (an odd count drops the last
    mirror); the shifted plan and no offsets lead as before."""
    from engine.control.balance import BalanceParams, BalancePlanner

    sim, plan = _walk_sim(rig, 1.0)
    for n in (8, 7):
        b = BalanceParams(candidates=n, antithetic=True)
        ctl = BalancePlanner(sim, plan, TrackingParams(residual=0.0, balance=b), b, seed=1)
        ctl.U = np.full_like(ctl.U, 0.02)
        plans = ctl.candidates(0)
        assert len(plans) == n and np.array_equal(plans[0], ctl.U) and not plans[1].any()
        noise = np.array(plans[2:]) - b.decay * ctl.U
        pairs = (n - 2) // 2
        for k in range(pairs):
            np.testing.assert_allclose(noise[2 * k], -noise[2 * k + 1], atol=1e-15)
        rms = np.sqrt((noise ** 2).reshape(n - 2, -1).mean(axis=1))
        assert rms[0] < rms[-1] and np.all((rms > 0.6 * b.sigma_min) & (rms < 1.4 * b.sigma))
        assert not np.allclose(noise[0], noise[2])  # pairs are drawn afresh
        ctl.close()


def test_a_rollout_stops_once_the_offsets_ahead_would_take_it_past_the_best(rig, monkeypatch):
    """offset_costs_ahead is eq. (1)'s offset term summed over the steps after each one (read
    at the physics step after it, as rollout_cost reads it), and a rollout stopped by it
    could not have won: the take is the same to the bit as with the plain bound, in fewer
    rollout steps."""
    from engine.control import balance as bal
    from engine.take import simulate

    U = np.random.default_rng(3).normal(scale=0.1, size=(10, 10))
    rest = bal.offset_costs_ahead(U, 24, 12, 0.1, 96)
    terms = [0.1 * float(u @ u) for u in (bal.offsets_at(U, 24, 12, 24 + t + 1) for t in range(96))]
    np.testing.assert_allclose(rest, [sum(terms[t + 1:]) for t in range(96)], rtol=1e-8, atol=1e-15)
    assert rest[-1] == 0.0 and np.all(rest <= np.array([sum(terms[t + 1:]) for t in range(96)]))

    def take():
        return simulate(rig, [(MOTION_DIR / "walk.bvh", 0.5)], seed=1, fps=120, progress=lambda f: None,
                        params=TrackingParams(residual=0.0, balance=bal.BalanceParams(candidates=6, horizon=36)))
    ahead = take()
    monkeypatch.setattr(bal, "offset_costs_ahead", lambda U, start, knot, w, until: np.zeros(until))
    plain = take()
    np.testing.assert_array_equal(ahead.q, plain.q)
    np.testing.assert_array_equal(ahead.activation, plain.activation)
    assert ahead.meta["balance"]["rollout_steps"] < plain.meta["balance"]["rollout_steps"]
