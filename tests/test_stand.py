"""The stand controller (engine.control.stand): a still reference held on the muscles alone
by an LQR about its nearest balanced pose. Issue 16's standing must-hold is in
test_balance.py; these check the pieces against independent computations."""
import mujoco
import numpy as np
import pytest

from engine.control import factory, stand
from engine.control.tracking import TrackingParams

from . import clips


@pytest.fixture(scope="module")
def physics(rig):
    from engine.physics.mujoco_backend import MujocoBackend

    return MujocoBackend(rig)


@pytest.fixture(scope="module")
def walk_q(rig):
    from engine.motion.retarget import retarget

    ref, _ = retarget(clips.bundled("walk"), rig)
    return ref.q


@pytest.fixture(scope="module")
def balanced(rig, physics, walk_q):
    """Frame 60 of the walk (both feet on the floor, the left heel up) balanced."""
    return stand.balanced_pose(physics.model, rig, walk_q[60])


def test_balanced_pose_is_a_static_equilibrium(rig, physics, walk_q, balanced):
    """At the balanced pose MuJoCo's inverse dynamics at rest needs no force and no torque at
    the root (all six components; the search weighs only the vertical force and the tipping
    torques): the floor's soft contacts carry the body. Its feet lie flat (the walk frame had a heel 11 cm up), and the
    pose stays near the frame."""
    q, u0, left = balanced
    m = physics.model
    d = mujoco.MjData(m)
    d.qpos[:] = q
    mujoco.mj_inverse(m, d)  # qvel and qacc are zero in fresh data
    weight = rig.mass_kg * 9.81
    assert left < 0.5
    assert np.abs(d.qfrc_inverse[:3]).max() < 0.002 * weight  # N; measured ~0.02 N
    assert np.abs(d.qfrc_inverse[3:6]).max() < 1.0  # N m
    np.testing.assert_allclose(u0, d.qfrc_inverse, atol=1e-6)  # u0 is what the muscles are asked to hold
    for name in ("TalusR", "TalusL"):
        b = rig.body_index(name)
        R = d.ximat[b + 1].reshape(3, 3) @ rig.body_rest_rot[b].T
        assert np.degrees(np.arccos(min(R[2, 2], 1.0))) < 2.0  # level within 2 deg
    heel_up = d.xipos[rig.body_index("TalusL") + 1, 2] - d.xipos[rig.body_index("TalusR") + 1, 2]
    assert abs(heel_up) < 0.005
    moved = np.zeros(m.nv)
    mujoco.mj_differentiatePos(m, moved, 1.0, walk_q[60], q)
    assert np.degrees(np.abs(moved[6:])).mean() < 6.0
    assert np.abs(moved[[0, 1]]).max() < 1e-9 and abs(moved[5]) < 1e-4  # kept where it stood


def test_linearisation_predicts_the_physics(physics, balanced):
    """A x from the finite-difference linearisation against MuJoCo stepped from a slightly
    disturbed state (another computation of the same step), the constraint solve converged
    as tightly as the linearisation's."""
    import copy

    q0, u0, _ = balanced
    m = copy.deepcopy(physics.model)
    m.opt.tolerance, m.opt.iterations = 1e-12, 1000
    A, B = stand.linearise(m, q0, u0)
    nv = m.nv
    rng = np.random.default_rng(3)
    d = mujoco.MjData(m)

    def step(dx, du):
        d.qpos[:] = q0
        mujoco.mj_integratePos(m, d.qpos, dx[:nv], 1.0)
        d.qvel[:] = dx[nv:]
        d.qacc_warmstart[:] = 0.0
        d.qfrc_applied[:] = 0.0
        d.qfrc_applied[6:] = u0[6:] + du
        mujoco.mj_step(m, d)
        out = np.zeros(nv)
        mujoco.mj_differentiatePos(m, out, 1.0, q0, d.qpos)
        return np.concatenate([out, d.qvel])

    base = step(np.zeros(2 * nv), np.zeros(nv - 6))
    from engine.physics.mujoco_backend import full_mass_matrix

    M = full_mass_matrix(m, d, np.zeros((nv, nv)))
    # small enough that no contact comes or goes (a toe's 0.1 N m already does: 36 % off)
    for dx, du in ((np.concatenate([1e-5 * rng.standard_normal(nv), np.zeros(nv)]), np.zeros(nv - 6)),
                   (np.concatenate([np.zeros(nv), 1e-4 * rng.standard_normal(nv)]), np.zeros(nv - 6)),
                   (np.zeros(2 * nv), 1e-3 * np.diag(M)[6:] * rng.standard_normal(nv - 6))):
        real = step(dx, du) - base
        pred = A @ dx + B @ du
        assert np.linalg.norm(real - pred) < 0.02 * np.linalg.norm(real)


