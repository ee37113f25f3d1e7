"""BVH reading/writing and source-skeleton kinematics (engine.motion)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from engine.errors import InputFileError, ParameterError
from engine.motion import (
    SourceMotion,
    SourceSkeleton,
    detect_units,
    euler_to_quat,
    matrix_to_euler,
    read_bvh,
    write_bvh,
)
from engine.transforms import (
    Y_UP_TO_Z_UP,
    axis_angle_to_quat,
    euler_to_matrix,
    quat_to_matrix,
)

from .conftest import MOTION_DIR

MASS_CLIPS = ["walk.bvh", "run.bvh"]

needs_mass = pytest.mark.skipif(not MOTION_DIR.is_dir(), reason=f"no MASS motions at {MOTION_DIR}")


def _header(path: Path) -> tuple[int, float]:
    text = path.read_text()
    frames = int(re.search(r"Frames:\s*(\d+)", text).group(1))
    frame_time = float(re.search(r"Frame Time:\s*(\S+)", text).group(1))
    return frames, frame_time


def _same_rotation(qa, qb, atol=1e-6):
    np.testing.assert_allclose(quat_to_matrix(qa), quat_to_matrix(qb), atol=atol)


def _write(tmp_path, text: str, name="clip.bvh", newline="\n") -> Path:
    path = tmp_path / name
    path.write_bytes(text.replace("\n", newline).encode())
    return path


def _by_name(motion: SourceMotion, names: list[str]) -> list[int]:
    return [motion.index(n) for n in names]


# ----------------------------------------------------------------------------- MASS clips


@needs_mass
@pytest.mark.parametrize("clip", MASS_CLIPS)
def test_mass_clip_matches_header(clip):
    path = MOTION_DIR / clip
    frames, frame_time = _header(path)
    text = path.read_text()
    motion = read_bvh(path)
    assert motion.num_frames == frames
    assert motion.frame_time == pytest.approx(frame_time, rel=1e-5)
    assert motion.frame_time == 1 / 120  # "0.00833333" snapped to 120 fps
    assert motion.seconds == pytest.approx(frames * frame_time)
    assert motion.rotations.shape == (frames, motion.skeleton.num_bones, 4)
    declared = re.findall(r"^\s*(?:ROOT|JOINT)\s+(\S+)", text, re.M)
    assert motion.skeleton.names == declared
    assert len(motion.skeleton.end_sites) == text.count("End Site")
    assert motion.local_translations is None  # only the root has position channels


@needs_mass
@pytest.mark.parametrize("clip", MASS_CLIPS)
def test_mass_clip_is_z_up_metres(clip):
    motion = read_bvh(MOTION_DIR / clip)
    _, pos = motion.fk()
    z = pos[..., 2]
    names = motion.skeleton.names
    head, hips = motion.index("Character1_Head"), motion.index("Character1_Hips")
    assert np.all(z[:, head] > z[:, hips] + 0.4)
    body = [j for j, n in enumerate(names) if n.startswith("Character1_")]
    lowest = {names[body[j]] for j in np.argmin(z[:, body], axis=1)}
    assert lowest <= {"Character1_LeftToeBase", "Character1_RightToeBase",
                      "Character1_LeftFoot", "Character1_RightFoot"}, lowest
    stature = z[:, head] - z[:, body].min(axis=1)
    assert np.all((stature > 1.3) & (stature < 2.0)), stature  # metres, not centimetres
    assert 0.0 <= z[:, body].min() < 0.2  # feet near the floor at z = 0


@needs_mass
def test_mass_units_detected_as_centimetres():
    path = MOTION_DIR / "walk.bvh"
    auto, cm, m = read_bvh(path), read_bvh(path, units="cm"), read_bvh(path, units="m")
    np.testing.assert_allclose(auto.skeleton.offsets, cm.skeleton.offsets)
    np.testing.assert_allclose(auto.root_translation, cm.root_translation)
    np.testing.assert_allclose(m.skeleton.offsets, 100.0 * cm.skeleton.offsets)
    assert detect_units(m.skeleton) == "cm"  # read as metres, it is 100x too big
    assert detect_units(cm.skeleton) == "m"


@needs_mass
def test_mass_fk_matches_naive_reference():
    """fk() against a per-frame matrix evaluation of the raw file (Y-up, cm, ZXY)."""
    path = MOTION_DIR / "walk.bvh"
    lines = path.read_text().splitlines()
    names, parents, offsets, stack = [], [], [], []
    for i, line in enumerate(lines):
        words = line.split()
        if words and words[0] in ("ROOT", "JOINT"):
            names.append(words[1])
            parents.append(stack[-1] if stack else -1)
            offsets.append([float(w) for w in lines[i + 2].split()[1:4]])
            stack.append(len(names) - 1)
        elif words == ["End", "Site"]:
            stack.append(None)
        elif words == ["}"]:
            stack.pop()
        elif words == ["MOTION"]:
            data = np.array([[float(w) for w in l.split()] for l in lines[i + 3:] if l.strip()])
            break
    motion = read_bvh(path)
    _, pos = motion.fk()
    C = Y_UP_TO_Z_UP
    for f in (0, 57, len(data) - 1):
        row = data[f]
        world_R, world_p = [], []
        for j, p in enumerate(parents):
            angles = np.radians(row[3 + 3 * j: 6 + 3 * j] if j else row[3:6])
            R = euler_to_matrix(angles, "ZXY")
            if p < 0:
                world_R.append(R)
                world_p.append(row[:3])
            else:
                world_R.append(world_R[p] @ R)
                world_p.append(world_p[p] + world_R[p] @ np.array(offsets[j]))
        expected = np.array(world_p) @ C.T / 100.0
        np.testing.assert_allclose(pos[f], expected, atol=1e-9)


@needs_mass
def test_mass_end_site_offsets():
    motion = read_bvh(MOTION_DIR / "walk.bvh")
    hand = motion.index("Character1_LeftHand")
    expected = Y_UP_TO_Z_UP @ np.array([0.269758, 0.141128, 0.89614]) / 100.0
    np.testing.assert_allclose(motion.skeleton.end_sites[hand], expected)


# ----------------------------------------------------------------------------- round trips


@needs_mass
@pytest.mark.parametrize("order", ["XYZ", "YXZ", "ZYX"])
@pytest.mark.parametrize("clip", MASS_CLIPS)
def test_round_trip_other_channel_order(tmp_path, clip, order):
    motion = read_bvh(MOTION_DIR / clip)
    out = tmp_path / f"out_{order}.bvh"
    write_bvh(out, motion, channel_order=order)
    rot_line = " ".join(f"{a}rotation" for a in order)
    channel_lines = [l for l in out.read_text().splitlines() if "CHANNELS" in l]
    assert channel_lines and all(l.rstrip().endswith(rot_line) for l in channel_lines)
    back = read_bvh(out)
    assert back.skeleton.names == motion.skeleton.names
    assert back.num_frames == motion.num_frames
    assert back.frame_time == pytest.approx(motion.frame_time, rel=1e-9)
    r0, p0 = motion.fk()
    r1, p1 = back.fk()
    np.testing.assert_allclose(p1, p0, atol=1e-6)
    _same_rotation(r1, r0)
    _same_rotation(back.rotations, motion.rotations)
    for j, off in motion.skeleton.end_sites.items():
        np.testing.assert_allclose(back.skeleton.end_sites[j], off, atol=1e-9)


@needs_mass
def test_round_trip_in_metres_is_detected(tmp_path):
    motion = read_bvh(MOTION_DIR / "run.bvh")
    out = tmp_path / "metres.bvh"
    write_bvh(out, motion, units="m")
    back = read_bvh(out)  # auto: a 1.7 m skeleton written in metres stays metres
    np.testing.assert_allclose(back.fk()[1], motion.fk()[1], atol=1e-6)
    inches = tmp_path / "inches.bvh"
    write_bvh(inches, motion, units="in")
    np.testing.assert_allclose(read_bvh(inches, units="in").fk()[1], motion.fk()[1], atol=1e-6)


def _random_motion(rng, parents, frames=20, rest=False, sliding=()):
    J = len(parents)
    offsets = rng.normal(scale=0.2, size=(J, 3))
    rest_rot = axis_angle_to_quat(rng.normal(scale=1.0, size=(J, 3))) if rest else None
    skel = SourceSkeleton([f"b{j}" for j in range(J)], parents, offsets, rest_rot,
                          {J - 1: np.array([0.0, 0.1, 0.0])})
    rot = axis_angle_to_quat(rng.normal(scale=1.0, size=(frames, J, 3)))
    root = rng.normal(size=(frames, 3))
    local = None
    if sliding:
        local = np.tile(offsets, (frames, 1, 1))
        for j in sliding:
            local[:, j] += rng.normal(scale=0.05, size=(frames, 3))
    return SourceMotion(skel, rot, root, 1 / 30, local)


@pytest.mark.parametrize("order", ["XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX"])
def test_round_trip_non_depth_first_skeleton_with_rest_rotations(tmp_path, order):
    rng = np.random.default_rng(7)
    motion = _random_motion(rng, [-1, 0, 0, 1, 2, 3], rest=True, sliding=(4,))
    out = tmp_path / "random.bvh"
    write_bvh(out, motion, channel_order=order, units="cm")
    back = read_bvh(out, units="cm")
    assert back.skeleton.names == ["b0", "b1", "b3", "b5", "b2", "b4"]  # written depth first
    idx = _by_name(back, motion.skeleton.names)
    r0, p0 = motion.fk()
    r1, p1 = back.fk()
    np.testing.assert_allclose(p1[:, idx], p0, atol=1e-6)
    _same_rotation(r1[:, idx], r0)
    assert back.local_translations is not None
    np.testing.assert_allclose(back.local_translations[:, back.index("b4")],
                               motion.local_translations[:, 4], atol=1e-9)


# ----------------------------------------------------------------------------- hand-made files

SLIDER = """HIERARCHY
ROOT root
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
  JOINT slider
  {
    OFFSET 1 0 0
    CHANNELS 6 Xrotation Yrotation Zrotation Xposition Yposition Zposition
    JOINT tip
    {
      OFFSET 0 0 1
      CHANNELS 3 Zrotation Xrotation Yrotation
      End Site
      {
        OFFSET 0 0 0.5
      }
    }
  }
}
MOTION
Frames: 2
Frame Time: 0.5
0 0 0 0 0 0   0 0 0 1 0 0     0 0 0
1 2 3 90 0 0  90 0 0 2 0 0.5  0 0 0
"""


def test_position_channels_on_non_root_joint(tmp_path):
    motion = read_bvh(_write(tmp_path, SLIDER), units="m", up="z")
    slider, tip = motion.index("slider"), motion.index("tip")
    assert motion.local_translations is not None
    np.testing.assert_allclose(motion.local_translations[:, slider], [[1, 0, 0], [2, 0, 0.5]])
    np.testing.assert_allclose(motion.local_translations[:, tip], [[0, 0, 1], [0, 0, 1]])
    _, pos = motion.fk()
    # Frame 1: root at (1,2,3) turned 90 deg about Z; slider's (2,0,0.5) -> (0,2,0.5);
    # slider turned a further 90 deg about its X: tip's (0,0,1) -> Rz Rx (0,0,1) = (1,0,0).
    np.testing.assert_allclose(pos[0], [[0, 0, 0], [1, 0, 0], [1, 0, 1]], atol=1e-12)
    np.testing.assert_allclose(pos[1], [[1, 2, 3], [1, 4, 3.5], [2, 4, 3.5]], atol=1e-12)
    out = tmp_path / "again.bvh"
    write_bvh(out, motion, units="m", up="z")
    assert "CHANNELS 6" in out.read_text().split("JOINT slider")[1].split("JOINT tip")[0]
    np.testing.assert_allclose(read_bvh(out, units="m", up="z").fk()[1], pos, atol=1e-9)


def _one_bone(order_line: str, values: str, root_offset="0 0 0", child_offset="1 0 0") -> str:
    return f"""HIERARCHY
