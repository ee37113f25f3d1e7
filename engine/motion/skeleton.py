"""Blender-independent source skeletons and their motion (numpy only).

A `SourceSkeleton` is the hierarchy a motion was recorded on (a BVH file, or an armature's
rest pose); a `SourceMotion` animates it. Conventions (DESIGN.md): Z-up, metres, seconds,
quaternions (w, x, y, z). Bones are stored in topological order: bone 0 is the only root and
every other bone's parent comes before it.

Forward kinematics, for bone j with parent p:
    world_rot[j] = world_rot[p] * rest_rotations[j] * rotations[j]
    head[j]      = head[p] + world_rot[p] (x) offset[j]
and the root's head is `root_translation`, its world rotation rest_rotations[0] * rotations[0].
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field

import numpy as np

from ..errors import ParameterError
from ..transforms import quat_multiply, quat_normalize, quat_rotate, quat_slerp

_IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])


@dataclass
class SourceSkeleton:
    """Bone hierarchy and rest pose.

    names: bone names, unique. parents: (J,) int, -1 for the root (bone 0 only), otherwise
    an index smaller than the bone's own. offsets: (J, 3) rest head positions in the parent's
    frame, metres (the root's is its rest position in the world). rest_rotations: (J, 4) each
    bone's rest frame relative to its parent's (identity for BVH; None means identity).
    end_sites: {bone index: (3,) offset of the bone's tip in the bone's frame, metres}.
    """

    names: list[str]
    parents: np.ndarray
    offsets: np.ndarray
    rest_rotations: np.ndarray | None = None
    end_sites: dict[int, np.ndarray] = field(default_factory=dict)

    def __post_init__(self):
        self.names = [str(n) for n in self.names]
        self.parents = np.asarray(self.parents, dtype=np.int64)
        self.offsets = np.asarray(self.offsets, dtype=float)
        if self.rest_rotations is None:
            self.rest_rotations = np.tile(_IDENTITY, (len(self.names), 1))
        self.rest_rotations = np.asarray(self.rest_rotations, dtype=float)
        self.end_sites = {int(k): np.asarray(v, dtype=float) for k, v in self.end_sites.items()}
        validate_skeleton(self)
        self.rest_rotations = _unit(self.rest_rotations)

    @property
    def num_bones(self) -> int:
        return len(self.names)

    def index(self, name: str) -> int:
        """Index of the bone called `name`; ParameterError naming it if there is none."""
        try:
            return self.names.index(name)
        except ValueError:
            close = difflib.get_close_matches(name, self.names, n=3)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ParameterError(
                "bone", f"no bone named {name!r} in the skeleton ({self.num_bones} bones){hint}"
            ) from None

    def children(self, j: int) -> list[int]:
        """Indices of the bones whose parent is bone j."""
        return [int(c) for c in np.flatnonzero(self.parents == j)]

    def rest_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """World rest rotations (J, 4) and head positions (J, 3), root at its rest offset."""
        rot = np.empty((self.num_bones, 4))
        pos = np.empty((self.num_bones, 3))
        for j, p in enumerate(self.parents):
            if p < 0:
                rot[j], pos[j] = self.rest_rotations[j], self.offsets[j]
            else:
                rot[j] = quat_multiply(rot[p], self.rest_rotations[j])
                pos[j] = pos[p] + quat_rotate(rot[p], self.offsets[j])
        return rot, pos


@dataclass
class SourceMotion:
    """A skeleton animated over F frames sampled every `frame_time` seconds.

    rotations: (F, J, 4) each bone's rotation relative to its rest local frame.
    root_translation: (F, 3) world position of the root's head, metres.
    local_translations: (F, J, 3) per-frame head offsets in the parent's frame that replace
    skeleton.offsets (BVH position channels on non-root joints), or None when only the root
    moves. The root's column is not used (its head is root_translation); readers store the
    root's rest offset there.
    """

    skeleton: SourceSkeleton
    rotations: np.ndarray
    root_translation: np.ndarray
    frame_time: float
    local_translations: np.ndarray | None = None

    def __post_init__(self):
        self.rotations = np.asarray(self.rotations, dtype=float)
        self.root_translation = np.asarray(self.root_translation, dtype=float)
        if self.local_translations is not None:
            self.local_translations = np.asarray(self.local_translations, dtype=float)
        validate_motion(self)
        self.frame_time = float(self.frame_time)
        self.rotations = _unit(self.rotations)

    @property
    def num_frames(self) -> int:
        return int(self.rotations.shape[0])

    @property
    def fps(self) -> float:
        return 1.0 / self.frame_time

    @property
    def seconds(self) -> float:
        """Playing length, num_frames * frame_time."""
        return self.num_frames * self.frame_time

    @property
    def times(self) -> np.ndarray:
        """(F,) time of each frame, the first at 0."""
        return np.arange(self.num_frames) * self.frame_time

    def index(self, name: str) -> int:
        return self.skeleton.index(name)

    def frames(self, index) -> "SourceMotion":
        """The motion at frames `index` (a slice or an index array), in that order."""
        local = self.local_translations
        return SourceMotion(self.skeleton, self.rotations[index], self.root_translation[index],
                            self.frame_time, None if local is None else local[index])

    def bone_offsets(self, j: int) -> np.ndarray:
        """(F, 3) or (3,) head offset of bone j in its parent's frame."""
        if self.local_translations is None:
            return self.skeleton.offsets[j]
        return self.local_translations[:, j]

    def fk(self) -> tuple[np.ndarray, np.ndarray]:
        """World rotations (F, J, 4) and head positions (F, J, 3) of every bone."""
        skel = self.skeleton
        local = quat_multiply(skel.rest_rotations[None], self.rotations)
        rot = np.empty_like(local)
        pos = np.empty(local.shape[:2] + (3,))
        for j, p in enumerate(skel.parents):
            if p < 0:
                rot[:, j] = local[:, j]
                pos[:, j] = self.root_translation
            else:
                rot[:, j] = quat_multiply(rot[:, p], local[:, j])
                pos[:, j] = pos[:, p] + quat_rotate(rot[:, p], self.bone_offsets(j))
        return quat_normalize(rot), pos

    def resample(self, fps: float) -> "SourceMotion":
        """The motion at `fps` frames per second, from its first frame.

        Samples lie at k / fps, every interval 1 / fps, up to the last source frame: the clip
        ends up to one output frame before the source does where its length is not a whole
        number of output frames (a 120 fps clip written at 30 or 60 fps, a 25 fps capture at
        120). Rotations are slerped, translations lerped. (A last sample clamped to the last
        source frame made a short last interval whose velocity was a fraction of the clip's:
        a 30 fps copy of the run ended at 1.2 m/s instead of 5.1, and the loop closing there
        started its take 1.4 m/s slow. Frames owning their intervals, the last one carried on
        past the source's end, kept a cycle's length but changed every 30 fps capture's end,
        and the Mixamo fixture's 20 s takes fell on two draws that had walked.)
        """
        fps = float(fps)
        if not np.isfinite(fps) or fps <= 0:
            raise ParameterError("fps", f"must be a positive number, got {fps}")
        F = self.num_frames
        n = int(np.floor((F - 1) * self.frame_time * fps + 1e-6)) + 1
        u = np.arange(n) / fps / self.frame_time  # in source frames, never past the last
        i0 = np.clip(np.floor(u + 1e-9).astype(np.int64), 0, max(F - 2, 0))
        i1 = np.minimum(i0 + 1, F - 1)
        a = np.clip(u - i0, 0.0, 1.0)
        rot = quat_slerp(self.rotations[i0], self.rotations[i1], a[:, None])
        root = _lerp(self.root_translation[i0], self.root_translation[i1], a[:, None])
        local = self.local_translations
        if local is not None:
            local = _lerp(local[i0], local[i1], a[:, None, None])
        return SourceMotion(self.skeleton, rot, root, 1.0 / fps, local)


def _lerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    return a + (b - a) * t


def _check_array(name: str, a: np.ndarray, shape: tuple) -> None:
    """ParameterError unless a has `shape` (None = any size) and only finite values."""
    ok = a.ndim == len(shape) and all(s is None or s == d for s, d in zip(shape, a.shape))
    if not ok:
        want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
        raise ParameterError(name, f"expected shape {want}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])
        raise ParameterError(name, f"contains NaN or infinite values (first at index {bad})")


def _norms(q: np.ndarray) -> np.ndarray:
    return np.sqrt(np.einsum("...i,...i->...", q, q))


def _unit(q: np.ndarray) -> np.ndarray:
    """q scaled to unit length (returned as is when it already is)."""
    n = _norms(q)
    return q if np.all(np.abs(n - 1.0) < 1e-12) else q / n[..., None]


def _check_quats(name: str, q: np.ndarray) -> None:
    if q.size and np.min(_norms(q)) < 1e-6:
        raise ParameterError(name, "contains a zero-length quaternion")


def validate_skeleton(skel: SourceSkeleton) -> None:
    """ParameterError on bad shapes, NaNs, duplicate names or a non-topological hierarchy."""
    J = len(skel.names)
    if J == 0:
        raise ParameterError("names", "a skeleton needs at least one bone")
    dup = sorted({n for n in skel.names if skel.names.count(n) > 1})
    if dup:
        raise ParameterError("names", f"duplicate bone names {dup}")
    _check_array("parents", skel.parents, (J,))
    _check_array("offsets", skel.offsets, (J, 3))
    _check_array("rest_rotations", skel.rest_rotations, (J, 4))
    _check_quats("rest_rotations", skel.rest_rotations)
    if skel.parents[0] != -1:
        raise ParameterError("parents", "bone 0 must be the root (parent -1)")
    bad = [j for j in range(1, J) if not 0 <= skel.parents[j] < j]
    if bad:
        raise ParameterError(
            "parents",
            f"bone {skel.names[bad[0]]!r} has parent {skel.parents[bad[0]]}; every bone but the "
            "first needs a parent listed before it",
        )
    for j, off in skel.end_sites.items():
        if not 0 <= j < J:
            raise ParameterError("end_sites", f"bone index {j} out of range 0..{J - 1}")
        _check_array(f"end_sites[{skel.names[j]}]", off, (3,))


def validate_motion(motion: SourceMotion) -> None:
    """ParameterError on shapes that disagree with the skeleton, NaNs or a bad frame time."""
    J = motion.skeleton.num_bones
    _check_array("rotations", motion.rotations, (None, J, 4))
    F = motion.rotations.shape[0]
    if F == 0:
        raise ParameterError("rotations", "a motion needs at least one frame")
    _check_quats("rotations", motion.rotations)
    _check_array("root_translation", motion.root_translation, (F, 3))
    if motion.local_translations is not None:
        _check_array("local_translations", motion.local_translations, (F, J, 3))
    ft = motion.frame_time
    if not isinstance(ft, (int, float, np.floating, np.integer)) or not np.isfinite(ft) or ft <= 0:
        raise ParameterError("frame_time", f"must be a positive number of seconds, got {ft!r}")
