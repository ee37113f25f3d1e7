"""BVH (Biovision hierarchy) reader and writer, numpy only.

Reading follows the usual conventions (those of Blender's importer): a joint's rotation
channels, in the order listed, are intrinsic Euler angles in degrees, R = R_a R_b R_c for
"Arotation Brotation Crotation"; position channels give the joint's translation in its
parent's frame and replace the OFFSET components they name (for the root: its world
position). Y-up files are turned Z-up with Y_UP_TO_Z_UP (p_z = C p_y, R_z = C R_y C^T) and
lengths become metres. Malformed files raise InputFileError with the offending line.
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..atomic import atomic_open
from ..errors import InputFileError, ParameterError
from ..transforms import (
    Y_UP_TO_Z_UP,
    matrix_to_quat,
    quat_conjugate,
    quat_multiply,
    quat_to_matrix,
)
from .skeleton import SourceMotion, SourceSkeleton

# Metres per file unit.
UNIT_SCALE = {"m": 1.0, "cm": 0.01, "mm": 0.001, "in": 0.0254}
# A rest skeleton larger than this many file units along any axis is taken to be in cm.
AUTO_CM_THRESHOLD = 3.0

_CHANNELS = {f"{a}{kind}": (a.upper(), kind) for a in "xyz" for kind in ("position", "rotation")}
_CHUNK = 2048  # frames converted at a time
_TOKEN = re.compile(r"[{}]|[^\s{}]+")


# ----------------------------------------------------------------------------- reading


@dataclass
class _Joint:
    """A joint as declared in the HIERARCHY section (file units, file axes)."""

    name: str
    parent: int
    line: int
    offset: np.ndarray | None = None
    channels: list[tuple[str, str]] = field(default_factory=list)  # (axis, kind)
    end_site: np.ndarray | None = None


class _Tokens:
    """Hierarchy tokens with their 1-based line numbers, read front to back."""

    def __init__(self, path, lines: list[str]):
        self.path = path
        self.items: list[tuple[str, int]] = []
        self.last_line = max(len(lines), 1)
        for n, text in enumerate(lines, 1):
            toks = _TOKEN.findall(text)
            self.items.extend((t, n) for t in toks)
            if toks and toks[0].upper() == "MOTION":
                break
        self.pos = 0

    def fail(self, problem: str, line: int):
        raise InputFileError(self.path, problem, line)

    def next(self, what: str) -> tuple[str, int]:
        if self.pos >= len(self.items):
            self.fail(f"unexpected end of file, expected {what}", self.last_line)
        self.pos += 1
        return self.items[self.pos - 1]

    def rest_of_line(self, line: int) -> list[str]:
        """Consume the tokens left on `line`, up to an opening brace."""
        out = []
        while self.pos < len(self.items):
            tok, n = self.items[self.pos]
            if n != line or tok == "{":
                break
            out.append(tok)
            self.pos += 1
        return out

    def expect(self, word: str, where: str) -> int:
        tok, line = self.next(f"{word!r} {where}")
        if tok.upper() != word.upper():
            self.fail(f"expected {word!r} {where}, found {tok!r}", line)
        return line


def read_bvh(path, units: str = "auto", up: str = "y") -> SourceMotion:
    """Read a BVH file into a Z-up, metre SourceMotion.

    units: "auto" (cm when the rest skeleton spans more than 3 file units, else m), or one of
    "m", "cm", "mm", "in". up: the file's up axis, "y" (the BVH norm) or "z". A frame time
    within 1e-5 of 1/n for a whole frame rate n is read as exactly 1/n (snap_frame_time).
    """
    _check_option("units", units, ("auto", *UNIT_SCALE))
    _check_option("up", up, ("y", "z"))
    lines = _read_lines(path)
    joints, motion_line = _parse_hierarchy(path, lines)
    channels = sum(len(j.channels) for j in joints)
    if channels == 0:
        raise InputFileError(path, "the hierarchy declares no channels", joints[0].line)
    num_frames, frame_time, first, frames_line = _parse_motion_header(path, lines, motion_line)
    data = _parse_frames(path, lines, first, num_frames, channels, frames_line)
    raw = _raw_skeleton(joints)
    unit = detect_units(raw) if units == "auto" else units
    return _build_motion(joints, raw, data, snap_frame_time(frame_time), UNIT_SCALE[unit], up)


def snap_frame_time(frame_time: float, rel_tol: float = 1e-5) -> float:
    """1/n for the whole frame rate n within rel_tol of 1/frame_time, else frame_time.

    BVH files round the frame time ("0.00833333" for 120 fps); snapping keeps resampling to
    30 fps landing on whole source frames. 29.97 fps (0.0333667) is left alone.
    """
    fps = 1.0 / frame_time
    whole = round(fps)
    return 1.0 / whole if whole >= 1 and abs(fps - whole) <= rel_tol * fps else frame_time


def detect_units(skeleton: SourceSkeleton) -> str:
    """"cm" if the rest skeleton (heads and end sites) spans > 3 units on some axis, else "m"."""
    rot, pos = skeleton.rest_pose()
    tips = [pos[j] + quat_to_matrix(rot[j]) @ off for j, off in skeleton.end_sites.items()]
    pts = np.vstack([pos] + tips) if tips else pos
    extent = float(np.max(np.ptp(pts, axis=0)))
    return "cm" if extent > AUTO_CM_THRESHOLD else "m"


def _check_option(name: str, value, choices: tuple) -> None:
    if value not in choices:
        allowed = ", ".join(map(repr, choices))
        raise ParameterError(name, f"must be one of {allowed}, got {value!r}")


def _read_lines(path) -> list[str]:
    """The file's lines (universal newlines, no terminators); UTF-8 or else Latin-1."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise InputFileError(path, f"cannot read BVH file: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if len(lines) > 1 and lines[-1] == "":  # the final newline ends a line, starts none
        lines.pop()
    return lines