ROOT a
{{
  OFFSET {root_offset}
  CHANNELS 3 {order_line}
  JOINT b
  {{
    OFFSET {child_offset}
    CHANNELS 0
  }}
}}
MOTION
Frames: 1
Frame Time: 0.01
{values}
"""


@pytest.mark.parametrize(
    "order_line, expected",
    [
        ("Xrotation Yrotation Zrotation", [0, 0, 1]),  # Rx(90) Rz(90) (1,0,0)
        ("Zrotation Yrotation Xrotation", [0, 1, 0]),  # Rz(90) Rx(90) (1,0,0)
        ("Yrotation Xrotation Zrotation", [0, 0, 1]),  # Ry(0) Rx(90) Rz(90)
    ],
)
def test_rotation_channel_order(tmp_path, order_line, expected):
    angle = {"X": 90.0, "Y": 0.0, "Z": 90.0}
    values = " ".join(str(angle[w[0]]) for w in order_line.split())
    motion = read_bvh(_write(tmp_path, _one_bone(order_line, values)), units="m", up="z")
    _, pos = motion.fk()
    np.testing.assert_allclose(pos[0, 1], expected, atol=1e-12)


def test_y_up_file_becomes_z_up(tmp_path):
    # Y-up, cm: root 1 m up, no position channels; a yaw of 90 deg about Y (vertical).
    text = _one_bone("Zrotation Xrotation Yrotation", "0 0 90",
                     root_offset="0 100 0", child_offset="10 0 0")
    motion = read_bvh(_write(tmp_path, text))
    np.testing.assert_allclose(motion.root_translation, [[0, 0, 1.0]], atol=1e-12)
    np.testing.assert_allclose(motion.skeleton.offsets[1], [0.1, 0, 0], atol=1e-12)
    # Y-up: Ry(90) (10,0,0) = (0,0,-10); Z-up: (0,10,0) cm. The yaw is about +Z now.
    _, pos = motion.fk()
    np.testing.assert_allclose(pos[0, 1], [0, 0.1, 1.0], atol=1e-12)
    c = np.cos(np.pi / 4)
    _same_rotation(motion.rotations[0, 0], [c, 0, 0, c], atol=1e-12)


def test_units_auto_metres_and_explicit_override(tmp_path):
    text = _one_bone("Zrotation Xrotation Yrotation", "0 0 0",
                     root_offset="0 1 0", child_offset="0 0.8 0")
    path = _write(tmp_path, text)
    assert read_bvh(path).skeleton.offsets[1] == pytest.approx([0, 0, 0.8])  # 0.8 span: metres
    assert read_bvh(path, units="cm").skeleton.offsets[1] == pytest.approx([0, 0, 0.008])
    assert read_bvh(path, units="in").skeleton.offsets[1] == pytest.approx([0, 0, 0.8 * 0.0254])


def test_bad_options_raise_parameter_error(tmp_path):
    path = _write(tmp_path, SLIDER)
    with pytest.raises(ParameterError, match="units"):
        read_bvh(path, units="furlong")
    with pytest.raises(ParameterError, match="up"):
        read_bvh(path, up="x")
    motion = read_bvh(path)
    with pytest.raises(ParameterError, match="channel_order"):
        write_bvh(tmp_path / "x.bvh", motion, channel_order="XXY")
    motion.skeleton.names[1] = "bad{name"
    with pytest.raises(ParameterError, match="bad{name"):
        write_bvh(tmp_path / "x.bvh", motion)


def test_missing_file_is_input_file_error(tmp_path):
    with pytest.raises(InputFileError, match="nope.bvh"):
        read_bvh(tmp_path / "nope.bvh")


# ----------------------------------------------------------------------------- malformed files

BASE = """HIERARCHY
ROOT hips
{
  OFFSET 0 90 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
  JOINT spine
  {
    OFFSET 0 10 0
    CHANNELS 3 Zrotation Xrotation Yrotation
    End Site
    {
      OFFSET 0 50 0
    }
  }
}
MOTION
Frames: 3
Frame Time: 0.0333333
0 90 0 0 0 0 0 0 0
1 90 0 5 0 0 10 0 0
2 90 0 10 0 0 20 0 0
"""


def _edit(lines, line, new):
    """Replace 1-based `line` by `new` (None deletes it; a list inserts several)."""
    out = list(lines)
    out[line - 1: line] = [] if new is None else ([new] if isinstance(new, str) else new)
    return out


# (name, line to edit, replacement, line the error must name, words the message must hold)
MALFORMED = [
    ("bad offset number", 8, "    OFFSET 0 ten 0", 8, "'ten'"),
    ("short offset", 8, "    OFFSET 0 10", 8, "3 numbers"),
    ("missing open brace", 7, None, 7, "expected '{'"),
    ("missing close brace", 14, None, 15, "opened at line 2"),
    ("unknown channel", 9, "    CHANNELS 3 Zrotation Xrotation Wrotation", 9, "'Wrotation'"),
    ("channel count", 9, "    CHANNELS 4 Zrotation Xrotation Yrotation", 9, "declares 4"),
    ("stray token", 10, "    End Sight", 10, "End Site"),
    ("unnamed joint", 6, "  JOINT", 6, "without a name"),
    ("junk in joint", 9, ["    CHANNELS 3 Zrotation Xrotation Yrotation", "    SCALE 2"], 10,
     "'SCALE'"),
    ("second root", 16, ["ROOT other", "MOTION"], 16, "second ROOT"),
    ("no frames line", 17, "Frame Count 3", 17, "Frames"),
    ("bad frame count", 17, "Frames: three", 17, "'three'"),
    ("bad frame time", 18, "Frame Time: -0.1", 18, "frame time"),
    ("short frame", 20, "1 90 0 5 0 0 10 0", 20, "8 values"),
    ("long frame", 21, "2 90 0 10 0 0 20 0 0 7", 21, "10 values"),
    ("bad frame token", 20, "1 90 0 5 0 0 1O 0 0", 20, "'1O'"),
    ("glued numbers", 19, "0 90 0 0 0 0 0 0-1 0", 19, "'0-1'"),
    ("nan in frame", 21, "2 90 0 10 0 nan 20 0 0", 21, "non-finite"),
    ("fewer frames than declared", 17, "Frames: 5", 17, "declares 5 frames but only 3"),
    ("more frames than declared", 17, "Frames: 2", 21, "more frame lines"),
]


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize("name, line, new, expected_line, words", MALFORMED,
                         ids=[m[0] for m in MALFORMED])
def test_malformed_file_names_the_line(tmp_path, newline, name, line, new, expected_line, words):
    lines = BASE.splitlines()
    text = "\n".join(_edit(lines, line, new)) + "\n"
    path = _write(tmp_path, text, newline=newline)
    with pytest.raises(InputFileError) as info:
        read_bvh(path)
    err = info.value
    assert err.line == expected_line, str(err)
    assert f"{path}:{expected_line}:" in str(err)
    assert words in str(err)


def test_base_file_is_valid_and_blank_lines_are_skipped(tmp_path):
    """The malformed cases above start from a file that reads cleanly."""
    lines = BASE.splitlines()
    text = "\n".join(_edit(lines, 20, ["", "1 90 0 5 0 0 10 0 0", "   "])) + "\n\n"
    motion = read_bvh(_write(tmp_path, text))
    assert motion.num_frames == 3
    np.testing.assert_allclose(motion.root_translation[:, 0], [0, 0.01, 0.02])


def test_truncated_hierarchy_reports_last_line(tmp_path):
    text = "\n".join(BASE.splitlines()[:9]) + "\n"
    with pytest.raises(InputFileError) as info:
        read_bvh(_write(tmp_path, text))
    assert info.value.line == 9 and "end of file" in str(info.value)


def test_empty_file(tmp_path):
    with pytest.raises(InputFileError, match="HIERARCHY"):
        read_bvh(_write(tmp_path, ""))


# ----------------------------------------------------------------------------- resampling


def _spin_motion(angle_deg: float, sign: float = 1.0) -> SourceMotion:
    skel = SourceSkeleton(["a"], [-1], np.zeros((1, 3)))
    q1 = sign * axis_angle_to_quat(np.array([0.0, 0.0, np.radians(angle_deg)]))
    rot = np.array([[[1.0, 0.0, 0.0, 0.0]], [q1]])
    return SourceMotion(skel, rot, np.array([[0.0, 0.0, 0.0], [4.0, 0.0, 2.0]]), 1.0)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_resample_slerps_hand_computed(sign):
    motion = _spin_motion(160.0, sign)
    out = motion.resample(4.0)  # samples at 0, 0.25, 0.5, 0.75, 1.0 s
    assert out.num_frames == 5 and out.frame_time == 0.25
    half = np.radians(40.0) / 2  # a quarter of 160 deg, about Z
    _same_rotation(out.rotations[1, 0], [np.cos(half), 0, 0, np.sin(half)], atol=1e-12)
    # Normalised linear interpolation would land at about 34.5 deg, not 40.
    np.testing.assert_allclose(out.root_translation[1], [1.0, 0.0, 0.5])
    _same_rotation(out.rotations[-1], motion.rotations[-1], atol=1e-12)


@needs_mass
def test_resample_keeps_source_frames_and_whole_intervals():
    motion = read_bvh(MOTION_DIR / "walk.bvh")  # 132 frames at 120 fps: 131/120 s from first to last
    out = motion.resample(30.0)
    assert out.frame_time == pytest.approx(1 / 30) and out.num_frames == 33  # 0 .. 32/30 s, none clamped
    _same_rotation(out.rotations[0], motion.rotations[0], atol=1e-12)
    np.testing.assert_allclose(out.root_translation[0], motion.root_translation[0])
    _same_rotation(out.rotations[-1], motion.rotations[128], atol=1e-9)  # 32/30 s = source frame 128
    # Sample 4 falls at 4/30 s = source frame 16 exactly.
    _same_rotation(out.rotations[4], motion.rotations[16], atol=1e-9)
    np.testing.assert_allclose(out.root_translation[4], motion.root_translation[16], atol=1e-12)
    # Upsampling then taking every other frame gives the source back.
    up = motion.resample(240.0)
    _same_rotation(up.rotations[::2], motion.rotations, atol=1e-9)


@pytest.mark.parametrize("src_fps, fps", [(120.0, 30.0), (25.0, 120.0), (50.0, 120.0), (30.0, 120.0), (120.0, 60.0)])
def test_resample_keeps_a_steady_speed_to_the_last_frame(src_fps, fps):
    """A root moving at 5 m/s moves 5 / fps every output frame, the last too: a last sample
    clamped to the source's end made a 30 fps copy of a run end at 1.2 m/s, and the loop
    closing there started the take 1.4 m/s slow. The clip keeps its length (frames * frame
    time) to within one output frame, ending at or before the last source frame."""
    skel = SourceSkeleton(["a"], [-1], np.zeros((1, 3)))
    frames = 67
    rot = np.tile([1.0, 0.0, 0.0, 0.0], (frames, 1, 1))
    root = np.zeros((frames, 3))
    root[:, 1] = 5.0 * np.arange(frames) / src_fps
    out = SourceMotion(skel, rot, root, 1.0 / src_fps).resample(fps)
    np.testing.assert_allclose(np.diff(out.root_translation[:, 1]), 5.0 / fps, rtol=1e-9)
    end = (frames - 1) / src_fps  # the last source frame
    assert end - 1.0 / fps < out.times[-1] <= end + 1e-12


def test_resample_lerps_local_translations():
    rng = np.random.default_rng(3)
    motion = _random_motion(rng, [-1, 0, 1], frames=3, sliding=(2,))
    out = motion.resample(60.0)  # source at 30 fps: one new sample between each pair
    mid = 0.5 * (motion.local_translations[0] + motion.local_translations[1])
    np.testing.assert_allclose(out.local_translations[1], mid)
    with pytest.raises(ParameterError, match="fps"):
        motion.resample(0.0)


# ----------------------------------------------------------------------------- skeleton API


@needs_mass
def test_index_names_the_missing_bone():
    motion = read_bvh(MOTION_DIR / "walk.bvh")
    assert motion.index("Character1_Head") == motion.skeleton.names.index("Character1_Head")
    with pytest.raises(ParameterError, match="Character1_Haed") as info:
        motion.index("Character1_Haed")
    assert "Character1_Head" in str(info.value)  # suggests the close match


def test_validation_rejects_nan_and_bad_shapes():
    skel = SourceSkeleton(["a", "b"], [-1, 0], np.zeros((2, 3)))
    rot = np.tile([1.0, 0, 0, 0], (3, 2, 1))
    root = np.zeros((3, 3))
    SourceMotion(skel, rot, root, 0.1)  # valid
    bad = rot.copy()
    bad[1, 1, 2] = np.nan
    with pytest.raises(ParameterError, match="rotations"):
        SourceMotion(skel, bad, root, 0.1)
    with pytest.raises(ParameterError, match="root_translation"):
        SourceMotion(skel, rot, np.zeros((3, 2)), 0.1)
    with pytest.raises(ParameterError, match="rotations"):
        SourceMotion(skel, rot[:, :1], root, 0.1)
    with pytest.raises(ParameterError, match="local_translations"):
        SourceMotion(skel, rot, root, 0.1, np.zeros((3, 1, 3)))
    with pytest.raises(ParameterError, match="frame_time"):
        SourceMotion(skel, rot, root, 0.0)
    with pytest.raises(ParameterError, match="rotations"):
        SourceMotion(skel, np.zeros((3, 2, 4)), root, 0.1)
    with pytest.raises(ParameterError, match="offsets"):
        SourceSkeleton(["a", "b"], [-1, 0], [[0, 0, 0], [np.inf, 0, 0]])
    with pytest.raises(ParameterError, match="parents"):
        SourceSkeleton(["a", "b", "c"], [-1, 2, 0], np.zeros((3, 3)))
    with pytest.raises(ParameterError, match="duplicate"):
        SourceSkeleton(["a", "a"], [-1, 0], np.zeros((2, 3)))


def test_fk_with_rest_rotations_hand_computed():
    # b's rest frame is a's turned 90 deg about Z; c sits 1 m along b's x axis.
    c45 = np.cos(np.pi / 4)
    skel = SourceSkeleton(["a", "b", "c"], [-1, 0, 1], [[0, 0, 1], [1, 0, 0], [1, 0, 0]],
                          [[1, 0, 0, 0], [c45, 0, 0, c45], [1, 0, 0, 0]])
    rot = np.tile([1.0, 0, 0, 0], (2, 3, 1))
    rot[1, 0] = [c45, c45, 0, 0]  # frame 1: a turns 90 deg about X
    motion = SourceMotion(skel, rot, np.array([[0, 0, 1.0], [0, 0, 1.0]]), 0.1)
    world, pos = motion.fk()
    np.testing.assert_allclose(pos[0], [[0, 0, 1], [1, 0, 1], [1, 1, 1]], atol=1e-12)
    # Rx(90): b's offset (1,0,0) stays; c's (1,0,0) in b's frame is world (0,1,0) -> (0,0,1).
    np.testing.assert_allclose(pos[1], [[0, 0, 1], [1, 0, 1], [1, 0, 2]], atol=1e-12)
    _, rest = skel.rest_pose()
    np.testing.assert_allclose(rest, pos[0], atol=1e-12)


# ----------------------------------------------------------------------------- Euler helpers


@pytest.mark.parametrize("order", ["XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX"])
def test_euler_conversions_agree_with_euler_to_matrix(order):
    rng = np.random.default_rng(11)
    angles = rng.uniform(-np.pi, np.pi, size=(500, 3))
    angles[:, 1] *= 0.5
    angles[:20, 1] = np.pi / 2  # gimbal lock
    angles[20:40, 1] = -np.pi / 2
    R = euler_to_matrix(angles, order)
    np.testing.assert_allclose(euler_to_matrix(matrix_to_euler(R, order), order), R, atol=1e-12)
    np.testing.assert_allclose(quat_to_matrix(euler_to_quat(angles, order)), R, atol=1e-12)
    C = Y_UP_TO_Z_UP
    np.testing.assert_allclose(quat_to_matrix(euler_to_quat(angles, order, C)), C @ R @ C.T,
                               atol=1e-12)
