"""The human284 rig: counts, symmetry, agreement with MASS's human.xml, LBS weights, bad files."""
import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from engine import kinematics as kin
from engine.errors import InputFileError
from engine.rig import GROUPS, load_rig
from engine.transforms import MIRROR_X, Y_UP_TO_Z_UP

from .conftest import MASS, REPO


def test_counts(rig):
    s = rig.summary()
    assert (s["bodies"], s["joints"], s["muscles"], s["waypoints"]) == (23, 22, 284, 1212)
    assert s["joint_types"] == {"free": 1, "ball": 14, "hinge": 8}
    assert s["dofs"] == 6 + 14 * 3 + 8
    assert s["muscles_by_group"] == {"trunk": 46, "right_leg": 79, "left_leg": 79,
                                     "right_arm": 40, "left_arm": 40}
    assert rig.mass_kg == pytest.approx(61.4)


def test_left_muscles_mirror_their_right_twins(rig):
    twin = rig.muscle_twin
    assert np.all(twin[twin] == np.arange(rig.num_muscles)) and np.all(twin != np.arange(rig.num_muscles))
    for m in range(rig.num_muscles):
        a = slice(rig.muscle_wp_start[m], rig.muscle_wp_start[m + 1])
        b = slice(rig.muscle_wp_start[twin[m]], rig.muscle_wp_start[twin[m] + 1])
        assert np.abs(rig.wp_rest[a] @ MIRROR_X - rig.wp_rest[b]).max() < 1e-6, rig.muscle_names[m]
        assert rig.muscle_f0[m] == rig.muscle_f0[twin[m]]
    # The skeleton mirrors too: every left body's pose is the mirror of its right twin's.
    for i, name in enumerate(rig.body_names):
        if name.endswith("L"):
            j = rig.body_index(name[:-1] + "R")
            assert np.abs(MIRROR_X @ rig.body_rest_pos[j] - rig.body_rest_pos[i]).max() < 1e-9
            assert np.abs(MIRROR_X @ rig.body_rest_rot[j] @ MIRROR_X - rig.body_rest_rot[i]).max() < 1e-9


def _human_xml_bodies():
    """Body positions straight from human.xml, turned Z-up; the left toes' transforms are
    swapped there (FootThumbL sits where the little toe is), which the converter repairs."""
    out = {}
    for node in ET.parse(MASS / "human.xml").getroot().iter("Node"):
        t = node.find("Body").find("Transformation")
        out[node.get("name")] = Y_UP_TO_Z_UP @ np.array([float(v) for v in t.get("translation").split()])
    out["FootThumbL"], out["FootPinkyL"] = out["FootPinkyL"], out["FootThumbL"]
    return out


def test_rest_pose_fk_matches_human_xml(rig):
    root_pos, local_rot = kin.q_to_pose(rig, kin.rest_q(rig))
    _, _, body_rot, body_pos = kin.forward_kinematics(rig, root_pos, local_rot)
    ref = _human_xml_bodies()
    for i, name in enumerate(rig.body_names):
        assert np.linalg.norm(body_pos[i] - ref[name]) < 1e-3, name
    assert np.allclose(body_rot, rig.body_rest_rot, atol=1e-12)
    assert rig.meta["fixes"], "the left-toe repair must be recorded in the rig file"


def test_rest_lengths_are_polyline_lengths(rig):
    root_pos, local_rot = kin.q_to_pose(rig, kin.rest_q(rig))
    _, _, body_rot, body_pos = kin.forward_kinematics(rig, root_pos, local_rot)
    wp = kin.MusclePaths(rig).positions(body_rot, body_pos)
    assert np.abs(wp - rig.wp_rest).max() < 1e-12
    by_hand = [np.linalg.norm(np.diff(rig.wp_rest[rig.muscle_wp_start[m]:rig.muscle_wp_start[m + 1]], axis=0),
                              axis=1).sum() for m in range(rig.num_muscles)]
    assert np.allclose(rig.muscle_rest_length, by_hand, rtol=0, atol=1e-12)
    assert np.allclose(kin.muscle_lengths(rig, wp), by_hand, atol=1e-12)