def test_lqr_gain_stabilises_the_linear_model(physics, balanced):
    """The gain lqr_gains returns solves the Riccati equation it is built on: no mode of
    A - B K grows, and the discounted closed loop is strictly stable."""
    q0, u0, _ = balanced
    A, B = stand.linearise(physics.model, q0, u0)
    n = A.shape[0]
    K = stand.lqr_gains(A, B, np.eye(n), 1e-2 * np.eye(B.shape[1]))
    # the neutral modes (the body slid or turned on the floor) stay neutral, within the
    # finite differences' error; lqr_gains treats them as stable by the 1e-4 discount
    assert np.abs(np.linalg.eigvals(A - B @ K)).max() <= 1.0 + 1e-4
    Ad = (1.0 - 1e-4) * A
    assert np.abs(np.linalg.eigvals(Ad - B @ K)).max() < 1.0


def _take(rig, tmp_path, clip, seconds, residual, scale=1.0):
    from engine import fatigue as fat
    from engine.motion import write_bvh
    from engine.take import simulate

    path = tmp_path / "clip.bvh"
    write_bvh(path, clip)
    return simulate(rig, [(path, seconds)], params=TrackingParams(residual=residual),
                    fatigue=fat.FatigueParams(scale=scale), fps=30, progress=lambda f: None)


def test_stand_controller_only_for_a_still_reference_without_the_residual(rig, tmp_path):
    held = clips.hold(clips.bundled("walk"), 60)
    take = _take(rig, tmp_path, held, 0.5, residual=0.0)
    s = take.meta["stand"]
    assert s["mode"] == "stand" and s["activation_max"] < 0.6 and s["balance_left"] < 0.5
    from engine.commands.simulate import report_lines
    from engine.commands.take_report import glance_lines

    assert s["closed_loop_radius"] <= 1.0 + 1e-4  # the controller's own design: nothing grows
    assert any(line.startswith("stand       stand controller") for line in report_lines(take, []))
    assert any(line.startswith("- Stand: stand controller") for line in glance_lines(take))
    assert not any(line.startswith("gait") for line in report_lines(take, []))  # a held pose has none
    from engine.take_notes import notes, stand_note  # the Blender panel's notes, printed by the CLI too

    short = [line for line in report_lines(take, []) if line.startswith("in short")]
    assert short == ["in short    " + "; ".join(notes(take))] and stand_note(take) in short[0]
    assert _take(rig, tmp_path, held, 0.2, residual=1.0).meta["stand"] is None  # the analysis option
    assert _take(rig, tmp_path, clips.bundled("walk"), 0.2, residual=0.0).meta["stand"] is None  # moving


def test_the_tracker_takes_what_the_stand_controller_cannot(rig, tmp_path):
    """Two held poses chained (one LQR holds one pose) and the ODE backend (the LQR is
    designed on MuJoCo's contacts) go to the tracker."""
    from engine.control.plan import MotionPlan, load_clip
    from engine.simulation import Simulation

    from .conftest import MOTION_DIR

    walk = MOTION_DIR / "walk.bvh"
    two = MotionPlan(rig, [(load_clip(rig, f"{walk}@0")[0], 1.0, "a"), (load_clip(rig, f"{walk}@0.5")[0], 1.0, "b")])
    one = MotionPlan(rig, [(load_clip(rig, f"{walk}@0.5")[0], 1.0, "b")])
    params = TrackingParams(residual=0.0)
    assert stand.holds_still(one) and not stand.holds_still(two)
    mj = Simulation(rig, "mujoco")
    assert isinstance(factory.tracking_controller(mj, one, params), stand.StandController)
    assert not isinstance(factory.tracking_controller(mj, two, params), stand.StandController)
    pytest.importorskip("ode")
    assert not isinstance(factory.tracking_controller(Simulation(rig, "ode"), one, params), stand.StandController)


def test_stands_on_its_feet(rig, walk_q):
    """A standing frame of the walk stands on its feet; the same pose upside down does not
    (the tracker takes such a pose)."""
    from engine.control.plan import QSpace

    model = QSpace(rig).model
    assert stand.stands_on_its_feet(model, rig, walk_q[60])
    upside_down = walk_q[60].copy()
    upside_down[3:7] = [0.0, 1.0, 0.0, 0.0]  # turned 180 deg about x: the balance search only knows feet
    assert not stand.stands_on_its_feet(model, rig, upside_down)


