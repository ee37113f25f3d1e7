"""Retargeting between a source skeleton (BVH, armature) and the model, both ways.

World-space retargeting. Let F be the turn about the vertical that makes the source's rest
pose face -Y (the model's facing; found from the thighs and the up axis), W_s(t) the world
rotation of source bone s and W_s^0 its rest world rotation. Each mapped model body b gets
an alignment A_b: the rotation taking the model's rest (T-pose) bone direction, joint b ->
its child joint, onto the source's turned rest bone direction, bone s head -> the head of
the bone mapped to that child (keeping the bone's forward side forward, see _aim: no
twist for an A-pose; the pelvis aligns a whole frame built from
the hips and the spine instead; the feet take A = I, since both rest poses stand with flat
soles and feet forward while the ankle -> toe joint line differs between skeletons (a
skeleton whose foot bones rest turned from its soles has them turned back by what the clip's
planted frames say: engine.motion.soles); leaves such as hands, toes and head inherit their
parent's A).
Then the world rotation of b's joint frame is

    G_b(t) = F W_s(t) (W_s^0)^-1 F^-1 A_b

so a T-pose source has A ~ I and an A-pose source is absorbed by A. Local rotations are
G_parent^T G_b; hinge joints keep only the twist about their axis (swing-twist), which
leaves every other body's world rotation as the source had it. The root joint goes to
scale * F * (head of the pelvis bone) + ground offset, with scale = model leg length /
source leg length (hip -> knee -> ankle) and the vertical ground offset putting the feet's
lowest points on the floor in stance.

Back, model -> source, inverts the same map: W_s = F^-1 G_b A_b^-1 F W_s^0 for mapped
bones; unmapped bones keep the original clip's (or their rest) local rotation.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..errors import ParameterError
from ..kinematics import BALL, FREE, HINGE, MusclePaths
from ..transforms import (
    axis_angle_to_quat,
    matrix_to_quat,
    quat_angle,
    quat_conjugate,
    quat_multiply,
    quat_normalize,
    quat_rotate,
    quat_to_axis_angle,
    quat_to_matrix,
)
from .calibration import Calibration, detect_calibrations, held_inside, skip_frames
from .checks import check_reference
from .cleanup import repair_held, repair_spikes
from .limits import within_range
from .presets import resolve_mapping
from . import soles
from .reference import Reference, foot_tracks, motion_metrics, planted
from .rootpath import rebuilt_root
from .skeleton import SourceMotion, SourceSkeleton
from .standing import SourcePose, source_pose

REFERENCE_FPS = 120.0
TWIST_TRUST_DEG = 15.0  # a rest pose's limb twist is kept unless the clip's hinges say it is off by more
DIRECTION_SHARE = 0.01  # of the leg's length: a bone shorter than this gives no direction to aim at
# a rest pose's trunk or collarbone (a clip frame's neck or collarbone: other libraries' sit 20-33
# deg off the model's) aimed further than this from its parent keeps the parent's alignment
NEUTRAL_SLACK_DEG = 2.0
STANCE_SPEED_MPS = 0.3  # a foot point slower than this (horizontally) is planted
_CHUNK = 256  # frames per block when computing muscle lengths

# Which model joint a body's direction points at (bodies with one child use that child).
_DIRECTION = {"Torso": ["Neck"], "TalusR": ["FootThumbR", "FootPinkyR"],
              "TalusL": ["FootThumbL", "FootPinkyL"]}
_FEET = ("TalusR", "TalusL")
_NEUTRAL = ("Spine", "Torso", "Neck", "Head", "ShoulderR", "ShoulderL")
_FRAME_NEUTRAL = ("Neck", "Head", "ShoulderR", "ShoulderL")


def _swing(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Smallest rotation (quaternion) taking direction u onto direction v."""
    u = u / np.linalg.norm(u)
    v = v / np.linalg.norm(v)
    d = float(u @ v)
    if d < -1 + 1e-9:
        axis = np.cross(u, [1.0, 0, 0])
        if np.linalg.norm(axis) < 1e-6:
            axis = np.cross(u, [0, 1.0, 0])
        return np.concatenate([[0.0], axis / np.linalg.norm(axis)])
    return quat_normalize(np.concatenate([[1.0 + d], np.cross(u, v)]))