def _parse_hierarchy(path, lines: list[str]) -> tuple[list[_Joint], int]:
    """Joints in file order (depth first) and the 1-based line of the MOTION keyword."""
    toks = _Tokens(path, lines)
    toks.expect("HIERARCHY", "at the start of a BVH file")
    tok, line = toks.next("ROOT")
    if tok.upper() != "ROOT":
        toks.fail(f"expected ROOT, found {tok!r}", line)
    joints: list[_Joint] = []
    _parse_joint(toks, joints, -1, line)
    tok, line = toks.next("MOTION")
    if tok.upper() == "ROOT":
        toks.fail("a second ROOT hierarchy is not supported", line)
    if tok.upper() != "MOTION":
        toks.fail(f"expected MOTION after the hierarchy, found {tok!r}", line)
    return joints, line


def _parse_joint(toks: _Tokens, joints: list[_Joint], parent: int, line: int) -> None:
    """Parse one ROOT/JOINT block (its keyword already read on `line`), children included."""
    name = " ".join(toks.rest_of_line(line))
    if not name:
        toks.fail("joint without a name", line)
    if any(j.name == name for j in joints):
        toks.fail(f"duplicate joint name {name!r}", line)
    joint = _Joint(name, parent, line)
    index = len(joints)
    joints.append(joint)
    toks.expect("{", f"after joint {name!r}")
    while True:
        tok, n = toks.next(f"'}}' closing joint {name!r} (opened at line {line})")
        word = tok.upper()
        if tok == "}":
            break
        if word == "OFFSET":
            if joint.offset is not None:
                toks.fail(f"second OFFSET in joint {name!r}", n)
            joint.offset = _parse_numbers(toks, n, 3, "OFFSET")
        elif word == "CHANNELS":
            if joint.channels:
                toks.fail(f"second CHANNELS in joint {name!r}", n)
            joint.channels = _parse_channels(toks, n)
        elif word == "JOINT":
            _parse_joint(toks, joints, index, n)
        elif word == "END":
            if joint.end_site is not None:
                toks.fail(f"second End Site in joint {name!r}", n)
            joint.end_site = _parse_end_site(toks, n)
        elif word in ("MOTION", "ROOT"):
            toks.fail(f"missing '}}' closing joint {name!r} (opened at line {line})", n)
        else:
            toks.fail(f"unexpected {tok!r} in joint {name!r}", n)
    if joint.offset is None:
        toks.fail(f"joint {name!r} has no OFFSET", line)


def _parse_end_site(toks: _Tokens, line: int) -> np.ndarray:
    rest = toks.rest_of_line(line)
    if [t.upper() for t in rest] != ["SITE"]:
        toks.fail("expected 'End Site'", line)
    toks.expect("{", "after End Site")
    n = toks.expect("OFFSET", "in End Site")
    offset = _parse_numbers(toks, n, 3, "OFFSET")
    toks.expect("}", "closing End Site")
    return offset


