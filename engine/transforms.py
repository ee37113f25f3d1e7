"""Rotation and rigid-transform helpers, batched over the leading axes.

Conventions (DESIGN.md): quaternions are (w, x, y, z); rotation matrices act on
column vectors (x_world = R @ x_local); every function accepts any number of
leading batch dimensions and never loops in Python.
"""
from __future__ import annotations

import numpy as np

# Y-up (MASS XML, BVH) to Z-up (Blender, MuJoCo, the engine): +90 deg about X.
# (x, y, z)_yup -> (x, -z, y)_zup; a character facing +Z in Y-up faces -Y in Z-up.
Y_UP_TO_Z_UP = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])

# Reflection through the sagittal plane x = 0 (left <-> right).
MIRROR_X = np.diag([-1.0, 1.0, 1.0])


def skew(v: np.ndarray) -> np.ndarray:
    """Cross-product matrices [v]x, shape (..., 3, 3)."""
    v = np.asarray(v, dtype=float)
    z = np.zeros(v.shape[:-1])
    x, y, w = v[..., 0], v[..., 1], v[..., 2]
    return np.stack(
        [np.stack([z, -w, y], -1), np.stack([w, z, -x], -1), np.stack([-y, x, z], -1)], -2
    )


def axis_angle_to_matrix(rotvec: np.ndarray) -> np.ndarray:
    """Rodrigues' formula for rotation vectors (axis * angle), shape (..., 3) -> (..., 3, 3)."""
    rotvec = np.asarray(rotvec, dtype=float)
    theta = np.linalg.norm(rotvec, axis=-1)[..., None, None]
    K = skew(rotvec)
    small = theta < 1e-8
    safe = np.where(small, 1.0, theta)
    a = np.where(small, 1.0 - theta**2 / 6.0, np.sin(safe) / safe)
    b = np.where(small, 0.5 - theta**2 / 24.0, (1.0 - np.cos(safe)) / safe**2)
    eye = np.broadcast_to(np.eye(3), K.shape)
    return eye + a * K + b * (K @ K)


def matrix_to_axis_angle(R: np.ndarray) -> np.ndarray:
    """Inverse of axis_angle_to_matrix; angles in [0, pi]."""
    return quat_to_axis_angle(matrix_to_quat(R))


def quat_normalize(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=float)
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """(w, x, y, z) unit quaternions -> rotation matrices."""
    q = quat_normalize(q)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )


def matrix_to_quat(R: np.ndarray) -> np.ndarray:
    """Rotation matrices -> (w, x, y, z) with w >= 0 (Shepperd's method, branch-free)."""
    R = np.asarray(R, dtype=float)
    m00, m11, m22 = R[..., 0, 0], R[..., 1, 1], R[..., 2, 2]
    # Four candidate magnitudes; pick the largest for numerical stability.
    cand = np.stack(
        [1 + m00 + m11 + m22, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22], -1
    )
    k = np.argmax(cand, axis=-1)
    s = np.sqrt(np.maximum(np.take_along_axis(cand, k[..., None], -1)[..., 0], 1e-300)) * 2
    d21, d12 = R[..., 2, 1], R[..., 1, 2]
    d02, d20 = R[..., 0, 2], R[..., 2, 0]
    d10, d01 = R[..., 1, 0], R[..., 0, 1]
    q = np.stack(
        [
            np.choose(k, [s / 4, (d21 - d12) / s, (d02 - d20) / s, (d10 - d01) / s]),
            np.choose(k, [(d21 - d12) / s, s / 4, (d01 + d10) / s, (d02 + d20) / s]),
            np.choose(k, [(d02 - d20) / s, (d01 + d10) / s, s / 4, (d12 + d21) / s]),
            np.choose(k, [(d10 - d01) / s, (d02 + d20) / s, (d12 + d21) / s, s / 4]),
        ],
        -1,
    )
    q = np.where(q[..., :1] < 0, -q, q)
    return quat_normalize(q)


def quat_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a * b (apply b first, then a)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        -1,
    )


def quat_conjugate(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=float)
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vectors v by unit quaternions q."""
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    u = q[..., 1:]
    w = q[..., :1]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def quat_angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angle (radians, in [0, pi]) of the rotation between unit quaternions a and b (..., 4);
    q and -q are the same rotation."""
    d = np.abs(np.sum(np.asarray(a, dtype=float) * np.asarray(b, dtype=float), axis=-1))
    return 2.0 * np.arccos(np.minimum(d, 1.0))


def quat_heading(q: np.ndarray) -> np.ndarray:
    """Heading angle about +Z (radians, (...,)) of rotations q (..., 4): where the rotated -Y
    axis (the model's forward at rest) points in the ground plane."""
    q = np.asarray(q, dtype=float)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    # R @ [0, -1, 0] = -(second column of R)
    return np.arctan2(-(1 - 2 * (x * x + z * z)), -(2 * (x * y - w * z)))


