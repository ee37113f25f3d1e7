"""An ankle's twist turned into the hip: the leg swivelled about its hip -> ankle line.

A capture's feet turn about the shank's length more than the model's ankle can hold them:
the source's knee turns the shank (a kick's knee 10-12 deg off the model's hinge on average,
up to 31), which the model's hinge knee cannot, so the retarget leaves that turn to the
ankle to keep the foot's place in the world; or the capture puts a dancer's turn-out in the
ankle (MASS's pirouette: its right foot turned 28 deg about the shank on average). The
model's ankle is a ball joint that allows it, but few muscles turn the foot about the shank:
the tracker cannot hold such a foot against the floor (the kick's swinging ankle erred 24 deg
even with the root residual, its stance ankle and the pirouette's 30), and a person does not
turn there either (the foot's abduction at the ankle and below is a few degrees; the turn
comes from the hip).

So a twist beyond KEEP_DEG is taken out of the ankle by swivelling the thigh and shank
together about the line from the hip joint to the ankle joint: the hip joint, the ankle joint,
the knee's bend and the foot's world rotation stay as they were, the knee points elsewhere,
and the hip, whose rotators are among the strongest muscles, takes the turn. With the knee
bent the swivel's axis is not the shank's length, so the turn is found in a few rounds.
Clips that turn their ankles less (MASS's walk and run: 5 and 16 deg at most) are untouched.
"""
from __future__ import annotations

import numpy as np

from ..transforms import axis_angle_to_quat, quat_conjugate, quat_multiply, quat_normalize, quat_rotate

KEEP_DEG = 20.0  # twist about the shank the ankle keeps; beyond it the hip takes it (MASS's run: 16 at most)
ROUNDS = 4  # swivels per frame (each leaves cos(knee's tilt from the hip -> ankle line) of the excess)


def ankle_twist(rig, G: np.ndarray, side: str) -> np.ndarray:
    """(F,) each frame's twist (rad) of the ankle's local rotation about the shank's length
    (knee -> ankle in the shank's joint frame), from world joint rotations G (F, B, 4)."""
    bi = rig.body_index
    t, a = bi(f"Tibia{side}"), bi(f"Talus{side}")
    s = rig.joint_pos[a] - rig.joint_pos[t]
    s = s / np.linalg.norm(s)
    q = quat_multiply(quat_conjugate(G[:, t]), G[:, a])
    tw = 2.0 * np.arctan2(q[:, 1:] @ s, np.ascontiguousarray(q[:, 0]))  # contiguous: the same bits (tests/test_same_bits.py)
    return (tw + np.pi) % (2 * np.pi) - np.pi


def swivel_legs(rig, G: np.ndarray, keep_deg: float | None = None) -> tuple[np.ndarray, list[dict]]:
    """World joint rotations G (F, B, 4) with each leg's ankle twist beyond keep_deg (default
    KEEP_DEG) turned into its hip (module doc), and per leg swivelled: the frames and the most
    it turned (deg)."""
    out = np.array(G, dtype=float, copy=True)
    bi, J = rig.body_index, rig.joint_pos
    keep = np.radians(KEEP_DEG if keep_deg is None else keep_deg)
    moved = []
    for side in "RL":
        f, t, a = bi(f"Femur{side}"), bi(f"Tibia{side}"), bi(f"Talus{side}")
        total = np.zeros(len(out))
        for _ in range(ROUNDS):
            tw = ankle_twist(rig, out, side)
            excess = np.sign(tw) * np.maximum(np.abs(tw) - keep, 0.0)
            if not np.any(np.abs(excess) > 1e-9):
                break
            u = quat_rotate(out[:, f], J[t] - J[f]) + quat_rotate(out[:, t], J[a] - J[t])  # hip -> ankle, world
            u /= np.linalg.norm(u, axis=-1, keepdims=True)
            turn = axis_angle_to_quat(u * excess[:, None])  # turning the shank by +x lowers the ankle's twist by x
            out[:, f] = quat_normalize(quat_multiply(turn, out[:, f]))
            out[:, t] = quat_normalize(quat_multiply(turn, out[:, t]))
            total += excess
        if np.any(total != 0):
            moved.append(dict(leg=f"Femur{side}", frames=int(np.count_nonzero(total)),
                              worst_deg=round(float(np.degrees(np.abs(total).max())), 1)))
    return out, moved


def describe(swivelled: list[dict] | None) -> str:
    """One line on the legs swivelled."""
    if not swivelled:
        return ""
    side = {"R": "right", "L": "left"}
    parts = [f"{side[m['leg'][-1]]} up to {m['worst_deg']:.0f} deg in {m['frames']} frames" for m in swivelled]
    return (f"ankle twist beyond {KEEP_DEG:.0f} deg turned into the hip (the leg swivelled about its hip -> ankle "
            "line): " + ", ".join(parts))
