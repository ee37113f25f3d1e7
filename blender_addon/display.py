"""The musculoskeletal display: plain Blender data that needs no add-on to play or render.

Per armature, a collection "Sinew <armature>" with
- "<armature>.sinew_bones.<Body>": the model's bone meshes, one rigid mesh object per armature
  bone that model bodies follow, parented to that bone (no per-frame deformation), under an
  empty "<armature>.sinew_bones" that stands for them;
- "<armature>.sinew_muscles": the 284 muscles as static tubes, built once: the 1,212 waypoints
  (loose vertices, each skinned to one or two bones with the model's LBS weights, MASS eq. 1)
  and a 4-vertex ring around each (two ring vertices skinned like their waypoint, two mirrored
  by the node group, exact under LBS), 4 quads per polyline segment; then a Geometry Nodes
  modifier ("Sinew Muscles" node group) that reads the take table at the scene frame, stores
  the value shown (activation, fatigue M_F or force / f0) as the point attribute `sinew_value`,
  which the material maps white -> red, and scales each ring about its waypoint by
  1 + Gain * activation (thicker when more active). Per frame: one Armature modifier over
  3 x 1,212 vertices and ~25 field nodes; no curves are built, no Python runs;
- "<armature>.sinew_take": the take table, a mesh with one vertex per (frame, muscle) whose
  position holds (activation, M_F, force / f0) (frame-major), written once by the bake.
Both display meshes are parented to the armature with identity transforms, so their vertices
are in armature space; the rest shape is the model posed in the armature's rest pose by the
retarget (so A-pose and T-pose rigs both fit). Nothing here runs per frame in Python.
"""
from __future__ import annotations

import numpy as np

from .engine.kinematics import MusclePaths
from .engine.motion import SourceMotion
from .engine.motion.retarget import model_bodies
from .engine.transforms import quat_conjugate, quat_rotate

NODE_GROUP = "Sinew Muscles"
VALUE_ATTR = "sinew_value"
MUSCLE_ATTR = "sinew_muscle"
CENTRE_ATTR = "sinew_centre"
SOURCE_ATTR = "sinew_source"
SIGN_ATTR = "sinew_sign"
RADIUS = 0.006  # tube radius of a relaxed muscle on the model (metres)
RING = 4  # vertices around each tube: +n, +b (skinned), -n, -b (mirrored by the node group)
NODE_GROUP_VERSION = 2
COLOR_MAPS = {
    "WHITE_RED": ((1.0, 1.0, 1.0, 1.0), (0.8, 0.0, 0.0, 1.0)),
    "BLUE_RED": ((0.1, 0.3, 1.0, 1.0), (0.9, 0.0, 0.0, 1.0)),
    "GREY_ORANGE": ((0.6, 0.6, 0.6, 1.0), (1.0, 0.35, 0.0, 1.0)),
}


def names_for(arm_name: str) -> dict:
    return dict(collection=f"Sinew {arm_name}", bones=f"{arm_name}.sinew_bones",
                muscles=f"{arm_name}.sinew_muscles", table=f"{arm_name}.sinew_take")


def body_bones(rig, mapping: dict) -> list[str]:
    """Armature bone each model body follows: its mapped bone, else its nearest mapped ancestor's."""
    out = []
    for b, name in enumerate(rig.body_names):
        p = b
        while rig.body_names[p] not in mapping:
            p = rig.body_parent[p]
        out.append(mapping[rig.body_names[p]])
    return out


def rest_aligned_bodies(rt, skeleton):
    """Model body frames (B, 3, 3), (B, 3) when the armature stands in its rest pose, in the
    armature's world (metres), i.e. mapped back through the retarget's heading and scale."""
    J = skeleton.num_bones
    motion = SourceMotion(skeleton, np.tile([1.0, 0, 0, 0], (1, J, 1)), skeleton.offsets[:1].copy(), 1 / 30)
    W, hips = rt.source_fk(motion)
    G, _ = rt.model_rotations(W)
    root = rt.scale * quat_rotate(rt.heading, hips)
    body_rot, body_pos = model_bodies(rt.rig, root, G)
    return body_rot[0], body_pos[0]


