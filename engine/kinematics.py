"""Skeleton and muscle-path kinematics, vectorised over muscles and waypoints.

Pose: `root_pos` (..., 3) is the world position of the root joint; `local_rot`
(..., B, 3, 3) holds each joint's rotation relative to the rest (T-) pose, expressed in
its parent's joint frame (entry 0 is the root's world rotation). All joint frames are
world-aligned at rest (see engine.rig), so the rest pose is all identities.

Generalised coordinates follow MuJoCo's layout: per joint in body order, the free root
has 7 position coordinates (x, y, z, qw, qx, qy, qz) and 6 velocity DOFs (world linear,
then angular in the root's frame); a ball joint 4 / 3 (quaternion / angular velocity in
the child's joint frame); a hinge 1 / 1 (angle about its axis).
"""
from __future__ import annotations

import numpy as np

from .rig import JOINT_TYPES, Rig
from .transforms import axis_angle_to_matrix, quat_to_matrix

FREE, BALL, HINGE = (JOINT_TYPES.index(t) for t in ("free", "ball", "hinge"))


# ---- poses ----------------------------------------------------------------------------
def rest_q(rig: Rig) -> np.ndarray:
    """Generalised position coordinates of the rest pose."""
    q = []
    for b, t in enumerate(rig.joint_type):
        if t == FREE:
            q += [*rig.joint_pos[b], 1.0, 0.0, 0.0, 0.0]
        elif t == BALL:
            q += [1.0, 0.0, 0.0, 0.0]
        else:
            q += [0.0]
    return np.array(q)


def joint_errors_deg(rig: Rig, diff: np.ndarray) -> float:
    """Mean joint-angle error (deg) over the non-root joints, from a velocity-space
    difference (rotation vectors for ball joints, angles for hinges): the take's "joint
    error", and the balance planner's cost term."""
    sq = np.square(diff[rig.dof_start[1]:])
    angles = np.sqrt(np.add.reduceat(sq, rig.dof_start[1:-1] - rig.dof_start[1]))  # one per joint
    return float(np.degrees(np.add.reduce(angles) / len(angles)))  # np.mean's sum and division, less overhead


