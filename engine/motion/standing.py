"""The source pose a retarget aligns the model on: the rest pose when it stands, else a frame.

Retargeting (engine.motion.retarget) maps each source bone's rotation relative to a pose in
which the source stands as the model's T-pose does: upright, legs under the hips, facing one
way, feet flat. Most skeletons rest in such a pose (a T- or A-pose). Others do not: a BVH whose
joint axes run along the bones (every offset along one axis) rests as a straight line, and
its zero rotations are no pose at all. For those the clip itself gives the pose:

- the body: the frame, among at most SAMPLES spread over the clip, whose legs and trunk are
  nearest upright and straight (the sum of each leg's hip -> ankle angle from straight down,
  each knee's bend and the pelvis -> neck angle from straight up);
- each foot: the frame where that foot is flattest on the floor, i.e. in mid-stance: its
  ankle and toe heads both nearest their lowest heights in the clip and slow. There the
  model's foot, flat on its sole at rest, is laid flat too, turned to where the source's
  toes point.

A rest pose stands when both legs hang within UPRIGHT_DEG of straight down and the trunk is
within UPRIGHT_DEG of straight up.

A rest pose also tells each bone's twist (which side of a thigh faces forward), if the
skeleton's rest pose twists its limbs as the model's does (CMU's turns its arms 30 deg
otherwise); a frame of a walk does not (an arm swings and turns). So the twist of the limb
bones can come from their hinges instead: over the clip, the normal of the plane a knee or
elbow bends in ((hip -> knee) x (knee -> ankle)), weighted by how far it bends, is fixed in
the thigh's and the shank's own frames. `bends` keeps it, per bone, in that bone's frame.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from ..transforms import quat_conjugate, quat_multiply, quat_rotate
from .skeleton import SourceMotion, SourceSkeleton

UPRIGHT_DEG = 35.0  # legs and trunk of a standing rest pose, from vertical at most
SAMPLES = 4000  # frames of a long clip examined for the standing pose, at most
STANCE_SPEED_WEIGHT = 0.1  # seconds: a foot moving 1 m/s counts as 10 cm above its lowest
MIN_BEND_DEG, MIN_BENT = 15.0, 5  # a knee or elbow tells its hinge when bent this far, this often


class RestPoseDoesNotStand(ParameterError):
    """A skeleton's rest pose does not stand, and no clip was given to find a pose in."""


@dataclass
class SourcePose:
    """World rotations (J, 4) and head positions (J, 3) of the source bones in the pose the
    model's T-pose stands for. `frame` is None for the skeleton's rest pose, else the clip
    frame the body was taken from; `feet` {bone: frame} the frames each foot's bones (the
    foot and its descendants) were taken from."""

    rot: np.ndarray
    pos: np.ndarray
    frame: int | None = None
    feet: dict | None = None
    bends: dict | None = None  # {bone: (3,) unit bend-plane normal in the bone's own frame}
    rolled: dict | None = None  # {foot bone: deg} feet turned about their length to stand flat (level_feet)

    def meta(self) -> dict | None:
        """What a reference records to rebuild this pose (None: the rest pose as it is)."""
        if self.frame is None and not self.bends and not self.rolled:
            return None
        return dict(frame=None if self.frame is None else int(self.frame), feet={str(k): int(v) for k, v in (self.feet or {}).items()},
                    bends={str(k): np.round(v, 10).tolist() for k, v in (self.bends or {}).items()},
                    rolled={str(k): round(float(v), 3) for k, v in (self.rolled or {}).items()},
                    rotations=np.round(self.rot, 10).tolist(), positions=np.round(self.pos, 10).tolist())

    @classmethod
    def from_meta(cls, meta: dict, skeleton: SourceSkeleton) -> "SourcePose":
        rot, pos = np.asarray(meta["rotations"], float), np.asarray(meta["positions"], float)
        if rot.shape != (skeleton.num_bones, 4) or pos.shape != (skeleton.num_bones, 3):
            raise ParameterError("source_pose", f"recorded for {len(rot)} bones, the skeleton has {skeleton.num_bones}")
        frame = meta.get("frame")
        return cls(rot, pos, None if frame is None else int(frame), {int(k): int(v) for k, v in meta.get("feet", {}).items()},
                   {int(k): np.asarray(v, float) for k, v in meta.get("bends", {}).items()},
                   {int(k): float(v) for k, v in meta.get("rolled", {}).items()})

    def with_foot_turned(self, foot: int, turn: np.ndarray, deg: float) -> "SourcePose":
        """This pose with source bone `foot` turned by the world rotation `turn` (4,), recorded
        in `rolled` as `deg`. Only the bone itself: the bones below it keep their own frames
        (a toe's turn about the foot's length is not the toe hinge's to take either way)."""
        rot = self.rot.copy()
        rot[foot] = quat_multiply(turn, rot[foot])
        rolled = dict(self.rolled or {})
        rolled[int(foot)] = rolled.get(int(foot), 0.0) + float(deg)
        return SourcePose(rot, self.pos, self.frame, self.feet, self.bends, rolled)