def _to_armature(obj, rt, pts_model: np.ndarray) -> np.ndarray:
    """Model-world points -> the armature object's local space."""
    from .armature import _object_frame

    _, _, M = _object_frame(obj)
    world = quat_rotate(quat_conjugate(rt.heading), pts_model) / rt.scale
    Minv = np.linalg.inv(M)
    return world @ Minv[:3, :3].T + Minv[:3, 3]


def muscle_tubes(rig, centres: np.ndarray, radius: float, ring: int = RING):
    """Static tube mesh around the muscle polylines: (vertices, quads).

    Vertices: the W waypoints first (loose: the ring centres the node group scales about),
    then `ring` vertices per waypoint on a circle of `radius` perpendicular to the polyline
    (frames parallel-transported along each muscle, so tubes do not twist). Quads: `ring` per
    polyline segment, facing outwards."""
    W = len(centres)
    start = rig.muscle_wp_start
    counts = np.diff(start)
    last = np.repeat(start[1:] - 1, counts)
    first = np.repeat(start[:-1], counts)
    nxt, prv = np.minimum(np.arange(W) + 1, last), np.maximum(np.arange(W) - 1, first)
    tangent = centres[nxt] - centres[prv]
    tangent /= np.maximum(np.linalg.norm(tangent, axis=1, keepdims=True), 1e-12)
    normal = np.empty_like(centres)
    # first waypoint: any perpendicular; then parallel transport along the muscle
    t0 = tangent[start[:-1]]
    helper = np.where(np.abs(t0[:, 2:3]) < 0.9, [[0.0, 0.0, 1.0]], [[1.0, 0.0, 0.0]])
    n0 = np.cross(t0, helper)
    normal[start[:-1]] = n0 / np.linalg.norm(n0, axis=1, keepdims=True)
    for i in range(1, int(counts.max())):
        k = start[:-1][counts > i] + i
        n = normal[k - 1] - np.sum(normal[k - 1] * tangent[k], axis=1, keepdims=True) * tangent[k]
        bad = np.linalg.norm(n, axis=1) < 1e-6  # a reversal: restart the frame
        n[bad] = np.cross(tangent[k][bad], [0.0, 0.0, 1.0]) + 1e-3
        normal[k] = n / np.linalg.norm(n, axis=1, keepdims=True)
    binormal = np.cross(tangent, normal)
    ang = 2 * np.pi * np.arange(ring) / ring
    rings = centres[:, None] + radius * (np.cos(ang)[None, :, None] * normal[:, None]
                                         + np.sin(ang)[None, :, None] * binormal[:, None])
    verts = np.concatenate([centres, rings.reshape(-1, 3)])
    a, b = rig.seg_a[:, None], rig.seg_b[:, None]
    j, j1 = np.arange(ring)[None], (np.arange(ring)[None] + 1) % ring
    quads = np.stack([W + ring * a + j, W + ring * a + j1, W + ring * b + j1, W + ring * b + j], -1)
    return verts, quads.reshape(-1, 4)


def _add_faces(mesh, faces: np.ndarray) -> None:
    """Append faces (F, n) of n vertices each."""
    F, n = faces.shape
    mesh.loops.add(faces.size)
    mesh.loops.foreach_set("vertex_index", faces.astype(np.int32).ravel())
    mesh.polygons.add(F)
    mesh.polygons.foreach_set("loop_start", (n * np.arange(F)).astype(np.int32))
    mesh.polygons.foreach_set("loop_total", np.full(F, n, np.int32))


def _add_quads(mesh, quads: np.ndarray) -> None:
    _add_faces(mesh, quads)
    mesh.polygons.foreach_set("use_smooth", np.ones(len(quads), bool))


def _collection(scene, name: str):
    import bpy

    coll = bpy.data.collections.get(name)
    if coll is None:
        coll = bpy.data.collections.new(name)
    if coll.name not in scene.collection.children and not any(
            c == coll for c in scene.collection.children_recursive):
        scene.collection.children.link(coll)
    return coll


