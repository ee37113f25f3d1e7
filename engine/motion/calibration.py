"""Calibration poses at the start and the end of mocap clips: found, and skipped unless kept.

Motion capture often opens with the actor (or the solver) holding a T- or A-pose for one
frame or a few, then cutting or easing into the motion, and many sessions end as they began:
the actor eases or cuts back into the pose and holds it (detect_calibration_end: the same
rules with the clip's time reversed). Tracked as it is, that opening is a
jump the body cannot make, or seconds of a pose nobody asked for. Real motion also often
starts near such a pose (a kick or a dance opening with the arms out), so a start is skipped
only where it is all of these, judged on the mapped bones at any frame rate:

- a calibration pose on every skipped frame: both upper arms within T_POSE_DEG of
  horizontal (T-pose) or A_POSE_DEG and less below it (A-pose), and both knees straight
  (thigh and shank within STRAIGHT_KNEE_DEG of one line);
- held: every skipped frame within STILL_DEG of the run's first pose (marker jitter passes,
  motion does not), for at least HOLD_S before an easing (a single frame counts only when a
  jump follows it: a pose the body cannot leave that fast);
- followed by a cut or an easing into motion the clip never comes back to:
  - jump: the pose change into the first motion frame is at least JUMP_MIN_DEG and
    JUMP_FACTOR times the clip's ordinary frame-to-frame change (its 90th percentile after
    the cut), and no frame of the motion after the cut comes back near the skipped poses
    (the nearest is at least FAR_SHARE of the jump away), so the cut is not a fast move;
  - easing (no jump): the held pose is far from every frame of the clip's second half (at
    least max(JUMP_MIN_DEG, JUMP_FACTOR x ordinary)); the frames up to where the easing
    comes within half that of the motion are skipped, and never past where the easing ends
    (it stops moving away from the held pose, or its pose change, past its peak, is least).

Pose change is the root-mean-square over the bones of each bone's local rotation angle
(2 acos |<q_a, q_b>|). The cut is searched in the first MAX_SECONDS, leaving at least
MIN_MOTION_S and MIN_MOTION_FRAMES of motion; held runs one after the other go together (a
T-pose then an A-pose). The skipped pose is named from its upper arms: T-pose or A-pose.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..transforms import quat_angle
from .skeleton import SourceMotion

JUMP_MIN_DEG = 10.0  # deg RMS over the bones, in one frame
JUMP_FACTOR = 2.5  # times the ordinary frame-to-frame change
FAR_SHARE = 0.5  # the motion's nearest frame to a skipped pose, as a share of the jump
MAX_SECONDS = 10.0  # a calibration is looked for this far into the clip
MIN_MOTION_S, MIN_MOTION_FRAMES = 0.5, 8  # and leaves at least this much motion after it
EASE_SAMPLES = 2000  # frames of the clip's second half the easing rule compares with, at most
T_POSE_DEG, A_POSE_DEG = 25.0, 65.0  # upper-arm angle below horizontal: T within 25, A 25..65
STRAIGHT_KNEE_DEG = 20.0  # a calibration pose stands on straight legs
STILL_DEG = 5.0  # a held pose stays this close (RMS over bones) to its first frame
HOLD_S = 0.1  # and, to ease into the motion rather than jump, is held this long


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
    at_end: bool = False  # the last `frames` frames (detect_calibration_end), not the first

    @property
    def seconds(self) -> float:
        return self.frames / self.fps

    def meta(self, skipped: bool) -> dict | None:
        """The record a reference keeps (None when nothing was found)."""
        if not self.frames:
            return None
        return dict(frames=self.frames, seconds=round(self.seconds, 4), source_fps=round(self.fps, 6),
                    pose=self.pose, jump_deg=round(self.jump_deg, 2), ordinary_deg=round(self.ordinary_deg, 2),
                    distance_deg=round(self.distance_deg, 2), eased=self.eased, skipped=bool(skipped),
                    at="end" if self.at_end else "start")


def pose_distance_deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """RMS over bones of the angle between poses a and b ((..., J, 4) quaternions)."""
    return np.sqrt(np.mean(np.degrees(quat_angle(a, b)) ** 2, axis=-1))


def pose_change_deg(rotations: np.ndarray) -> np.ndarray:
    """(F-1,) pose distance between consecutive frames of (F, J, 4) rotations."""
    return pose_distance_deg(rotations[1:], rotations[:-1])


def _heads(motion: SourceMotion, start: int, stop: int) -> np.ndarray:
    """World head positions (n, J, 3) of frames start..stop-1."""
    return motion.frames(slice(start, stop)).fk()[1]


def arm_drop_deg(motion: SourceMotion, frame: int, arms) -> list[float]:
    """Angle below horizontal (deg) of each upper arm [(arm bone, forearm bone), ...] in a frame."""
    return [float(x) for x in _arm_drops(_heads(motion, frame, frame + 1), arms)[0]]


def _arm_drops(heads: np.ndarray, arms) -> np.ndarray:
    """(n, len(arms)) upper-arm angle below horizontal, degrees."""
    out = np.empty((len(heads), len(arms)))
    for i, (arm, fore) in enumerate(arms):
        d = heads[:, fore] - heads[:, arm]
        out[:, i] = np.degrees(np.arcsin(-d[:, 2] / np.maximum(np.linalg.norm(d, axis=-1), 1e-12)))
    return out


def _knee_bends(heads: np.ndarray, legs) -> np.ndarray:
    """(n, len(legs)) angle between thigh and shank (0: straight), degrees."""
    out = np.empty((len(heads), len(legs)))
    for i, (hip, knee, ankle) in enumerate(legs):
        u, v = heads[:, knee] - heads[:, hip], heads[:, ankle] - heads[:, knee]
        c = np.sum(u * v, -1) / np.maximum(np.linalg.norm(u, axis=-1) * np.linalg.norm(v, axis=-1), 1e-12)
        out[:, i] = np.degrees(np.arccos(np.clip(c, -1.0, 1.0)))
    return out


def _poses(heads: np.ndarray, arms, legs) -> tuple[np.ndarray, np.ndarray]:
    """Per frame of `heads` (n, J, 3): the pose's name (_pose_names) and whether it is a
    calibration pose (a T- or A-pose on straight legs)."""
    names = _pose_names(_arm_drops(heads, arms))
    return names, (names != "") & np.all(_knee_bends(heads, legs) <= STRAIGHT_KNEE_DEG, axis=1)


def _pose_names(drops: np.ndarray) -> np.ndarray:
    """Per frame "T-pose", "A-pose" or "" from the upper arms' drops (n, arms)."""
    t = np.all(np.abs(drops) <= T_POSE_DEG, axis=1)
    a = np.all((drops > T_POSE_DEG) & (drops <= A_POSE_DEG), axis=1)
    return np.where(t, "T-pose", np.where(a, "A-pose", ""))