def _angle_deg(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Angle between direction arrays u and v (..., 3), degrees."""
    c = np.sum(u * v, -1) / np.maximum(np.linalg.norm(u, axis=-1) * np.linalg.norm(v, axis=-1), 1e-12)
    return np.degrees(np.arccos(np.clip(c, -1.0, 1.0)))


_DOWN, _UP = np.array([0.0, 0.0, -1.0]), np.array([0.0, 0.0, 1.0])


def _trunk(pos: np.ndarray, trunk) -> np.ndarray:
    """Pelvis -> the mean of the top bones' heads (the shoulders), (..., 3)."""
    pelvis, tops = trunk
    return pos[..., list(tops), :].mean(-2) - pos[..., pelvis, :]


def uprightness_deg(pos: np.ndarray, legs, trunk) -> np.ndarray:
    """The worst angle from vertical (deg) of the legs (hip -> ankle, down) and the trunk
    (pelvis -> shoulders, up) in head positions (..., J, 3); legs [(hip, knee, ankle)],
    trunk (pelvis, (upper-arm bones))."""
    angles = [_angle_deg(pos[..., a, :] - pos[..., h, :], _DOWN) for h, _, a in legs]
    angles.append(_angle_deg(_trunk(pos, trunk), _UP))
    return np.max(np.stack(angles, -1), -1)


def _standing_score(pos: np.ndarray, legs, trunk) -> np.ndarray:
    score = _angle_deg(_trunk(pos, trunk), _UP)
    for h, k, a in legs:
        score = score + _angle_deg(pos[..., a, :] - pos[..., h, :], _DOWN)
        score = score + _angle_deg(pos[..., k, :] - pos[..., h, :], pos[..., a, :] - pos[..., k, :])
    return score


def source_pose(skeleton: SourceSkeleton, legs, trunk, feet, motion: SourceMotion | None = None,
                limbs=(), turns: dict | None = None) -> SourcePose:
    """The pose to align on (module doc). legs [(hip, knee, ankle)] and trunk (pelvis,
    (upper arms)) are source bone indices; feet [(ankle, toe)] per side; limbs [(a, b, c)]
    the hinged chains whose bends are measured (legs and arms), each bone's bend kept in the
    frame of turns.get(bone, bone) (the last twist bone of its chain: retarget.twist_chains).
    Without a motion, a rest pose that does not stand is an error naming how far from
    standing it is."""
    rot, pos = skeleton.rest_pose()
    worst = float(uprightness_deg(pos, legs, trunk))
    if worst <= UPRIGHT_DEG:
        if motion is None or motion.num_frames < 1:
            return SourcePose(rot, pos)
        F = motion.num_frames
        idx = np.unique(np.linspace(0, F - 1, min(F, SAMPLES)).round().astype(int))
        W, P = motion.frames(idx).fk()
        return SourcePose(rot, pos, bends=_bends(W, P, limbs, turns or {}))
    if motion is None or motion.num_frames < 1:
        raise RestPoseDoesNotStand(
            "skeleton", f"its rest pose does not stand (a leg or the trunk {worst:.0f} deg from vertical, as when "
            "joint axes run along the bones): it can be retargeted with a clip, whose most upright frame then "
            "stands for the rest pose")
    F = motion.num_frames
    idx = np.unique(np.linspace(0, F - 1, min(F, SAMPLES)).round().astype(int))
    nxt = np.where(idx + 1 < F, idx + 1, np.maximum(idx - 1, 0))  # a neighbour, for speeds
    W, P = motion.frames(np.concatenate([idx, nxt])).fk()
    n = len(idx)
    body = int(np.argmin(_standing_score(P[:n], legs, trunk)))
    rot, pos = W[body].copy(), P[body].copy()
    foot_frames = {}
    step = np.maximum(np.abs(nxt - idx), 1)[:, None] * motion.frame_time
    for ankle, toe in feet:
        ends = [b for b in (ankle, toe) if b >= 0]  # a foot without a toe bone: its ankle alone
        height = sum(P[:n, b, 2] - P[:n, b, 2].min() for b in ends)
        speed = sum(np.linalg.norm(P[n:, b, :2] - P[:n, b, :2], axis=-1) / step[:, 0] for b in ends)
        k = int(np.argmin(height + STANCE_SPEED_WEIGHT * speed))
        for b in _subtree(skeleton, ankle):
            rot[b] = W[k, b]
        foot_frames[int(ankle)] = int(idx[k])
    return SourcePose(rot, pos, int(idx[body]), foot_frames, _bends(W[:n], P[:n], limbs, turns or {}))


def _bends(W: np.ndarray, P: np.ndarray, limbs, turns: dict) -> dict:
    """{bone: unit normal of the chain's bend plane in the bone's frame} for both bones a and
    b of each chain (a, b, c) that bends by more than MIN_BEND_DEG in at least MIN_BENT frames
    (the frame, and the key, of turns.get(bone, bone))."""
    out = {}
    for a, b, c in limbs:
        n = np.cross(P[:, b] - P[:, a], P[:, c] - P[:, b])
        size = np.linalg.norm(n, axis=-1) / np.maximum(
            np.linalg.norm(P[:, b] - P[:, a], axis=-1) * np.linalg.norm(P[:, c] - P[:, b], axis=-1), 1e-12)
        bent = size > np.sin(np.radians(MIN_BEND_DEG))
        if bent.sum() < MIN_BENT:
            continue
        for bone in (turns.get(a, a), turns.get(b, b)):
            local = quat_rotate(quat_conjugate(W[bent, bone]), n[bent])  # |n| weights the sum
            mean = local.sum(0)
            if np.linalg.norm(mean) > 1e-9:
                out[int(bone)] = mean / np.linalg.norm(mean)
    return out


def _subtree(skeleton: SourceSkeleton, j: int) -> list[int]:
    out, stack = [], [int(j)]
    while stack:
        b = stack.pop()
        out.append(b)
        stack.extend(skeleton.children(b))
    return out