def _replace_object(name: str, mesh, coll):
    import bpy

    old = bpy.data.objects.get(name)
    if old is not None:
        old_mesh = old.data
        bpy.data.objects.remove(old)
        if old_mesh is not None and old_mesh.users == 0:
            bpy.data.meshes.remove(old_mesh)
    obj = bpy.data.objects.new(name, mesh)
    coll.objects.link(obj)
    return obj


def bone_parts(arm_name: str) -> list:
    """The armature's bone-mesh objects (one per armature bone that model bodies follow)."""
    import bpy

    return [o for o in bpy.data.objects
            if o.get("sinew_role") == "bone_part" and o.get("sinew_armature") == arm_name]


def _remove_parts(arm_name: str, role: str) -> None:
    import bpy

    for o in [o for o in bpy.data.objects if o.get("sinew_role") == role and o.get("sinew_armature") == arm_name]:
        mesh = o.data
        bpy.data.objects.remove(o)
        if mesh is not None and mesh.users == 0:
            bpy.data.meshes.remove(mesh)


def set_visibility(arm_name: str, show_bones: bool, show_muscles: bool) -> None:
    """Show or hide the bone meshes and the muscles, in the viewport and in renders."""
    import bpy

    nm = names_for(arm_name)
    ob_b, ob_m = bpy.data.objects.get(nm["bones"]), bpy.data.objects.get(nm["muscles"])
    for ob in ([ob_b] if ob_b is not None else []) + bone_parts(arm_name):
        ob.hide_viewport = ob.hide_render = not show_bones
    if ob_m is not None:
        ob_m.hide_viewport = ob_m.hide_render = not show_muscles


def _bone_parent(obj, arm, bone: str) -> None:
    """Parent `obj`, whose vertices are in armature space, to `bone`: it then moves exactly as
    vertices skinned rigidly to that bone would (Blender parents to the bone's tail)."""
    from mathutils import Matrix

    b = arm.data.bones[bone]
    obj.parent = arm
    obj.parent_type = "BONE"
    obj.parent_bone = bone
    obj.matrix_parent_inverse = (b.matrix_local @ Matrix.Translation((0.0, b.length, 0.0))).inverted()
    obj.matrix_basis = Matrix.Identity(4)


