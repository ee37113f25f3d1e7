"""Blender armatures as the engine's source skeletons, and baking motion back as keyframes.

Conventions: the engine's SourceSkeleton is world-space (Z-up, metres, (w, x, y, z)), so the
armature object's world matrix at the time of the call is folded into the root bone's rest
frame and every offset (object scale included). A pose bone's rotation relative to its rest
(`matrix_basis`) is exactly SourceMotion.rotations; the root bone's `location` is its head's
displacement in its own rest frame, in armature units.

Only the bone tree holding most bones is used (IK targets, props and other roots are left
alone); the user's data is only read here, never changed, except by `bake_action`, which
makes a new Action.
"""
from __future__ import annotations

import numpy as np

from .engine.errors import ParameterError
from .engine.motion import SourceMotion, SourceSkeleton
from .engine.transforms import matrix_to_quat


def _np(m) -> np.ndarray:
    return np.array([list(r) for r in m], dtype=float)


def _object_frame(obj):
    """(rotation 3x3, uniform scale, 4x4 world matrix) of the armature object."""
    M = _np(obj.matrix_world)
    A = M[:3, :3]
    s = float(np.cbrt(abs(np.linalg.det(A)))) or 1.0
    return A / s, s, M


def bone_order(obj) -> list:
    """Bones of the largest tree, parents before children (depth first, Blender's order)."""
    roots = [b for b in obj.data.bones if b.parent is None]
    if not roots:
        raise ParameterError("armature", f"armature {obj.name!r} has no bones")

    def tree(b):
        out = [b]
        for c in b.children:
            out += tree(c)
        return out

    trees = [tree(r) for r in roots]
    return max(trees, key=len)


def armature_skeleton(obj) -> SourceSkeleton:
    """SourceSkeleton of the armature's rest pose in world space."""
    if obj is None or obj.type != "ARMATURE":
        raise ParameterError("armature", f"{getattr(obj, 'name', obj)!r} is not an armature object")
    R_obj, s, M = _object_frame(obj)
    bones = bone_order(obj)
    index = {b.name: i for i, b in enumerate(bones)}
    J = len(bones)
    parents = np.array([index[b.parent.name] if b.parent else -1 for b in bones])
    R = np.empty((J, 3, 3))
    H = np.empty((J, 3))
    tails = np.empty((J, 3))
    for i, b in enumerate(bones):
        ml = _np(b.matrix_local)
        R[i] = R_obj @ ml[:3, :3]
        H[i] = (M @ np.append(ml[:3, 3], 1.0))[:3]
        tails[i] = (M @ np.append(np.array(b.tail_local, float), 1.0))[:3]
    offsets = np.empty((J, 3))
    rest = np.empty((J, 3, 3))
    for j in range(J):
        p = parents[j]
        if p < 0:
            offsets[j], rest[j] = H[j], R[j]
        else:
            offsets[j] = R[p].T @ (H[j] - H[p])
            rest[j] = R[p].T @ R[j]
    ends = {j: R[j].T @ (tails[j] - H[j]) for j in range(J) if not bones[j].children}
    return SourceSkeleton([b.name for b in bones], parents, offsets, matrix_to_quat(rest), ends)


def action_motion(obj, skeleton: SourceSkeleton, frame_start: int, frame_end: int, fps: float) -> SourceMotion:
    """The armature's current animation sampled frame by frame (the scene frame is restored)."""
    import bpy

    scene = bpy.context.scene
    keep = scene.frame_current, scene.frame_subframe
    _, _, M = _object_frame(obj)
    names = skeleton.names
    frames = list(range(int(frame_start), int(frame_end) + 1))
    rot = np.empty((len(frames), len(names), 4))
    root = np.empty((len(frames), 3))
    try:
        for k, f in enumerate(frames):
            scene.frame_set(f)
            pb = obj.pose.bones
            for j, n in enumerate(names):
                rot[k, j] = tuple(pb[n].matrix_basis.to_quaternion())
            root[k] = (M @ np.append(np.array(pb[names[0]].head, float), 1.0))[:3]
    finally:
        scene.frame_set(keep[0], subframe=keep[1])
    return SourceMotion(skeleton, rot, root, 1.0 / fps)


def root_location(obj, skeleton: SourceSkeleton, root_translation: np.ndarray) -> np.ndarray:
    """Root bone `location` values (F, 3) that put its head at world `root_translation`."""
    _, _, M = _object_frame(obj)
    b = obj.data.bones[skeleton.names[0]]
    ml = _np(b.matrix_local)
    Minv = np.linalg.inv(M)
    local = root_translation @ Minv[:3, :3].T + Minv[:3, 3]
    return (local - ml[:3, 3]) @ ml[:3, :3]


# ---- actions ------------------------------------------------------------------------------
def slotted_actions() -> bool:
    """Blender 4.4+ actions have slots, layers and channelbags."""
    import bpy

    return bpy.app.version >= (4, 4, 0)


def unique_action_name(base: str) -> str:
    """`<base>_fatigued_001`, the first number not taken."""
    import bpy

    n = 1
    while f"{base}_fatigued_{n:03d}" in bpy.data.actions:
        n += 1
    return f"{base}_fatigued_{n:03d}"


