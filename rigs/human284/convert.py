"""Convert the MASS model (../shared/reference/mass) into the rig file the engine loads.

    python rigs/human284/convert.py [--mass DIR] [--out rigs/human284]

Writes `human284.npz` (skeleton, muscles, LBS waypoints) and `meshes.npz` (bone meshes).
Both are plain arrays plus one JSON string `meta`; they load without pickle.

What the conversion does, in order:
1. Reads human.xml (23 bodies, Y-up, metres) and muscle284.xml (284 units, waypoints in
   world coordinates of the T-pose) and turns everything Z-up (+90 deg about X).
2. Repairs human.xml's left toes (their transforms are swapped; see
   fix_swapped_transforms), then symmetrises left and right about the sagittal plane x = 0: every right-side quantity
   (body pose, box size, mass, joint position, hinge axis, waypoint) is averaged with the
   mirror image of its left twin, and the left side is then set to the exact mirror of the
   result; midline bodies get x = 0 and a mirror-symmetric orientation. Muscle parameters
   (f0, lm, lt) of a twin pair are averaged the same way. The largest shift this causes is
   recorded in meta["symmetrisation"].
3. Weights each waypoint as MASS does (MASS Muscle::AddAnchor): the first and last waypoint
   of a muscle are rigid on their own body; an inner waypoint that lies within 8 cm of a
   joint is blended between the body that joint moves and that body's parent, with weights
   proportional to 1/sqrt(distance to each body's joint), normalised; otherwise it is rigid.
4. Stores per muscle the rest (T-pose) polyline length, the body-part group (by the body of
   the last waypoint) and the index of the left/right twin.
"""
from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from engine.npzfile import write_npz  # noqa: E402
from engine.rig import FORMAT, FORMAT_VERSION, GROUPS, JOINT_TYPES  # noqa: E402
from engine.transforms import MIRROR_X, Y_UP_TO_Z_UP, orthonormalize  # noqa: E402

C = Y_UP_TO_Z_UP
M = MIRROR_X
LBS_RADIUS = 0.08  # metres (MASS Muscle::AddAnchor)

TRUNK = {"Pelvis", "Spine", "Torso", "Neck", "Head"}


def _vec(s: str) -> np.ndarray:
    return np.array([float(t) for t in s.split()])


def twin_body(name: str) -> str:
    if name.endswith("R"):
        return name[:-1] + "L"
    if name.endswith("L"):
        return name[:-1] + "R"
    return name


def side(name: str) -> str:
    return name[-1] if name not in TRUNK else ""


def body_group(body: str) -> str:
    if body in TRUNK:
        return "trunk"
    limb = "leg" if any(body.startswith(p) for p in ("Femur", "Tibia", "Talus", "Foot")) else "arm"
    return ("right_" if body.endswith("R") else "left_") + limb


def read_skeleton(path: Path) -> list[dict]:
    bodies = []
    for node in ET.parse(path).getroot().iter("Node"):
        b, j = node.find("Body"), node.find("Joint")
        bt, jt = b.find("Transformation"), j.find("Transformation")
        jtype = {"Free": "free", "Ball": "ball", "Revolute": "hinge"}[j.get("type")]
        bodies.append(
            dict(
                name=node.get("name"),
                parent=node.get("parent"),
                mass=float(b.get("mass")),
                # The body frame turns with the world (R_zup = C R C^T), so the box's local axes
                # turn too: local (x, y, z) -> (x, -z, y), and its extents follow.
                size=np.abs(C) @ _vec(b.get("size")),
                contact=b.get("contact") == "On",
                obj=b.get("obj"),
                rot=C @ _vec(bt.get("linear")).reshape(3, 3) @ C.T,
                pos=C @ _vec(bt.get("translation")),
                jtype=jtype,
                jpos=C @ _vec(jt.get("translation")),
                axis=C @ _vec(j.get("axis")) if j.get("axis") else np.zeros(3),
                lower=_vec(j.get("lower")) if j.get("lower") else np.zeros(3),
                upper=_vec(j.get("upper")) if j.get("upper") else np.zeros(3),
                bvh=j.get("bvh") or "",
            )
        )
    return bodies