def _parse_numbers(toks: _Tokens, line: int, count: int, what: str) -> np.ndarray:
    """`count` finite numbers, all on `line`."""
    words = toks.rest_of_line(line)
    if len(words) != count:
        toks.fail(f"{what} needs {count} numbers, found {len(words)}", line)
    values = []
    for w in words:
        try:
            v = float(w)
        except ValueError:
            v = float("nan")
        if not np.isfinite(v):
            toks.fail(f"bad number {w!r} in {what}", line)
        values.append(v)
    return np.array(values)


def _parse_channels(toks: _Tokens, line: int) -> list[tuple[str, str]]:
    words = toks.rest_of_line(line)
    if not words or not words[0].isdigit():
        toks.fail("CHANNELS needs a count followed by channel names", line)
    count, names = int(words[0]), words[1:]
    if len(names) != count:
        toks.fail(f"CHANNELS declares {count} channels but names {len(names)}", line)
    out = []
    for w in names:
        ch = _CHANNELS.get(w.lower())
        if ch is None:
            toks.fail(f"unknown channel {w!r} (expected Xposition..Zrotation)", line)
        if ch in out:
            toks.fail(f"channel {w!r} listed twice", line)
        out.append(ch)
    return out


def _header_value(path, lines: list[str], start: int, pattern: str, what: str) -> tuple[str, int]:
    """Value of the first non-blank line at or after index `start` matching `pattern`."""
    i = start
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i >= len(lines):
        raise InputFileError(path, f"unexpected end of file, expected {what!r}", len(lines))
    m = re.fullmatch(pattern, lines[i].strip(), re.IGNORECASE)
    if m is None:
        raise InputFileError(path, f"expected {what!r}, found {lines[i].strip()[:40]!r}", i + 1)
    return m.group(1), i + 1


def _parse_motion_header(path, lines: list[str], motion_line: int) -> tuple[int, float, int, int]:
    """Frame count, frame time, 0-based index of the first frame line, line of "Frames:"."""
    extra = lines[motion_line - 1].split()[1:]
    if extra:
        raise InputFileError(path, f"unexpected {extra[0]!r} after MOTION", motion_line)
    value, n = _header_value(path, lines, motion_line, r"Frames\s*:\s*(\S+)", "Frames: <count>")
    if not value.isdigit() or int(value) < 1:
        raise InputFileError(path, f"bad frame count {value!r}: need a positive integer", n)
    frames, frames_line = int(value), n
    value, n = _header_value(path, lines, n, r"Frame\s+Time\s*:\s*(\S+)", "Frame Time: <seconds>")
    try:
        frame_time = float(value)
    except ValueError:
        frame_time = float("nan")
    if not np.isfinite(frame_time) or frame_time <= 0:
        raise InputFileError(path, f"bad frame time {value!r}: need a positive number", n)
    return frames, frame_time, n, frames_line


def _parse_frames(path, lines: list[str], start: int, frames: int, channels: int,
                  frames_line: int) -> np.ndarray:
    """(frames, channels) values from the lines from index `start`; blank lines skipped.

    frames_line is the line declaring the frame count, blamed when frames are missing.
    """
    data = np.empty((frames, channels))
    line_of = np.empty(frames, dtype=np.int64)
    k = 0
    with warnings.catch_warnings():
        # np.fromstring warns (numpy 1.x) or raises (later) on a token it cannot read.
        warnings.simplefilter("error", DeprecationWarning)
        for i in range(start, len(lines)):
            text = lines[i]
            if not text or text.isspace():  # fromstring reads whitespace-only text as [-1.]
                continue
            try:
                values = np.fromstring(text, sep=" ")
            except (DeprecationWarning, ValueError):
                raise InputFileError(path, _bad_token(text), i + 1) from None
            if values.size != channels:
                raise InputFileError(
                    path, f"frame has {values.size} values, the hierarchy has {channels} channels",
                    i + 1,
                )
            if k == frames:
                raise InputFileError(path, f"more frame lines than the {frames} declared", i + 1)
            data[k] = values
            line_of[k] = i + 1
            k += 1
    if k < frames:
        raise InputFileError(
            path, f"declares {frames} frames but only {k} frame lines follow",
            frames_line,
        )
    bad = ~np.isfinite(data)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise InputFileError(path, f"non-finite value in column {col + 1}", int(line_of[row]))
    return data


def _bad_token(text: str) -> str:
    for w in text.split():
        try:
            float(w)
        except ValueError:
            return f"bad number {w[:40]!r} in frame"
    return "unreadable frame line"


def _raw_skeleton(joints: list[_Joint]) -> SourceSkeleton:
    """The hierarchy as declared: file units, file axes."""
    return SourceSkeleton(
        names=[j.name for j in joints],
        parents=[j.parent for j in joints],
        offsets=np.array([j.offset for j in joints]),
        end_sites={i: j.end_site for i, j in enumerate(joints) if j.end_site is not None},
    )


