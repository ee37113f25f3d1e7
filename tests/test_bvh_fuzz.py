"""Property-based BVH fuzzing (issue 19): a damaged file never ends in a traceback. Whatever
is done to the bundled MASS walk (truncated, lines or characters deleted, tokens inserted,
numbers swapped, odd line endings, other encodings), reading and retargeting it either
works or raises one SinewError, a single line; a reading error names the file and a line
in it."""
import re

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from engine.errors import InputFileError, SinewError  # noqa: E402

from .conftest import MASS  # noqa: E402

FRAMES = 12  # the walk cut to a few frames: a retarget costs milliseconds

TOKENS = ["{", "}", "ROOT", "JOINT", "End Site", "End", "Site", "OFFSET", "CHANNELS", "0", "3", "6", "-1",
          "Xrotation", "Yposition", "MOTION", "Frames:", "Frame Time:", "HIERARCHY", "nan", "inf", "-inf",
          "1e999", "1e-320", "0x10", "1,5", "--1", "+", ".", "\t", "\x00", "\x0b", "\x1c", "\u2028", "é",
          "\ufeff", "Character1_Hips", "Character1_LeftFoot", "\n", "\n\n", " "]
NUMBERS = ["0", "-0", "1e308", "-1e308", "1e999", "nan", "inf", "1e-320", "360000", "-90", "1.2.3", "٣",
           "0.0000001", "12345678901234567890", "", "7e", "1_000"]


def _base() -> str:
    text = (MASS / "motion" / "walk.bvh").read_text()
    head, motion = text.split("MOTION", 1)
    rows = [r for r in motion.splitlines() if r.strip()][2:2 + FRAMES]
    return f"{head}MOTION\nFrames: {FRAMES}\nFrame Time: 0.00833333\n" + "\n".join(rows) + "\n"


BASE = _base()
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


@st.composite
def mutation(draw, text):
    kind = draw(st.sampled_from(["truncate", "delete_chars", "delete_line", "insert", "swap_number",
                                 "swap_offset", "line_endings", "duplicate_line"]))
    n = len(text)
    if kind == "truncate":
        return text[:draw(st.integers(0, n))]
    if kind == "delete_chars":
        i = draw(st.integers(0, n))
        return text[:i] + text[i + draw(st.integers(1, 40)):]
    lines = text.split("\n")
    if kind in ("delete_line", "duplicate_line"):
        i = draw(st.integers(0, max(len(lines) - 1, 0)))
        lines[i:i + 1] = [] if kind == "delete_line" else [lines[i]] * 2 if lines else []
        return "\n".join(lines)
    if kind == "insert":
        i = draw(st.integers(0, n))
        tok = draw(st.sampled_from(TOKENS) | st.text(max_size=6))
        sep = draw(st.sampled_from(["", " ", "\n"]))
        return text[:i] + sep + tok + sep + text[i:]
    if kind in ("swap_number", "swap_offset"):  # anywhere, or in the hierarchy (bone lengths)
        end = text.find("MOTION") if kind == "swap_offset" else -1
        spans = [m.span() for m in NUMBER.finditer(text, 0, end if end >= 0 else len(text))]
        if not spans:
            return text
        a, b = spans[draw(st.integers(0, len(spans) - 1))]
        return text[:a] + draw(st.sampled_from(NUMBERS)) + text[b:]
    ending = draw(st.sampled_from(["\r\n", "\r", "\n\r", "\n\n", "\r\r\n"]))
    return text.replace("\n", ending)


@st.composite
def damaged_file(draw) -> bytes:
    text = BASE
    for _ in range(draw(st.integers(1, 3))):
        text = draw(mutation(text))
    encoding = draw(st.sampled_from(["utf-8", "utf-8-sig", "latin-1", "utf-16", "cp1252", "utf-32-le"]))
    if encoding in ("latin-1", "cp1252") and draw(st.booleans()):
        text = text.replace("Character1_Hips", "Hüfte", 1)
    return text.encode(encoding, errors="replace")


def _read_and_retarget(path, rig):
    from engine.motion import Retargeter, read_bvh

    motion = read_bvh(path)
    rt = Retargeter.build(rig, motion.skeleton)
    return rt.to_model(motion, source=str(path))


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=damaged_file())
def test_a_damaged_bvh_retargets_or_fails_in_one_line(data, rig, tmp_path):
    path = tmp_path / "clip.bvh"
    path.write_bytes(data)
    try:
        ref = _read_and_retarget(path, rig)
    except InputFileError as e:
        msg = str(e)
        assert "\n" not in msg and msg.startswith(str(path)), msg
        assert e.line is not None and 1 <= e.line, msg  # a reading error names the line
    except SinewError as e:  # the file reads but does not map onto the model (bones missing)
        assert "\n" not in str(e), str(e)
    else:
        assert ref.num_frames >= 1
        assert all(np.all(np.isfinite(getattr(ref, k))) for k in ("root_pos", "local_rot", "q", "muscle_length"))


def test_the_undamaged_base_retargets(rig, tmp_path):
    path = tmp_path / "clip.bvh"
    path.write_text(BASE)
    assert _read_and_retarget(path, rig).num_frames == FRAMES  # 120 fps in, 120 fps out