def ball_limits_zup(lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-axis rotation-vector bounds from Y-up axes to Z-up axes: (x, y, z) -> (x, -z, y)."""
    lo = np.array([lower[0], -upper[2], lower[1]])
    hi = np.array([upper[0], -lower[2], upper[1]])
    return lo, hi


def read_muscles(path: Path) -> list[dict]:
    units = []
    for u in ET.parse(path).getroot().iter("Unit"):
        units.append(
            dict(
                name=u.get("name"),
                f0=float(u.get("f0")),
                lm=float(u.get("lm")),
                lt=float(u.get("lt")),
                lmax=float(u.get("lmax")),
                pen=float(u.get("pen_angle")),
                bodies=[w.get("body") for w in u.iter("Waypoint")],
                points=np.array([C @ _vec(w.get("p")) for w in u.iter("Waypoint")]),
            )
        )
    return units


def fix_swapped_transforms(bodies: list[dict]) -> list[str]:
    """Swap the transforms of left bodies whose names do not match their geometry.

    human.xml places FootThumbL (big toe) on the lateral side and FootPinkyL on the medial
    side, while their meshes, box sizes and the muscles' waypoints are where the names say.
    A left body belongs where its right twin's mirror image is; where the nearest left body
    to that spot is another one, the two exchange body and joint transforms.
    """
    index = {b["name"]: i for i, b in enumerate(bodies)}
    fixed = []
    for b in bodies:
        if side(b["name"]) != "R":
            continue
        target = M @ b["pos"]
        left = [x for x in bodies if side(x["name"]) == "L"]
        nearest = min(left, key=lambda x: np.linalg.norm(x["pos"] - target))
        own = bodies[index[twin_body(b["name"])]]
        if nearest is not own:
            for key in ("pos", "rot", "jpos"):
                own[key], nearest[key] = nearest[key], own[key]
            fixed.append(f"{own['name']} <-> {nearest['name']}: body and joint transforms swapped")
    return fixed


def symmetrise(bodies: list[dict], units: list[dict]) -> dict:
    """Mirror-average twins in place; return the largest shift per quantity (metres)."""
    shift = {"body_position": 0.0, "joint_position": 0.0, "waypoint": 0.0}
    index = {b["name"]: i for i, b in enumerate(bodies)}
    for b in bodies:
        if side(b["name"]) == "L":
            continue
        if side(b["name"]) == "":
            pos = b["pos"] * np.array([0.0, 1.0, 1.0])
            jpos = b["jpos"] * np.array([0.0, 1.0, 1.0])
            rot = orthonormalize(0.5 * (b["rot"] + M @ b["rot"] @ M))
            shift["body_position"] = max(shift["body_position"], np.abs(pos - b["pos"]).max())
            shift["joint_position"] = max(shift["joint_position"], np.abs(jpos - b["jpos"]).max())
            b.update(pos=pos, jpos=jpos, rot=rot)
            continue
        L = bodies[index[twin_body(b["name"])]]
        if L["jtype"] == "hinge" and np.dot(L["axis"], -M @ b["axis"]) < 0:
            # Same hinge described about the opposite axis (MASS's left elbow turns about
            # +y with range [-2.3, 0]): flip it so the two mirror before averaging.
            L.update(axis=-L["axis"], lower=-L["upper"], upper=-L["lower"])
        pos = 0.5 * (b["pos"] + M @ L["pos"])
        jpos = 0.5 * (b["jpos"] + M @ L["jpos"])
        # A mirrored frame M R M keeps det +1 (its x axis flips with the mirror).
        rot = orthonormalize(0.5 * (b["rot"] + M @ L["rot"] @ M))
        # Rotation axes are pseudo-vectors: the mirror image of axis a is -M a.
        axis = 0.5 * (b["axis"] - M @ L["axis"])
        if np.linalg.norm(axis) > 0:
            axis /= np.linalg.norm(axis)
        for key, new, old_r, old_l in (
            ("body_position", pos, b["pos"], M @ L["pos"]),
            ("joint_position", jpos, b["jpos"], M @ L["jpos"]),
        ):
            shift[key] = max(shift[key], np.abs(new - old_r).max(), np.abs(new - old_l).max())
        b.update(
            pos=pos, jpos=jpos, rot=rot, axis=axis,
            size=0.5 * (b["size"] + L["size"]), mass=0.5 * (b["mass"] + L["mass"]),
        )
        L.update(
            pos=M @ pos, jpos=M @ jpos, rot=M @ rot @ M, axis=-M @ axis,
            size=b["size"].copy(), mass=b["mass"], lower=b["lower"].copy(),
            upper=b["upper"].copy(),
        )
        if b["jtype"] == "hinge":
            # The left hinge axis is -M a_R, so the same limits describe the mirrored motion.
            L.update(lower=b["lower"].copy(), upper=b["upper"].copy())
    uindex = {u["name"]: i for i, u in enumerate(units)}
    for u in units:
        if not u["name"].startswith("R_"):
            continue
        L = units[uindex["L_" + u["name"][2:]]]
        if [twin_body(x) for x in u["bodies"]] != L["bodies"]:
            raise ValueError(f"muscle {u['name']}: waypoint bodies do not mirror its left twin")
        pts = 0.5 * (u["points"] + L["points"] @ M.T)
        shift["waypoint"] = max(shift["waypoint"], np.abs(pts - u["points"]).max())
        for k in ("f0", "lm", "lt", "lmax", "pen"):
            u[k] = L[k] = 0.5 * (u[k] + L[k])
        u["points"] = pts
        L["points"] = pts @ M.T
    return shift


def lbs_weights(points: np.ndarray, declared: list[int], jpos: np.ndarray, parent: np.ndarray):
    """MASS's anchor weighting (see module docstring). Returns bodies (n,2), weights (n,2)."""
    n = len(points)
    bodies = np.full((n, 2), -1, dtype=np.int64)
    weights = np.zeros((n, 2))
    for i, (p, b) in enumerate(zip(points, declared)):
        d = np.linalg.norm(jpos - p, axis=1)
        near = int(np.argmin(d))
        inner = 0 < i < n - 1
        if inner and d[near] < LBS_RADIUS:
            pair = [near] + ([int(parent[near])] if parent[near] >= 0 else [])
            w = 1.0 / np.sqrt(np.maximum(d[pair], 1e-9))
            bodies[i, : len(pair)] = pair
            weights[i, : len(pair)] = w / w.sum()
        else:
            bodies[i, 0], weights[i, 0] = b, 1.0
    return bodies, weights


def read_obj(path: Path) -> tuple[np.ndarray, np.ndarray]:
    verts, faces = [], []
    for line in path.read_text().splitlines():
        if line.startswith("v "):
            verts.append([float(t) for t in line.split()[1:4]])
        elif line.startswith("f "):
            idx = [int(t.split("/")[0]) - 1 for t in line.split()[1:]]
            faces.extend([idx[0], idx[k], idx[k + 1]] for k in range(1, len(idx) - 1))
    return np.array(verts), np.array(faces, dtype=np.int64)


def convert(mass_dir: Path, out_dir: Path) -> dict:
    bodies = read_skeleton(mass_dir / "human.xml")
    units = read_muscles(mass_dir / "muscle284.xml")
    fixes = fix_swapped_transforms(bodies)
    original = {b["name"]: (b["pos"].copy(), b["jpos"].copy()) for b in bodies}
    shift = symmetrise(bodies, units)

    names = [b["name"] for b in bodies]
    index = {n: i for i, n in enumerate(names)}
    parent = np.array([index.get(b["parent"], -1) for b in bodies])
    body_pos = np.array([b["pos"] for b in bodies])
    body_rot = np.array([b["rot"] for b in bodies])
    jpos = np.array([b["jpos"] for b in bodies])
    size = np.array([b["size"] for b in bodies])
    mass = np.array([b["mass"] for b in bodies])
    inertia = mass[:, None] / 12.0 * np.stack(
        [size[:, 1] ** 2 + size[:, 2] ** 2, size[:, 0] ** 2 + size[:, 2] ** 2,
         size[:, 0] ** 2 + size[:, 1] ** 2], axis=1)
    jtype = np.array([JOINT_TYPES.index(b["jtype"]) for b in bodies])
    lower, upper = np.zeros((len(bodies), 3)), np.zeros((len(bodies), 3))
    for i, b in enumerate(bodies):
        if b["jtype"] == "ball":
            lower[i], upper[i] = ball_limits_zup(b["lower"], b["upper"])
        elif b["jtype"] == "hinge":
            lower[i, 0], upper[i, 0] = b["lower"][0], b["upper"][0]

    wp_muscle, wp_body, wp_weight, wp_local, wp_world, starts = [], [], [], [], [], [0]
    for m, u in enumerate(units):
        declared = [index[x] for x in u["bodies"]]
        bs, ws = lbs_weights(u["points"], declared, jpos, parent)
        for p, bb, ww in zip(u["points"], bs, ws):
            loc = np.zeros((2, 3))
            for s in range(2):
                if bb[s] >= 0:
                    loc[s] = body_rot[bb[s]].T @ (p - body_pos[bb[s]])
            wp_muscle.append(m)
            wp_body.append(np.where(bb < 0, bb[0], bb))  # an unused slot repeats slot 0, weight 0
            wp_weight.append(ww)
            wp_local.append(loc)
            wp_world.append(p)
        starts.append(starts[-1] + len(u["points"]))
    wp_world = np.array(wp_world)
    starts = np.array(starts)
    seg = np.linalg.norm(np.diff(wp_world, axis=0), axis=1)
    same = np.diff(np.array(wp_muscle)) == 0
    rest_length = np.add.reduceat(np.where(same, seg, 0.0), starts[:-1])
    mnames = [u["name"] for u in units]
    twin = np.array([mnames.index(("L_" if n[0] == "R" else "R_") + n[2:]) for n in mnames])
    group = np.array([GROUPS.index(body_group(u["bodies"][-1])) for u in units])

    # Height: bone meshes span the body from sole to skull.
    meshes_v, meshes_f, v_start, f_start = [], [], [0], [0]
    for i, b in enumerate(bodies):
        v, f = read_obj(mass_dir / "OBJ" / b["obj"])
        v = (v * 0.01) @ C.T  # centimetres, Y-up -> metres, Z-up
        meshes_v.append((v - body_pos[i]) @ body_rot[i])  # into the body frame
        meshes_f.append(f)
        v_start.append(v_start[-1] + len(v))
        f_start.append(f_start[-1] + len(f))
    all_v = np.concatenate([mv @ body_rot[i].T + body_pos[i] for i, mv in enumerate(meshes_v)])
    height = float(all_v[:, 2].max() - all_v[:, 2].min())

    orig_pos = np.array([original[n][0] for n in names])
    meta = dict(
        format=FORMAT,
        version=FORMAT_VERSION,
        name="human284",
        source="MASS (Lee et al. 2019), human.xml + muscle284.xml, Apache-2.0",
        source_commit=(mass_dir / "SOURCE_COMMIT.txt").read_text().split()[0]
        if (mass_dir / "SOURCE_COMMIT.txt").exists() else "",
        units="metres, kilograms, newtons; Z-up, character faces -Y, left is +X",
        symmetrisation=(
            "mirror-average about x = 0: right := (right + mirror(left)) / 2, left := "
            "mirror(right); midline bodies projected to x = 0 with R := polar((R + M R M)/2); "
            "hinge axes mirrored as pseudo-vectors (-M a); twin muscle parameters averaged"
        ),
        fixes=fixes,
        symmetrisation_max_shift_m={k: float(v) for k, v in shift.items()},
        body_names=names,
        joint_bvh_names=[b["bvh"] for b in bodies],
        muscle_names=mnames,
        groups=list(GROUPS),
        joint_types=list(JOINT_TYPES),
        mass_kg=float(mass.sum()),
        height_m=height,
        lbs_radius_m=LBS_RADIUS,
    )
    write_npz(out_dir / "human284.npz", FORMAT, FORMAT_VERSION, meta, dict(
        body_parent=parent, body_rest_pos=body_pos, body_rest_rot=body_rot,
        body_rest_pos_unsymmetrised=orig_pos,
        body_mass=mass, body_size=size, body_inertia=inertia,
        body_contact=np.array([b["contact"] for b in bodies]),
        joint_type=jtype, joint_pos=jpos, joint_axis=np.array([b["axis"] for b in bodies]),
        joint_lower=lower, joint_upper=upper,
        wp_muscle=np.array(wp_muscle), wp_body=np.array(wp_body), wp_weight=np.array(wp_weight),
        wp_local=np.array(wp_local), wp_rest=wp_world, muscle_wp_start=starts,
        muscle_f0=np.array([u["f0"] for u in units]), muscle_lm=np.array([u["lm"] for u in units]),
        muscle_lt=np.array([u["lt"] for u in units]),
        muscle_lmax=np.array([u["lmax"] for u in units]),
        muscle_rest_length=rest_length, muscle_group=group, muscle_twin=twin,
    ), compress=True)
    write_npz(out_dir / "meshes.npz", "sinew-meshes", 1, dict(body_names=names, frame="body-local, metres"), dict(
        vertices=np.concatenate(meshes_v).astype(np.float32),
        triangles=np.concatenate(meshes_f).astype(np.uint32),
        vertex_start=np.array(v_start), triangle_start=np.array(f_start),
    ), compress=True)
    return meta


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mass", type=Path, default=REPO.parent / "shared" / "reference" / "mass",
                    help="folder with human.xml, muscle284.xml and OBJ/ (default: ../shared/...)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = ap.parse_args(argv)
    meta = convert(args.mass, args.out)
    print(json.dumps({k: meta[k] for k in ("mass_kg", "height_m", "symmetrisation_max_shift_m")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
