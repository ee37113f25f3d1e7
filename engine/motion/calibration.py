"""Calibration poses at the start of mocap clips: found, and skipped unless kept.

Motion capture often opens with the actor (or the solver) holding a T- or A-pose for one
frame or a few, then cuts straight to the motion. Tracked as it is, that opening is a
jump the body cannot make. Such a leading run of frames shows two things at any frame
rate, under any bone names:

- a jump: the pose change into the first motion frame is at least JUMP_MIN_DEG and
  JUMP_FACTOR times the clip's ordinary frame-to-frame change (its 90th percentile after
  the cut), and
- distance: no frame of the motion after the cut comes back near the skipped poses (the
  nearest is at least FAR_SHARE of the jump away), so the cut is not a fast move.

A T- or A-pose that eases into the motion instead (no jump) is found by its first frame
alone: far from the whole second half of the clip; the frames up to where the easing
comes near the motion are skipped (_ease_rule).

Pose change is the root-mean-square over the bones of each bone's local rotation angle
(2 acos |<q_a, q_b>|). The cut is searched in the first MAX_SECONDS, leaving at least
MIN_MOTION_S and MIN_MOTION_FRAMES of motion; the last qualifying cut wins (a T-pose then an A-pose both go). The skipped
pose is named from its upper arms: T-pose (both within 25 deg of horizontal), A-pose
(both 25-65 deg below), else "pose".
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .skeleton import SourceMotion

JUMP_MIN_DEG = 10.0  # deg RMS over the bones, in one frame
JUMP_FACTOR = 2.5  # times the ordinary frame-to-frame change
FAR_SHARE = 0.5  # the motion's nearest frame to a skipped pose, as a share of the jump
MAX_SECONDS = 10.0  # a calibration is looked for this far into the clip
MIN_MOTION_S, MIN_MOTION_FRAMES = 0.5, 8  # and leaves at least this much motion after it
EASE_SAMPLES = 2000  # frames of the clip's second half the easing rule compares with, at most
T_POSE_DEG, A_POSE_DEG = 25.0, 65.0  # upper-arm angle below horizontal: T within 25, A 25..65


@dataclass(frozen=True)
class Calibration:
    """What detect_calibration found: `frames` leading frames (0: none) at `fps`, the
    pose's name, the jump into the motion, the clip's ordinary frame-to-frame change and
    the distance from the skipped poses to the nearest motion frame (deg, RMS over bones)."""

    frames: int
    fps: float
    pose: str = ""
    jump_deg: float = 0.0
    ordinary_deg: float = 0.0
    distance_deg: float = 0.0
    eased: bool = False  # found by the easing rule (no jump: cut where it nears the motion)

    @property
    def seconds(self) -> float:
        return self.frames / self.fps

    def meta(self, skipped: bool) -> dict | None:
        """The record a reference keeps (None when nothing was found)."""
        if not self.frames:
            return None
        return dict(frames=self.frames, seconds=round(self.seconds, 4), source_fps=round(self.fps, 6),
                    pose=self.pose, jump_deg=round(self.jump_deg, 2), ordinary_deg=round(self.ordinary_deg, 2),
                    distance_deg=round(self.distance_deg, 2), eased=self.eased, skipped=bool(skipped))


def _angles_deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rotation angle between quaternions a and b (..., 4) -> (...), degrees."""
    d = np.abs(np.sum(a * b, axis=-1))
    return np.degrees(2.0 * np.arccos(np.minimum(d, 1.0)))


def pose_distance_deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """RMS over bones of the angle between poses a and b ((..., J, 4) quaternions)."""
    return np.sqrt(np.mean(_angles_deg(a, b) ** 2, axis=-1))


def pose_change_deg(rotations: np.ndarray) -> np.ndarray:
    """(F-1,) pose distance between consecutive frames of (F, J, 4) rotations."""
    return pose_distance_deg(rotations[1:], rotations[:-1])


def arm_drop_deg(motion: SourceMotion, frame: int, arms) -> list[float]:
    """Angle below horizontal (deg) of each upper arm [(arm bone, forearm bone), ...] in a frame."""
    one = SourceMotion(motion.skeleton, motion.rotations[frame:frame + 1],
                       motion.root_translation[frame:frame + 1], motion.frame_time,
                       None if motion.local_translations is None else motion.local_translations[frame:frame + 1])
    _, heads = one.fk()
    out = []
    for arm, fore in arms:
        d = heads[0, fore] - heads[0, arm]
        out.append(float(np.degrees(np.arcsin(-d[2] / max(np.linalg.norm(d), 1e-12)))))
    return out