def _build_motion(joints, raw: SourceSkeleton, data, frame_time, scale, up) -> SourceMotion:
    """Turn channel columns into quaternions and translations in metres, Z-up."""
    C = Y_UP_TO_Z_UP if up == "y" else np.eye(3)  # file axes -> Z-up
    offsets = raw.offsets * scale
    starts = np.cumsum([0] + [len(j.channels) for j in joints])
    rotations = _channel_rotations(joints, data, starts, C)
    root = np.tile(offsets[0], (data.shape[0], 1))
    moving = any(kind == "position" for j in joints[1:] for _, kind in j.channels)
    local = np.tile(offsets, (data.shape[0], 1, 1)) if moving else None
    for index, joint in enumerate(joints):
        target = root if index == 0 else local[:, index] if moving else None
        for k, (axis, kind) in enumerate(joint.channels):
            if kind == "position":
                target[:, "XYZ".index(axis)] = data[:, starts[index] + k] * scale
    local = None if local is None else local @ C.T
    end_sites = {j: C @ off * scale for j, off in raw.end_sites.items()}
    skeleton = SourceSkeleton(raw.names, raw.parents, offsets @ C.T, None, end_sites)
    return SourceMotion(skeleton, rotations, root @ C.T, frame_time, local)


def _channel_rotations(joints, data, starts, C) -> np.ndarray:
    """(F, J, 4) joint rotations, turned into Z-up by C; joints sharing an order go together."""
    groups: dict[str, tuple[list[int], list[list[int]]]] = {}
    for index, joint in enumerate(joints):
        rot = [(starts[index] + k, a)
               for k, (a, kind) in enumerate(joint.channels) if kind == "rotation"]
        if rot:
            members, cols = groups.setdefault("".join(a for _, a in rot), ([], []))
            members.append(index)
            cols.append([c for c, _ in rot])
    rotations = np.zeros((data.shape[0], len(joints), 4))
    rotations[..., 0] = 1.0
    for order, (members, cols) in groups.items():
        cols = np.array(cols)
        for f in range(0, data.shape[0], _CHUNK):  # chunks of frames stay in cache
            angles = np.radians(data[f:f + _CHUNK, cols])  # (chunk, members, len(order))
            rotations[f:f + _CHUNK, members] = euler_to_quat(angles, order, C)
    return rotations


def euler_to_quat(angles: np.ndarray, order: str, frame: np.ndarray | None = None) -> np.ndarray:
    """Intrinsic Euler angles (radians, (..., len(order))) -> quaternions, as euler_to_matrix.

    With `frame` (a rotation matrix C), returns the quaternion of C R C^T: the same rotation
    with its axes turned by C (how a Y-up rotation reads in Z-up).
    """
    angles = np.asarray(angles, dtype=float)
    frame = np.eye(3) if frame is None else np.asarray(frame, dtype=float)
    half = 0.5 * angles
    cos, sin = np.cos(half), np.sin(half)
    q = None
    for i, axis in enumerate(order.upper()):
        direction = frame[:, "XYZ".index(axis)]
        qi = np.concatenate([cos[..., i:i + 1], sin[..., i:i + 1] * direction], axis=-1)
        q = qi if q is None else quat_multiply(q, qi)
    if q is None:
        q = np.zeros(angles.shape[:-1] + (4,))
        q[..., 0] = 1.0
    return q


def _conjugate_by(c: np.ndarray, q: np.ndarray) -> np.ndarray:
    """c q c^-1: the rotation q expressed in axes turned by c."""
    return quat_multiply(quat_multiply(c, q), quat_conjugate(c))


# ----------------------------------------------------------------------------- writing


