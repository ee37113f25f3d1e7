"""The muscle half of a physics step: Newton's third law, virtual work, moment arms."""
import numpy as np
import pytest

from engine import fatigue as fat
from engine import kinematics as kin
from engine.muscle_step import MuscleSystem, PDGains
from engine.transforms import axis_angle_to_matrix


@pytest.fixture(scope="module")
def system(rig):
    return MuscleSystem(rig)


def body_state(rig, seed):
    rng = np.random.default_rng(seed)
    _, _, br, bp = kin.forward_kinematics(rig, rng.normal(size=3),
                                          axis_angle_to_matrix(rng.normal(scale=0.3, size=(23, 3))))
    return br, bp, rng.normal(size=(23, 3)), rng.normal(size=(23, 3))


def test_muscles_are_internal_forces(rig, system):
    """Tensions pull waypoint pairs along their segment: total force and total torque about
    any point vanish, whatever the pose, velocities and activations."""
    for seed in range(3):
        br, bp, lv, av = body_state(rig, seed)
        action = np.random.default_rng(seed).uniform(-0.3, 0.3, rig.num_muscles)
        res = system.step(br, bp, lv, av, action, fat.FatigueState.fresh(rig.num_muscles))
        assert res.force.max() > 100.0
        assert np.abs(res.body_force.sum(0)).max() < 1e-8
        about_world = res.body_torque + np.cross(bp, res.body_force)
        assert np.abs(about_world.sum(0)).max() < 1e-8


def test_power_delivered_equals_tension_times_shortening(rig, system):
    """Virtual work: sum_b F_b . v_b + tau_b . omega_b = -sum_m f_m dl_m/dt."""
    br, bp, lv, av = body_state(rig, 5)
    res = system.step(br, bp, lv, av, np.full(rig.num_muscles, -0.1),
                      fat.FatigueState(np.full(284, 0.3), np.full(284, 0.7), np.zeros(284)))
    power = np.sum(res.body_force * lv) + np.sum(res.body_torque * av)
    assert power == pytest.approx(-np.sum(res.force * res.length_rate), rel=1e-9)


def test_generalised_forces_equal_moment_arms_times_tension(rig, system):
    """The joint torques the body wrenches produce are -A^T f (A: moment arms dl/dq)."""
    rng = np.random.default_rng(9)
    root = rng.normal(size=3)
    local = axis_angle_to_matrix(rng.normal(scale=0.3, size=(23, 3)))
    G, x, br, bp = kin.forward_kinematics(rig, root, local)
    zero = np.zeros((23, 3))
    res = system.step(br, bp, zero, zero, np.full(rig.num_muscles, -0.2), fat.FatigueState.fresh(284))
    A = kin.moment_arms(rig, root, local)
    axes, centres, joints, rotational = kin.dof_axes(rig, G, x)
    tau = np.empty(rig.num_dofs)
    for d in range(rig.num_dofs):
        moved = rig.subtree[joints[d]]
        F, T = res.body_force[moved], res.body_torque[moved]
        if rotational[d]:
            tau[d] = axes[d] @ (T.sum(0) + np.cross(bp[moved] - centres[d], F).sum(0))
        else:
            tau[d] = axes[d] @ F.sum(0)
    assert np.allclose(tau, -A.T @ res.force, atol=1e-6 * np.abs(tau).max())


def test_step_follows_the_pd_law_and_fatigue_bounds(rig, system):
    br, bp, lv, av = body_state(rig, 2)
    state = fat.FatigueState(np.full(284, 0.2), np.full(284, 0.5), np.full(284, 0.3))
    res = system.step(br, bp, lv, av, np.zeros(rig.num_muscles), state)
    lb, ub = fat.activation_bounds(state.MA, state.MR, system.dt, system.params.F_eff,
                                   system.params.LD, system.params.LR)
    assert np.all((res.activation >= lb - 1e-15) & (res.activation <= ub + 1e-15))
    assert np.allclose(res.fatigue.MA + res.fatigue.MR + res.fatigue.MF, 1.0)
    # Muscles shorter than their T-pose target and shortening ask for no force: they sit at lb.
    slack = (res.length < rig.muscle_rest_length) & (res.length_rate < 0)
    assert slack.any() and np.allclose(res.activation[slack], lb[slack])


def test_gains(rig):
    g = PDGains.for_rig(rig, stiffness=20.0)
    assert np.allclose(g.kp * rig.muscle_rest_length / 20.0, rig.muscle_f0)
    assert np.allclose(g.kd, 2 * np.sqrt(g.kp))
    with pytest.raises(ValueError, match="stiffness"):
        PDGains.for_rig(rig, stiffness=float("nan"))