def _pose_name(motion: SourceMotion, frame: int, arms) -> str:
    if not arms:
        return "pose"
    drops = arm_drop_deg(motion, frame, arms)
    if all(abs(x) <= T_POSE_DEG for x in drops):
        return "T-pose"
    if all(T_POSE_DEG < x <= A_POSE_DEG for x in drops):
        return "A-pose"
    return "pose"


def detect_calibration(motion: SourceMotion, bones=None, arms=()) -> Calibration:
    """The calibration frames at the start of `motion` (see the module's rules).

    bones: source bone indices to compare (default all; a retarget passes the mapped ones,
    so fingers and helper bones do not count); arms: [(upper-arm bone, forearm bone)] used
    to name the pose (and needed by the easing rule).
    """
    F = motion.num_frames
    if F <= MIN_MOTION_FRAMES:
        return Calibration(0, motion.fps)
    R = motion.rotations if bones is None else motion.rotations[:, np.asarray(bones, int)]
    d = pose_change_deg(R)  # d[t]: frame t -> t + 1
    last = min(F - max(MIN_MOTION_FRAMES, int(np.ceil(MIN_MOTION_S * motion.fps))), int(MAX_SECONDS * motion.fps) + 1)
    cal = _jump_rule(motion, R, d, last, arms)
    return cal if cal.frames else _ease_rule(motion, R, d, last, arms)


def _jump_rule(motion: SourceMotion, R: np.ndarray, d: np.ndarray, last: int, arms) -> Calibration:
    """The last cut k <= last with a jump into frame k and no motion frame near the poses before."""
    for k in np.flatnonzero(d[:last] >= JUMP_MIN_DEG)[::-1] + 1:  # cut before frame k, last first
        ordinary = float(np.percentile(d[k:], 90)) if k < len(R) - 1 else 0.0
        jump = float(d[k - 1])
        if jump < JUMP_FACTOR * ordinary:
            continue
        lead = R[[0, k - 1]] if k > 1 else R[:1]  # the run's first and last poses
        near = float(pose_distance_deg(lead[:, None], R[None, k:]).min())
        if near < FAR_SHARE * jump:
            continue
        return Calibration(int(k), motion.fps, _pose_name(motion, k - 1, arms), jump, ordinary, near)
    return Calibration(0, motion.fps)


def _ease_rule(motion: SourceMotion, R: np.ndarray, d: np.ndarray, last: int, arms) -> Calibration:
    """A T- or A-pose on the first frame that eases into the motion without a jump: the
    first frame is at least max(JUMP_MIN_DEG, JUMP_FACTOR x ordinary) from every frame of
    the clip's second half (the motion), and the cut falls at the first frame within half
    that of it (the rest of the easing is kept: it no longer jumps)."""
    pose = _pose_name(motion, 0, arms)
    if pose == "pose":
        return Calibration(0, motion.fps)
    half = len(R) // 2
    rest = R[half:][::max(1, (len(R) - half) // EASE_SAMPLES)]
    ordinary = float(np.percentile(d[half:], 90))
    far = max(JUMP_MIN_DEG, JUMP_FACTOR * ordinary)
    distance = float(pose_distance_deg(R[:1, None], rest[None]).min())
    if distance < far:
        return Calibration(0, motion.fps)
    for i0 in range(1, last + 1, 64):
        near = pose_distance_deg(R[i0:min(i0 + 64, last + 1), None], rest[None]).min(1)
        hit = np.flatnonzero(near <= far / 2)
        if hit.size:
            k = i0 + int(hit[0])
            return Calibration(k, motion.fps, pose, float(d[k - 1]), ordinary, distance, eased=True)
    return Calibration(0, motion.fps)


def skip_frames(motion: SourceMotion, frames: int) -> SourceMotion:
    """`motion` without its first `frames` frames."""
    if frames <= 0:
        return motion
    local = motion.local_translations
    return SourceMotion(motion.skeleton, motion.rotations[frames:], motion.root_translation[frames:],
                        motion.frame_time, None if local is None else local[frames:])


def describe(cal: dict | None, flag: str = "--keep-calibration") -> str:
    """One line on a reference's meta['calibration'] for the command line, or ''."""
    if not cal:
        return ""
    join = ("easing into the motion" if cal.get("eased") else
            f"joined to the motion by a {cal['jump_deg']:.0f} deg jump")
    what = (f"{cal['frames']} frame{'s' if cal['frames'] != 1 else ''} ({cal['seconds']:.2f} s) of "
            f"{'an' if cal['pose'] == 'A-pose' else 'a'} {cal['pose']} at the start, {join}")
    if cal["skipped"]:
        return f"skipped {what}; {flag} keeps them"
    return f"kept {what} ({flag})"