def detect_calibration(motion: SourceMotion, bones=None, arms=(), legs=()) -> Calibration:
    """The calibration frames at the start of `motion` (see the module's rules).

    bones: source bone indices to compare (default all; a retarget passes the mapped ones,
    so fingers and helper bones do not count); arms: [(upper-arm bone, forearm bone)] and
    legs: [(hip, knee, ankle)] judge the pose. Without arms and legs nothing is found: a
    pose cannot be told a calibration pose without them.
    """
    F = motion.num_frames
    if F <= MIN_MOTION_FRAMES or not (len(arms) and len(legs)):
        return Calibration(0, motion.fps)
    R = motion.rotations if bones is None else motion.rotations[:, np.asarray(bones, int)]
    d = pose_change_deg(R)  # d[t]: frame t -> t + 1
    last = min(F - max(MIN_MOTION_FRAMES, int(np.ceil(MIN_MOTION_S * motion.fps))), int(MAX_SECONDS * motion.fps) + 1)
    if last < 1:
        return Calibration(0, motion.fps)
    names, posed = _poses(_heads(motion, 0, last + 1), arms, legs)
    found, start = Calibration(0, motion.fps), 0
    while start < last:  # held runs one after the other (a T-pose, then an A-pose)
        cal = _held_run(motion, R, d, start, last, posed, names)
        if not cal.frames:
            break
        found, start = cal, cal.frames  # (an easing may end in the clip's own calibration frame)
    return found


def detect_calibration_end(motion: SourceMotion, bones=None, arms=(), legs=()) -> Calibration:
    """The calibration frames at the end of `motion`: detect_calibration's rules with time
    reversed (a held T- or A-pose the motion cuts or eases into and never leaves), so what
    is never cut from a start that moves is never cut from an end that moves."""
    found = detect_calibration(motion.frames(slice(None, None, -1)), bones, arms, legs)
    return replace(found, at_end=True) if found.frames else found