def _aim(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotation taking bone direction u onto v that keeps the bone's forward side forward.

    Both directions get a frame (bone axis, the world forward -Y made orthogonal to it; +Z
    for bones that point forward or back) and A maps one frame onto the other. Unlike the
    minimal swing this adds no twist when an A-pose arm (turned about the forward axis)
    tilts out of the frontal plane; for small differences the two agree.
    """
    def frame(d):
        d = d / np.linalg.norm(d)
        ref = np.array([0.0, -1.0, 0.0])
        if abs(d @ ref) > 0.9:
            ref = np.array([0.0, 0.0, 1.0])
        r = ref - (ref @ d) * d
        r = r / np.linalg.norm(r)
        return np.stack([d, r, np.cross(d, r)], axis=1)

    uu, vv = u / np.linalg.norm(u), v / np.linalg.norm(v)
    if abs(uu @ [0.0, -1.0, 0.0]) > 0.9 or abs(vv @ [0.0, -1.0, 0.0]) > 0.9:
        return _swing(u, v)  # near the switch between references: the swing is stable there
    return matrix_to_quat(frame(v) @ frame(u).T)


def _frame(lateral: np.ndarray, up: np.ndarray) -> np.ndarray:
    """Rotation with x along `lateral` and z as close to `up` as is orthogonal to it."""
    x = lateral / np.linalg.norm(lateral)
    z = up - (up @ x) * x
    z = z / np.linalg.norm(z)
    return np.stack([x, np.cross(z, x), z], axis=1)


def _zturn(angle: float) -> np.ndarray:
    return np.array([np.cos(angle / 2), 0.0, 0.0, np.sin(angle / 2)])


def _toe_bone(skeleton: SourceSkeleton, src: np.ndarray, bi, side: str) -> int:
    """The source bone whose head is the toes of the foot on `side` ("R"/"L"): the one mapped
    to the big toe, else the ankle bone's only child; -1 when there is none."""
    toe = int(src[bi(f"FootThumb{side}")])
    if toe >= 0:
        return toe
    kids = skeleton.children(int(src[bi(f"Talus{side}")]))
    return kids[0] if len(kids) == 1 else -1


def _hand_bone(skeleton: SourceSkeleton, src: np.ndarray, bi, side: str) -> int:
    """The source bone whose head is the wrist on `side`: the one mapped to the hand, else
    the forearm bone's only child; -1 when there is none."""
    hand = int(src[bi(f"Hand{side}")])
    if hand >= 0:
        return hand
    kids = skeleton.children(int(src[bi(f"ForeArm{side}")]))
    return kids[0] if len(kids) == 1 else -1


# Bodies above the waist whose forward side is the chest's (a pose taken from a clip).
_CHEST = ("Torso", "Neck", "Head", "ShoulderR", "ShoulderL", "ArmR", "ArmL", "ForeArmR", "ForeArmL")

# Limb bodies whose twist a pose taken from a clip gets from their hinge: body -> (proximal
# joint, hinge joint, distal joint, the way the distal bone swings when the hinge flexes:
# knees bend the shank back, elbows the forearm forward; the model faces -Y).
_BENDS = {f"{b}{s}": (f"{p}{s}", f"{h}{s}", f"{d}{s}", w)
          for s in "RL"
          for (b, p, h, d, w) in (("Femur", "Femur", "Tibia", "Talus", 1.0), ("Tibia", "Femur", "Tibia", "Talus", 1.0),
                                  ("Arm", "Arm", "ForeArm", "Hand", -1.0), ("ForeArm", "Arm", "ForeArm", "Hand", -1.0))}


def _model_bend(rig, b: int) -> np.ndarray:
    """Normal of the plane body b's limb bends in, in the model's rest pose (world axes): the
    hinge's axis, signed as (proximal bone) x (distal bone, flexed)."""
    p, h, d, way = _BENDS[rig.body_names[b]]
    J, bi = rig.joint_pos, rig.body_index
    prox, dist = J[bi(h)] - J[bi(p)], J[bi(d)] - J[bi(h)]
    flexed = dist / np.linalg.norm(dist) + 0.3 * way * np.array([0.0, 1.0, 0.0])
    axis = rig.joint_axis[bi(h)]  # joint frames are world-aligned at rest
    return axis * np.sign(axis @ np.cross(prox, flexed))


def _frame2(d: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Rotation with x along d and y along n made orthogonal to it."""
    x = d / np.linalg.norm(d)
    y = n - (n @ x) * x
    y = y / np.linalg.norm(y)
    return np.stack([x, y, np.cross(x, y)], axis=1)


def hinge_axes(rig) -> np.ndarray:
    """(B, 3) hinge axis per body in its parent's joint frame (zero rows for other joints);
    joint frames are world-aligned at rest, so this is the rig's rest axis."""
    return np.where((rig.joint_type == HINGE)[:, None], rig.joint_axis, 0.0)


def _ddt(x: np.ndarray, dt: float) -> np.ndarray:
    """Time derivative along axis 0: central differences, one-sided at the ends (the
    values of numpy's gradient, without its overhead on large arrays)."""
    out = np.empty_like(x)
    if len(x) < 2:
        out[...] = 0.0
        return out
    np.subtract(x[2:], x[:-2], out=out[1:-1])
    out[1:-1] *= 0.5 / dt
    out[0] = (x[1] - x[0]) / dt
    out[-1] = (x[-1] - x[-2]) / dt
    return out


def _continuous(q: np.ndarray) -> np.ndarray:
    """Quaternions (F, ..., 4) with signs flipped so consecutive frames agree (q ~ -q)."""
    if len(q) < 2:
        return q
    dots = np.sum(q[1:] * q[:-1], axis=-1)
    flips = np.concatenate([np.ones((1,) + dots.shape[1:]), np.where(dots < 0, -1.0, 1.0)])
    return q * np.cumprod(flips, axis=0)[..., None]


class _ModelFrames(NamedTuple):
    """A clip's frames on the model (Retargeter._model_frames)."""
    G: np.ndarray  # (F, B, 4) world rotations of the joint frames
    off: np.ndarray  # (F, B) hinge off-axis angles (rad)
    local: np.ndarray  # (F, B, 4) local rotations inside the joints' ranges
    limited: list  # what within_range moved
    root: np.ndarray  # (F, 3)
    body_rot: np.ndarray  # (F, B, 3, 3)
    body_pos: np.ndarray  # (F, B, 3)
    tracks: list  # reference.foot_tracks
    root_path: dict | None  # rootpath's meta
    offset: float  # the ground offset (m)


@dataclass
class Retargeter:
    """The fixed part of a retarget: mapping, heading, scale and per-body alignments.

    Build with `Retargeter.build(rig, skeleton, preset=..., mapping=...)`; then
    `to_model(motion)` -> Reference and `to_source(root_pos, local_rot, ...)` -> SourceMotion.
    """

    rig: object
    skeleton: SourceSkeleton
    mapping: dict
    preset: str
    heading: np.ndarray  # F, quaternion about +Z
    scale: float
    align: np.ndarray  # (B, 4) A_b (identity for unmapped bodies)
    source_of: np.ndarray  # (B,) source bone index per body, -1 when unmapped
    turn_of: np.ndarray  # (B,) source bone whose world rotation turns the body (`twist_chains`)
    axes: np.ndarray  # (B, 3) hinge axes
    source_height: float
    source_leg: float
    pose: SourcePose  # the source pose the model's T-pose stands for (engine.motion.standing)

    @classmethod
    def build(cls, rig, skeleton: SourceSkeleton, preset: str | None = None,
              mapping=None, exact: bool = False, motion: SourceMotion | None = None,
              pose: SourcePose | None = None) -> "Retargeter":
        """exact=True takes `mapping` (a dict) as the whole mapping, as saved in a
        Reference's meta, instead of laying it over a preset. A skeleton whose rest pose does
        not stand (joint axes along the bones) needs `motion`, whose most upright frame is
        aligned on instead, or the `pose` recorded by an earlier retarget."""
        if exact:
            from .presets import check_mapping, missing_required

            mp, label = dict(mapping), str(preset or "map")
            check_mapping(mp, skeleton, label)
            if missing_required(mp):
                raise ParameterError("mapping", f"lacks model bodies {', '.join(missing_required(mp))}")
        else:
            mp, label = resolve_mapping(skeleton, preset, mapping)
        B = rig.num_bodies
        src = np.full(B, -1)
        for b, name in enumerate(rig.body_names):
            if name in mp:
                src[b] = skeleton.index(mp[name])
        bi = rig.body_index
        turn = twist_chains(rig, skeleton, src)
        if pose is None:
            legs = [tuple(int(src[bi(f"{n}{s}")]) for n in ("Femur", "Tibia", "Talus")) for s in "RL"]
            trunk = (int(src[0]), (int(src[bi("ArmR")]), int(src[bi("ArmL")])))
            feet = [(int(src[bi(f"Talus{s}")]), _toe_bone(skeleton, src, bi, s)) for s in "RL"]
            arms = [(int(src[bi(f"Arm{s}")]), int(src[bi(f"ForeArm{s}")]), _hand_bone(skeleton, src, bi, s))
                    for s in "RL"]
            turns = {int(s): int(t) for s, t in zip(src, turn) if s >= 0 and t != s}
            pose = source_pose(skeleton, legs, trunk, feet, motion, legs + [a for a in arms if a[2] >= 0], turns)
        W0, P0 = pose.rot, pose.pos
        up = np.array([0.0, 0.0, 1.0])
        # Heading: the thighs give the source's left; forward = left x up must become -Y.
        left = P0[src[bi("FemurL")]] - P0[src[bi("FemurR")]]
        fwd = np.cross(left, up)
        fwd[2] = 0.0
        if np.linalg.norm(fwd) < 1e-9:
            raise ParameterError("skeleton", "cannot tell which way the source faces: its hips are not side by side")
        angle = np.arctan2(-1.0, 0.0) - np.arctan2(fwd[1], fwd[0])
        Fq = _zturn(angle)
        P = quat_rotate(Fq, P0)  # turned source rest heads

        # Scale from leg length (hip -> knee -> ankle), averaged over both sides.
        def leg(pos, idx):
            return np.mean([np.linalg.norm(pos[idx(f"Femur{s}")] - pos[idx(f"Tibia{s}")])
                            + np.linalg.norm(pos[idx(f"Tibia{s}")] - pos[idx(f"Talus{s}")])
                            for s in "RL"])

        src_leg = leg(P0, lambda n: src[bi(n)])
        model_leg = leg(rig.joint_pos, bi)
        if src_leg < 1e-6:
            raise ParameterError("skeleton", "the source's legs have zero length in the rest pose")
        scale = float(model_leg / src_leg)
        # a source direction shorter than this tells nothing: joints that share a place (CMU's
        # neck and collarbones start where its upper spine ends), written with position
        # channels, sit a rounding error apart in a random direction
        tiny = DIRECTION_SHARE * src_leg

        # Alignments.
        A = np.tile([1.0, 0, 0, 0], (B, 1))
        J = rig.joint_pos
        lat_m = J[bi("FemurL")] - J[bi("FemurR")]
        upb = "Spine" if src[bi("Spine")] >= 0 else "Torso"
        up_m = J[bi(upb)] - J[0]
        lat_s = P[src[bi("FemurL")]] - P[src[bi("FemurR")]]
        up_s = P[src[bi(upb)]] - P[src[0]]
        if np.linalg.norm(up_s) < tiny:  # spine bone starts at the hips: use the neck side
            up_s = np.mean(P[[src[bi("ArmR")], src[bi("ArmL")]]], 0) - P[src[0]]
            up_m = np.mean(J[[bi("ArmR"), bi("ArmL")]], 0) - J[0]
        A[0] = matrix_to_quat(_frame(lat_s, up_s) @ _frame(lat_m, up_m).T)

        def targets(b):
            """Mapped model bodies that b's direction points at (descending past unmapped)."""
            kids = _DIRECTION.get(rig.body_names[b]) or [
                rig.body_names[k] for k in np.flatnonzero(rig.body_parent == b)]
            if len(kids) != 1 and rig.body_names[b] not in _DIRECTION:
                return []
            ks = [bi(k) for k in kids]
            if all(src[k] >= 0 for k in ks):
                return ks
            if len(ks) == 1:
                return targets(ks[0])
            return []

        # the chest's left, in the turned pose: from the collarbones' heads, or the shoulders'
        # where those meet (CMU's both start at the top of the spine: a line of no length, whose
        # direction turned a bone-axes copy's chest 170 deg)
        lat_c = P[src[bi("ArmL")]] - P[src[bi("ArmR")]]
        if src[bi("ShoulderR")] >= 0 and src[bi("ShoulderL")] >= 0:
            lat_sh = P[src[bi("ShoulderL")]] - P[src[bi("ShoulderR")]]
            if np.linalg.norm(lat_sh[:2]) > 0.5 * np.linalg.norm(lat_c[:2]):
                lat_c = lat_sh
        chest = _zturn(np.arctan2(lat_c[1], lat_c[0]))  # from the hips' facing (-Y) to the chest's
        for b in range(1, B):
            p = rig.body_parent[b]
            A[b] = A[p]
            if src[b] < 0:
                continue
            ks = targets(b)
            d_s = None
            if ks:
                d_m = J[ks].mean(0) - J[b]
                d_s = P[src[ks]].mean(0) - P[src[b]]
            else:
                kids = np.flatnonzero(rig.body_parent == b)
                s = src[b]
                tip = None
                skids = skeleton.children(s)
                if len(skids) == 1:
                    tip = P[skids[0]]
                elif s in skeleton.end_sites:
                    tip = P[s] + quat_rotate(quat_multiply(Fq, W0[s]), skeleton.end_sites[s])
                if len(kids) == 1 and tip is not None:
                    d_m = J[kids[0]] - J[b]
                    d_s = tip - P[s]
            if rig.body_names[b] in _FEET:
                # Both poses stand with the soles flat and the feet forward; their ankle -> toe
                # joint lines differ with where each skeleton puts its joints. A foot taken
                # from a clip's stance (pose.frame set) is turned to where its toes point.
                A[b] = [1.0, 0.0, 0.0, 0.0]
                toe = _toe_bone(skeleton, src, bi, rig.body_names[b][-1])
                if pose.frame is not None and toe >= 0:
                    d_s = np.zeros(3)  # ankle -> toe in the pose, through a metatarsal bone where there is one
                    j = toe
                    while j != src[b] and j >= 0:
                        d_s += quat_rotate(quat_multiply(Fq, W0[skeleton.parents[j]]), skeleton.offsets[j])
                        j = int(skeleton.parents[j])
                    d_m = J[[bi(f"FootThumb{rig.body_names[b][-1]}"), bi(f"FootPinky{rig.body_names[b][-1]}")]].mean(0) - J[b]
                    A[b] = _zturn(np.arctan2(d_s[1], d_s[0]) - np.arctan2(d_m[1], d_m[0]))
                continue
            if d_s is not None and np.linalg.norm(d_s) > tiny and np.linalg.norm(d_m) > 1e-6:
                if pose.frame is not None and rig.body_names[b] in _CHEST:
                    # a clip's frame: the chest may face elsewhere than the hips (a run's
                    # counter-rotation); its forward side is kept forward of the shoulders'
                    A[b] = quat_multiply(chest, _aim(d_m, quat_rotate(quat_conjugate(chest), d_s)))
                else:
                    A[b] = _aim(d_m, d_s)
                bend = (pose.bends or {}).get(int(turn[b]))
                if bend is not None and rig.body_names[b] in _BENDS:
                    # twist from the hinge the bone bends about (engine.motion.standing); a
                    # standing rest pose's own twist is trusted unless the hinge is far off it
                    # (CMU's arms rest turned 30 deg from how their elbows bend)
                    n_s = quat_rotate(quat_multiply(Fq, W0[turn[b]]), bend)
                    hinged = matrix_to_quat(_frame2(d_s, n_s) @ _frame2(d_m, _model_bend(rig, b)).T)
                    if pose.frame is not None or np.degrees(quat_angle(hinged, A[b])) > TWIST_TRUST_DEG:
                        A[b] = hinged
                neutral = _NEUTRAL if pose.frame is None else _FRAME_NEUTRAL
                if rig.body_names[b] in neutral and np.degrees(quat_angle(A[b], A[p])) > NEUTRAL_SLACK_DEG:
                    # Both rest poses hold the spine, neck and collarbones in their neutral
                    # place, but a skeleton built otherwise puts these joints elsewhere (CMU's
                    # collarbone line is 22 deg off the model's, its neck 23): aimed at one
                    # another they would shrug the model's shoulders and bow its head, so they
                    # keep their parent's alignment. (MASS's own are within 0.4 deg: aimed as
                    # ever.) A frame of a clip bends its trunk as it moves: the spine is aimed
                    # there; its neck and collarbones move little from their neutral place, less
                    # than skeletons differ in where they put them (aimed, a bone-axes copy of
                    # the CMU run shrugged its shoulders 29 deg and turned its head 32).
                    A[b] = A[p]

        height = float(np.ptp(P0[:, 2]))
        return cls(rig, skeleton, mp, label, Fq, scale, A, src, turn, hinge_axes(rig),
                   height, float(src_leg), pose)

    # ---- source -> model -------------------------------------------------------------------
    def source_fk(self, motion: SourceMotion) -> tuple[np.ndarray, np.ndarray]:
        """World rotations (F, J, 4) of the mapped source bones and their ancestors (other
        columns unset), and the head of the pelvis bone (F, 3)."""
        skel = self.skeleton
        need = np.zeros(skel.num_bones, bool)
        for s in self.source_of[self.source_of >= 0]:
            while s >= 0 and not need[s]:
                need[s] = True
                s = skel.parents[s]
        F = motion.num_frames
        W = np.empty((F, skel.num_bones, 4))
        for j in np.flatnonzero(need):
            rest = skel.rest_rotations[j]
            loc = motion.rotations[:, j]
            if np.abs(rest[0] - 1.0) > 1e-15:
                loc = quat_multiply(rest, loc)
            p = skel.parents[j]
            W[:, j] = loc if p < 0 else quat_multiply(W[:, p], loc)
        s0 = int(self.source_of[0])
        chain = [s0]
        while skel.parents[chain[-1]] >= 0:
            chain.append(int(skel.parents[chain[-1]]))
        head = motion.root_translation.copy()
        for j in chain[::-1][1:]:
            head += quat_rotate(W[:, skel.parents[j]], motion.bone_offsets(j))
        return W, head

    def model_rotations(self, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Joint-frame world rotations G (F, B, 4) and hinge off-axis angles (F, B) from the
        source's world bone rotations W (F, J, 4)."""
        rig = self.rig
        W0 = self.pose.rot
        F = W.shape[0]
        B = rig.num_bodies
        G = np.empty((F, B, 4))
        off = np.zeros((F, B))
        Fq, Fc = self.heading, quat_conjugate(self.heading)
        for b in range(B):
            s = self.source_of[b]
            p = rig.body_parent[b]
            if s < 0:
                G[:, b] = G[:, p] if p >= 0 else self.align[0]
                continue
            t = self.turn_of[b]  # s, or the last twist bone of its chain
            rot_s = quat_multiply(W[:, t], quat_multiply(quat_conjugate(W0[t]), Fc))
            G[:, b] = quat_multiply(quat_multiply(Fq, rot_s), self.align[b])
            if rig.joint_type[b] == HINGE:
                local = quat_multiply(quat_conjugate(G[:, p]), G[:, b])
                a = self.axes[b]
                proj = local[:, 1:] @ a
                tw = np.concatenate([local[:, :1], proj[:, None] * a], -1)
                n = np.linalg.norm(tw, axis=-1, keepdims=True)
                tw = np.where(n > 1e-9, tw / np.maximum(n, 1e-12), [1.0, 0, 0, 0])
                # off-axis part: local = swing * twist
                sw = quat_multiply(local, quat_conjugate(tw))
                off[:, b] = 2 * np.arccos(np.clip(np.abs(sw[:, 0]), 0, 1))
                G[:, b] = quat_multiply(G[:, p], tw)
        return quat_normalize(G), off

    def _judged_on(self) -> tuple:
        """(mapped bones, arms, legs): what engine.motion.calibration judges a pose on."""
        bi = self.rig.body_index
        src = self.source_of
        arms = [(int(src[bi(f"Arm{s}")]), int(src[bi(f"ForeArm{s}")])) for s in "RL"]
        legs = [tuple(int(src[bi(f"{n}{s}")]) for n in ("Femur", "Tibia", "Talus")) for s in "RL"]
        return np.unique(src[src >= 0]), arms, legs

    def calibrations(self, motion: SourceMotion) -> tuple[Calibration, Calibration]:
        """The T-/A-pose frames at the start and at the end of `motion`
        (engine.motion.calibration.detect_calibrations), judged on the mapped bones."""
        return detect_calibrations(motion, *self._judged_on())

    def to_model(self, motion: SourceMotion, fps: float = REFERENCE_FPS, source: str = "",
                 ground: bool = True, with_muscles: bool = True, progress=None,
                 keep_calibration: bool = False) -> Reference:
        """The model's reference trajectory for `motion`, resampled to `fps` (slerp).

        source: the file name recorded in the meta; ground=False skips the vertical shift;
        progress: optional callable(fraction done). A calibration pose at the start (T- or
        A-pose frames that jump to the motion) or at the end (the motion cut or eased into
        one) is skipped unless keep_calibration; either way meta["calibration"] and
        meta["calibration_end"] say what was found (None: nothing).
        """
        if motion.skeleton is not self.skeleton and motion.skeleton.names != self.skeleton.names:
            raise ParameterError("motion", "the motion's skeleton is not the one this retargeter was built for")
        t0 = time.perf_counter()
        source_fps = motion.fps
        cal, cal_end = self.calibrations(motion)
        if not keep_calibration:
            motion = skip_frames(motion, cal.frames, cal_end.frames)
        inside = held_inside(motion, *self._judged_on())  # calibration poses past the start
        motion, held = repair_held(motion)
        motion, repaired = repair_spikes(motion)
        repaired = sorted(repaired + held, key=lambda r: r["first_s"])
        if abs(motion.fps - fps) > 1e-6 * fps:
            motion = motion.resample(fps)
        W, hips = self.source_fk(motion)
        m = self._model_frames(W, hips, fps, ground)
        if self._level_feet(m.G, m.body_rot, m.body_pos, m.tracks, fps, grounded=ground):  # feet turned: again
            m = self._model_frames(W, hips, fps, ground)
        off, local, limited, root, body_rot, body_pos, tracks, root_path, offset = m[1:]
        rig = self.rig
        if progress:
            progress(0.3)
        ref = build_reference(rig, root, local, body_rot, body_pos, fps, with_muscles=with_muscles,
                              tracks=tracks, progress=(lambda f: progress(0.3 + 0.6 * f)) if progress else None)
        hinges = [b for b in range(rig.num_bodies) if rig.joint_type[b] == HINGE and self.source_of[b] >= 0]
        off_deg = {rig.body_names[b]: dict(mean=round(float(np.degrees(off[:, b].mean())), 3),
                                           max=round(float(np.degrees(off[:, b].max())), 3))
                   for b in hinges}
        ref.meta.update(
            source=str(source),
            mapping=dict(self.mapping),
            preset=self.preset,
            scale=float(self.scale),
            scale_basis="leg length (hip-knee-ankle)",
            heading_deg=round(float(np.degrees(2 * np.arctan2(self.heading[3], self.heading[0]))), 4),
            ground_offset_m=float(offset),
            source_fps=round(float(source_fps), 6),
            calibration=cal.meta(skipped=not keep_calibration),
            calibration_end=cal_end.meta(skipped=not keep_calibration),
            source_pose=self.pose.meta(),
            levelled_feet={rig.body_names[b]: round(float(self.pose.rolled[int(self.turn_of[b])]), 1)
                           for b in map(rig.body_index, _FEET) if int(self.turn_of[b]) in (self.pose.rolled or {})},
            repaired=repaired,
            root_path=root_path,
            limited=limited,
            hinge_off_axis_deg=off_deg,
            retarget_seconds=round(time.perf_counter() - t0, 3),
        )
        ref.meta["checks"] = inside + check_reference(rig, ref)  # raises for a root no body can move
        return ref

    def _model_frames(self, W: np.ndarray, hips: np.ndarray, fps: float, ground: bool) -> "_ModelFrames":
        """The model's frames for the source's world bone rotations W (F, J, 4) and pelvis heads
        (F, 3): world joint rotations G and hinge off-axis angles, local rotations inside the
        joints' ranges and what was moved, the root, the bodies (rotations, positions), the
        feet's tracks, the root's path rebuilt (an "in place" export) and the ground offset
        (0 without `ground`)."""
        rig = self.rig
        G, off = self.model_rotations(W)
        local = np.empty_like(G)
        local[:, 0] = G[:, 0]
        par = rig.body_parent[1:]
        local[:, 1:] = quat_multiply(quat_conjugate(G[:, par]), G[:, 1:])
        local, limited = within_range(rig, quat_normalize(local))
        local = _continuous(local)
        if limited:  # the world rotations again, from the moved joints
            G = world_rotations(rig, local)
        root = self.scale * quat_rotate(self.heading, hips)
        body_rot, body_pos = model_bodies(rig, root, G)
        tracks = foot_tracks(rig, body_rot, body_pos)
        rebuilt, root_path = rebuilt_root(tracks, root, fps)
        if rebuilt is not None:  # an "in place" export: the root moved as its feet say it went
            shift = rebuilt - root
            root, body_pos = rebuilt, body_pos + shift[:, None]
            tracks = [(low + shift, nxt + shift[1:]) for low, nxt in tracks]
        offset = 0.0
        if ground:
            offset = ground_offset(tracks, fps)
            root = root + [0.0, 0.0, offset]
            body_pos = body_pos + [0.0, 0.0, offset]
            tracks = [(low + [0.0, 0.0, offset], nxt + [0.0, 0.0, offset]) for low, nxt in tracks]
        return _ModelFrames(G, off, local, limited, root, body_rot, body_pos, tracks, root_path, offset)

    def _level_feet(self, G: np.ndarray, body_rot: np.ndarray, body_pos: np.ndarray, tracks, fps: float,
                    grounded: bool = True) -> bool:
        """Turn the source pose's feet whose planted soles stand turned about the sole's length
        (engine.motion.soles), judged on the frames where the foot is planted with its heel
        and toes down (a forefoot gait's: every planted frame; soles.judged_frames), from the
        model's world joint rotations G (F, B, 4), its bodies and the feet's tracks; True where
        they were turned (the frames must then be made again)."""
        rig, bi = self.rig, self.rig.body_index
        if not grounded:  # heights above the floor
            up = [0.0, 0.0, ground_offset(tracks, fps)]
            tracks = [(low + up, nxt + up) for low, nxt in tracks]
            body_pos = body_pos + up
        _, stance = planted(tracks, fps)  # (F-1, 2): right, left
        flat = [soles.heel_and_toes_down(rig, body_rot[:-1], body_pos[:-1], side) for side in "RL"]
        judged = soles.judged_frames(stance, flat, fps)
        feet = {}
        for i, side in enumerate("RL"):
            b = bi(f"Talus{side}")
            frames = judged[i]
            if self.source_of[b] < 0 or not len(frames):
                return False
            axis = rig.joint_pos[[bi(f"FootThumb{side}"), bi(f"FootPinky{side}")]].mean(0) - rig.joint_pos[b]
            axis[2] = 0.0  # the sole's length: the rest foot's heel -> toes line along the floor
            feet[b] = (axis, *soles.stance_roll(G[frames, b], axis), len(frames))
        if not soles.needs_levelling([f[1:] for f in feet.values()], fps):
            return False
        Fq, Fc = self.heading, quat_conjugate(self.heading)
        pose = self.pose
        for b, (axis, roll, _, _) in feet.items():
            # G_b C, C the roll about the sole's length, is the source pose's foot turned by
            # T = F^-1 A_b C^-1 A_b^-1 F in the source's world (G_b = F W W0^-1 F^-1 A_b)
            C = axis_angle_to_quat(np.radians(roll) * axis / np.linalg.norm(axis))
            A = self.align[b]
            T = quat_multiply(quat_multiply(Fc, A), quat_multiply(quat_conjugate(C), quat_multiply(quat_conjugate(A), Fq)))
            pose = pose.with_foot_turned(int(self.turn_of[b]), quat_normalize(T), roll)
        self.pose = pose
        return True

    # ---- model -> source -------------------------------------------------------------------
    def to_source(self, root_pos: np.ndarray, local_rot: np.ndarray, frame_time: float,
                  ground_offset: float = 0.0, original: SourceMotion | None = None) -> SourceMotion:
        """Source-skeleton motion reproducing a model trajectory.

        root_pos (F, 3), local_rot (F, B, 4) quaternions or (F, B, 3, 3) matrices.
        Unmapped source bones take `original`'s local rotations (resampled to frame_time;
        used when the frame counts then agree) or stay at rest.
        """
        rig, skel = self.rig, self.skeleton
        root_pos = np.asarray(root_pos, float)
        local_rot = np.asarray(local_rot, float)
        if local_rot.shape[-2:] == (3, 3):
            local_rot = matrix_to_quat(local_rot)
        F = root_pos.shape[0]
        if local_rot.shape != (F, rig.num_bodies, 4):
            raise ParameterError("local_rot", f"expected ({F}, {rig.num_bodies}, 4) or (..., 3, 3), got {local_rot.shape}")
        G = world_rotations(rig, local_rot)
        orig_rot, orig_trans = None, None
        if original is not None:
            o = original
            if abs(o.frame_time - frame_time) > 1e-9:
                o = o.resample(1.0 / frame_time)
            if o.num_frames == F:
                orig_rot, orig_trans = o.rotations, o.local_translations
        W0 = self.pose.rot
        Fq, Fc = self.heading, quat_conjugate(self.heading)
        first = {}
        for b in range(rig.num_bodies):
            s = int(self.source_of[b])
            if s >= 0 and s not in first:
                first[s] = b
        J = skel.num_bones
        Ws = np.empty((F, J, 4))
        rots = np.empty((F, J, 4))
        for s in range(J):
            p = skel.parents[s]
            if s in first:
                b = first[s]
                t = int(self.turn_of[b])
                Ws[:, s] = quat_multiply(
                    quat_multiply(Fc, quat_multiply(G[:, b], quat_conjugate(self.align[b]))),
                    quat_multiply(Fq, W0[t]))
                if t != s:  # the body turns the chain's last twist bone: those between keep
                    # the original's local rotations (or their rest), the mapped bone the rest
                    chain = [t]
                    while chain[-1] != s:
                        chain.append(int(skel.parents[chain[-1]]))
                    below = np.array([1.0, 0, 0, 0])
                    for h in chain[-2::-1]:
                        r = orig_rot[:, h] if orig_rot is not None else np.array([1.0, 0, 0, 0])
                        below = quat_multiply(below, quat_multiply(skel.rest_rotations[h], r))
                    Ws[:, s] = quat_multiply(Ws[:, s], quat_conjugate(below))
                par = Ws[:, p] if p >= 0 else np.array([1.0, 0, 0, 0])
                rots[:, s] = quat_multiply(quat_conjugate(skel.rest_rotations[s]),
                                           quat_multiply(quat_conjugate(par), Ws[:, s]))
            else:
                rots[:, s] = orig_rot[:, s] if orig_rot is not None else [1.0, 0, 0, 0]
                par = Ws[:, p] if p >= 0 else np.array([1.0, 0, 0, 0])
                Ws[:, s] = quat_multiply(par, quat_multiply(skel.rest_rotations[s], rots[:, s]))
        rots = _continuous(quat_normalize(rots))
        s0 = self.source_of[0]
        target = quat_rotate(Fc, (root_pos - [0.0, 0.0, ground_offset]) / self.scale)
        probe = SourceMotion(skel, rots, np.zeros((F, 3)), frame_time, orig_trans)
        _, heads = probe.fk()
        return SourceMotion(skel, rots, target - heads[:, s0], frame_time, orig_trans)

    def reference_to_source(self, ref: Reference, original: SourceMotion | None = None) -> SourceMotion:
        return self.to_source(ref.root_pos, ref.local_rot, ref.frame_time,
                              float(ref.meta.get("ground_offset_m", 0.0)), original)


def twist_chains(rig, skeleton: SourceSkeleton, src: np.ndarray) -> np.ndarray:
    """(B,) the source bone whose world rotation turns each body: its own (src), or where the
    bone mapped to its child body hangs from it through twist bones only (Daz's ThighBend ->
    ThighTwist -> Shin, ShldrBend -> ShldrTwist -> ForearmBend: the limb's twist is in the
    twist bone, and the mapped bone's world rotation lacks it), the last of those."""
    from .presets import is_twist_bone

    turn = src.copy()
    for b in np.flatnonzero(src >= 0):
        s, found = int(src[b]), set()
        for c in np.flatnonzero(rig.body_parent == b):
            j = int(src[c])
            if j < 0 or j == s:
                continue
            between = []
            j = int(skeleton.parents[j])
            while j >= 0 and j != s:
                between.append(j)
                j = int(skeleton.parents[j])
            if j == s and between and all(is_twist_bone(skeleton.names[h]) for h in between):
                found.add(between[0])
        if len(found) == 1:
            turn[b] = found.pop()
    return turn


# ---- helpers shared with other callers --------------------------------------------------
def ground_offset(tracks, fps: float) -> float:
    """Vertical shift that puts the feet on the floor in stance.

    tracks: reference.foot_tracks() of the trajectory. A foot is in stance in a frame when
    its lowest point (followed as the same point on the foot) slides horizontally slower
    than 0.3 m/s; the shift is minus the median height of those points. With no stance
    frames (a clip in the air) it is minus the 5th percentile of the per-frame lowest point.
    """
    stance, lows = [], []
    for low, nxt in tracks:
        lows.append(low[:, 2])
        v = np.linalg.norm(nxt[:, :2] - low[:-1, :2], axis=-1) * fps
        stance.append(low[:-1, 2][v < STANCE_SPEED_MPS])
    st = np.concatenate(stance)
    if st.size:
        return -float(np.median(st))
    return -float(np.percentile(np.minimum(*lows), 5))


def reference_muscle_lengths(rig, body_rot: np.ndarray, body_pos: np.ndarray, progress=None) -> np.ndarray:
    """Muscle lengths (F, M) of a trajectory, in blocks of frames.

    The same LBS and polyline sums as engine.kinematics (MusclePaths.positions +
    muscle_lengths), but the sparse LBS matrix is differenced first (rows seg_b - seg_a), so
    one sparse product gives every segment vector of a block of frames directly; blocks of
    256 frames stay in cache. ~3x faster than positions + lengths over long clips.
    """
    X = MusclePaths(rig).X.tocsr()  # (K, 4B) sparse LBS weights
    D = (X[rig.seg_b] - X[rig.seg_a]).tocsr()
    F, B = body_pos.shape[:2]
    out = np.empty((F, rig.num_muscles))
    for i in range(0, F, _CHUNK):
        R, t = body_rot[i:i + _CHUNK], body_pos[i:i + _CHUNK]
        n = len(t)
        blocks = np.empty((B, 4, n, 3))  # per body [R^T; t^T], frames along the columns
        blocks[:, :3] = np.transpose(R, (1, 3, 0, 2))
        blocks[:, 3] = np.transpose(t, (1, 0, 2))
        d = np.asarray(D @ blocks.reshape(4 * B, n * 3)).reshape(-1, n, 3)
        seg = np.sqrt(np.einsum("kfi,kfi->kf", d, d))
        out[i:i + n] = np.add.reduceat(seg, rig.muscle_seg_start, axis=0).T
        if progress and i % (64 * _CHUNK) == 0:
            progress((i + n) / F)
    return out


def world_rotations(rig, local: np.ndarray) -> np.ndarray:
    """The joint frames' world rotations (..., B, 4) from their local rotations (parent first)."""
    G = np.empty_like(local)
    for b in range(rig.num_bodies):
        p = rig.body_parent[b]
        G[..., b, :] = local[..., b, :] if p < 0 else quat_multiply(G[..., p, :], local[..., b, :])
    return G


def model_bodies(rig, root_pos: np.ndarray, G: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Body rotations (F, B, 3, 3) and positions (F, B, 3) from the root joint position and
    the joint frames' world rotations G (F, B, 4); forward_kinematics with quaternions."""
    B = rig.num_bodies
    offset = rig.joint_pos - rig.joint_pos[np.maximum(rig.body_parent, 0)]
    x = np.empty(G.shape[:-1] + (3,))
    x[:, 0] = root_pos
    for b in range(1, B):
        p = rig.body_parent[b]
        x[:, b] = x[:, p] + quat_rotate(G[:, p], offset[b])
    rest_q = matrix_to_quat(rig.body_rest_rot)
    body_rot = quat_to_matrix(quat_multiply(G, rest_q))
    body_pos = x + quat_rotate(G, rig.body_rest_pos - rig.joint_pos)
    return body_rot, body_pos


def build_reference(rig, root_pos: np.ndarray, local: np.ndarray, body_rot: np.ndarray,
                    body_pos: np.ndarray, fps: float, with_muscles: bool = True,
                    tracks=None, progress=None) -> Reference:
    """A Reference from a model trajectory (local quaternions (F, B, 4)); derived arrays
    (q, velocities, muscle lengths and rates, metrics) are computed here."""
    F, B = local.shape[:2]
    dt = 1.0 / fps
    times = np.arange(F) * dt
    q_parts, v_parts = [], []
    axes = hinge_axes(rig)
    rv = _ddt(root_pos, dt)
    # angular velocity in the child frame: log(R(t-1)^T R(t+1)) / 2dt (one-sided at the ends)
    if F > 1:
        nxt = np.concatenate([local[1:], local[-1:]])
        prv = np.concatenate([local[:1], local[:-1]])
        span = np.full(F, 2 * dt)
        span[[0, -1]] = dt
        omega = quat_to_axis_angle(quat_multiply(quat_conjugate(prv), nxt)) / span[:, None, None]
    else:
        omega = np.zeros((F, B, 3))
    for b in range(B):
        t = rig.joint_type[b]
        if t == FREE:
            q_parts += [root_pos, local[:, b]]
            v_parts += [rv, omega[:, b]]
        elif t == BALL:
            q_parts.append(local[:, b])
            v_parts.append(omega[:, b])
        else:
            ang = 2 * np.arctan2(local[:, b, 1:] @ axes[b], np.ascontiguousarray(local[:, b, 0]))  # DESIGN.md 'Same bits'
            ang = (ang + np.pi) % (2 * np.pi) - np.pi
            q_parts.append(ang[:, None])
            v_parts.append(_ddt(np.unwrap(ang), dt)[:, None])
    q = np.concatenate(q_parts, -1)
    qvel = np.concatenate(v_parts, -1)
    L = reference_muscle_lengths(rig, body_rot, body_pos, progress) if with_muscles else np.zeros((F, rig.num_muscles))
    Ld = _ddt(L, dt)
    metrics, feet = motion_metrics(rig, body_rot, body_pos, root_pos, fps, tracks=tracks)
    meta = dict(fps=float(fps), rig=rig.name, bodies=list(rig.body_names), metrics=metrics)
    return Reference(times, root_pos, local, body_pos, body_rot, q, qvel, rv, L, Ld, feet, meta)


# ---- one-call API -------------------------------------------------------------------------
def retarget(motion: SourceMotion, rig=None, preset: str | None = None, mapping=None,
             fps: float = REFERENCE_FPS, source: str = "",
             keep_calibration: bool = False) -> tuple[Reference, Retargeter]:
    """Source motion -> (model Reference at `fps`, the Retargeter used, for going back);
    a calibration pose at the start is skipped unless keep_calibration (Retargeter.to_model)."""
    if rig is None:
        from ..rig import load_rig

        rig = load_rig()
    rt = Retargeter.build(rig, motion.skeleton, preset=preset, mapping=mapping, motion=motion)
    return rt.to_model(motion, fps=fps, source=source, keep_calibration=keep_calibration), rt


UPRIGHT_SHARE, LYING_SHARE = 0.7, 0.3  # standing_share of a body read the right way up, and the wrong way


def standing_share(motion: SourceMotion, mapping: dict) -> float:
    """How upright the body stands over the clip (up to 200 frames): the mean cosine between +Z
    and the line from the ankles' midpoint to the neck (or head). 1: standing, 0: lying."""
    sk = motion.skeleton
    top = next((mapping[b] for b in ("Neck", "Head", "Torso") if mapping.get(b)), None)
    feet = [mapping.get(f"Talus{s}") for s in "RL"]
    if top is None or not all(feet):
        return 1.0  # nothing to judge by: taken as read
    F = motion.num_frames
    _, P = motion.frames(np.unique(np.linspace(0, F - 1, min(F, 200)).round().astype(int))).fk()
    line = P[:, sk.index(top)] - P[:, [sk.index(f) for f in feet]].mean(1)
    return float(np.mean(line[:, 2] / np.maximum(np.linalg.norm(line, axis=-1), 1e-12)))


def read_clip(path, units: str = "auto", up: str = "auto", preset: str | None = None,
              mapping=None) -> tuple[SourceMotion, str]:
    """A BVH file as a Z-up SourceMotion, and its up axis as a reference's meta["up_axis"]
    says it ("y" or "z" as told, "y (found)" or "z (found)"). The BVH norm is Y up; some
    exporters write Z up, and read as Y up such a body lies on its back (a walk read so goes
    up and down at 0.2 m/s, and every take of it falls). up "auto" reads it as Z up when its
    body lies as read and stands so (standing_share)."""
    from .bvh import read_bvh

    if up != "auto":
        return read_bvh(path, units=units, up=up), up
    motion = read_bvh(path, units=units, up="y")
    mp, _ = resolve_mapping(motion.skeleton, preset, mapping)
    if standing_share(motion, mp) < LYING_SHARE:
        other = read_bvh(path, units=units, up="z")
        if standing_share(other, mp) > UPRIGHT_SHARE:
            return other, "z (found)"
    return motion, "y (found)"


def retarget_file(path, rig=None, preset: str | None = None, mapping=None, units: str = "auto",
                  up: str = "auto", fps: float = REFERENCE_FPS,
                  keep_calibration: bool = False) -> tuple[Reference, Retargeter, SourceMotion]:
    """Read a BVH (read_clip: its up axis found unless given) and retarget it; returns
    (reference, retargeter, source motion as read). meta["up_axis"] says which axis was up."""
    motion, axis = read_clip(path, units, up, preset, mapping)
    ref, rt = retarget(motion, rig, preset, mapping, fps, source=str(Path(path)), keep_calibration=keep_calibration)
    ref.meta["up_axis"] = axis
    return ref, rt, motion


def retarget_back(ref: Reference, skeleton: SourceSkeleton, rig=None,
                  root_pos: np.ndarray | None = None, local_rot: np.ndarray | None = None,
                  original: SourceMotion | None = None) -> SourceMotion:
    """Model -> source for a reference made by `retarget` (same mapping and scale, read from
    its meta); root_pos/local_rot (e.g. a simulated take at the reference's rate) replace
    the reference's own trajectory when given."""
    if rig is None:
        from ..rig import load_rig

        rig = load_rig()
    recorded = ref.meta.get("source_pose")
    rt = Retargeter.build(rig, skeleton, preset=ref.meta.get("preset"), mapping=ref.meta.get("mapping"),
                          exact=True, motion=original,
                          pose=SourcePose.from_meta(recorded, skeleton) if recorded else None)
    rt.scale = float(ref.meta.get("scale", rt.scale))
    rp = ref.root_pos if root_pos is None else root_pos
    lr = ref.local_rot if local_rot is None else local_rot
    return rt.to_source(rp, lr, ref.frame_time, float(ref.meta.get("ground_offset_m", 0.0)), original)