def test_lbs_weights_follow_mass(rig):
    """MASS Muscle::AddAnchor: ends rigid; an inner waypoint within 8 cm of a joint blends the
    body of that joint and its parent with weights ~ 1/sqrt(distance)."""
    start, end = rig.muscle_wp_start[:-1], rig.muscle_wp_start[1:] - 1
    blended = rig.wp_weight[:, 1] > 0
    assert not blended[start].any() and not blended[end].any()
    assert blended.sum() > 300
    assert np.allclose(rig.wp_weight.sum(1), 1.0)
    for k in np.flatnonzero(blended):
        b0, b1 = rig.wp_body[k]
        assert rig.body_parent[b0] == b1
        d = np.linalg.norm(rig.joint_pos - rig.wp_rest[k], axis=1)
        assert np.argmin(d) == b0 and d[b0] < 0.08
        w = 1 / np.sqrt(d[[b0, b1]])
        assert np.allclose(rig.wp_weight[k], w / w.sum())


def test_groups_follow_the_last_waypoint(rig):
    last_body = rig.wp_body[rig.muscle_wp_start[1:] - 1, 0]
    for m in range(rig.num_muscles):
        name = rig.body_names[last_body[m]]
        group = GROUPS[rig.muscle_group[m]]
        if name in ("Pelvis", "Spine", "Torso", "Neck", "Head"):
            assert group == "trunk"
        else:
            assert group.startswith("right" if name.endswith("R") else "left")


def test_meshes_cover_every_body(rig):
    with np.load(REPO / "rigs" / "human284" / "meshes.npz", allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        v, tri, vs, ts = z["vertices"], z["triangles"], z["vertex_start"], z["triangle_start"]
    assert meta["body_names"] == rig.body_names
    for b in range(rig.num_bodies):
        verts = v[vs[b]:vs[b + 1]]
        faces = tri[ts[b]:ts[b + 1]]
        assert len(verts) > 50 and len(faces) > 50
        assert faces.min() >= 0 and faces.max() < len(verts)
        # Each bone mesh sits around its body's box (body-local frame), within a few cm,
        # and an elongated box is longest along the axis its bone is longest (the boxes turn
        # with their body frames when Y-up becomes Z-up).
        centre = verts.mean(0)
        size = rig.body_size[b]
        assert np.all(np.abs(centre) < size / 2 + 0.05), rig.body_names[b]
        if size.max() > 1.5 * np.median(size):
            extent = verts.max(0) - verts.min(0)
            assert np.argmax(extent) == np.argmax(size), rig.body_names[b]
    world = np.concatenate([v[vs[b]:vs[b + 1]] @ rig.body_rest_rot[b].T + rig.body_rest_pos[b]
                            for b in range(rig.num_bodies)])
    assert world[:, 2].max() - world[:, 2].min() == pytest.approx(rig.height_m, abs=1e-3)
    assert 1.6 < rig.height_m < 1.8


def _rewrite(src, dst, **changes):
    with np.load(src, allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    data.update(changes)
    for k in [k for k, v in changes.items() if v is None]:
        data.pop(k)
    np.savez(dst, **data)
    return dst


@pytest.mark.parametrize("case, expect", [
    ("missing", "not found"),
    ("truncated", "not a readable rig file"),
    ("version", "format version 99"),
    ("nan", "muscle_f0"),
    ("no_array", "missing array 'wp_local'"),
    ("shape", "wp_body"),
])
def test_bad_rig_files_are_refused_by_name(tmp_path, rig, case, expect):
    src = rig.path
    dst = tmp_path / f"{case}.npz"
    meta = dict(rig.meta)
    if case == "truncated":
        dst.write_bytes(src.read_bytes()[:5000])
    elif case == "version":
        meta["version"] = 99
        _rewrite(src, dst, meta=np.array(json.dumps(meta)))
    elif case == "nan":
        f0 = rig.muscle_f0.copy()
        f0[3] = np.nan
        _rewrite(src, dst, muscle_f0=f0)
    elif case == "no_array":
        _rewrite(src, dst, wp_local=None)
    elif case == "shape":
        _rewrite(src, dst, wp_body=rig.wp_body[:, :1])
    with pytest.raises(InputFileError) as err:
        load_rig(dst)
    assert str(dst) in str(err.value) and expect in str(err.value)


def test_converter_reproduces_the_committed_rig(tmp_path, rig):
    """The committed file is what rigs/human284/convert.py makes from ../shared today (to
    1e-12 m: numpy builds differ in the last bit of a few waypoint transforms, 5.6e-17 m)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("convert", REPO / "rigs" / "human284" / "convert.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.convert(MASS, tmp_path)
    fresh = load_rig(tmp_path / "human284.npz")
    for name in ("body_rest_pos", "body_rest_rot", "wp_local", "wp_weight", "muscle_rest_length", "joint_pos"):
        assert np.allclose(getattr(fresh, name), getattr(rig, name), rtol=0, atol=1e-12), name