def detect_calibrations(motion: SourceMotion, bones=None, arms=(), legs=()) -> tuple[Calibration, Calibration]:
    """The calibration frames at the start and at the end of `motion`. A session that opens
    and ends in calibration poses has the same pose (or a T- and an A-pose, a few bones
    apart) at both ends, so each end's pose would be "motion coming back near" the other's
    (the jump rule): the start is judged without the held pose at the end (the run of posed,
    still frames it ends in), and the end without what was found at the start (or its held
    pose). A pose the motion comes back to inside the clip still keeps either end."""
    F = motion.num_frames
    head = held_frames(motion, bones, arms, legs)
    tail = held_frames(motion.frames(slice(None, None, -1)), bones, arms, legs)
    start = detect_calibration(motion.frames(slice(0, F - tail)) if 0 < tail < F else motion, bones, arms, legs)
    skip = max(start.frames, head) if head < F else start.frames
    end = detect_calibration_end(motion.frames(slice(skip, None)) if skip else motion, bones, arms, legs)
    return start, end


def held_frames(motion: SourceMotion, bones=None, arms=(), legs=()) -> int:
    """How many frames `motion` opens with in one calibration pose (a T- or A-pose on straight
    legs) held still (within STILL_DEG of its first frame): 0 without arms and legs to judge by."""
    F = motion.num_frames
    if not F or not (len(arms) and len(legs)):
        return 0
    R = motion.rotations if bones is None else motion.rotations[:, np.asarray(bones, int)]
    n = min(F, int(MAX_SECONDS * motion.fps) + 1)
    names, posed = _poses(_heads(motion, 0, n), arms, legs)
    return _held_length(R, posed, names, 0, n)


def _held_length(R, posed, names, start: int, stop: int) -> int:
    """How many frames from `start` (up to `stop`) hold one calibration pose: posed, named as
    frame `start` is, and within STILL_DEG of it (R: the compared bones' rotations)."""
    run = (posed[start:stop] & (names[start:stop] == names[start])
           & (pose_distance_deg(R[start:stop], R[start][None]) <= STILL_DEG))
    return int(np.argmin(run)) if not run.all() else len(run)


def held_inside(motion: SourceMotion, bones=None, arms=(), legs=()) -> list[dict]:
    """Calibration poses inside the clip (a capture restarted, takes spliced): the frames
    between two jumps (each at least max(JUMP_MIN_DEG, JUMP_FACTOR x the clip's ordinary
    frame-to-frame change), at most MAX_SECONDS apart) when every one of them is the same T-
    or A-pose on straight legs (as detect_calibration judges them). A take jumps there.
    Findings as engine.motion.checks makes them: check "calibration", body the pose's name,
    worst the larger jump (deg). Only the frames between jumps are posed (a long clip has few)."""
    F = motion.num_frames
    if F < 3 or not (len(arms) and len(legs)):
        return []
    R = motion.rotations if bones is None else motion.rotations[:, np.asarray(bones, int)]
    d = pose_change_deg(R)  # d[t]: frame t -> t + 1
    limit = max(JUMP_MIN_DEG, JUMP_FACTOR * float(np.percentile(d, 90)))
    jumps = np.flatnonzero(d >= limit)
    out = []
    for j1, j2 in zip(jumps[:-1], jumps[1:]):
        first, last = int(j1) + 1, int(j2)  # the frames between the jump in and the jump out
        if (last - first + 1) * motion.frame_time > MAX_SECONDS:
            continue
        names, posed = _poses(_heads(motion, first, last + 1), arms, legs)
        if posed.all() and np.all(names == names[0]):
            out.append(dict(check="calibration", body=str(names[0]), first_s=round(first / motion.fps, 3),
                            last_s=round(last / motion.fps, 3), frames=last - first + 1,
                            worst=round(float(max(d[j1], d[j2])), 1), limit=round(limit, 1), unit="deg"))
    return out


def _held_run(motion, R, d, start, last, posed, names) -> Calibration:
    """The calibration ending a held pose that starts at frame `start`, or none."""
    if not posed[start]:
        return Calibration(0, motion.fps)
    end = start + _held_length(R, posed, names, start, last + 1)  # first frame out of the run
    if end > last:
        return Calibration(0, motion.fps)  # the pose outlasts the search: it is the clip
    cal = _jump(motion, R, d, start, end, names[start])
    if cal.frames or (end - start) * motion.frame_time < HOLD_S:
        return cal
    return _ease(motion, R, d, start, end, last, names[start])