class _Curves:
    """F-curve factory for a new action on either API (slotted 4.4+, legacy 4.2-4.3)."""

    def __init__(self, action, obj):
        self.action = action
        self.slot = None
        self.groups = {}
        if slotted_actions():
            self.slot = action.slots.new(id_type="OBJECT", name=obj.name)
            layer = action.layers.new("Layer")
            strip = layer.strips.new(type="KEYFRAME")
            self.bag = strip.channelbag(self.slot, ensure=True)
        else:
            self.bag = None

    def new(self, path: str, index: int, group: str):
        if self.bag is not None:
            fc = self.bag.fcurves.new(path, index=index)
            g = self.groups.get(group)
            if g is None:
                g = self.groups[group] = self.bag.groups.new(group)
            fc.group = g
            return fc
        return self.action.fcurves.new(path, index=index, action_group=group)


_LINEAR = 1


def _key(fc, frames: np.ndarray, values: np.ndarray) -> None:
    kp = fc.keyframe_points
    kp.add(len(frames))
    co = np.empty((len(frames), 2), dtype=np.float32)
    co[:, 0], co[:, 1] = frames, values
    kp.foreach_set("co", co.ravel())
    # raw enum values: 0 CONSTANT, 1 LINEAR, 2 BEZIER (one key per frame: linear is exact there
    # and cheaper to evaluate)
    kp.foreach_set("interpolation", np.full(len(frames), _LINEAR, dtype=np.int32))
    fc.update()


def _euler_keys(quats: np.ndarray, order: str) -> np.ndarray:
    from mathutils import Quaternion

    out = np.empty((len(quats), 3))
    prev = None
    for i, q in enumerate(quats):
        e = Quaternion(q).to_euler(order) if prev is None else Quaternion(q).to_euler(order, prev)
        out[i] = e
        prev = e
    return out


def bake_action(obj, motion: SourceMotion, frame_start: int, name: str):
    """A new Action on `obj` holding `motion` (one key per frame from `frame_start`): every
    bone of the skeleton gets its rotation in the pose bone's own rotation mode, the root its
    location. Returns (action, slot or None). Nothing else is touched."""
    import bpy

    action = bpy.data.actions.new(name)
    if not slotted_actions():
        action.id_root = "OBJECT"  # 4.4+: the slot carries the ID type (setting this adds a legacy slot)
    curves = _Curves(action, obj)
    F = motion.num_frames
    frames = frame_start + np.arange(F, dtype=float)
    for j, bname in enumerate(motion.skeleton.names):
        pb = obj.pose.bones[bname]
        base = f'pose.bones["{bpy.utils.escape_identifier(bname)}"]'
        q = motion.rotations[:, j]
        mode = pb.rotation_mode
        if mode == "QUATERNION":
            path, vals = "rotation_quaternion", q
        elif mode == "AXIS_ANGLE":
            from .engine.transforms import quat_to_axis_angle

            aa = quat_to_axis_angle(q)
            ang = np.linalg.norm(aa, axis=-1, keepdims=True)
            axis = np.where(ang > 1e-9, aa / np.maximum(ang, 1e-12), [0.0, 1.0, 0.0])
            path, vals = "rotation_axis_angle", np.concatenate([ang, axis], -1)
        else:
            path, vals = "rotation_euler", _euler_keys(q, mode)
        for i in range(vals.shape[1]):
            _key(curves.new(f"{base}.{path}", i, bname), frames, vals[:, i])
    loc = root_location(obj, motion.skeleton, motion.root_translation)
    root = motion.skeleton.names[0]
    base = f'pose.bones["{bpy.utils.escape_identifier(root)}"]'
    for i in range(3):
        _key(curves.new(f"{base}.location", i, root), frames, loc[:, i])
    return action, curves.slot


def assign_action(obj, action, slot) -> None:
    """Make `action` the armature's active action; the previous one is stashed on a muted NLA
    track, the way Blender's Action editor keeps an action it switches away from, so it keeps
    a user and is saved unchanged."""
    ad = obj.animation_data or obj.animation_data_create()
    old = ad.action
    if old is not None and old != action and not _stashed(ad, old):
        track = ad.nla_tracks.new()
        track.name = "[Action Stash]"
        start = int(old.frame_range[0])
        strip = track.strips.new(old.name, start, old)
        if slotted_actions() and getattr(ad, "action_slot", None) is not None:
            try:
                strip.action_slot = ad.action_slot
            except (AttributeError, TypeError, RuntimeError):
                pass
        track.mute = True
    ad.action = action
    if slot is not None:
        ad.action_slot = slot


def _stashed(ad, action) -> bool:
    return any(s.action == action for t in ad.nla_tracks for s in t.strips)


def bone_world_heads(obj, names) -> np.ndarray:
    """World positions (len(names), 3) of the pose bones' heads at the current frame."""
    _, _, M = _object_frame(obj)
    pb = obj.pose.bones
    H = np.array([tuple(pb[n].head) for n in names], float)
    return H @ M[:3, :3].T + M[:3, 3]