def _skin(obj, arm, groups: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    for bone, (idx, w) in groups.items():
        vg = obj.vertex_groups.new(name=bone)
        for val in np.unique(w):
            sel = idx[w == val]
            vg.add(sel.tolist(), float(val), "REPLACE")
    mod = obj.modifiers.new("Sinew Armature", "ARMATURE")
    mod.object = arm
    mod.use_vertex_groups = True
    mod.use_bone_envelopes = False


def _parent(obj, arm, tag: str) -> None:
    from mathutils import Matrix

    obj.parent = arm
    obj.matrix_parent_inverse = Matrix.Identity(4)
    obj.matrix_basis = Matrix.Identity(4)
    obj["sinew_role"] = tag
    obj["sinew_armature"] = arm.name


def build_display(context, arm, rt, rig, meshes_path, prefs=None) -> dict:
    """(Re)build the bone and muscle display for armature `arm` retargeted by `rt`."""
    import bpy

    skel = rt.skeleton
    nm = names_for(arm.name)
    coll = _collection(context.scene, nm["collection"])
    bones = body_bones(rig, rt.mapping)
    body_rot, body_pos = rest_aligned_bodies(rt, skel)

    # bone meshes
    with np.load(meshes_path, allow_pickle=False) as z:
        V, T, vs, ts = z["vertices"].astype(float), z["triangles"], z["vertex_start"], z["triangle_start"]
    body_of_v = np.repeat(np.arange(rig.num_bodies), np.diff(vs))
    # meshes.npz numbers each body's triangle corners within that body's vertices
    T = T.astype(np.int64) + np.repeat(vs[:-1], np.diff(ts))[:, None]
    world = np.einsum("vij,vj->vi", body_rot[body_of_v], V) + body_pos[body_of_v]
    verts = _to_armature(arm, rt, world)
    # One rigid mesh per armature bone, parented to that bone: the pose moves whole objects and
    # no vertex is deformed per frame (an Armature modifier over the 42,000 bone-mesh vertices
    # cost several times the muscle display). "<armature>.sinew_bones" is an empty that carries
    # the parts' visibility.
    _remove_parts(arm.name, "bone_part")
    ob_b = _replace_object(nm["bones"], None, coll)
    ob_b.empty_display_size = 0.05
    _parent(ob_b, arm, "bones")
    mat = bone_material()
    parts = []
    for bone in dict.fromkeys(bones):  # first-body order
        bodies = [b for b in range(rig.num_bodies) if bones[b] == bone]
        sel = np.concatenate([np.arange(vs[b], vs[b + 1]) for b in bodies])
        local = np.full(len(verts), -1)
        local[sel] = np.arange(len(sel))
        tri = local[np.concatenate([T[ts[b]:ts[b + 1]] for b in bodies])]
        name = f"{nm['bones']}.{rig.body_names[bodies[0]]}"
        mesh = bpy.data.meshes.new(name)
        mesh.vertices.add(len(sel))
        mesh.vertices.foreach_set("co", verts[sel].astype(np.float32).ravel())
        _add_faces(mesh, tri)
        mesh.update()
        mesh.validate()
        mesh.materials.append(mat)
        part = bpy.data.objects.new(name, mesh)  # old parts are gone: a clash only gets a suffix
        coll.objects.link(part)
        _bone_parent(part, arm, bone)
        part["sinew_role"] = "bone_part"
        part["sinew_armature"] = arm.name
        part["sinew_bodies"] = [rig.body_names[b] for b in bodies]  # vertices in this order
        parts.append(part)

    # muscles: static tubes (rings around the waypoints) skinned like their waypoints
    wp = MusclePaths(rig).positions(body_rot, body_pos)
    centres = _to_armature(arm, rt, wp)
    radius = RADIUS / rt.scale
    verts, quads = muscle_tubes(rig, centres, radius, RING)
    mesh = bpy.data.meshes.new(nm["muscles"])
    mesh.vertices.add(len(verts))
    mesh.vertices.foreach_set("co", verts.astype(np.float32).ravel())
    _add_quads(mesh, quads)
    W = rig.num_waypoints
    ring_of = np.concatenate([np.arange(W), np.repeat(np.arange(W), RING)])  # vertex -> its waypoint
    attr = mesh.attributes.new(MUSCLE_ATTR, "INT", "POINT")
    attr.data.foreach_set("value", rig.wp_muscle[ring_of].astype(np.int32))
    attr = mesh.attributes.new(CENTRE_ATTR, "INT", "POINT")
    attr.data.foreach_set("value", ring_of.astype(np.int32))
    # Only the centres and the first two ring vertices are skinned (armature deformation is
    # the display's main per-vertex cost); the other two mirror them about the centre, which
    # is exact because linear blend skinning is linear in the rest position.
    j = np.concatenate([np.zeros(W, int), np.tile(np.arange(RING), W)])
    source = np.arange(len(verts))
    source[j >= 2] -= 2
    attr = mesh.attributes.new(SOURCE_ATTR, "INT", "POINT")
    attr.data.foreach_set("value", source.astype(np.int32))
    attr = mesh.attributes.new(SIGN_ATTR, "FLOAT", "POINT")
    attr.data.foreach_set("value", np.where(j >= 2, -1.0, 1.0).astype(np.float32))
    mesh.update()
    ob_m = _replace_object(nm["muscles"], mesh, coll)
    _parent(ob_m, arm, "muscles")
    wgroups: dict[str, tuple[list, list]] = {}
    for s in range(2):
        for k in np.flatnonzero(rig.wp_weight[:, s] > 0):
            bone = bones[rig.wp_body[k, s]]
            wgroups.setdefault(bone, ([], []))
            wgroups[bone][0].append(k)
            wgroups[bone][1].append(rig.wp_weight[k, s])
    merged = {}
    for bone, (idx, w) in wgroups.items():  # a waypoint blended over two bodies of one bone
        idx, w = np.array(idx), np.array(w)
        u, inv = np.unique(idx, return_inverse=True)
        wsum = np.round(np.bincount(inv, w), 6)
        rings = (W + RING * u[:, None] + np.arange(2)).ravel()  # its skinned ring vertices share its weights
        merged[bone] = (np.concatenate([u, rings]), np.concatenate([wsum, np.repeat(wsum, 2)]))
    _skin(ob_m, arm, merged)
    mod = ob_m.modifiers.new("Sinew Muscles", "NODES")
    mod.node_group = muscle_node_group()
    mod.show_in_editmode = False
    mat = muscle_material(getattr(prefs, "color_map", "WHITE_RED"))
    mesh.materials.append(mat)
    settings = arm.sinew
    set_input(mod, "Thickness", settings.muscle_thickness)
    set_input(mod, "Muscles", rig.num_muscles)
    set_mode(mod, settings.color_mode)
    table = bpy.data.objects.get(nm["table"])
    if table is not None:
        set_input(mod, "Table", table)
        set_input(mod, "Take Start", int(table.get("sinew_frame_start", 1)))
        set_input(mod, "Last Row", max(int(table.get("sinew_frames", 1)) - 1, 0))
    set_visibility(arm.name, settings.show_bones, settings.show_muscles)
    return dict(collection=coll.name, bones=ob_b.name, muscles=ob_m.name, bone_parts=len(parts),
                bone_vertices=sum(len(p.data.vertices) for p in parts), waypoints=len(centres))


def write_take_table(context, arm, values: np.ndarray, frame_start: int) -> object:
    """Store per-frame values (F, M, 3) = (activation, M_F, force / f0) as the take table and
    point the muscle display at it. Returns the table object."""
    import bpy

    nm = names_for(arm.name)
    F, M, _ = values.shape
    mesh = bpy.data.meshes.new(nm["table"])
    mesh.vertices.add(F * M)
    mesh.vertices.foreach_set("co", np.ascontiguousarray(values, dtype=np.float32).ravel())
    coll = _collection(context.scene, nm["collection"])
    table = _replace_object(nm["table"], mesh, coll)
    table.hide_viewport = True
    table.hide_render = True
    table.hide_select = True
    table["sinew_role"] = "take_table"
    table["sinew_armature"] = arm.name
    table["sinew_frame_start"] = int(frame_start)
    table["sinew_frames"] = int(F)
    ob_m = bpy.data.objects.get(nm["muscles"])
    if ob_m is not None:
        mod = ob_m.modifiers.get("Sinew Muscles")
        set_input(mod, "Table", table)
        set_input(mod, "Take Start", int(frame_start))
        set_input(mod, "Last Row", int(F) - 1)
    return table


# ---- node group, materials -----------------------------------------------------------------
def _socket_id(mod, name: str) -> str:
    for item in mod.node_group.interface.items_tree:
        if item.item_type == "SOCKET" and item.in_out == "INPUT" and item.name == name:
            return item.identifier
    raise KeyError(name)


def set_input(mod, name: str, value) -> None:
    mod[_socket_id(mod, name)] = value
    if mod.id_data is not None:
        mod.id_data.update_tag()


def muscle_node_group():
    """The Geometry Nodes group (shared by every display; built once per file).

    Per frame it only reads: the take table at (frame, muscle) for every tube vertex, stores
    the shown value (the table column picked by Channel) as `sinew_value` and scales each
    ring about its armature-deformed centre by Thickness * (1 + Gain * activation). The tube
    topology is static mesh data, so nothing is built per frame, and the tree is kept to a
    few nodes: its cost is mostly per node, not per vertex."""
    import bpy

    ng = bpy.data.node_groups.get(NODE_GROUP)
    if ng is not None and ng.get("sinew_version") == NODE_GROUP_VERSION:
        return ng
    if ng is not None:
        ng.name = NODE_GROUP + ".old"
    ng = bpy.data.node_groups.new(NODE_GROUP, "GeometryNodeTree")
    ng["sinew_version"] = NODE_GROUP_VERSION
    io = ng.interface
    io.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    io.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    s = io.new_socket("Table", in_out="INPUT", socket_type="NodeSocketObject")
    s.description = "Take table: one point per (frame, muscle), position = (activation, M_F, force / f0)"
    s = io.new_socket("Take Start", in_out="INPUT", socket_type="NodeSocketInt"); s.default_value = 1
    s.description = "Scene frame of the table's first row"
    s = io.new_socket("Last Row", in_out="INPUT", socket_type="NodeSocketInt"); s.default_value = 0
    s.min_value, s.description = 0, "Rows (frames) in the table minus one; frames outside hold the end rows"
    s = io.new_socket("Muscles", in_out="INPUT", socket_type="NodeSocketInt"); s.default_value = 284
    s = io.new_socket("Channel", in_out="INPUT", socket_type="NodeSocketVector")
    s.default_value, s.description = (1.0, 0.0, 0.0), "Shown value: (1,0,0) activation, (0,1,0) M_F, (0,0,1) force"
    s = io.new_socket("Thickness", in_out="INPUT", socket_type="NodeSocketFloat"); s.default_value = 1.0
    s.min_value = 0.0
    s = io.new_socket("Gain", in_out="INPUT", socket_type="NodeSocketFloat"); s.default_value = 1.5
    s.description = "Extra thickness of a fully active muscle"

    N, L = ng.nodes, ng.links

    def node(kind, inputs=(), **props):
        n = N.new(kind)
        for k, v in props.items():
            setattr(n, k, v)
        for i, v in inputs:
            sock = _socket(n.inputs, i)
            if isinstance(v, (int, float, tuple, str)):
                sock.default_value = v
            elif v is not None:
                L.new(v, sock)
        return n

    def math(op, *args):
        return node("ShaderNodeMath", enumerate(args), operation=op).outputs[0]

    def vmath(op, a, b):
        n = node("ShaderNodeVectorMath", [(0, a), (3 if op == "SCALE" else 1, b)], operation=op)
        return n.outputs["Value" if op == "DOT_PRODUCT" else "Vector"]

    def named(name, kind="INT"):
        return _socket(node("GeometryNodeInputNamedAttribute", [("Name", name)], data_type=kind).outputs,
                       "Attribute")

    gi, go = node("NodeGroupInput"), node("NodeGroupOutput")
    frame = node("GeometryNodeInputSceneTime").outputs["Frame"]
    # table row of this frame (single values): clamp(floor(frame) - start, 0, last) * muscles
    row = node("ShaderNodeClamp", [("Value", math("SUBTRACT", math("FLOOR", frame), gi.outputs["Take Start"])),
                                   ("Min", 0.0), ("Max", gi.outputs["Last Row"])]).outputs[0]
    index = math("MULTIPLY_ADD", row, gi.outputs["Muscles"], named(MUSCLE_ATTR))
    table = node("GeometryNodeObjectInfo", [("Object", gi.outputs["Table"])], transform_space="ORIGINAL")
    pos = node("GeometryNodeInputPosition").outputs[0]
    # no table: an empty geometry, every sample 0 (relaxed)
    value = _socket(node("GeometryNodeSampleIndex", [("Geometry", table.outputs["Geometry"]), ("Value", pos),
                                                     ("Index", index)], data_type="FLOAT_VECTOR",
                         domain="POINT").outputs, "Value")
    store = node("GeometryNodeStoreNamedAttribute", [("Geometry", gi.outputs["Geometry"]), ("Name", VALUE_ATTR),
                                                     ("Value", vmath("DOT_PRODUCT", value, gi.outputs["Channel"]))],
                 data_type="FLOAT", domain="POINT")
    # thickness: each ring scaled about its centre (a loose vertex skinned like the ring)
    centre = _socket(node("GeometryNodeSampleIndex", [("Geometry", gi.outputs["Geometry"]), ("Value", pos),
                                                      ("Index", named(CENTRE_ATTR))],
                          data_type="FLOAT_VECTOR", domain="POINT").outputs, "Value")
    source = _socket(node("GeometryNodeSampleIndex", [("Geometry", gi.outputs["Geometry"]), ("Value", pos),
                                                      ("Index", named(SOURCE_ATTR))],
                          data_type="FLOAT_VECTOR", domain="POINT").outputs, "Value")
    act = node("ShaderNodeSeparateXYZ", [(0, value)]).outputs["X"]
    scale = math("MULTIPLY", math("MULTIPLY_ADD", act, gi.outputs["Gain"], 1.0), gi.outputs["Thickness"])
    scale = math("MULTIPLY", scale, named(SIGN_ATTR, "FLOAT"))
    newpos = vmath("ADD", centre, vmath("SCALE", vmath("SUBTRACT", source, centre), scale))
    setp = node("GeometryNodeSetPosition", [("Geometry", store.outputs[0]), ("Position", newpos)])
    L.new(setp.outputs[0], go.inputs[0])
    for i, n in enumerate(N):
        n.location = (200 * (i % 8), -200 * (i // 8))
    return ng


def _socket(sockets, key):
    """A node's socket by index or name; by name, the first *available* one (Blender 4.2 and
    later keep one socket per name for these nodes; older node types had one per data type,
    with the unused ones disabled)."""
    if isinstance(key, int):
        return sockets[key]
    hits = [s for s in sockets if s.name == key or s.identifier == key]
    for s in hits:
        if getattr(s, "enabled", True):
            return s
    if hits:
        return hits[0]
    raise KeyError(key)


CHANNELS = {"ACTIVATION": (1.0, 0.0, 0.0), "FATIGUE": (0.0, 1.0, 0.0), "FORCE": (0.0, 0.0, 1.0)}


def set_mode(mod, color_mode: str) -> None:
    """Colour the display by ACTIVATION, FATIGUE (M_F) or FORCE (force / f0)."""
    set_input(mod, "Channel", CHANNELS.get(color_mode, CHANNELS["ACTIVATION"]))


def _use_nodes(mat) -> None:
    """Node materials: a switch before Blender 5.0, always on (and the switch deprecated) since."""
    import bpy

    if bpy.app.version < (5, 0, 0):
        mat.use_nodes = True


def muscle_material(color_map: str = "WHITE_RED"):
    import bpy

    name = "Sinew Muscle"
    mat = bpy.data.materials.get(name)
    if mat is None:
        mat = bpy.data.materials.new(name)
        _use_nodes(mat)
        nt = mat.node_tree
        bsdf = nt.nodes.get("Principled BSDF")
        attr = nt.nodes.new("ShaderNodeAttribute")
        attr.attribute_type = "GEOMETRY"
        attr.attribute_name = VALUE_ATTR
        clamp = nt.nodes.new("ShaderNodeClamp")
        nt.links.new(attr.outputs["Fac"], clamp.inputs["Value"])
        ramp = nt.nodes.new("ShaderNodeValToRGB")
        ramp.name = "Sinew Ramp"
        nt.links.new(clamp.outputs[0], ramp.inputs["Fac"])
        nt.links.new(ramp.outputs["Color"], bsdf.inputs["Base Color"])
        em = bsdf.inputs.get("Emission Color") or bsdf.inputs.get("Emission")
        nt.links.new(ramp.outputs["Color"], em)
        bsdf.inputs["Emission Strength"].default_value = 0.4
        bsdf.inputs["Roughness"].default_value = 0.6
    set_color_map(mat, color_map)
    return mat


def set_color_map(mat, color_map: str) -> None:
    lo, hi = COLOR_MAPS.get(color_map, COLOR_MAPS["WHITE_RED"])
    ramp = mat.node_tree.nodes.get("Sinew Ramp")
    if ramp is not None:
        ramp.color_ramp.elements[0].color = lo
        ramp.color_ramp.elements[-1].color = hi
    mat.diffuse_color = hi


def bone_material():
    import bpy

    mat = bpy.data.materials.get("Sinew Bone")
    if mat is None:
        mat = bpy.data.materials.new("Sinew Bone")
        _use_nodes(mat)
        bsdf = mat.node_tree.nodes.get("Principled BSDF")
        bsdf.inputs["Base Color"].default_value = (0.85, 0.82, 0.72, 1.0)
        mat.diffuse_color = (0.85, 0.82, 0.72, 1.0)
    return mat
