"""Test clips of the KIND real mocap is, built from the bundled MASS clips (walk.bvh, run.bvh).

Real clips come with other bone names, other frame rates, mirrored, and often with a T- or
A-pose held on their first frames before the motion starts. These transforms build such
clips from the bundled ones, so a test can check a feature on the kind of data rather than
on the two files:

    m = variant("walk", names="mixamo", fps=30, pose="T", pose_frames=1)
    path = variant_file(tmp_path, "walk", names="cmu", fps=60, mirrored=True)

Every transform takes and returns an engine.motion SourceMotion (Z-up, metres).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

try:  # the project's engine; in a Blender-like Python (tests/blender) only the installed extension has one
    from engine.motion import SourceMotion, SourceSkeleton, read_bvh, write_bvh
    from engine.transforms import MIRROR_X, axis_angle_to_quat, quat_conjugate, quat_multiply, quat_rotate, quat_slerp
except ImportError:
    from bl_ext.user_default.sinew.engine.motion import SourceMotion, SourceSkeleton, read_bvh, write_bvh
    from bl_ext.user_default.sinew.engine.transforms import (MIRROR_X, axis_angle_to_quat, quat_conjugate,
                                                             quat_multiply, quat_rotate, quat_slerp)

MOTION_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "reference" / "mass" / "motion"
MOCAP_DIR = MOTION_DIR.parents[1] / "mocap"  # real captures from outside MASS (SOURCES.md there)
# The MASS clips: walk and run are cycles; the others are real motion that starts moving at once
# (several open near a T- or A-pose: a kick and a dance with the arms out).
MASS_CLIPS = ("walk", "run", "dance", "kick", "balance", "backflip", "cart", "pirouette")
NAME_STYLES = ("mass", "mixamo", "cmu")
A_POSE_DEG = 45.0  # upper arms this far below horizontal


def bundled(clip: str = "walk") -> SourceMotion:
    """A clip of reference/mass/motion (MASS_CLIPS; 120 fps, Character1_* names)."""
    return read_bvh(MOTION_DIR / f"{clip}.bvh")


def _subset(m: SourceMotion, keep: list[int]) -> SourceMotion:
    """The motion on the bones `keep` (a dropped bone's children must be dropped too)."""
    skel = m.skeleton
    new = {j: i for i, j in enumerate(keep)}
    parents = [new[skel.parents[j]] if skel.parents[j] >= 0 else -1 for j in keep]
    s = SourceSkeleton([skel.names[j] for j in keep], parents, skel.offsets[keep], skel.rest_rotations[keep],
                       {new[j]: v for j, v in skel.end_sites.items() if j in new})
    local = None if m.local_translations is None else m.local_translations[:, keep]
    return SourceMotion(s, m.rotations[:, keep], m.root_translation, m.frame_time, local)


def _renamed(m: SourceMotion, names: list[str]) -> SourceMotion:
    skel = m.skeleton
    s = SourceSkeleton(names, skel.parents, skel.offsets, skel.rest_rotations, skel.end_sites)
    return SourceMotion(s, m.rotations, m.root_translation, m.frame_time, m.local_translations)


def rename(m: SourceMotion, style: str) -> SourceMotion:
    """Bone names as Mixamo ('mixamorig:Hips', ...) or CMU ('Hips', 'LeftUpLeg', ...) write
    them; MASS's helper bones (*_RIGMESH), which neither rig has, are dropped."""
    if style not in NAME_STYLES:
        raise ValueError(f"style {style!r}: one of {NAME_STYLES}")
    if style == "mass":
        return m
    keep = [j for j, n in enumerate(m.skeleton.names) if not n.endswith("_RIGMESH")]
    m = _subset(m, keep)
    prefix = "mixamorig:" if style == "mixamo" else ""
    return _renamed(m, [n.replace("Character1_", prefix) for n in m.skeleton.names])


# Other libraries' bone names for the MASS skeleton's bones (its CMU-style names, `rename`
# "cmu"): "{Side}" Left/Right, "{S}" L/R, "{s}" l/r, "{side}" left/right. Each is how that
# library names these bones (no bone added or removed: `daz_chains` adds Daz's extra ones).
LIBRARY_NAMES = {
    "xsens_mvn": {"Hips": "Hips", "Spine": "Chest", "Spine1": "Chest2", "Neck": "Neck", "Head": "Head",
                  "{Side}Shoulder": "{Side}Collar", "{Side}Arm": "{Side}Shoulder", "{Side}ForeArm": "{Side}Elbow",
                  "{Side}Hand": "{Side}Wrist", "{Side}UpLeg": "{Side}Hip", "{Side}Leg": "{Side}Knee",
                  "{Side}Foot": "{Side}Ankle", "{Side}ToeBase": "{Side}Toe"},
    "optitrack": {"Hips": "Hip", "Spine": "Ab", "Spine1": "Chest", "Neck": "Neck", "Head": "Head",
                  "{Side}Shoulder": "{S}Shoulder", "{Side}Arm": "{S}UArm", "{Side}ForeArm": "{S}FArm",
                  "{Side}Hand": "{S}Hand", "{Side}UpLeg": "{S}Thigh", "{Side}Leg": "{S}Shin", "{Side}Foot": "{S}Foot",
                  "{Side}ToeBase": "{S}Toe"},
    "3dsmax_biped": {"Hips": "Bip001 Pelvis", "Spine": "Bip001 Spine", "Spine1": "Bip001 Spine2", "Neck": "Bip001 Neck",
                     "Head": "Bip001 Head", "{Side}Shoulder": "Bip001 {S} Clavicle", "{Side}Arm": "Bip001 {S} UpperArm",
                     "{Side}ForeArm": "Bip001 {S} Forearm", "{Side}Hand": "Bip001 {S} Hand",
                     "{Side}UpLeg": "Bip001 {S} Thigh", "{Side}Leg": "Bip001 {S} Calf", "{Side}Foot": "Bip001 {S} Foot",
                     "{Side}ToeBase": "Bip001 {S} Toe0"},
    "poser": {"Hips": "hip", "Spine": "abdomen", "Spine1": "chest", "Neck": "neck", "Head": "head",
              "{Side}Shoulder": "{s}Collar", "{Side}Arm": "{s}Shldr", "{Side}ForeArm": "{s}ForeArm", "{Side}Hand": "{s}Hand",
              "{Side}UpLeg": "{s}Thigh", "{Side}Leg": "{s}Shin", "{Side}Foot": "{s}Foot", "{Side}ToeBase": "{s}Toe"},
    "daz_genesis": {"Hips": "hip", "Spine": "abdomenLower", "Spine1": "chestUpper", "Neck": "neckLower", "Head": "head",
                    "{Side}Shoulder": "{s}Collar", "{Side}Arm": "{s}ShldrBend", "{Side}ForeArm": "{s}ForearmBend",
                    "{Side}Hand": "{s}Hand", "{Side}UpLeg": "{s}ThighBend", "{Side}Leg": "{s}Shin",
                    "{Side}Foot": "{s}Foot", "{Side}ToeBase": "{s}Toe"},
    "rokoko": {"Hips": "Hips", "Spine": "Spine1", "Spine1": "Spine4", "Neck": "Neck", "Head": "Head",
               "{Side}Shoulder": "{Side}Shoulder", "{Side}Arm": "{Side}Arm", "{Side}ForeArm": "{Side}ForeArm",
               "{Side}Hand": "{Side}Hand", "{Side}UpLeg": "{Side}Thigh", "{Side}Leg": "{Side}Shin",
               "{Side}Foot": "{Side}Foot", "{Side}ToeBase": "{Side}Toe"},
    "bandai_namco": {"Hips": "Hips", "Spine": "Spine", "Spine1": "Chest", "Neck": "Neck", "Head": "Head",
                     "{Side}Shoulder": "Shoulder_{S}", "{Side}Arm": "UpperArm_{S}", "{Side}ForeArm": "LowerArm_{S}",
                     "{Side}Hand": "Hand_{S}", "{Side}UpLeg": "UpperLeg_{S}", "{Side}Leg": "LowerLeg_{S}",
                     "{Side}Foot": "Foot_{S}", "{Side}ToeBase": "Toes_{S}"},
    "lafan1": {"Hips": "Hips", "Spine": "Spine", "Spine1": "Spine2", "Neck": "Neck", "Head": "Head",
               "{Side}Shoulder": "{Side}Shoulder", "{Side}Arm": "{Side}Arm", "{Side}ForeArm": "{Side}ForeArm",
               "{Side}Hand": "{Side}Hand", "{Side}UpLeg": "{Side}UpLeg", "{Side}Leg": "{Side}Leg",
               "{Side}Foot": "{Side}Foot", "{Side}ToeBase": "{Side}Toe"},
    "character_creator": {"Hips": "CC_Base_Hip", "Spine": "CC_Base_Waist", "Spine1": "CC_Base_Spine02",
                          "Neck": "CC_Base_NeckTwist01", "Head": "CC_Base_Head",
                          "{Side}Shoulder": "CC_Base_{S}_Clavicle", "{Side}Arm": "CC_Base_{S}_Upperarm",
                          "{Side}ForeArm": "CC_Base_{S}_Forearm", "{Side}Hand": "CC_Base_{S}_Hand",
                          "{Side}UpLeg": "CC_Base_{S}_Thigh", "{Side}Leg": "CC_Base_{S}_Calf",
                          "{Side}Foot": "CC_Base_{S}_Foot", "{Side}ToeBase": "CC_Base_{S}_ToeBase"},
    "vrm": {"Hips": "J_Bip_C_Hips", "Spine": "J_Bip_C_Spine", "Spine1": "J_Bip_C_Chest", "Neck": "J_Bip_C_Neck",
            "Head": "J_Bip_C_Head", "{Side}Shoulder": "J_Bip_{S}_Shoulder", "{Side}Arm": "J_Bip_{S}_UpperArm",
            "{Side}ForeArm": "J_Bip_{S}_LowerArm", "{Side}Hand": "J_Bip_{S}_Hand", "{Side}UpLeg": "J_Bip_{S}_UpperLeg",
            "{Side}Leg": "J_Bip_{S}_LowerLeg", "{Side}Foot": "J_Bip_{S}_Foot", "{Side}ToeBase": "J_Bip_{S}_ToeBase"},
    "snake_case": {"Hips": "hips", "Spine": "spine", "Spine1": "chest", "Neck": "neck", "Head": "head",
                   "{Side}Shoulder": "{side}_clavicle", "{Side}Arm": "{side}_upper_arm", "{Side}ForeArm": "{side}_lower_arm",
                   "{Side}Hand": "{side}_hand", "{Side}UpLeg": "{side}_upper_leg", "{Side}Leg": "{side}_lower_leg",
                   "{Side}Foot": "{side}_foot", "{Side}ToeBase": "{side}_toes"},
}


def library_names(library: str) -> dict[str, str]:
    """{CMU-style name: `library`'s name} for the MASS skeleton's bones (LIBRARY_NAMES)."""
    out = {}
    for cmu, theirs in LIBRARY_NAMES[library].items():
        sides = (("Left", "L", "l", "left"), ("Right", "R", "r", "right")) if "{Side}" in cmu else ((None,) * 4,)
        for Side, S, s, side in sides:
            fill = (lambda n: n) if Side is None else (
                lambda n: n.replace("{Side}", Side).replace("{S}", S).replace("{s}", s).replace("{side}", side))
            out[fill(cmu)] = fill(theirs)
    return out


def rename_as(m: SourceMotion, library: str) -> SourceMotion:
    """The clip with its bones named as `library` names them (LIBRARY_NAMES)."""
    m = rename(m, "cmu")
    names = library_names(library)
    return _renamed(m, [names[n] for n in m.skeleton.names])


def insert_bone(m: SourceMotion, parent: str, name: str, adopts: list[str], share: float = 0.0,
                twist: bool = False) -> SourceMotion:
    """The clip with a bone `name` put between `parent` and its children `adopts`, its head
    `share` of the way to theirs (their common offset's direction). twist=True moves the
    parent's twist about that direction into the new bone (as Daz's ThighTwist, ShldrTwist
    and ForearmTwist carry it): every bone's world rotation below the parent is unchanged."""
    if m.local_translations is not None:
        raise ValueError("insert_bone: a clip with position channels on its joints is not handled")
    skel = m.skeleton
    pi = skel.index(parent)
    kids = [skel.index(n) for n in adopts]
    off = skel.offsets[kids[0]]
    order = list(range(pi + 1)) + [-1] + list(range(pi + 1, skel.num_bones))  # -1: the new bone
    new_index = {j: i for i, j in enumerate(order)}
    parents, offsets = [], []
    for j in order:
        if j == -1:
            parents.append(new_index[pi])
            offsets.append(share * off)
        elif j in kids:
            parents.append(new_index[-1])
            offsets.append(skel.offsets[j] - share * off)
        else:
            parents.append(-1 if skel.parents[j] < 0 else new_index[skel.parents[j]])
            offsets.append(skel.offsets[j])
    rest = np.array([[1.0, 0, 0, 0] if j == -1 else skel.rest_rotations[j] for j in order])
    names = [name if j == -1 else skel.names[j] for j in order]
    ends = {new_index[j]: v for j, v in skel.end_sites.items()}
    rot = np.concatenate([m.rotations[:, :pi + 1], np.tile([1.0, 0, 0, 0], (m.num_frames, 1, 1)),
                          m.rotations[:, pi + 1:]], axis=1)
    if twist:  # r = swing * twist about the bone's direction d (in the parent bone's frame)
        d = off / np.linalg.norm(off)
        r = m.rotations[:, pi]
        tw = np.concatenate([r[:, :1], (r[:, 1:] @ d)[:, None] * d], axis=1)
        tw /= np.linalg.norm(tw, axis=1, keepdims=True)
        rot[:, new_index[pi]] = quat_multiply(r, quat_conjugate(tw))
        rot[:, new_index[-1]] = tw
    return SourceMotion(SourceSkeleton(names, parents, np.array(offsets), rest, ends), rot, m.root_translation,
                        m.frame_time)


def daz_chains(m: SourceMotion) -> SourceMotion:
    """The clip as Daz Genesis 8 builds its skeleton: Daz's names (LIBRARY_NAMES), a "pelvis"
    under the "hip" that carries the thighs, twist bones inside the limbs' chains (the thigh's,
    the upper arm's and the forearm's twist in ThighTwist, ShldrTwist and ForearmTwist) and a
    metatarsal bone between the foot and the toes."""
    m = rename_as(m, "daz_genesis")
    m = insert_bone(m, "hip", "pelvis", ["lThighBend", "rThighBend"])
    for s in "lr":
        m = insert_bone(m, f"{s}ThighBend", f"{s}ThighTwist", [f"{s}Shin"], 0.5, twist=True)
        m = insert_bone(m, f"{s}ShldrBend", f"{s}ShldrTwist", [f"{s}ForearmBend"], 0.5, twist=True)
        m = insert_bone(m, f"{s}ForearmBend", f"{s}ForearmTwist", [f"{s}Hand"], 0.5, twist=True)
        m = insert_bone(m, f"{s}Foot", f"{s}Metatarsals", [f"{s}Toe"], 0.5)
    return m


def resample(m: SourceMotion, fps: float) -> SourceMotion:
    return m.resample(fps)


def loop(m: SourceMotion, cycles: int) -> SourceMotion:
    """A cycle played `cycles` times in a row, each moved on by the cycle's horizontal travel
    (plus one frame's step), as a longer capture of the same gait would be."""
    step = m.root_translation[-1] - m.root_translation[0] + (m.root_translation[-1] - m.root_translation[-2])
    step[2] = 0.0
    T = np.concatenate([m.root_translation + k * step for k in range(cycles)])
    local = None if m.local_translations is None else np.tile(m.local_translations, (cycles, 1, 1))
    return SourceMotion(m.skeleton, np.tile(m.rotations, (cycles, 1, 1)), T, m.frame_time, local)


def mirror(m: SourceMotion) -> SourceMotion:
    """Left and right swapped: every pose reflected through the plane x = 0 (a rotation R
    becomes M R M, quaternion (w, x, -y, -z)), then Left/Right names exchanged so the bone
    called Left is on the character's left again."""
    skel = m.skeleton
    flip = np.array([1.0, 1.0, -1.0, -1.0])
    swap = {"Left": "Right", "Right": "Left", "L_": "R_", "R_": "L_"}
    names = [re.sub(r"Left|Right|^L_|^R_", lambda k: swap[k.group(0)], n) for n in skel.names]
    s = SourceSkeleton(names, skel.parents, skel.offsets @ MIRROR_X, skel.rest_rotations * flip,
                       {j: v @ MIRROR_X for j, v in skel.end_sites.items()})
    local = None if m.local_translations is None else m.local_translations @ MIRROR_X
    return SourceMotion(s, m.rotations * flip, m.root_translation @ MIRROR_X, m.frame_time, local)


def hold(m: SourceMotion, frame: int, frames: int = 240) -> SourceMotion:
    """One frame of m held still for `frames` frames: a pose to stand in (issue 16's
    standing test holds a frame of the walk)."""
    k = np.full(frames, int(frame))
    local = None if m.local_translations is None else m.local_translations[k]
    return SourceMotion(m.skeleton, m.rotations[k], m.root_translation[k], m.frame_time, local)


def calibration_pose(m: SourceMotion, kind: str = "T") -> tuple[np.ndarray, np.ndarray]:
    """One calibration frame for m's skeleton: (rotations (J, 4), root translation (3,)).

    "T": the rest pose (the bundled skeletons rest in a T-pose), standing upright at the
    rest root height above the clip's first root position. "A": the same with both upper
    arms lowered A_POSE_DEG below horizontal (about the horizontal axis across each arm).
    """
    if kind not in ("T", "A"):
        raise ValueError(f"kind {kind!r}: 'T' or 'A'")
    skel = m.skeleton
    rot = np.tile([1.0, 0.0, 0.0, 0.0], (skel.num_bones, 1))
    root = m.root_translation[0].copy()
    root[2] = skel.offsets[0, 2]
    if kind == "A":
        W0, P0 = skel.rest_pose()
        for j, n in enumerate(skel.names):
            if not re.search(r"(Left|Right)Arm$", n):
                continue
            child = [c for c in skel.children(j) if "ForeArm" in skel.names[c]][0]
            d = P0[child] - P0[j]
            axis = np.cross(d, [0.0, 0.0, 1.0])
            axis /= np.linalg.norm(axis)
            half = -np.radians(A_POSE_DEG) / 2  # about d x up, a positive angle raises the arm
            lower = np.concatenate([[np.cos(half)], np.sin(half) * axis])
            frame = quat_multiply(W0[skel.parents[j]], skel.rest_rotations[j])  # bone's rest frame
            rot[j] = quat_multiply(quat_conjugate(frame), quat_multiply(lower, frame))
    return rot, root


def insert_pose(m: SourceMotion, kind: str = "T", frames: int = 1, ease: int = 0) -> SourceMotion:
    """m with `frames` calibration frames (calibration_pose) put before its first frame, and
    then `ease` frames moving smoothly from that pose to the first (slerp, smoothstep)."""
    rot, root = calibration_pose(m, kind)
    w = np.arange(1, ease + 1) / (ease + 1)
    w = (w * w * (3 - 2 * w))[:, None]
    R = [np.repeat(rot[None], frames, 0), quat_slerp(np.repeat(rot[None], ease, 0), m.rotations[:1], w),
         m.rotations]
    T = [np.repeat(root[None], frames, 0), root + w * (m.root_translation[:1] - root), m.root_translation]
    local = m.local_translations
    if local is not None:
        local = np.concatenate([np.repeat(local[:1], frames + ease, 0), local])
    return SourceMotion(m.skeleton, np.concatenate(R), np.concatenate(T), m.frame_time, local)


def append_pose(m: SourceMotion, kind: str = "T", frames: int = 1, ease: int = 0) -> SourceMotion:
    """m ending as many capture sessions do: `ease` frames moving smoothly from its last
    frame into a calibration pose (calibration_pose, where the clip ends), then `frames`
    frames holding it (insert_pose with time reversed)."""
    return reverse(insert_pose(reverse(m), kind, frames, ease))


def splice_pose(m: SourceMotion, kind: str = "T", at_s: float = 0.5, frames: int = 1) -> SourceMotion:
    """m with `frames` calibration frames (calibration_pose, standing where the clip is then)
    put in at `at_s`: the clip jumps into the pose and out of it (a capture restarted, takes
    spliced together)."""
    k = int(round(at_s * m.fps))
    rot, root = calibration_pose(m.frames(slice(k, k + 1)), kind)
    R = np.concatenate([m.rotations[:k], np.repeat(rot[None], frames, 0), m.rotations[k:]])
    T = np.concatenate([m.root_translation[:k], np.repeat(root[None], frames, 0), m.root_translation[k:]])
    local = m.local_translations
    if local is not None:
        local = np.concatenate([local[:k], np.repeat(local[k:k + 1], frames, 0), local[k:]])
    return SourceMotion(m.skeleton, R, T, m.frame_time, local)


def reverse(m: SourceMotion) -> SourceMotion:
    """The clip played backwards."""
    return m.frames(slice(None, None, -1))


def start_at(m: SourceMotion, phase: float) -> SourceMotion:
    """The clip from `phase` (0..1) of its length on: a capture that starts mid-motion."""
    return m.frames(slice(int(round(phase * (m.num_frames - 1))), None))


def in_place(m: SourceMotion, keep_sway_s: float | None = None) -> SourceMotion:
    """m with its root's horizontal travel taken out; with keep_sway_s, only its moving average
    over that many seconds (the sway about it kept), as a root-motion extraction leaves it."""
    r = m.root_translation.copy()
    if keep_sway_s is None:
        r[:, :2] = r[0, :2]
    else:
        n = max(int(round(keep_sway_s / m.frame_time)), 1)
        pad = np.pad(r[:, :2], ((n // 2, n - 1 - n // 2), (0, 0)), mode="edge")
        kernel = np.ones(n) / n
        trend = np.stack([np.convolve(pad[:, k], kernel, mode="valid") for k in range(2)], 1)
        r[:, :2] = r[:, :2] - trend + r[0, :2]
    return SourceMotion(m.skeleton, m.rotations, r, m.frame_time, m.local_translations)


def curved(m: SourceMotion, turn_deg: float) -> SourceMotion:
    """m walked along an arc that turns it `turn_deg` over its length (> 0: to the character's
    left, < 0: to its right) instead of its straight line: each frame's root moved onto the arc
    at the distance it had travelled along the clip's start-to-end direction (its sideways
    sway kept across the arc) and the whole pose turned about the vertical by the arc's angle
    there, as a capture of a walk on a curved path is (its planted feet pivot a little, as
    real ones do on a curve). An angle, not a radius: a capture's units are its own."""
    r = m.root_translation
    d = r[-1, :2] - r[0, :2]
    travel = float(np.linalg.norm(d))
    d = d / travel
    left = np.array([-d[1], d[0]])
    rel = r[:, :2] - r[0, :2]
    s, lat = rel @ d, rel @ left
    radius = travel / np.radians(turn_deg)  # signed: the centre lies radius x left of the start
    theta = s / radius
    # the arc through the start, heading d, about the centre; a root `lat` to the left of the
    # line stays `lat` nearer the centre of a left turn
    along, across = (radius - lat) * np.sin(theta), radius - (radius - lat) * np.cos(theta)
    root = r.copy()
    root[:, :2] = r[0, :2] + along[:, None] * d + across[:, None] * left
    yaw = axis_angle_to_quat(theta[:, None] * np.array([0.0, 0.0, 1.0]))  # (F, 4) world turn
    rest = m.skeleton.rest_rotations[0]
    rot = m.rotations.copy()  # the root's world rotation is rest x local: turn it in the world
    rot[:, 0] = quat_multiply(quat_conjugate(rest), quat_multiply(yaw, quat_multiply(rest, m.rotations[:, 0])))
    return SourceMotion(m.skeleton, rot, root, m.frame_time, m.local_translations)


def jitter(m: SourceMotion, deg: float = 0.5, seed: int = 0) -> SourceMotion:
    """m with a capture's jitter: every joint turned by an independent random rotation of `deg`
    per axis (normal), and the root moved by deg x 2 mm, in every frame (marker noise; a
    markerless video capture's is larger)."""
    rng = np.random.default_rng(seed)
    F, J = m.rotations.shape[:2]
    turn = axis_angle_to_quat(np.radians(deg) * rng.standard_normal((F, J, 3)))
    root = m.root_translation + 2e-3 * deg * rng.standard_normal((F, 3))
    return SourceMotion(m.skeleton, quat_multiply(m.rotations, turn), root, m.frame_time, m.local_translations)


def under_ground_root(m: SourceMotion, name: str = "root", carries_travel: bool = False) -> SourceMotion:
    """m under a new root bone on the floor (as game skeletons and FBX conversions have it:
    Unreal's `root`, an `Armature`), the hips below it with position channels. The root bone
    stays at the origin, or with carries_travel it takes the hips' horizontal travel (root
    motion) and the hips keep the rest."""
    sk, F = m.skeleton, m.num_frames
    J = sk.num_bones
    parents = np.concatenate([[-1], np.where(sk.parents < 0, 0, sk.parents + 1)])
    offsets = np.vstack([[0.0, 0.0, 0.0], sk.offsets])
    rotations = np.concatenate([np.tile([1.0, 0.0, 0.0, 0.0], (F, 1, 1)), m.rotations], 1)
    local = np.zeros((F, J + 1, 3))
    local[:, 1:] = sk.offsets[None] if m.local_translations is None else m.local_translations
    root = np.zeros((F, 3))
    if carries_travel:
        root[:, :2] = m.root_translation[:, :2]
    local[:, 1] = m.root_translation - root
    skeleton = SourceSkeleton([name] + sk.names, parents, offsets, None, {k + 1: v for k, v in sk.end_sites.items()})
    return SourceMotion(skeleton, rotations, root, m.frame_time, local)


def bone_aligned(m: SourceMotion, twist_seed: int = 0) -> SourceMotion:
    """The same motion on a skeleton whose joint axes run along its bones, as some mocap
    libraries write it: every bone's x axis points at its (first) child, turned about it by
    a random twist, so that zero rotations lay the skeleton out as a line, not a standing pose;
    a new root bone on the floor under the hips carries the travel, the hips hang from it by
    a translation, and every joint has position channels (its offset, to 1e-5 m).
    World positions and bone directions are the original's; only the axes differ."""
    skel = m.skeleton
    J = skel.num_bones
    W, H = m.fk()
    rng = np.random.default_rng(twist_seed)
    C = np.tile([1.0, 0.0, 0.0, 0.0], (J, 1))  # C_j: original bone frame -> new bone frame
    for j in range(J):
        kids = skel.children(j)
        d = skel.offsets[kids[0]] if kids else skel.end_sites.get(j, np.array([1.0, 0.0, 0.0]))
        if np.linalg.norm(d) < 1e-9:
            d = np.array([1.0, 0.0, 0.0])
        d = d / np.linalg.norm(d)
        x = np.array([1.0, 0.0, 0.0])
        axis = np.cross(x, d)
        angle = np.arctan2(np.linalg.norm(axis), x @ d)
        axis = axis / np.linalg.norm(axis) if np.linalg.norm(axis) > 1e-9 else np.array([0.0, 0.0, 1.0])
        swing = axis_angle_to_quat(axis * angle)  # x -> d
        twist = axis_angle_to_quat(d * rng.uniform(-np.pi, np.pi))
        C[j] = quat_multiply(twist, swing)
    Wn = quat_multiply(W, C[None])  # new world frames
    names = ["joint_Root"] + list(skel.names)
    parents = [-1] + [p + 1 for p in skel.parents]
    offsets = np.zeros((J + 1, 3))
    for j in range(1, J):  # offsets in the parent's new frame (the original's are in its old one)
        p = skel.parents[j]
        offsets[j + 1] = quat_rotate(quat_conjugate(C[p]), skel.offsets[j])
    ground = H[:, 0].copy()
    ground[:, 2] = 0.0
    offsets[1] = [0.0, 0.0, float(H[0, 0, 2])]
    rot = np.empty((m.num_frames, J + 1, 4))
    rot[:, 0] = [1.0, 0.0, 0.0, 0.0]
    rot[:, 1] = Wn[:, 0]
    for j in range(1, J):
        rot[:, j + 1] = quat_multiply(quat_conjugate(Wn[:, skel.parents[j]]), Wn[:, j])
    local = np.tile(offsets, (m.num_frames, 1, 1)) + rng.uniform(-1e-5, 1e-5, (m.num_frames, J + 1, 3))
    local[:, 1] = H[:, 0] - ground
    ends = {j + 1: quat_rotate(quat_conjugate(C[j]), v) for j, v in skel.end_sites.items()}
    new = SourceSkeleton(names, parents, offsets, None, ends)
    return SourceMotion(new, rot, ground, m.frame_time, local)


def rolled_bones(m: SourceMotion, rolls: dict[str, float], axes: dict[str, np.ndarray] | None = None) -> SourceMotion:
    """The same motion on a skeleton whose named bones' frames are turned, each by `rolls`
    degrees about `axes` (a direction in the rest pose's world; default: the bone's first
    child's offset at rest, made level), as a capture whose foot bones rest turned from how
    the soles meet the floor writes it (the CMU captures' feet: ~25 deg, mirrored). World
    positions are the original's, every other bone's frame too; the zero rotations now
    stand the feet on their edges."""
    skel = m.skeleton
    W0, _ = skel.rest_pose()
    rot = m.rotations.copy()
    offsets = skel.offsets.copy()
    local = None if m.local_translations is None else m.local_translations.copy()
    ends = dict(skel.end_sites)
    for name, deg in rolls.items():
        j = skel.index(name)
        kids = skel.children(j)
        if axes and name in axes:
            fwd = np.asarray(axes[name], float).copy()
        else:
            fwd = quat_rotate(W0[j], skel.offsets[kids[0]] if kids else ends[j])  # in the world at rest
            fwd[2] = 0.0
        axis = quat_rotate(quat_conjugate(W0[j]), fwd / np.linalg.norm(fwd))  # in the bone's frame
        Q = axis_angle_to_quat(np.radians(deg) * axis)
        rot[:, j] = quat_multiply(rot[:, j], Q)  # the bone's frame turned by Q ...
        for c in kids:  # ... its children's world frames and heads kept
            rot[:, c] = quat_multiply(quat_conjugate(Q), rot[:, c])
            offsets[c] = quat_rotate(quat_conjugate(Q), offsets[c])
            if local is not None:
                local[:, c] = quat_rotate(quat_conjugate(Q), local[:, c])
        if j in ends:
            ends[j] = quat_rotate(quat_conjugate(Q), ends[j])
    new = SourceSkeleton(list(skel.names), skel.parents, offsets, skel.rest_rotations, ends)
    return SourceMotion(new, rot, m.root_translation, m.frame_time, local)


def retime(m: SourceMotion, tempo: float) -> SourceMotion:
    """The same frames played `tempo` times as fast (a slower or brisker performance of the
    same steps: cadence and speed scale by tempo, stride length stays)."""
    return SourceMotion(m.skeleton, m.rotations, m.root_translation, m.frame_time / tempo, m.local_translations)


def variant(clip: str = "walk", names: str = "mass", fps: float | None = None, mirrored: bool = False,
            pose: str | None = None, pose_frames: int = 1, ease: int = 0, cycles: int = 1,
            tempo: float | None = None) -> SourceMotion:
    """A bundled clip looped `cycles` times, renamed, retimed to `tempo`, resampled, mirrored
    and with a calibration pose (held for pose_frames, then easing into the motion over `ease`
    frames), in that order."""
    m = rename(loop(bundled(clip), cycles) if cycles > 1 else bundled(clip), names)
    if tempo is not None:
        m = retime(m, tempo)
    if fps is not None:
        m = resample(m, fps)
    if mirrored:
        m = mirror(m)
    if pose is not None:
        m = insert_pose(m, pose, pose_frames, ease)
    return m


def variant_file(folder, clip: str = "walk", **kw) -> Path:
    """variant(clip, **kw) written as a BVH file in `folder` (cm, Y-up, as mocap is)."""
    tag = "_".join([clip] + [f"{k}{v}" for k, v in sorted(kw.items()) if v not in (None, False)])
    path = Path(folder) / (re.sub(r"[^\w.-]", "", tag) + ".bvh")
    write_bvh(path, variant(clip, **kw))
    return path


def hand_heights(m: SourceMotion) -> np.ndarray:
    """(F, 2) height of the (right, left) hand bone's head: a check that poses are what
    they claim (T-pose: at shoulder height; A-pose: lower; walking: lower still)."""
    _, pos = m.fk()
    idx = [j for side in ("Right", "Left") for j, n in enumerate(m.skeleton.names) if n.endswith(f"{side}Hand")]
    return pos[:, idx, 2]