def test_a_held_pose_stands_fresh_and_the_same_twice(rig, tmp_path):
    """Frame 0 (a toe-off: the right heel 11 cm up) held 10 s fresh: no fall, the pose kept
    within a few degrees of the balanced pose, and the same take twice is the same bit for
    bit."""
    held = clips.hold(clips.bundled("walk"), 0)
    a = _take(rig, tmp_path, held, 10.0, residual=0.0)
    b = _take(rig, tmp_path, held, 10.0, residual=0.0)
    assert not a.meta["summary"]["fell"]
    np.testing.assert_array_equal(a.q, b.q)
    np.testing.assert_array_equal(a.activation, b.activation)
    # still: the pelvis moved less than 1 cm over the last 5 s
    last = a.times >= 5.0
    assert np.ptp(a.body_pos[last, 0], axis=0).max() < 0.01


def test_clip_at_seconds_holds_that_pose(rig):
    """`walk.bvh@0.5` (the CLI's CLIP@AT) is the walk's pose at 0.5 s (frame 60 at 120 fps)
    held still: the same reference as tests/clips.hold builds, and the stand controller takes
    it; a time outside the clip is refused naming the clip."""
    from engine.control.plan import load_clip
    from engine.errors import ParameterError
    from engine.motion.retarget import retarget
    from engine.take import simulate

    from .conftest import MOTION_DIR

    ref, name = load_clip(rig, f"{MOTION_DIR / 'walk.bvh'}@0.5")
    assert name == "walk.bvh@0.5" and ref.meta["held_at_s"] == 0.5
    walk, _ = retarget(clips.bundled("walk"), rig)
    np.testing.assert_allclose(ref.q, np.repeat(walk.q[60:61], ref.num_frames, axis=0))
    assert not ref.qvel.any()
    take = simulate(rig, [(f"{MOTION_DIR / 'walk.bvh'}@0.5", 0.3)], params=TrackingParams(residual=0.0),
                    progress=lambda f: None)
    assert take.meta["stand"]["mode"] == "stand" and take.meta["clips"][0]["name"] == "walk.bvh@0.5"
    with pytest.raises(ParameterError, match="walk.bvh: a pose at 5 s is outside the clip"):
        load_clip(rig, f"{MOTION_DIR / 'walk.bvh'}@5")


def test_take_over_designs_where_the_body_is(rig):
    """StandController.take_over (a body handed over by another controller) designs about the
    balanced pose nearest its target and moves neither the body nor its muscles. Handed the
    state start() left (a balanced pose), it finds a pose within 3 deg of it (the search is a
    least-squares fit, not exact to the last degree); the muscles' generalised forces and the
    solve's row weights it designs with, from a MuJoCo data of its own, are those a
    simulation put at that pose gives; and its closed loop is stable."""
    from engine.control.plan import MotionPlan, load_clip
    from engine.simulation import Simulation

    from .conftest import MOTION_DIR

    plan = MotionPlan(rig, [(load_clip(rig, f"{MOTION_DIR / 'walk.bvh'}@0.5")[0], 1.0, "b")])
    params = TrackingParams(residual=0.0)
    sim = Simulation(rig, "mujoco")
    started = stand.StandController(sim, plan, params)
    started.start(sim)
    q, qd = sim.physics.get_q()
    MA = sim.fatigue.MA.copy()
    other = stand.StandController(sim, plan, params)
    assert other.take_over(sim, started.q0) < 0.5
    q2, qd2 = sim.physics.get_q()
    np.testing.assert_array_equal(q2, q)
    np.testing.assert_array_equal(qd2, qd)
    np.testing.assert_array_equal(sim.fatigue.MA, MA)
    assert np.abs(plan.space.diff(started.q0, other.q0)).max() < np.radians(3.0)
    there = Simulation(rig, "mujoco")
    there.physics.set_q(other.q0, np.zeros(len(qd)))
    there.state = there.physics.body_state()
    witness = stand.StandController(there, plan, params)
    G, g_pe = witness._generalised(there, there.state)
    np.testing.assert_allclose(other.G0, G, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(other.g0, g_pe, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(other._rows, witness._row_weights(), rtol=1e-12)
    assert np.abs(np.linalg.eigvals(other._A - other._B @ other.G0 @ other.K)).max() <= 1.0 + 1e-4
