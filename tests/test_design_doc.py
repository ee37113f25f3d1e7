"""DESIGN.md (the map of the project) names the repository's files as they are: a module moved
or removed without it is a stale map."""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The repository's top-level folders whose paths the design names.
TOP = ("engine", "training", "blender_addon", "rigs", "tests", "tools", "benchmarks", "scripts", "research", "docs")
# A path: a top-level folder, a slash, then path characters (a glob's * too); not part of a
# longer word or path (../shared/..., bl_ext.<repo>.sinew).
REPO_PATH = re.compile(r"(?<![\w./-])(?:%s)/[\w./*-]*" % "|".join(TOP))
# A module named by its file alone, in a list under its folder ("bvh.py", "muscle_step.c").
BARE_MODULE = re.compile(r"(?<![\w./*-])[\w-]+\.(?:py|c)\b")


def named_paths(text: str) -> list[str]:
    """The repository paths `text` names, trailing punctuation off ("engine/take.py)." ->
    "engine/take.py")."""
    return [m.group(0).rstrip(".,:;") for m in REPO_PATH.finditer(text)]


def missing(text: str, root: Path = REPO) -> list[str]:
    """The named paths with nothing at them (a glob matches at least one file)."""
    gone = []
    for path in named_paths(text):
        found = any(root.glob(path.rstrip("/"))) if "*" in path else (root / path.rstrip("/")).exists()
        if not found:
            gone.append(path)
    return sorted(set(gone))


def missing_modules(text: str, root: Path = REPO) -> list[str]:
    """The files named by name alone that no top-level folder holds."""
    have = {f.name for top in TOP if (root / top).is_dir() for f in (root / top).rglob("*") if f.is_file()}
    return sorted({m.group(0) for m in BARE_MODULE.finditer(text)} - have)


def test_design_names_only_paths_that_exist():
    text = (REPO / "DESIGN.md").read_text(encoding="utf-8")
    assert len(named_paths(text)) > 40  # it does name the modules
    assert missing(text) == [], "DESIGN.md names paths that do not exist: update it"
    assert missing_modules(text) == [], "DESIGN.md names modules that do not exist: update it"


def test_the_check_sees_a_stale_path():
    text = ("engine/take.py (the run), engine/native/*.c and rigs/human284/. blender_addon/core.py, "
            "tools/gone.sh; training/configs/*.yaml. ../shared/engine/x.py is not ours, nor is papers/x.txt.")
    assert named_paths(text) == ["engine/take.py", "engine/native/*.c", "rigs/human284/", "blender_addon/core.py",
                                 "tools/gone.sh", "training/configs/*.yaml"]
    assert missing(text) == ["blender_addon/core.py", "tools/gone.sh", "training/configs/*.yaml"]
    listed = "the motion (bvh.py, retarget_old.py), the step (muscle_step.c), engine/take.py"
    assert missing_modules(listed) == ["retarget_old.py"]
