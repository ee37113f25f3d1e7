"""Bad frames in a capture, found and repaired before retargeting.

Optical capture loses markers or swaps them for a frame or two; the solver then throws a bone
out and back (a knee flung 90 deg for one frame at 120 fps is ~190 rad/s, where a kick's
fastest joint turns under 26). Tracked, such a spike is a kick the body cannot give, and the
low-pass on the reference's velocities only spreads it. A spike is a run of frames of one
bone, at most SPIKE_S long (and MAX_SPIKE_FRAMES), that jumps away from the frame before it
faster than SPIKE_SPEED (or by more than SPIKE_STEP_DEG in one frame, at low frame rates) and
comes back: the frame after the run is within RETURN_SHARE of the jump of the frame before it. Its frames are replaced by the slerp between the frames around them. Root
translations are treated alike (a jump faster than SPIKE_ROOT_SPEED that comes back).

A capture's lost sample is also written as the frame before it again (the MASS kick's last
two frames repeat its third-last): every channel the same while the clip moves around it, the
body stops dead for a frame and then moves twice as far. A clip that loops or starts a take
takes its velocity from its ends, so a repeated last frame closes the loop a frame's step
short. `repair_held` replaces such a run of at most MAX_HELD frames inside the clip by the
slerp between its neighbours and drops one at the end. Repeated frames at the start are left
(a calibration pose holds still there), and so is a longer run (a pose held on purpose).
"""
from __future__ import annotations

import numpy as np

from ..transforms import quat_angle, quat_slerp
from .skeleton import SourceMotion

SPIKE_SPEED = 60.0  # rad/s: faster than any joint of a real kick, dance or sprint
SPIKE_STEP_DEG = 35.0  # deg in one frame, out and back, is a spike at any frame rate
SPIKE_ROOT_SPEED = 20.0  # m/s
SPIKE_S, MAX_SPIKE_FRAMES = 0.025, 3
RETURN_SHARE = 0.5
MAX_HELD = 3  # frames: a run of repeated frames this short, in a moving clip, is lost samples


def _spikes(jump: np.ndarray, back: dict, limit: float, longest: int) -> list[tuple[int, int]]:
    """Runs (first, last) of frames that leave the frame before by more than `limit` and whose
    successor comes back: jump[t] = distance t -> t + 1; back[n][t] = distance t -> t + n + 1."""
    out, F, t = [], len(jump) + 1, 0
    while t < F - 2:
        if jump[t] > limit:
            for n in range(1, longest + 1):
                if t + n + 1 < F and back[n][t] < RETURN_SHARE * jump[t] and jump[t + n] > limit:
                    out.append((t + 1, t + n))
                    t += n
                    break
        t += 1
    return out


def repair_spikes(motion: SourceMotion, bones=None) -> tuple[SourceMotion, list[dict]]:
    """`motion` with its spikes (module doc) replaced, and what was repaired: one dict per
    spike, bone (name or "root"), first_s, frames, size (deg or m)."""
    F = motion.num_frames
    if F < 3:
        return motion, []
    dt = motion.frame_time
    longest = max(1, min(MAX_SPIKE_FRAMES, int(SPIKE_S / dt + 1e-9)))
    limit = min(SPIKE_SPEED * dt, np.radians(SPIKE_STEP_DEG))
    rot = motion.rotations.copy()
    root = motion.root_translation.copy()
    names = motion.skeleton.names
    found = []
    for j in range(motion.skeleton.num_bones) if bones is None else bones:
        q = rot[:, j]
        jump = quat_angle(q[1:], q[:-1])
        if jump.max(initial=0.0) <= limit:
            continue
        back = {n: quat_angle(q[n + 1:], q[:-(n + 1)]) for n in range(1, longest + 1)}
        for a, b in _spikes(jump, back, limit, longest):
            w = (np.arange(a, b + 1) - (a - 1)) / (b + 2 - a)
            q[a:b + 1] = quat_slerp(np.repeat(q[a - 1:a], len(w), 0), np.repeat(q[b + 1:b + 2], len(w), 0), w[:, None])
            found.append(dict(bone=names[j], first_s=round(a * dt, 4), frames=b - a + 1,
                              size=round(float(np.degrees(jump[a - 1])), 1), unit="deg"))
    step = np.linalg.norm(np.diff(root, axis=0), axis=-1)
    if step.max(initial=0.0) > SPIKE_ROOT_SPEED * dt:
        back = {n: np.linalg.norm(root[n + 1:] - root[:-(n + 1)], axis=-1) for n in range(1, longest + 1)}
        for a, b in _spikes(step, back, SPIKE_ROOT_SPEED * dt, longest):
            w = ((np.arange(a, b + 1) - (a - 1)) / (b + 2 - a))[:, None]
            root[a:b + 1] = (1 - w) * root[a - 1] + w * root[b + 1]
            found.append(dict(bone="root", first_s=round(a * dt, 4), frames=b - a + 1,
                              size=round(float(step[a - 1]), 3), unit="m"))
    if not found:
        return motion, []
    fixed = SourceMotion(motion.skeleton, rot, root, motion.frame_time, motion.local_translations)
    return fixed, sorted(found, key=lambda f: f["first_s"])


