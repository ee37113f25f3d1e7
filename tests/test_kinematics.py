"""Forward kinematics, muscle lengths and rates, and moment arms checked against finite differences."""
import numpy as np
import pytest

from engine import kinematics as kin
from engine.transforms import axis_angle_to_matrix


def random_pose(rig, rng, scale=0.4):
    """Random joint rotations respecting each joint type (hinges about their axes)."""
    rotvec = rng.normal(scale=scale, size=(rig.num_bodies, 3))
    hinge = rig.joint_type == kin.HINGE
    angle = rng.uniform(0.2, 1.2, size=hinge.sum())
    rotvec[hinge] = angle[:, None] * rig.joint_axis[hinge]
    return rng.normal(size=3), axis_angle_to_matrix(rotvec)


def lengths_at(rig, root_pos, local_rot):
    _, _, br, bp = kin.forward_kinematics(rig, root_pos, local_rot)
    return kin.muscle_lengths(rig, kin.MusclePaths(rig).positions(br, bp))


def perturbed(rig, root_pos, local_rot, dof, eps):
    """The pose moved by eps along velocity DOF `dof` (MuJoCo layout, see engine.kinematics)."""
    root_pos, local_rot = root_pos.copy(), local_rot.copy()
    b = np.searchsorted(rig.dof_start, dof, side="right") - 1
    i = dof - rig.dof_start[b]
    t = rig.joint_type[b]
    if t == kin.FREE and i < 3:
        root_pos[i] += eps
    elif t == kin.HINGE:
        local_rot[b] = local_rot[b] @ axis_angle_to_matrix(eps * rig.joint_axis[b])
    else:
        e = np.zeros(3)
        e[i - 3 if t == kin.FREE else i] = eps
        local_rot[b] = local_rot[b] @ axis_angle_to_matrix(e)
    return root_pos, local_rot


def test_moment_arms_match_central_differences(rig):
    rng = np.random.default_rng(7)
    eps = 1e-6
    for _ in range(3):
        root_pos, local_rot = random_pose(rig, rng)
        A = kin.moment_arms(rig, root_pos, local_rot)
        assert A.shape == (rig.num_muscles, rig.num_dofs)
        fd = np.empty_like(A)
        for d in range(rig.num_dofs):
            lp = lengths_at(rig, *perturbed(rig, root_pos, local_rot, d, eps))
            lm = lengths_at(rig, *perturbed(rig, root_pos, local_rot, d, -eps))
            fd[:, d] = (lp - lm) / (2 * eps)
        assert np.abs(A - fd).max() < 1e-4
        assert np.abs(A).max() > 0.05  # not trivially zero
        # A rigid motion of the whole body changes no muscle length.
        assert np.abs(A[:, :6]).max() < 1e-9


def test_knee_and_hip_moment_arm_signs(rig):
    root_pos, local_rot = kin.q_to_pose(rig, kin.rest_q(rig))
    local_rot = local_rot.copy()
    A = kin.moment_arms(rig, root_pos, local_rot)
    knee = rig.dof_start[rig.body_index("TibiaR")]  # hinge about +x: positive flexes the knee
    hip_x = rig.dof_start[rig.body_index("FemurR")]  # about +x: positive swings the thigh back
    m = rig.muscle_index
    # Knee flexion stretches the vasti (extensors) and shortens biceps femoris (a flexor).
    for ext in ("R_Vastus_Lateralis", "R_Vastus_Medialis", "R_Vastus_Intermedius"):
        assert A[m(ext), knee] > 0.01, ext
    assert A[m("R_Bicep_Femoris_Short"), knee] < -0.005
    assert np.sign(A[m("R_Vastus_Lateralis"), knee]) != np.sign(A[m("R_Bicep_Femoris_Short"), knee])
    # Hip extension stretches the flexors and shortens the extensors.
    for flexor in ("R_iliacus", "R_Psoas_Major", "R_Rectus_Femoris"):
        assert A[m(flexor), hip_x] > 0.005, flexor
    for extensor in ("R_Gluteus_Maximus2", "R_Semimembranosus", "R_Bicep_Femoris_Longus"):
        assert A[m(extensor), hip_x] < -0.005, extensor
    # Mirror symmetry: the left knee's vastus arm equals the right one's.
    assert A[m("L_Vastus_Lateralis"), rig.dof_start[rig.body_index("TibiaL")]] == pytest.approx(
        A[m("R_Vastus_Lateralis"), knee], abs=1e-9)


