"""The musculoskeletal display: plain Blender data that needs no add-on to play or render.

Per armature, a collection "Sinew <armature>" with
- "<armature>.sinew_bones": the model's bone meshes, one mesh, skinned rigidly to the mapped
  armature bones (vertex groups + an Armature modifier);
- "<armature>.sinew_muscles": the 284 muscle polylines (1,212 waypoints; each waypoint skinned
  to one or two bones with the model's LBS weights, MASS eq. 1), then a Geometry Nodes
  modifier ("Sinew Muscles" node group) that samples the take table at the scene frame,
  sweeps each polyline into a tube whose radius grows with activation, and stores the value
  shown (activation, fatigue M_F or force / f0) as the point attribute `sinew_value`, which
  the material maps white -> red;
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
MODES = ("ACTIVATION", "FATIGUE", "FORCE")
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
    world = np.einsum("vij,vj->vi", body_rot[body_of_v], V) + body_pos[body_of_v]
    verts = _to_armature(arm, rt, world)
    mesh = bpy.data.meshes.new(nm["bones"])
    mesh.vertices.add(len(verts))
    mesh.vertices.foreach_set("co", verts.astype(np.float32).ravel())
    mesh.loops.add(T.size)
    mesh.loops.foreach_set("vertex_index", T.astype(np.int32).ravel())
    mesh.polygons.add(len(T))
    mesh.polygons.foreach_set("loop_start", (3 * np.arange(len(T))).astype(np.int32))
    mesh.polygons.foreach_set("loop_total", np.full(len(T), 3, np.int32))
    mesh.update()
    mesh.validate()
    mesh.materials.append(bone_material())
    ob_b = _replace_object(nm["bones"], mesh, coll)
    _parent(ob_b, arm, "bones")
    groups: dict[str, list] = {}
    for b in range(rig.num_bodies):
        groups.setdefault(bones[b], []).append(np.flatnonzero(body_of_v == b))
    _skin(ob_b, arm, {k: (np.concatenate(v), np.ones(sum(map(len, v)))) for k, v in groups.items()})

    # muscles
    wp = MusclePaths(rig).positions(body_rot, body_pos)
    verts = _to_armature(arm, rt, wp)
    mesh = bpy.data.meshes.new(nm["muscles"])
    mesh.vertices.add(len(verts))
    mesh.vertices.foreach_set("co", verts.astype(np.float32).ravel())
    edges = np.stack([rig.seg_a, rig.seg_b], 1).astype(np.int32)
    mesh.edges.add(len(edges))
    mesh.edges.foreach_set("vertices", edges.ravel())
    attr = mesh.attributes.new(MUSCLE_ATTR, "INT", "POINT")
    attr.data.foreach_set("value", rig.wp_muscle.astype(np.int32))
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
        merged[bone] = (u, np.round(np.bincount(inv, w), 6))
    _skin(ob_m, arm, merged)
    mod = ob_m.modifiers.new("Sinew Muscles", "NODES")
    mod.node_group = muscle_node_group()
    mod.show_in_editmode = False
    mat = muscle_material(getattr(prefs, "color_map", "WHITE_RED"))
    mesh.materials.append(mat)
    settings = arm.sinew
    set_input(mod, "Radius", 0.006 / rt.scale)
    set_input(mod, "Muscles", rig.num_muscles)
    set_input(mod, "Mode", MODES.index(settings.color_mode))
    set_input(mod, "Material", mat)
    table = bpy.data.objects.get(nm["table"])
    if table is not None:
        set_input(mod, "Table", table)
        set_input(mod, "Take Start", int(table.get("sinew_frame_start", 1)))
        set_input(mod, "Frames", int(table.get("sinew_frames", 0)))
    ob_b.hide_viewport = ob_b.hide_render = not settings.show_bones
    ob_m.hide_viewport = ob_m.hide_render = not settings.show_muscles
    return dict(collection=coll.name, bones=ob_b.name, muscles=ob_m.name,
                bone_vertices=len(ob_b.data.vertices), waypoints=len(verts))


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
        set_input(mod, "Frames", int(F))
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


def get_input(mod, name: str):
    return mod[_socket_id(mod, name)]


def muscle_node_group():
    """The Geometry Nodes group (shared by every display; built once per file)."""
    import bpy

    ng = bpy.data.node_groups.get(NODE_GROUP)
    if ng is not None and ng.get("sinew_version") == 1:
        return ng
    if ng is not None:
        ng.name = NODE_GROUP + ".old"
    ng = bpy.data.node_groups.new(NODE_GROUP, "GeometryNodeTree")
    ng["sinew_version"] = 1
    io = ng.interface
    io.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    io.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    s = io.new_socket("Table", in_out="INPUT", socket_type="NodeSocketObject")
    s = io.new_socket("Take Start", in_out="INPUT", socket_type="NodeSocketInt"); s.default_value = 1
    s = io.new_socket("Frames", in_out="INPUT", socket_type="NodeSocketInt"); s.default_value = 0; s.min_value = 0
    s = io.new_socket("Muscles", in_out="INPUT", socket_type="NodeSocketInt"); s.default_value = 284
    s = io.new_socket("Mode", in_out="INPUT", socket_type="NodeSocketInt")
    s.default_value, s.min_value, s.max_value = 0, 0, 2
    s = io.new_socket("Radius", in_out="INPUT", socket_type="NodeSocketFloat"); s.default_value = 0.006
    s = io.new_socket("Gain", in_out="INPUT", socket_type="NodeSocketFloat"); s.default_value = 1.5
    s = io.new_socket("Resolution", in_out="INPUT", socket_type="NodeSocketInt")
    s.default_value, s.min_value = 4, 3
    io.new_socket("Material", in_out="INPUT", socket_type="NodeSocketMaterial")

    N, L = ng.nodes, ng.links

    def node(kind, **props):
        n = N.new(kind)
        for k, v in props.items():
            setattr(n, k, v)
        return n

    def math(op, a, b=None, c=None):
        n = node("ShaderNodeMath", operation=op)
        for i, v in enumerate((a, b, c)):
            if v is None:
                continue
            if isinstance(v, (int, float)):
                n.inputs[i].default_value = v
            else:
                L.new(v, n.inputs[i])
        return n.outputs[0]

    gi, go = node("NodeGroupInput"), node("NodeGroupOutput")
    t = node("GeometryNodeInputSceneTime")
    # frame index into the table: clamp(floor(frame) - start, 0, frames - 1)
    rel = math("SUBTRACT", math("FLOOR", t.outputs["Frame"]), gi.outputs["Take Start"])
    last = math("MAXIMUM", math("SUBTRACT", gi.outputs["Frames"], 1.0), 0.0)
    fidx = node("ShaderNodeClamp")
    L.new(rel, fidx.inputs["Value"]); fidx.inputs["Min"].default_value = 0.0
    L.new(last, fidx.inputs["Max"])
    muscle = node("GeometryNodeInputNamedAttribute", data_type="INT")
    muscle.inputs["Name"].default_value = MUSCLE_ATTR
    idx = math("ADD", math("MULTIPLY", fidx.outputs[0], gi.outputs["Muscles"]), muscle.outputs["Attribute"])
    toint = node("FunctionNodeFloatToInt", rounding_mode="ROUND")
    L.new(idx, toint.inputs[0])
    info = node("GeometryNodeObjectInfo", transform_space="ORIGINAL")
    L.new(gi.outputs["Table"], info.inputs["Object"])
    sample = node("GeometryNodeSampleIndex", data_type="FLOAT_VECTOR", domain="POINT")
    L.new(info.outputs["Geometry"], sample.inputs["Geometry"])
    L.new(node("GeometryNodeInputPosition").outputs[0], sample.inputs["Value"])
    L.new(toint.outputs[0], sample.inputs["Index"])
    sep = node("ShaderNodeSeparateXYZ")
    L.new(sample.outputs[0], sep.inputs[0])
    has = math("GREATER_THAN", gi.outputs["Frames"], 0.5)  # no take: everything relaxed
    act = math("MULTIPLY", sep.outputs["X"], has)
    sw = node("GeometryNodeIndexSwitch", data_type="FLOAT")
    while len(sw.index_switch_items) < 3:
        sw.index_switch_items.new()
    L.new(gi.outputs["Mode"], sw.inputs["Index"])
    L.new(act, sw.inputs[1])
    L.new(math("MULTIPLY", sep.outputs["Y"], has), sw.inputs[2])
    L.new(math("MULTIPLY", sep.outputs["Z"], has), sw.inputs[3])
    store = node("GeometryNodeStoreNamedAttribute", data_type="FLOAT", domain="POINT")
    store.inputs["Name"].default_value = VALUE_ATTR
    L.new(gi.outputs["Geometry"], store.inputs["Geometry"])
    L.new(sw.outputs[0], store.inputs["Value"])
    m2c = node("GeometryNodeMeshToCurve")
    L.new(store.outputs[0], m2c.inputs[0])
    radius = math("MULTIPLY", gi.outputs["Radius"],
                  math("ADD", 1.0, math("MULTIPLY", gi.outputs["Gain"], math("MINIMUM", act, 1.0))))
    circle = node("GeometryNodeCurvePrimitiveCircle", mode="RADIUS")
    L.new(gi.outputs["Resolution"], circle.inputs["Resolution"])
    circle.inputs["Radius"].default_value = 1.0
    c2m = node("GeometryNodeCurveToMesh")
    if "Scale" in c2m.inputs:  # Blender 4.3+: an explicit scale field
        L.new(m2c.outputs[0], c2m.inputs["Curve"])
        L.new(radius, c2m.inputs["Scale"])
    else:  # 4.2: the profile follows the curve radius
        rad = node("GeometryNodeSetCurveRadius")
        L.new(m2c.outputs[0], rad.inputs["Curve"])
        L.new(radius, rad.inputs["Radius"])
        L.new(rad.outputs[0], c2m.inputs["Curve"])
    L.new(circle.outputs["Curve"], c2m.inputs["Profile Curve"])
    c2m.inputs["Fill Caps"].default_value = False  # thin tubes: caps cost time, show nothing
    setm = node("GeometryNodeSetMaterial")
    L.new(c2m.outputs[0], setm.inputs["Geometry"])
    L.new(gi.outputs["Material"], setm.inputs["Material"])
    L.new(setm.outputs[0], go.inputs[0])
    for i, n in enumerate(N):
        n.location = (200 * (i % 8), -200 * (i // 8))
    return ng


def muscle_material(color_map: str = "WHITE_RED"):
    import bpy

    name = "Sinew Muscle"
    mat = bpy.data.materials.get(name)
    if mat is None:
        mat = bpy.data.materials.new(name)
        mat.use_nodes = True
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
        mat.use_nodes = True
        bsdf = mat.node_tree.nodes.get("Principled BSDF")
        bsdf.inputs["Base Color"].default_value = (0.85, 0.82, 0.72, 1.0)
        mat.diffuse_color = (0.85, 0.82, 0.72, 1.0)
    return mat
