"""A retargeted pose brought inside the model's joint ranges.

A capture's joints go where the model's cannot: a dancer's forearm pronation, which the
model's one-piece forearm leaves to the wrist (the pirouette turns its right hand 149 deg
against the wrist's 40 deg cone), a trunk bent further than the model's spine. The physics
stops each joint at its limit, so such a reference asks the tracker for a pose it cannot
take, and its joint error then measures the retarget, not the tracking.

`within_range` moves each ball joint's rotation beyond its range to where the body can take
it (the cone the physics limits it to, engine.physics.base.ball_cone):

- a ball joint past its cone keeps the cone's edge along the same axis; what is beyond goes
  to its parent when that is a ball joint with no other child (a spine bent past the lumbar
  range bends the next vertebra up, an arm raised past the shoulder lifts the collarbone),
  so the body's world rotation is kept; otherwise (the wrist under its hinge elbow, a
  collarbone under the torso that also holds the neck) it is dropped;
- a hinge is left as it is: a knee or toe asked past its stop is held there by the physics
  (a straight stance knee pushed into its stop is how a stance leg locks: clipping the CMU
  walk's knees, 4 deg past straight at heel strike, to the stop made its 4 s take fall at
  1.3 s on a draw that walked it).

Bodies are taken from the hands and feet inwards, so what a child passes on is checked
again at its parent.
"""
from __future__ import annotations

import numpy as np

from ..kinematics import BALL
from ..physics.base import ball_cone
from ..transforms import axis_angle_to_quat, quat_multiply, quat_normalize, quat_to_axis_angle

TOLERANCE = 1e-6  # rad: a joint this little past its range is at it (rounding)


def within_range(rig, local: np.ndarray) -> tuple[np.ndarray, list[dict]]:
    """Local joint rotations (F, B, 4) brought inside the rig's ranges (module doc), and what
    was moved: per body past its range, the frames, the most it was past (deg) and where
    that went ("parent" or "dropped")."""
    out = np.array(local, dtype=float, copy=True)
    cone = ball_cone(rig)
    kids = np.bincount(rig.body_parent[rig.body_parent >= 0], minlength=rig.num_bodies)
    moved = []
    for b in range(rig.num_bodies - 1, 0, -1):
        if rig.joint_type[b] != BALL:
            continue
        p = int(rig.body_parent[b])
        v = quat_to_axis_angle(out[:, b])
        angle = np.linalg.norm(v, axis=-1)
        over = angle > cone[b] + TOLERANCE
        if not over.any():
            continue
        u = v[over] / angle[over, None]
        excess = (angle[over] - cone[b])[:, None] * u
        out[over, b] = axis_angle_to_quat(cone[b] * u)
        passed = p >= 0 and rig.joint_type[p] == BALL and kids[p] == 1
        if passed:  # local_p exp(e) exp(-e) local_b: the child's world rotation is kept
            out[over, p] = quat_normalize(quat_multiply(out[over, p], axis_angle_to_quat(excess)))
        worst = float(np.degrees(angle[over] - cone[b]).max())
        moved.append(dict(body=rig.body_names[b], frames=int(over.sum()), worst_deg=round(worst, 1),
                          to="parent" if passed else "dropped"))
    return out, moved[::-1]


def describe(limited: list[dict], most: int = 3) -> str:
    """One line on what within_range moved: the joints past their range longest first."""
    if not limited:
        return ""
    worst = sorted(limited, key=lambda m: -m["frames"])
    parts = [f"{m['body']} up to {m['worst_deg']:.0f} deg in {m['frames']} frames"
             + (" (its parent took it)" if m["to"] == "parent" else "") for m in worst[:most]]
    more = f", and {len(worst) - most} more" if len(worst) > most else ""
    return "joints held at the model's range: " + ", ".join(parts) + more