def _jump(motion, R, d, start, k, pose) -> Calibration:
    """Cut before frame k when a jump leads into it and no later frame comes back near the run."""
    ordinary = float(np.percentile(d[k:], 90)) if k < len(R) - 1 else 0.0
    jump = float(d[k - 1])
    if jump < max(JUMP_MIN_DEG, JUMP_FACTOR * ordinary):
        return Calibration(0, motion.fps)
    lead = R[[start, k - 1]]  # the run's first and last poses
    near = float(pose_distance_deg(lead[:, None], R[None, k:]).min())
    if near < FAR_SHARE * jump:
        return Calibration(0, motion.fps)
    return Calibration(int(k), motion.fps, str(pose), jump, ordinary, near)


def _ease(motion, R, d, start, end, last, pose) -> Calibration:
    """A held pose that eases into the motion without a jump: its first frame is at least
    max(JUMP_MIN_DEG, JUMP_FACTOR x ordinary) from every frame of the clip's second half (the
    motion), and the cut falls at the first frame within half that of it (the rest of the
    easing is kept: it no longer jumps)."""
    half = len(R) // 2
    if end > half:
        return Calibration(0, motion.fps)
    rest = R[half:][::max(1, (len(R) - half) // EASE_SAMPLES)]
    ordinary = float(np.percentile(d[half:], 90))
    far = max(JUMP_MIN_DEG, JUMP_FACTOR * ordinary)
    distance = float(pose_distance_deg(R[start:start + 1, None], rest[None]).min())
    if distance < far:
        return Calibration(0, motion.fps)
    stop = _easing_end(R, d, start, end, last)
    until = last if stop is None else stop
    k = None  # the first frame within far / 2 of the motion, up to where the easing ends
    for i0 in range(end, until + 1, 64):
        near = pose_distance_deg(R[i0:min(i0 + 64, until + 1), None], rest[None]).min(1)
        hit = np.flatnonzero(near <= far / 2)
        if hit.size:
            k = i0 + int(hit[0])
            break
    k = stop if k is None else k
    if k is None or k <= end:
        return Calibration(0, motion.fps)
    return Calibration(k, motion.fps, str(pose), float(d[k - 1]), ordinary, distance, eased=True)


def _easing_end(R, d, start, end, last) -> int | None:
    """The frame where an easing out of the pose held until `end` has met the motion (None:
    not found before `last`): it moves away from the held pose, speeding up and slowing down
    as it nears its target, and the motion begins where it stops moving away or where its pose
    change, past its peak, is least (a clip whose opening is unlike its second half, the
    Mixamo fixture walking before it turns back, was otherwise cut 0.7 s into its walk, a
    dance 0.2 s into its first move)."""
    away = pose_distance_deg(R[end:last + 1], R[start][None])
    turned = np.flatnonzero(np.diff(away) <= 0)
    stop = end + int(turned[0]) if turned.size else None
    speed = d[end - 1:last if stop is None else stop]  # speed[i]: the change into frame end + i
    if len(speed) >= 3:
        speed = np.convolve(speed, np.ones(3) / 3, mode="same")  # marker jitter
        falling = np.flatnonzero(np.diff(speed) < 0)
        if falling.size:
            i = int(falling[0])
            rising = np.flatnonzero(np.diff(speed[i:]) > 0)
            if rising.size:
                lowest = end + i + int(rising[0])
                stop = lowest if stop is None else min(stop, lowest)
    return stop


def skip_frames(motion: SourceMotion, frames: int, last: int = 0) -> SourceMotion:
    """`motion` without its first `frames` frames and its `last` last ones."""
    if frames <= 0 and last <= 0:
        return motion
    return motion.frames(slice(max(frames, 0), motion.num_frames - max(last, 0)))


def found_in(meta: dict) -> list[dict]:
    """A reference's calibration records (its meta's "calibration" at the start and
    "calibration_end"), those found, in that order."""
    return [c for c in (meta.get("calibration"), meta.get("calibration_end")) if c]


def describe(cal: dict | None, flag: str = "--keep-calibration") -> str:
    """One line on a calibration record (a reference's meta['calibration'] or
    meta['calibration_end']) for the command line, or ''."""
    if not cal:
        return ""
    end = cal.get("at") == "end"  # (references saved before the end was looked at have no "at")
    join = (("easing out of the motion" if end else "easing into the motion") if cal.get("eased") else
            f"joined to the motion by a {cal['jump_deg']:.0f} deg jump")
    what = (f"{cal['frames']} frame{'s' if cal['frames'] != 1 else ''} ({cal['seconds']:.2f} s) of "
            f"{'an' if cal['pose'] == 'A-pose' else 'a'} {cal['pose']} at the {'end' if end else 'start'}, {join}")
    if cal["skipped"]:
        return f"skipped {what}; {flag} keeps them"
    return f"kept {what} ({flag})"