def _same(motion: SourceMotion) -> np.ndarray:
    """(F - 1,) whether frame t + 1 repeats frame t exactly, in every channel."""
    rot, root = motion.rotations, motion.root_translation
    same = np.all(rot[1:] == rot[:-1], axis=(1, 2)) & np.all(root[1:] == root[:-1], axis=1)
    if motion.local_translations is not None:
        same &= np.all(motion.local_translations[1:] == motion.local_translations[:-1], axis=(1, 2))
    return same


def repair_held(motion: SourceMotion) -> tuple[SourceMotion, list[dict]]:
    """`motion` with its repeated frames (module doc) interpolated over, or dropped at its end,
    and what was done: one dict per run, bone "all frames", first_s, frames, kind "held" or
    "end"."""
    F = motion.num_frames
    if F < 3:
        return motion, []
    same = _same(motion)
    if not same.any():
        return motion, []
    dt = motion.frame_time
    rot, root = motion.rotations.copy(), motion.root_translation.copy()
    local = None if motion.local_translations is None else motion.local_translations.copy()
    found, keep, t = [], F, 1
    while t < F:
        if not same[t - 1]:
            t += 1
            continue
        a = t  # frames a..b repeat frame a - 1
        while t < F and same[t - 1]:
            t += 1
        b = t - 1
        n = b - a + 1
        # the clip moves into the run (a run at the start, or one the clip rests in, is a pose)
        if a < 2 or same[a - 2] or n > MAX_HELD:
            continue
        if b == F - 1:
            keep = a
            found.append(dict(bone="all frames", first_s=round(a * dt, 4), frames=n, kind="end"))
            continue
        w = (np.arange(a, b + 1) - (a - 1)) / (n + 1)
        rot[a:b + 1] = quat_slerp(np.repeat(rot[a - 1:a], n, 0), np.repeat(rot[b + 1:b + 2], n, 0), w[:, None])
        root[a:b + 1] = (1 - w[:, None]) * root[a - 1] + w[:, None] * root[b + 1]
        if local is not None:
            local[a:b + 1] = (1 - w[:, None, None]) * local[a - 1] + w[:, None, None] * local[b + 1]
        found.append(dict(bone="all frames", first_s=round(a * dt, 4), frames=n, kind="held"))
    if not found:
        return motion, []
    fixed = SourceMotion(motion.skeleton, rot[:keep], root[:keep], dt, None if local is None else local[:keep])
    return fixed, found


def describe(repairs: list[dict] | None) -> str:
    """One line on what repair_spikes and repair_held replaced, or ''."""
    if not repairs:
        return ""
    held = [r for r in repairs if r.get("kind") in ("held", "end")]
    repairs = [r for r in repairs if r not in held]
    line = ""
    if held:
        inside = sum(r["frames"] for r in held if r["kind"] == "held")
        end = sum(r["frames"] for r in held if r["kind"] == "end")
        parts = ([f"{inside} repeated frame{'s' if inside != 1 else ''} interpolated over (a lost sample "
                  f"written again, or a pose held on twos; the first at {held[0]['first_s']:.2f} s)"] if inside else []) + \
                ([f"{end} repeated last frame{'s' if end != 1 else ''} dropped"] if end else [])
        line = "; ".join(parts)
    if not repairs:
        return line
    return _describe_spikes(repairs) + (f"; {line}" if line else "")


def _describe_spikes(repairs: list[dict]) -> str:
    frames = sum(r["frames"] for r in repairs)
    first = repairs[0]
    more = f" and {len(repairs) - 1} more" if len(repairs) > 1 else ""
    return (f"{frames} bad frame{'s' if frames != 1 else ''} blended over from {'their' if frames != 1 else 'its'} "
            f"neighbours (a bone thrown out and back within {1000 * SPIKE_S:.0f} ms): {first['bone']} at "
            f"{first['first_s']:.2f} s, {first['size']:g} {first['unit']} out{more}")