def q_to_pose(rig: Rig, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Generalised coordinates (..., nq) -> (root_pos (..., 3), local_rot (..., B, 3, 3))."""
    q = np.asarray(q, dtype=float)
    rots, i = [], 0
    root_pos = None
    for b, t in enumerate(rig.joint_type):
        if t == FREE:
            root_pos = q[..., i : i + 3]
            rots.append(quat_to_matrix(q[..., i + 3 : i + 7]))
            i += 7
        elif t == BALL:
            rots.append(quat_to_matrix(q[..., i : i + 4]))
            i += 4
        else:
            rots.append(axis_angle_to_matrix(q[..., i : i + 1] * rig.joint_axis[b]))
            i += 1
    return root_pos, np.stack(rots, axis=-3)


def forward_kinematics(rig: Rig, root_pos: np.ndarray, local_rot: np.ndarray):
    """Joint frames and body transforms of a pose.

    Returns (joint_rot, joint_pos, body_rot, body_pos): world rotation and origin of each
    joint frame, and world rotation and position of each body frame (box centre).
    A loop over the 23 bodies in parent-first order; batched over leading pose axes.
    """
    local_rot = np.asarray(local_rot, dtype=float)
    B = rig.num_bodies
    G = np.empty(local_rot.shape)
    x = np.empty(local_rot.shape[:-1])
    G[..., 0, :, :] = local_rot[..., 0, :, :]
    x[..., 0, :] = root_pos
    offset = rig.joint_pos - rig.joint_pos[np.maximum(rig.body_parent, 0)]
    for b in range(1, B):
        p = rig.body_parent[b]
        G[..., b, :, :] = G[..., p, :, :] @ local_rot[..., b, :, :]
        x[..., b, :] = x[..., p, :] + G[..., p, :, :] @ offset[b]
    body_rot = G @ rig.body_rest_rot
    body_pos = x + np.einsum("...bij,bj->...bi", G, rig.body_rest_pos - rig.joint_pos)
    return G, x, body_rot, body_pos


# ---- muscle paths ---------------------------------------------------------------------
class MusclePaths:
    """Linear blend skinning of the waypoints, p = sum_i w_i T_i x_i (MASS eq. 1; MuscleVAE
    eq. 18), and its time derivative.

    p is linear in the body transforms: stacking each body's [R^T; t^T] into a (4B, 3)
    block matrix T, the waypoints are p = X T with a fixed sparse X (K x 4B) holding
    w_i [x_i; 1]. Velocities use the same X with [dR/dt^T; v^T]. One sparse product per
    step moves every waypoint, with no per-anchor temporaries.
    """

    # [-w]x flattened row-major is w @ _SKEW_NEG: dR/dt^T = R^T [-w]x (dR/dt = [w]x R).
    _SKEW_NEG = np.zeros((3, 9))
    _SKEW_NEG[[0, 1, 2], [5, 6, 1]] = 1.0
    _SKEW_NEG[[0, 1, 2], [7, 2, 3]] = -1.0

    def __init__(self, rig: Rig):
        from scipy.sparse import csr_matrix

        from .transforms import SparseMatmul

        self.rig = rig
        K, B = rig.num_waypoints, rig.num_bodies
        used = rig.wp_weight > 0
        k = np.broadcast_to(np.arange(K)[:, None], used.shape)[used]
        b = rig.wp_body[used]
        xh = np.concatenate([rig.wp_local[used], np.ones((len(b), 1))], axis=1)
        vals = rig.wp_weight[used][:, None] * xh
        self.X = csr_matrix(
            (vals.ravel(), (np.repeat(k, 4), (4 * b[:, None] + np.arange(4)).ravel())),
            shape=(K, 4 * B),
        )
        self._X_times = SparseMatmul(self.X)

    def _apply(self, blocks: np.ndarray) -> np.ndarray:
        """X applied to per-body blocks (..., B, 4, C) -> (..., K, C)."""
        lead, C = blocks.shape[:-3], blocks.shape[-1]
        T = blocks.reshape(lead + (-1, C))
        if not lead:
            return self._X_times(T)
        T = np.moveaxis(T, -2, 0).reshape(T.shape[-2], -1)
        pv = self._X_times(T).reshape((-1,) + lead + (C,))
        return np.moveaxis(pv, 0, -2)

    def anchors(self, body_rot: np.ndarray, body_pos: np.ndarray) -> np.ndarray:
        """World position of each waypoint's anchor on each of its LBS bodies, (..., K, 2, 3)."""
        rig = self.rig
        R = body_rot[..., rig.wp_body, :, :]
        return np.einsum("...ksij,ksj->...ksi", R, rig.wp_local) + body_pos[..., rig.wp_body, :]

    def positions(self, body_rot: np.ndarray, body_pos: np.ndarray) -> np.ndarray:
        """Waypoint positions (..., K, 3)."""
        body_pos = np.asarray(body_pos, dtype=float)
        blocks = np.empty(body_pos.shape[:-1] + (4, 3))
        blocks[..., :3, :] = np.swapaxes(body_rot, -1, -2)
        blocks[..., 3, :] = body_pos
        return self._apply(blocks)

    def blocks(self, body_rot, body_pos, body_linvel, body_angvel, out=None) -> np.ndarray:
        """Per-body blocks [[R^T, dR/dt^T], [t^T, v^T]], (..., B, 4, 6): X times them gives
        waypoint positions and velocities side by side (dR/dt = [omega]x R)."""
        body_pos, body_angvel = np.asarray(body_pos, dtype=float), np.asarray(body_angvel, dtype=float)
        blocks = np.empty(body_pos.shape[:-1] + (4, 6)) if out is None else out
        Rt = np.swapaxes(body_rot, -1, -2)
        blocks[..., :3, :3] = Rt
        blocks[..., 3, :3] = body_pos
        skew_neg = (body_angvel @ self._SKEW_NEG).reshape(body_angvel.shape + (3,))
        np.matmul(Rt, skew_neg, out=blocks[..., :3, 3:])
        blocks[..., 3, 3:] = body_linvel
        return blocks

    def positions_and_velocities(self, body_rot, body_pos, body_linvel, body_angvel):
        """Waypoint positions and velocities, (..., K, 3) each.

        body_linvel is the velocity of each body frame's origin, body_angvel its angular
        velocity, both in the world frame: dp/dt = sum_i w_i (v_i + omega_i x R_i x_i).
        """
        pv = self._apply(self.blocks(body_rot, body_pos, body_linvel, body_angvel))
        return pv[..., :3], pv[..., 3:]


def segment_vectors(rig: Rig, wp: np.ndarray):
    """Segment vectors between consecutive waypoints of a muscle, their lengths and unit directions."""
    d = wp[..., rig.seg_b, :] - wp[..., rig.seg_a, :]
    length = np.linalg.norm(d, axis=-1)
    return d, length, d / length[..., None]


def muscle_lengths(rig: Rig, wp: np.ndarray) -> np.ndarray:
    """Polyline length of each muscle (MuscleVAE eq. 19), (..., M)."""
    _, seg_len, _ = segment_vectors(rig, wp)
    return np.add.reduceat(seg_len, rig.muscle_seg_start, axis=-1)


def muscle_length_rates(rig: Rig, wp: np.ndarray, wp_vel: np.ndarray) -> np.ndarray:
    """dl/dt of each muscle: sum over segments of u . (v_b - v_a), (..., M)."""
    _, _, u = segment_vectors(rig, wp)
    dv = wp_vel[..., rig.seg_b, :] - wp_vel[..., rig.seg_a, :]
    return np.add.reduceat(np.sum(u * dv, axis=-1), rig.muscle_seg_start, axis=-1)


# ---- moment arms ----------------------------------------------------------------------
def dof_axes(rig: Rig, joint_rot: np.ndarray, joint_pos: np.ndarray):
    """World axis, centre, joint index and kind (True = rotational) of every velocity DOF.

    joint_rot, joint_pos: one pose's joint frames from forward_kinematics, (B, 3, 3), (B, 3).
    """
    axes, centres, joints, rotational = [], [], [], []
    for b, t in enumerate(rig.joint_type):
        G, c = joint_rot[b], joint_pos[b]
        if t == FREE:
            axes += [*np.eye(3), *G.T]
            rotational += [False] * 3 + [True] * 3
            n = 6
        elif t == BALL:
            axes += [*G.T]
            rotational += [True] * 3
            n = 3
        else:
            axes.append(G @ rig.joint_axis[b])
            rotational.append(True)
            n = 1
        centres += [c] * n
        joints += [b] * n
    return np.array(axes), np.array(centres), np.array(joints), np.array(rotational)


def moment_arms(rig: Rig, root_pos: np.ndarray, local_rot: np.ndarray) -> np.ndarray:
    """Analytic dl/dq of every muscle about every velocity DOF at one pose, shape (M, nv).

    Rotating DOF d by a small angle turns every body its joint moves about the joint
    centre c_d, so a waypoint moves by  dp/dq_d = omega_d x sum_s w_s [b_s moved] (y_s - c_d)
    (y_s: the anchor's world position on body b_s); a translational DOF moves it by
    e_d sum_s w_s [b_s moved]. Then dl/dq_d = sum over segments u . (dp_b - dp_a).
    Positive means the muscle lengthens as q_d grows; rotational arms are in metres/radian.
    """
    G, x, body_rot, body_pos = forward_kinematics(rig, root_pos, local_rot)
    axes, centres, joints, rotational = dof_axes(rig, G, x)
    y = MusclePaths(rig).anchors(body_rot, body_pos)  # (K, 2, 3)
    moved = rig.subtree[joints][:, rig.wp_body] * rig.wp_weight  # (D, K, 2) weights on moved bodies
    W = moved.sum(-1)  # (D, K)
    Y = np.einsum("dks,ksi->dki", moved, y)  # (D, K, 3)
    lever = Y - W[..., None] * centres[:, None, :]
    dp = np.where(
        rotational[:, None, None],
        np.cross(axes[:, None, :], lever),
        axes[:, None, :] * W[..., None],
    )  # (D, K, 3)
    wp = np.einsum("ksi,ks->ki", y, rig.wp_weight)
    _, _, u = segment_vectors(rig, wp)
    dseg = np.einsum("dsi,si->sd", dp[:, rig.seg_b] - dp[:, rig.seg_a], u)
    return np.add.reduceat(dseg, rig.muscle_seg_start, axis=0)
