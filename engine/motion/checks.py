"""Checks of a retargeted reference before a take plays it: what no body can do.

A reference that asks for the impossible is a retarget bug or a broken capture until shown
otherwise, and a take of it diverges or falls for reasons that have nothing to do with the
muscles. Each check names the body and the frames at fault:

- speed: a joint turning faster than MAX_JOINT_SPEED (real captures: walks under 11 rad/s,
  kicks and dances under 26; a spike of one bad frame reaches hundreds);
- range: a joint beyond the model's range by more than RANGE_SLACK_DEG (a knee bent
  backwards, an arm through the torso), where the physics will stop it;
- floor: a foot more than BELOW_FLOOR_M under the floor;
- tipped foot: a foot on the floor (its lowest point within FOOT_CONTACT_M) rolled more than
  TIPPED_FOOT_DEG onto its side (a twisted foot; pitching onto the toes is walking);
- calibration (engine.motion.calibration.held_inside, found on the source clip by the
  retarget): a T- or A-pose held inside the clip with jumps into and out of it;
- root speed and place: the root moving faster than MAX_ROOT_SPEED (no runner does; a root
  jumping to 1e30 in a file does) or further than MAX_ROOT_DISTANCE from the origin (float
  precision is gone there: a file's root held at 1e30). These are errors: such a reference
  cannot be played at all.

Findings are dicts: check, body, first_s, last_s, frames (how many), worst (in the check's
unit) and limit; `describe` turns one into a line.
"""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from ..physics.base import ball_cone

MAX_JOINT_SPEED = 40.0  # rad/s
RANGE_SLACK_DEG = 15.0
BELOW_FLOOR_M = 0.10
FOOT_CONTACT_M = 0.03
TIPPED_FOOT_DEG = 45.0
MAX_ROOT_SPEED = 15.0  # m/s
MAX_ROOT_DISTANCE = 1e4  # m from the origin (a take's 1e-3 m contact detail needs ~1e-7 relative precision)


def _finding(check, body, bad: np.ndarray, values: np.ndarray, limit, fps, unit) -> dict:
    frames = np.flatnonzero(bad)
    return dict(check=check, body=body, first_s=round(frames[0] / fps, 3), last_s=round(frames[-1] / fps, 3),
                frames=int(len(frames)), worst=round(float(np.max(values[bad])), 3), limit=limit, unit=unit)


def check_reference(rig, ref) -> list[dict]:
    """Findings for `ref` (module doc), most frames first; ParameterError for a root speed no
    reference can have."""
    from ..kinematics import BALL, FREE, HINGE

    fps = ref.fps
    out = []
    speed = np.linalg.norm(ref.root_vel, axis=-1)
    if not np.all(np.isfinite(speed)) or speed.max() > MAX_ROOT_SPEED:
        k = int(np.argmax(np.where(np.isfinite(speed), speed, np.inf)))
        raise ParameterError("clip", f"{ref.meta.get('source') or 'the clip'}: its root moves at "
                             f"{speed[k]:.3g} m/s at {k / fps:.2f} s (no body moves faster than "
                             f"{MAX_ROOT_SPEED:g} m/s): the file's root positions are broken or in the wrong units")
    far = np.abs(ref.root_pos).max(axis=-1)
    if far.max() > MAX_ROOT_DISTANCE:
        k = int(np.argmax(far))
        raise ParameterError("clip", f"{ref.meta.get('source') or 'the clip'}: its root is {far[k]:.3g} m from "
                             f"the origin at {k / fps:.2f} s (at most {MAX_ROOT_DISTANCE:g} m): the file's root "
                             "positions are broken or in the wrong units")
    cones = ball_cone(rig)  # the ball joints' limits as the physics sets them
    for b, t in enumerate(rig.joint_type):
        k, n = rig.dof_start[b], rig.dof_start[b + 1] - rig.dof_start[b]
        name = rig.body_names[b]
        if t != FREE:
            w = np.linalg.norm(ref.qvel[:, k:k + n], axis=-1)
            bad = w > MAX_JOINT_SPEED
            if bad.any():
                out.append(_finding("speed", name, bad, w, MAX_JOINT_SPEED, fps, "rad/s"))
        if t == BALL:
            angle = np.degrees(2 * np.arccos(np.clip(np.abs(ref.local_rot[:, b, 0]), 0.0, 1.0)))
            cone = np.degrees(cones[b])
            over = angle - cone
        elif t == HINGE:
            qa = np.degrees(ref.q[:, rig.q_start[b]])
            over = np.maximum(np.degrees(rig.joint_lower[b, 0]) - qa, qa - np.degrees(rig.joint_upper[b, 0]))
        else:
            over = None
        if over is not None and (over > RANGE_SLACK_DEG).any():
            out.append(_finding("range", name, over > RANGE_SLACK_DEG, over, RANGE_SLACK_DEG, fps, "deg"))
    for i, side in enumerate(("R", "L")):
        h = ref.foot_height[:, i]
        if (h < -BELOW_FLOOR_M).any():
            out.append(_finding("floor", f"Talus{side}", h < -BELOW_FLOOR_M, -h, BELOW_FLOOR_M, fps, "m"))
        b = rig.body_index(f"Talus{side}")
        across = ref.body_rot[:, b] @ rig.body_rest_rot[b].T[:, 0]  # the rest foot's left, now
        tilt = np.degrees(np.arcsin(np.clip(np.abs(across[:, 2]), 0.0, 1.0)))  # roll: toe-off pitch is fine
        bad = (h < FOOT_CONTACT_M) & (tilt > TIPPED_FOOT_DEG)
        if bad.sum() > 1:
            out.append(_finding("tipped foot", f"Talus{side}", bad, tilt, TIPPED_FOOT_DEG, fps, "deg"))
    return sorted(out, key=lambda f: -f["frames"])


_WHAT = {"speed": "turns at up to {worst:.0f} {unit} (a body manages {limit:g})",
         "range": "goes {worst:.0f} deg past the model's range",
         "floor": "sinks up to {worst:.2f} m under the floor",
         "tipped foot": "stands on the floor tipped {worst:.0f} deg onto its side",
         "calibration": "held between jumps of up to {worst:.0f} deg (a calibration pose inside the clip: cut "
                        "the clip there, or the take jumps)"}


def describe(f: dict) -> str:
    """One line on a finding."""
    when = f"at {f['first_s']:.2f} s" if f["frames"] == 1 else \
        f"in {f['frames']} frames from {f['first_s']:.2f} to {f['last_s']:.2f} s"
    return f"{f['body']} {_WHAT[f['check']].format(**f)} {when}"


def summary_lines(checks, most: int = 3) -> list[str]:
    """Lines on a reference's findings: the `most` that last longest, then how many more."""
    checks = checks or []
    out = [describe(f) for f in checks[:most]]
    if len(checks) > most:
        out.append(f"and {len(checks) - most} more (the reference's meta: checks)")
    return out
