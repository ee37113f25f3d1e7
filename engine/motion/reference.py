"""A reference trajectory of the model: what retargeting produces and tracking/training read.

Saved as a plain .npz (no pickle) with a JSON `meta` string: format "sinew-reference",
version 1, the source file, the bone mapping, scale, heading, ground offset and frame rate.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputFileError
from ..npzfile import read_npz, write_npz

FORMAT = "sinew-reference"
FORMAT_VERSION = 1
# planted (`planted`): a share of the foot's own peak speed, not a speed, so a sprint's stance foot
# (sliding 1-2 m/s after retargeting, against a swing of 10 m/s) and a walk's (0-0.9 against 4)
# are both found, at any playback speed
STANCE_HEIGHT_M = 0.04  # a foot whose lowest corner is higher than this is in the air
STANCE_SPEED_SHARE = 0.2  # planted: the lowest corner slides slower than this x its clip's peak

# name -> number of trailing dims after (F,) ; None for 1-D per-frame arrays
_ARRAYS = {
    "times": (),
    "root_pos": (3,),
    "local_rot": (None, 4),
    "body_pos": (None, 3),
    "body_rot": (None, 3, 3),
    "q": (None,),
    "qvel": (None,),
    "root_vel": (3,),
    "muscle_length": (None,),
    "muscle_length_rate": (None,),
    "foot_height": (2,),
}


@dataclass
class Reference:
    """Model trajectory over F frames at `fps` (120 Hz unless resampled otherwise).

    times (F,), root_pos (F, 3) world position of the root joint, local_rot (F, B, 4)
    quaternions (w, x, y, z) of each joint in its parent's joint frame (entry 0: the root's
    world rotation), body_pos (F, B, 3) / body_rot (F, B, 3, 3) body frames, q (F, nq)
    generalised coordinates (engine.kinematics.rest_q layout), qvel (F, nv) their velocities
    (free: world linear + angular in the root frame; ball: angular in the child frame; hinge:
    angle rate), root_vel (F, 3) world velocity of the root joint, muscle_length (F, M) and
    muscle_length_rate (F, M) in m and m/s, foot_height (F, 2) lowest point of the right and
    left foot above the floor. meta: provenance and summary metrics (JSON-able).
    """

    times: np.ndarray
    root_pos: np.ndarray
    local_rot: np.ndarray
    body_pos: np.ndarray
    body_rot: np.ndarray
    q: np.ndarray
    qvel: np.ndarray
    root_vel: np.ndarray
    muscle_length: np.ndarray
    muscle_length_rate: np.ndarray
    foot_height: np.ndarray
    meta: dict = field(default_factory=dict)

    @property
    def num_frames(self) -> int:
        return int(self.times.shape[0])

    @property
    def fps(self) -> float:
        return float(self.meta.get("fps", 120.0))

    @property
    def frame_time(self) -> float:
        return 1.0 / self.fps

    @property
    def seconds(self) -> float:
        return self.num_frames / self.fps

    def local_rot_matrices(self) -> np.ndarray:
        from ..transforms import quat_to_matrix

        return quat_to_matrix(self.local_rot)

    def summary(self) -> dict:
        """The figures `sinew retarget --json` prints."""
        m = self.meta
        return dict(
            frames=self.num_frames,
            seconds=round(self.seconds, 4),
            fps=self.fps,
            mapped_bones=len(m.get("mapping", {})),
            preset=m.get("preset"),
            scale=m.get("scale"),
            **m.get("metrics", {}),
        )

    def held_at(self, seconds: float, name: str = "clip", hold_s: float = 2.0) -> "Reference":
        """The pose at `seconds` into this clip, held still for `hold_s` (velocities zero): a
        pose to stand in (`--clip walk.bvh@0.5:60`; the stand controller holds it)."""
        from ..errors import ParameterError

        if not (np.isfinite(seconds) and 0.0 <= seconds < self.seconds):
            raise ParameterError("clip", f"{name}: a pose at {seconds:g} s is outside the clip "
                                 f"(0 to {self.seconds - self.frame_time:.3f} s)")
        i = min(int(round(seconds * self.fps)), self.num_frames - 1)
        n = max(int(round(hold_s * self.fps)), 4)
        still = ("qvel", "root_vel", "muscle_length_rate")
        arrays = {k: (np.zeros_like(getattr(self, k)[:1]) if k in still else getattr(self, k)[i:i + 1]).repeat(n, axis=0)
                  for k in _ARRAYS if k != "times"}
        return Reference(times=np.arange(n) / self.fps, meta=dict(self.meta, held_at_s=i / self.fps), **arrays)

    # ---- files ---------------------------------------------------------------------------
    def save(self, path) -> Path:
        arrays = {k: np.ascontiguousarray(getattr(self, k), dtype=np.float64) for k in _ARRAYS}
        return write_npz(path, FORMAT, FORMAT_VERSION, self.meta, arrays)


def load_reference(path) -> Reference:
    """Read a reference .npz; InputFileError naming the file on anything malformed."""
    path = Path(path)
    meta, data = read_npz(path, FORMAT, FORMAT_VERSION, "reference",
                          hint="re-run `sinew retarget` to make a current one")
    fps = meta.get("fps")
    if not isinstance(fps, (int, float)) or not np.isfinite(fps) or fps <= 0:
        raise InputFileError(path, f"meta 'fps' must be a positive number, got {fps!r}")
    missing = [k for k in _ARRAYS if k not in data]
    if missing:
        raise InputFileError(path, f"missing arrays {missing}")
    F = data["times"].shape[0] if data["times"].ndim == 1 else -1
    if F < 1:
        raise InputFileError(path, f"'times' must be a non-empty 1-D array, got shape {data['times'].shape}")
    for k, tail in _ARRAYS.items():
        a = data[k]
        if a.dtype.kind not in "fi":
            raise InputFileError(path, f"array {k!r} has dtype {a.dtype}, expected numbers")
        ok = a.ndim == 1 + len(tail) and a.shape[0] == F and all(
            t is None or t == d for t, d in zip(tail, a.shape[1:]))
        if not ok:
            want = "(" + ", ".join(["F"] + ["*" if t is None else str(t) for t in tail]) + ")"
            raise InputFileError(path, f"array {k!r} has shape {a.shape}, expected {want} with F={F}")
        if not np.all(np.isfinite(a)):
            raise InputFileError(path, f"array {k!r} contains NaN or infinite values")
        data[k] = a.astype(np.float64)
    B = data["local_rot"].shape[1]
    for k in ("body_pos", "body_rot"):
        if data[k].shape[1] != B:
            raise InputFileError(path, f"array {k!r} has {data[k].shape[1]} bodies, local_rot has {B}")
    if data["muscle_length"].shape != data["muscle_length_rate"].shape:
        raise InputFileError(path, "muscle_length and muscle_length_rate differ in shape")
    norms = np.linalg.norm(data["local_rot"], axis=-1)
    if np.any(np.abs(norms - 1) > 1e-3):
        raise InputFileError(path, "local_rot holds quaternions that are not of unit length")
    return Reference(meta=meta, **data)


# ---- metrics ----------------------------------------------------------------------------
BOX_CORNERS = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)  # x half-size


def foot_points(rig, body_rot: np.ndarray, body_pos: np.ndarray, side: str, bodies=None) -> np.ndarray:
    """World corners of the foot's contact boxes (talus and toes; or `bodies`), (..., P, 3):
    each box's 8 in BOX_CORNERS' order."""
    if bodies is None:
        bodies = [b for b, n in enumerate(rig.body_names) if rig.body_contact[b] and n.endswith(side)]
    corners = 0.5 * BOX_CORNERS[None] * rig.body_size[bodies][:, None]  # (nb, 8, 3)
    pts = np.einsum("...bij,bkj->...bki", body_rot[..., bodies, :, :], corners)
    pts = pts + body_pos[..., bodies, None, :]
    return pts.reshape(pts.shape[:-3] + (-1, 3))


def foot_tracks(rig, body_rot: np.ndarray, body_pos: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per foot (right, left): the lowest corner of its contact boxes in each frame (F, 3),
    and where that same point on the foot is one frame later (F-1, 3)."""
    out = []
    for side in ("R", "L"):
        pts = foot_points(rig, body_rot, body_pos, side)  # (F, P, 3)
        k = np.argmin(pts[..., 2], axis=-1)
        low = np.take_along_axis(pts, k[:, None, None], 1)[:, 0]
        nxt = np.take_along_axis(pts[1:], k[:-1, None, None], 1)[:, 0]
        out.append((low, nxt))
    return out