def write_bvh(path, motion: SourceMotion, channel_order: str = "ZXY", units: str = "cm",
              up: str = "y") -> None:
    """Write `motion` as BVH: every joint rotates in `channel_order` (a permutation of XYZ).

    The root gets position channels; so does any other bone whose local_translations depart
    from its rest offset. Rest rotations are baked into the joint rotations. Leaves without
    an end site get a zero-length End Site. Bones are written depth first, so a skeleton not
    already in that order reads back reordered.
    """
    order = str(channel_order).upper()
    if sorted(order) != ["X", "Y", "Z"]:
        raise ParameterError(
            "channel_order", f"must be a permutation of 'XYZ', got {channel_order!r}"
        )
    _check_option("units", units, tuple(UNIT_SCALE))
    _check_option("up", up, ("y", "z"))
    skel = motion.skeleton
    for name in skel.names:
        if not name.strip() or re.search(r"[{}\r\n\t]", name):
            raise ParameterError("bone", f"name {name!r} cannot be written to BVH")
    to_file = 1.0 / UNIT_SCALE[units]
    C = Y_UP_TO_Z_UP.T if up == "y" else np.eye(3)  # Z-up -> file axes
    q_c = matrix_to_quat(C)
    local_rot = _conjugate_by(q_c, quat_multiply(skel.rest_rotations[None], motion.rotations))
    offsets = skel.offsets @ C.T * to_file
    moving = _moving_bones(motion)
    columns = []
    for j in _depth_first(skel.parents):
        if j == 0 or moving[j]:
            t = motion.root_translation if j == 0 else motion.local_translations[:, j]
            columns.append(t @ C.T * to_file)
        R = quat_to_matrix(local_rot[:, j])
        columns.append(np.unwrap(np.degrees(matrix_to_euler(R, order)), period=360.0, axis=0))
    data = np.concatenate(columns, axis=1)
    end_sites = {j: C @ off * to_file for j, off in skel.end_sites.items()}
    text = _hierarchy_text(skel, offsets, end_sites, moving, order)
    with atomic_open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
        fh.write(f"MOTION\nFrames: {motion.num_frames}\nFrame Time: {motion.frame_time:.10g}\n")
        np.savetxt(fh, data, fmt="%.10g", delimiter=" ")


def _moving_bones(motion: SourceMotion) -> np.ndarray:
    """(J,) True for non-root bones whose translation leaves the rest offset."""
    J = motion.skeleton.num_bones
    if motion.local_translations is None:
        return np.zeros(J, dtype=bool)
    dev = np.abs(motion.local_translations - motion.skeleton.offsets[None]).max(axis=(0, 2))
    moving = dev > 1e-9
    moving[0] = False
    return moving


def _depth_first(parents: np.ndarray) -> list[int]:
    """Bone indices in depth-first pre-order from the root."""
    children = [[] for _ in parents]
    for j, p in enumerate(parents):
        if p >= 0:
            children[p].append(j)
    out, stack = [], [0]
    while stack:
        j = stack.pop()
        out.append(j)
        stack.extend(reversed(children[j]))
    return out


def _hierarchy_text(skel, offsets, end_sites, moving, order) -> str:
    rot = " ".join(f"{a}rotation" for a in order)
    pos = "Xposition Yposition Zposition "
    out = ["HIERARCHY"]

    def fmt(v):
        return " ".join(f"{x:.10g}" for x in v)

    def emit(j, depth):
        pad = "\t" * depth
        out.append(f"{pad}{'ROOT' if j == 0 else 'JOINT'} {skel.names[j]}")
        out.append(f"{pad}{{")
        out.append(f"{pad}\tOFFSET {fmt(offsets[j])}")
        n = 6 if j == 0 or moving[j] else 3
        out.append(f"{pad}\tCHANNELS {n} {pos if n == 6 else ''}{rot}")
        kids = skel.children(j)
        for c in kids:
            emit(c, depth + 1)
        if j in end_sites or not kids:
            out.extend([f"{pad}\tEnd Site", f"{pad}\t{{",
                        f"{pad}\t\tOFFSET {fmt(end_sites.get(j, np.zeros(3)))}", f"{pad}\t}}"])
        out.append(f"{pad}}}")

    emit(0, 0)
    return "\n".join(out) + "\n"


def matrix_to_euler(R: np.ndarray, order: str) -> np.ndarray:
    """Inverse of euler_to_matrix for Tait-Bryan orders (a permutation of XYZ), (..., 3).

    The middle angle lies in [-pi/2, pi/2]; at gimbal lock the last angle is set to 0.
    """
    R = np.asarray(R, dtype=float)
    i, j, k = ("XYZ".index(a) for a in order.upper())
    s = 1.0 if (i, j, k) in ((0, 1, 2), (1, 2, 0), (2, 0, 1)) else -1.0
    cos_b = np.hypot(R[..., i, i], R[..., i, j])
    b = np.arctan2(s * R[..., i, k], cos_b)
    a = np.arctan2(-s * R[..., j, k], R[..., k, k])
    c = np.arctan2(-s * R[..., i, j], R[..., i, i])
    locked = cos_b < 1e-9
    a_locked = np.arctan2(s * R[..., k, j], R[..., j, j])
    a = np.where(locked, a_locked, a)
    c = np.where(locked, 0.0, c)
    return np.stack([a, b, c], axis=-1)
