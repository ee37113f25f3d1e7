"""Feet that stand flat: a clip's planted soles levelled about the foot's length.

The retarget maps each source bone's rotation relative to a pose in which the model's soles are
flat (engine.motion.standing): a skeleton whose rest pose stands is taken to stand on flat
soles. Most do. Some do not: the CMU captures' foot bones rest turned ~25 deg about their
length from how the subject's soles met the floor (both feet, mirrored, in the walk and the
run alike), so every step of theirs put the model on the outer edge of its feet, which it
cannot stand on: the ankle then fights the floor, and the take's balance with it.

A planted foot with its heel and toes down (engine.motion.reference.planted, and both ends of
it on the floor: not a foot raised onto its toes or pointed) stands on its sole. So where
both feet's planted frames agree (within ROLL_SPREAD_DEG of their median) on soles turned
by ROLL_MIN_DEG or more about the sole's length, outwards or inwards alike (mirrored, as a
skeleton's rest pose is), the source pose's feet are turned back about it by as much
(SourcePose.with_foot_turned): every frame of the clip alike, so the motion is kept and only
the feet's alignment changes. Only the roll is levelled: a planted foot's pitch is motion (a
heel strike, a push off, a run landing on its forefoot), which the clip keeps. One foot on
its edge is motion too (a dancer's, a stumble), and is kept.
Measured on the clips at hand (the median roll of the planted frames): the CMU walk -26 / 24
deg (right / left) on 104 / 103 frames; MASS's eight clips and the Mixamo fixture within 9 deg
on both feet at once (one foot of MASS's one-leg balance and of its pirouette 18, held down
on its edge while the other stands). The CMU walk levelled tracks at 3.4-4.0 deg on three
draws of its balanced take (4.9-5.7 before) and asks 11 N m of joint torque beyond the
muscles instead of 14. The CMU run has the same feet but lands on its forefoot: 5 and 11
frames with heel and toes down, too few to judge (MIN_PLANTED_S). A forefoot gait's feet are
judged on all their planted frames instead (judged_frames): the roll is read across the
foot's length, so a foot on its toes has the roll of a flat one. The CMU run's 37 and 42
planted frames agree on -22 / 24 deg (spread 1.7 / 0.8), as its walk's flat frames do; MASS's
eight clips and the Mixamo fixture stay within 15 deg on one foot and are left alone either way.
"""
from __future__ import annotations

import numpy as np

from ..transforms import quat_conjugate, quat_rotate
from .reference import BOX_CORNERS, STANCE_HEIGHT_M, foot_points

ROLL_MIN_DEG = 12.0  # a planted sole turned less than this about the foot's length is left
ROLL_SPREAD_DEG = 8.0  # the planted frames agree: mean distance of their rolls from the median, at most
MIN_PLANTED_S = 0.1  # s of planted frames (heel and toes down) each foot needs to be judged on

_UP = np.array([0.0, 0.0, 1.0])


def stance_roll(G: np.ndarray, axis: np.ndarray) -> tuple[float, float]:
    """(roll, spread) in degrees of a foot's planted frames. G (n, 4): the foot's joint-frame
    world rotations in those frames (the frame is world-aligned at rest, where the sole is
    flat); axis (3,): the sole's length (heel -> toes, along the floor at rest) in that frame.
    Each frame's roll is the turn about axis, right-handed, that takes the sole's up at rest
    to the world's up seen from the foot, both taken across the foot's length (its pitch, a
    heel strike or a push off, is not roll); roll is their median, spread their mean
    distance from it."""
    u = quat_rotate(quat_conjugate(G), _UP)  # the world's up in the foot's frame, (n, 3)
    a = axis / np.linalg.norm(axis)
    p0 = _UP - (_UP @ a) * a  # the rest's up across the foot's length
    pu = u - (u @ a)[:, None] * a
    rolls = np.degrees(np.arctan2(np.cross(p0, pu) @ a, pu @ p0))
    roll = float(np.median(rolls))
    return roll, float(np.abs(rolls - roll).mean())


def heel_and_toes_down(rig, body_rot: np.ndarray, body_pos: np.ndarray, side: str) -> np.ndarray:
    """(F,) whether both ends of the foot (side "R" or "L") touch the floor: the lowest corner
    of the talus box's heel half and of the toe boxes within STANCE_HEIGHT_M of it. A foot on
    its toes, pointed or raised onto them, has its heel up; one on its edge has both ends down."""
    bi = rig.body_index
    talus, toes = bi(f"Talus{side}"), [bi(f"FootThumb{side}"), bi(f"FootPinky{side}")]
    forward = rig.body_rest_rot[talus].T @ (rig.joint_pos[toes].mean(0) - rig.body_rest_pos[talus])
    heel = BOX_CORNERS @ forward < 0  # the talus box's corners away from the toes (in its own frame)
    heel_z = foot_points(rig, body_rot, body_pos, side, [talus])[:, heel, 2]
    toe_z = foot_points(rig, body_rot, body_pos, side, toes)[..., 2]
    return (heel_z.min(-1) < STANCE_HEIGHT_M) & (toe_z.min(-1) < STANCE_HEIGHT_M)


def judged_frames(stance: np.ndarray, flat: list, fps: float) -> list[np.ndarray]:
    """The frames each foot's roll is judged on: stance (F-1, 2), whether each foot (right,
    left) is planted (engine.motion.reference.planted); flat, per foot (F-1,), whether its heel
    and toes are down (heel_and_toes_down). The planted frames with the heel and toes down
    where both feet have MIN_PLANTED_S of them; else (a gait on the forefoot: a run lands and
    pushes off on it, its heel rarely down) every planted frame of both feet, which
    stance_roll reads alike, since it takes the roll across the foot's length (a pitched foot,
    on its toes, has the roll of a flat one)."""
    on_soles = [np.flatnonzero(stance[:, i] & flat[i]) for i in range(2)]
    if min(len(f) for f in on_soles) >= MIN_PLANTED_S * fps:
        return on_soles
    return [np.flatnonzero(stance[:, i]) for i in range(2)]


def needs_levelling(feet, fps: float) -> bool:
    """Whether the two feet's planted soles, feet [(roll, spread, frames)] for the right and
    the left foot (stance_roll and how many frames it was judged on), show a skeleton's feet
    turned, not a motion (the module doc): both rolled by ROLL_MIN_DEG or more, outwards
    or inwards alike (a roll about the foot's forward length mirrors into the opposite
    sign), each agreed on by its frames (spread within ROLL_SPREAD_DEG) over MIN_PLANTED_S."""
    (r1, s1, n1), (r2, s2, n2) = feet
    return (min(n1, n2) >= MIN_PLANTED_S * fps and max(s1, s2) <= ROLL_SPREAD_DEG
            and min(abs(r1), abs(r2)) >= ROLL_MIN_DEG and r1 * r2 < 0)


def describe(levelled: dict | None) -> str:
    """One line on the feet levelled: levelled {model foot body ("TalusR"): deg}."""
    if not levelled:
        return ""
    side = {"R": "right", "L": "left"}
    parts = [f"{side.get(name[-1], name)} {abs(float(deg)):.0f} deg" for name, deg in levelled.items()]
    return ("planted soles stood turned about the foot's length from the skeleton's rest pose (" + ", ".join(parts)
            + "): its feet levelled")