def slides(tracks) -> np.ndarray:
    """(F-1, 2) how far each foot's lowest point slides across the floor (m) to the next
    frame (that point on the foot followed), from foot_tracks()."""
    return np.stack([np.linalg.norm(nxt[:, :2] - low[:-1, :2], axis=1) for low, nxt in tracks], axis=1)


def planted(tracks, fps: float) -> tuple[np.ndarray, np.ndarray]:
    """(F-1, 2) lowest corner height of each foot and whether the foot is planted there: its
    lowest corner within STANCE_HEIGHT_M of the floor, sliding to the next frame slower than
    STANCE_SPEED_SHARE of that foot's peak speed in the clip. tracks: foot_tracks() of the
    frames (its lowest corner in each frame and where that point is one frame later)."""
    h = np.stack([low[:-1, 2] for low, _ in tracks], axis=1)
    speed = slides(tracks) * fps
    peak = speed.max(axis=0, keepdims=True)
    return h, (h < STANCE_HEIGHT_M) & (speed < STANCE_SPEED_SHARE * peak)


def motion_metrics(rig, body_rot: np.ndarray, body_pos: np.ndarray, root_pos: np.ndarray,
                   fps: float, tracks=None) -> tuple[dict, np.ndarray]:
    """Summary figures of a model trajectory, and the per-foot lowest point heights (F, 2).

    root_speed_mps: mean horizontal speed of the root over the clip (path length / time).
    foot_skate_cm: where a foot is planted (`planted`), how far its planted point slides to
    the next frame, mean, in cm at the clip's frame rate (at 120 Hz, 0.1 cm is a 12 cm/s
    slide); foot_skate_cm_per_s gives the same as a speed and foot_skate_total_cm the sum.
    contact_fraction: the share of foot-frames planted. stance_sink_cm: how far the lowest
    planted corner goes below the floor (0: none does).
    `tracks`: foot_tracks() of the same trajectory, when already computed.
    """
    tracks = foot_tracks(rig, body_rot, body_pos) if tracks is None else tracks
    h = np.stack([low[:, 2] for low, _ in tracks], -1)
    F = len(root_pos)
    if F > 1:
        stance_h, stance = planted(tracks, fps)
        sl = slides(tracks)[stance]
        sink = float(max(0.0, -stance_h[stance].min())) if stance.any() else 0.0
    else:
        sl, stance, sink = np.zeros(0), np.zeros((0, 2), bool), 0.0
    seconds = max((F - 1) / fps, 1e-12)
    path = float(np.sum(np.linalg.norm(np.diff(root_pos[:, :2], axis=0), axis=-1))) if F > 1 else 0.0
    net = float(np.linalg.norm(root_pos[-1, :2] - root_pos[0, :2]))
    lowest = h.min(-1)
    metrics = dict(
        root_speed_mps=round(path / seconds, 4),
        root_net_speed_mps=round(net / seconds, 4),
        foot_skate_cm=round(float(sl.mean() * 100) if sl.size else 0.0, 4),
        foot_skate_cm_per_s=round(float(sl.mean() * 100 * fps) if sl.size else 0.0, 3),
        foot_skate_total_cm=round(float(sl.sum() * 100), 3),
        contact_fraction=round(float(stance.mean()) if stance.size else 0.0, 4),
        stance_sink_cm=round(sink * 100, 3),
        lowest_foot_min_cm=round(float(lowest.min() * 100), 3),
        lowest_foot_mean_cm=round(float(lowest.mean() * 100), 3),
        lowest_foot_max_cm=round(float(lowest.max() * 100), 3),
    )
    return metrics, h
