"""Where a clip that is not a cycle loops best.

A capture of a walk starts and ends at whatever phase the actor was in; played longer than it
lasts, its last frame must lead back to an earlier one. The seam is judged in the character's
own frame: where it stands and which way it faces do not count (each cycle is carried on from
where the last one ended), the joints, the root's height and tilt, and how fast each moves do.

seam_deg: RMS over the joints' and the root tilt's rotation from frame a to frame b (degrees),
with the joint velocities' difference over SEAM_VELOCITY_S seconds added in quadrature and
the root's height difference at 1 deg per cm.

best_loop: the pair of frames (i, j), j - i at least MIN_LOOP_SHARE of the clip and
MIN_LOOP_S, whose seam is smallest; the loop plays frames i .. j-1 and then i again.
"""
from __future__ import annotations

import numpy as np

from ..kinematics import FREE
from ..transforms import quat_heading, quat_multiply

SEAM_VELOCITY_S = 0.1  # a joint velocity difference of 1 rad/s weighs as 0.1 rad of pose
HEIGHT_DEG_PER_M = 100.0  # 1 cm of root height weighs as 1 deg
MIN_LOOP_SHARE, MIN_LOOP_S = 0.5, 0.8  # a loop keeps at least this much of the clip
CANDIDATES = 600  # frames compared, at most (a long clip is sampled evenly, then refined)


def _features(ref) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per frame: the joint rotations and the root's tilt (F, B, 4) quaternions, the root
    height (F,) and the joint velocities (F, nv - 6)."""
    rot = np.array(ref.local_rot, dtype=float)
    # the root's heading removed: turn about +Z so its forward (-Y) points along -Y
    yaw = quat_heading(rot[:, 0]) - np.arctan2(-1.0, 0.0)
    zero = np.zeros_like(yaw)
    rot[:, 0] = quat_multiply(np.stack([np.cos(-yaw / 2), zero, zero, np.sin(-yaw / 2)], -1), rot[:, 0])
    return rot, np.asarray(ref.root_pos[:, 2], float), np.asarray(ref.qvel[:, 6:], float)


def _seams(feat, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """seam_deg between every frame in a and every frame in b: (len(a), len(b))."""
    rot, height, vel = feat
    dots = np.abs(np.einsum("ikc,jkc->ijk", rot[a], rot[b]))
    ang = np.degrees(2 * np.arccos(np.minimum(dots, 1.0)))
    pose2 = np.mean(ang ** 2, axis=-1)
    dv = vel[a][:, None] - vel[b][None]
    vel2 = np.mean((np.degrees(dv) * SEAM_VELOCITY_S) ** 2, axis=-1)
    h2 = ((height[a][:, None] - height[b][None]) * HEIGHT_DEG_PER_M) ** 2
    return np.sqrt(pose2 + vel2 + h2)


def seam_deg(ref, a: int, b: int) -> float:
    """How far frame b is from frame a in the character's own frame (module doc)."""
    return float(_seams(_features(ref), np.array([a]), np.array([b]))[0, 0])


def best_loop(ref) -> tuple[int, int, float]:
    """(i, j, seam): the loop i .. j-1 of `ref` whose seam (frame j-1 -> frame i, compared as
    frame j against frame i) is smallest, keeping MIN_LOOP_SHARE of the clip and MIN_LOOP_S."""
    F = ref.num_frames
    need = max(int(np.ceil(MIN_LOOP_SHARE * (F - 1))), int(np.ceil(MIN_LOOP_S * ref.fps)))
    if F - 1 < need:
        return 0, F - 1, seam_deg(ref, 0, F - 1)
    feat = _features(ref)
    stride = max(1, (F + CANDIDATES - 1) // CANDIDATES)
    idx = np.arange(0, F, stride)
    if idx[-1] != F - 1:
        idx = np.append(idx, F - 1)
    d = _seams(feat, idx, idx)
    gap = idx[None, :] - idx[:, None]
    d[gap < need] = np.inf
    a, b = np.unravel_index(np.argmin(d), d.shape)
    i, j = int(idx[a]), int(idx[b])
    if stride > 1:  # refine around the coarse best
        ii = np.arange(max(i - stride, 0), min(i + stride, F - 1) + 1)
        jj = np.arange(max(j - stride, 0), min(j + stride, F - 1) + 1)
        d = _seams(feat, ii, jj)
        d[(jj[None, :] - ii[:, None]) < need] = np.inf
        a, b = np.unravel_index(np.argmin(d), d.shape)
        i, j = int(ii[a]), int(jj[b])
    return i, j, seam_deg(ref, i, j)


def seam_size_deg(rig, dv: np.ndarray) -> float:
    """seam_deg's pose part (no velocities) of a velocity-space displacement dv (nv,) from one
    frame to another: RMS over the joints of each joint's rotation angle and the root's tilt,
    with the root height at HEIGHT_DEG_PER_M; where it stands and faces do not count."""
    parts, height = [], 0.0
    for b, t in enumerate(rig.joint_type):
        k, end = rig.dof_start[b], rig.dof_start[b + 1]
        if t == FREE:
            parts.append(np.linalg.norm(dv[k + 3:k + 5]))  # tilt: about the root's own x and y
            height = abs(dv[k + 2]) * HEIGHT_DEG_PER_M
        else:
            parts.append(np.linalg.norm(dv[k:end]))
    return float(np.sqrt(np.mean(np.degrees(parts) ** 2) + height ** 2))