def axis_angle_to_quat(rotvec: np.ndarray) -> np.ndarray:
    rotvec = np.asarray(rotvec, dtype=float)
    theta = np.linalg.norm(rotvec, axis=-1, keepdims=True)
    half = 0.5 * theta
    small = theta < 1e-8
    scale = np.where(small, 0.5 - theta**2 / 48.0, np.sin(half) / np.where(small, 1.0, theta))
    return np.concatenate([np.cos(half), rotvec * scale], -1)


def quat_to_axis_angle(q: np.ndarray) -> np.ndarray:
    """Unit quaternions -> rotation vectors with angle in [0, pi]."""
    q = quat_normalize(q)
    q = np.where(q[..., :1] < 0, -q, q)
    s = np.linalg.norm(q[..., 1:], axis=-1, keepdims=True)
    theta = 2.0 * np.arctan2(s, np.ascontiguousarray(q[..., :1]))  # contiguous: DESIGN.md 'Same bits'
    small = s < 1e-12
    scale = np.where(small, 2.0, theta / np.where(small, 1.0, s))
    return q[..., 1:] * scale


def quat_slerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Spherical interpolation between unit quaternions along the shorter arc; t broadcast."""
    a = quat_normalize(a)
    b = quat_normalize(b)
    t = np.asarray(t, dtype=float)[..., None]
    dot = np.sum(a * b, axis=-1, keepdims=True)
    b = np.where(dot < 0, -b, b)
    dot = np.abs(dot)
    omega = np.arccos(np.clip(dot, -1.0, 1.0))
    so = np.sin(omega)
    near = so < 1e-6
    so_safe = np.where(near, 1.0, so)
    wa = np.where(near, 1.0 - t, np.sin((1.0 - t) * omega) / so_safe)
    wb = np.where(near, t, np.sin(t * omega) / so_safe)
    return quat_normalize(wa * a + wb * b)


def euler_to_matrix(angles: np.ndarray, order: str) -> np.ndarray:
    """Intrinsic Euler angles (radians) in the given axis order, e.g. "ZXY" (BVH channel order).

    R = R_{order[0]}(angles[...,0]) @ R_{order[1]}(angles[...,1]) @ R_{order[2]}(angles[...,2]).
    """
    angles = np.asarray(angles, dtype=float)
    R = None
    for i, ax in enumerate(order.upper()):
        v = np.zeros(angles.shape[:-1] + (3,))
        v[..., "XYZ".index(ax)] = angles[..., i]
        Ri = axis_angle_to_matrix(v)
        R = Ri if R is None else R @ Ri
    return R


def orthonormalize(R: np.ndarray) -> np.ndarray:
    """Nearest rotation matrix (polar decomposition via SVD)."""
    U, _, Vt = np.linalg.svd(np.asarray(R, dtype=float))
    D = np.ones(U.shape[:-1])
    D[..., -1] = np.sign(np.linalg.det(U @ Vt))
    return (U * D[..., None, :]) @ Vt


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a x b over the last axis; several times faster than np.cross on small arrays."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


class SparseMatmul:
    """x -> A x for a fixed sparse matrix A (M x N) and dense x (N,) or (N, C), C-contiguous.

    Calls scipy's compiled CSR kernels directly: the same sums as `A @ x` without the
    several microseconds of checks that `A @ x` spends per call, which dominate small
    products. `out`, a C-contiguous float64 array of the result's shape, receives it.
    """

    def __init__(self, A):
        from scipy.sparse import _sparsetools, csr_matrix

        A = csr_matrix(A, dtype=np.float64)
        A.sum_duplicates()
        self.shape = A.shape
        self._csr = (A.shape[0], A.shape[1], A.indptr, A.indices, A.data)
        self._matvec, self._matvecs = _sparsetools.csr_matvec, _sparsetools.csr_matvecs

    @property
    def data(self) -> np.ndarray:
        """The matrix's values in CSR order: refill them in place to change the matrix
        without changing its pattern."""
        return self._csr[4]

    def __call__(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float64)
        M, N = self.shape
        shape = (M,) + x.shape[1:]
        if x.ndim > 2 or x.shape[0] != N:
            raise ValueError(f"SparseMatmul: shapes {self.shape} and {x.shape} do not match")
        if out is None:
            out = np.zeros(shape)
        elif out.shape != shape or out.dtype != np.float64 or not out.flags.c_contiguous:
            raise ValueError(f"SparseMatmul: out must be a C-contiguous float64 array of shape {shape}")
        else:
            out.fill(0.0)
        if x.ndim == 1:
            self._matvec(*self._csr, x, out)
        else:
            self._matvecs(M, N, x.shape[1], *self._csr[2:], x.ravel(), out.ravel())
        return out