def test_length_rates_match_finite_differences_in_time(rig):
    """dl/dt from body velocities equals the time derivative of the lengths along a motion."""
    rng = np.random.default_rng(3)
    w = rng.normal(scale=0.8, size=(rig.num_bodies, 3))
    v_root = rng.normal(size=3)
    paths = kin.MusclePaths(rig)

    def state(t):
        _, _, br, bp = kin.forward_kinematics(rig, v_root * t, axis_angle_to_matrix(w * t + 0.2))
        return br, bp

    h, t0 = 1e-5, 0.3
    (br_m, bp_m), (br0, bp0), (br_p, bp_p) = state(t0 - h), state(t0), state(t0 + h)
    lin = (bp_p - bp_m) / (2 * h)
    # Angular velocity from dR/dt R^T (a skew matrix).
    W = ((br_p - br_m) / (2 * h)) @ np.swapaxes(br0, -1, -2)
    ang = np.stack([W[:, 2, 1], W[:, 0, 2], W[:, 1, 0]], -1)
    wp, wv = paths.positions_and_velocities(br0, bp0, lin, ang)
    rate = kin.muscle_length_rates(rig, wp, wv)
    fd = (kin.muscle_lengths(rig, paths.positions(br_p, bp_p))
          - kin.muscle_lengths(rig, paths.positions(br_m, bp_m))) / (2 * h)
    assert np.abs(rate - fd).max() < 1e-6
    assert np.abs(rate).max() > 0.05


def test_batched_fk_and_lbs_equal_one_at_a_time(rig):
    rng = np.random.default_rng(11)
    poses = [random_pose(rig, rng) for _ in range(4)]
    root = np.stack([p[0] for p in poses])
    rots = np.stack([p[1] for p in poses])
    _, _, br, bp = kin.forward_kinematics(rig, root, rots)
    batch = kin.MusclePaths(rig).positions(br, bp)
    for i, (r, q) in enumerate(poses):
        _, _, br1, bp1 = kin.forward_kinematics(rig, r, q)
        assert np.allclose(batch[i], kin.MusclePaths(rig).positions(br1, bp1), atol=1e-12)
        # LBS by its definition, p = sum_i w_i (R_i x_i + t_i), one waypoint at a time.
        k = 500
        by_def = sum(rig.wp_weight[k, s] * (br1[rig.wp_body[k, s]] @ rig.wp_local[k, s] + bp1[rig.wp_body[k, s]])
                     for s in range(2))
        assert np.allclose(batch[i, k], by_def, atol=1e-12)


def test_q_to_pose_hinge_and_ball(rig):
    q = kin.rest_q(rig)
    b = rig.body_index("TibiaR")
    # Position coordinate index of the right knee: 7 for the root, 4 per ball, 1 per hinge.
    nq = np.array([7, 4, 1])[rig.joint_type]
    qi = int(np.concatenate([[0], np.cumsum(nq)])[b])
    q[qi] = 0.7
    _, local_rot = kin.q_to_pose(rig, q)
    assert np.allclose(local_rot[b], axis_angle_to_matrix(0.7 * rig.joint_axis[b]))
    assert np.allclose(np.delete(local_rot, b, axis=0), np.eye(3))


def test_hinges_have_unit_axes_and_mirror(rig):
    hinge = np.flatnonzero(rig.joint_type == kin.HINGE)
    assert len(hinge) == 8
    assert np.allclose(np.linalg.norm(rig.joint_axis[hinge], axis=1), 1.0)
    for b in hinge:
        name = rig.body_names[b]
        if name.endswith("L"):
            twin = rig.body_index(name[:-1] + "R")
            # Axes are pseudo-vectors: the mirror image of a is -M a; limits stay the same.
            assert np.allclose(rig.joint_axis[b], -np.diag([-1, 1, 1]) @ rig.joint_axis[twin])
            assert rig.joint_lower[b, 0] == rig.joint_lower[twin, 0]
            assert rig.joint_upper[b, 0] == rig.joint_upper[twin, 0]


def test_elbow_flexion_shortens_biceps_and_stretches_triceps(rig):
    root_pos, local_rot = kin.q_to_pose(rig, kin.rest_q(rig))
    A = kin.moment_arms(rig, root_pos, local_rot)
    for side in "RL":
        elbow = rig.dof_start[rig.body_index(f"ForeArm{side}")]  # positive angle = flexion (range 0..2.3)
        assert A[rig.muscle_index(f"{side}_Brachialis"), elbow] < -0.005
        assert A[rig.muscle_index(f"{side}_Bicep_Brachii_Short_Head"), elbow] < -0.005
        assert A[rig.muscle_index(f"{side}_Triceps_Lateral_Head"), elbow] > 0.005
