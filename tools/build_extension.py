#!/usr/bin/env python3
"""Build Sinew's Blender extension: one validated zip per platform in dist/.

    python tools/build_extension.py [--platforms linux-x64,...] [--no-download] [--out dist]

Steps (no Blender binary needed; Blender's own extension builder, shipped inside the PyPI
`bpy` module, runs under plain Python):

1. Stage the package in dist/stage/sinew/: the add-on (blender_addon/*.py) becomes the
   package root, the engine is copied to sinew/engine/ and the model data to sinew/rigs/
   (imported relatively, as bl_ext.<repo>.sinew.engine). Training code, tests, reference
   data and caches stay out; a check refuses any staged file that imports torch or bpy
   inside the engine.
2. Derive the third-party modules the add-on can import at run time from the sources
   (runtime_imports: the import graph from every add-on module through the engine) and
   refuse the build if RUNTIME has no wheels for one of them. Fetch those wheels for
   CPython 3.11 per platform into dist/wheels/ with `pip download --only-binary=:all:
   --no-deps` (cached: a wheel already there is not fetched again); a wheel counts for a
   platform when its tags fit it (wheel_platforms: any manylinux up to glibc 2.28, win_amd64,
   any macOS arm64 / x86_64 / universal2 build for macOS 12 or older).
3. Per platform, put its payload (platform_payload: the wheels and the compiled muscle
   step, engine/native/sinew_muscle-<platform>.*) into the staged package,
   write blender_manifest.toml (the repository's manifest plus `platforms = [that one]`
   and `wheels = [its wheels]`), `blender_ext build` it to
   dist/sinew-<version>-<platform>.zip and `blender_ext validate` the zip. (Not
   --split-platforms: Intel Macs need another mujoco than the "any" wheel the others use.)

Prints one JSON summary line at the end; exits non-zero on any failure.
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY_VERSION = "3.11"

# Runtime wheels by the top-level module the staged code imports (runtime_imports() derives
# that set from the sources; the build refuses an import no entry here provides). Pinned.
# numpy comes with Blender. scipy 1.15 is the newest that runs on Blender 4.2's numpy 1.24.3
# (1.16+ needs numpy 1.25+; 4.5 and 5.0 bundle 1.26.4). mujoco is split into mujoco + core;
# `import mujoco` also imports glfw. threadpoolctl caps BLAS threads inside Blender.
RUNTIME = {
    "mujoco": ["mujoco==4.0.0", "mujoco-core==4.0.0", "glfw==2.11.0"],
    "scipy": ["scipy==1.15.3"],
    "daqp": ["daqp==0.11.0"],
    "threadpoolctl": ["threadpoolctl==3.6.0"],
}
# mujoco 4 publishes no macOS x86_64 wheels: Intel Macs get the last monolithic 3.3 release
# (same Python API for what the engine uses; its __init__ also needs typing_extensions).
RUNTIME_BY_PLATFORM = {
    "macos-x64": {"mujoco": ["mujoco==3.3.7", "glfw==2.11.0", "typing-extensions==4.16.0"]},
}
# Declared dependencies of those wheels that stay out, and why (tests check the rest ship).
NOT_SHIPPED = {
    "numpy": "bundled with Blender",
    "mujoco-studio": "MuJoCo's interactive viewer", "pyopengl": "the viewer's OpenGL",
    "absl-py": "mujoco 3.3's command-line tools", "etils": "mujoco 3.3's file helpers",
}
# Imports the build does not ship: optional paths the add-on never takes.
OPTIONAL_IMPORTS = {"ode": "the ODE backend (Debian's python3-pyode) is a Linux cross-check; Blender runs MuJoCo"}
# Modules Blender's own Python provides.
BLENDER_MODULES = {"bpy", "bpy_extras", "mathutils", "numpy", "addon_utils", "bmesh", "gpu", "gpu_extras", "bl_ui",
                   "blf", "bl_math", "idprop", "aud", "imbuf", "freestyle", "rna_prop_ui", "bl_operators"}

# Oldest systems each platform's wheels must run on: Blender 4.2's Linux builds need glibc
# 2.28; on Macs, Blender 4.2 starts at macOS 11.2 but scipy has no arm64 wheel below macOS
# 12, so Sinew needs macOS 12 (arm64 and, for one rule, Intel).
GLIBC = (2, 28)
MACOS = (12, 0)
PLATFORMS = ("linux-x64", "windows-x64", "macos-arm64", "macos-x64")
_MAC_ARCHS = {"macos-arm64": {"arm64", "universal2"}, "macos-x64": {"x86_64", "intel", "universal2", "universal"}}
_LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}

# What of the engine and rigs travels: sources and model data only.
ENGINE_EXCLUDE = {"__pycache__"}
RIG_FILES = ["human284/human284.npz", "human284/meshes.npz"]


def blender_ext_cli() -> Path:
    """Blender's extension command line inside the installed bpy module."""
    import importlib.util

    spec = importlib.util.find_spec("bpy")
    roots = []
    if spec and spec.submodule_search_locations:
        roots += [Path(p) for p in spec.submodule_search_locations]
    roots += list((ROOT / ".venv" / "lib").glob("python3*/site-packages/bpy"))
    for r in roots:
        hits = sorted(r.glob("*/scripts/addons_core/bl_pkg/cli/blender_ext.py"))
        if hits:
            return hits[-1]
    raise SystemExit("build_extension: cannot find Blender's blender_ext.py (install the bpy module: "
                     "pip install 'bpy==4.5.*')")


def requirements(platform: str) -> list[str]:
    """The pinned runtime wheels one platform's zip carries."""
    table = {**RUNTIME, **RUNTIME_BY_PLATFORM.get(platform, {})}
    return sorted({r for reqs in table.values() for r in reqs})


def pip_platform_tags(platform: str) -> list[str]:
    """`pip download --platform` tags for a Blender platform (pip widens macOS tags to older
    releases itself, not manylinux ones)."""
    if platform == "linux-x64":
        return ([f"manylinux_2_{m}_x86_64" for m in range(GLIBC[1], 4, -1)]
                + [f"{k}_x86_64" for k in _LEGACY_MANYLINUX])
    if platform == "windows-x64":
        return ["win_amd64"]
    arch = "arm64" if platform == "macos-arm64" else "x86_64"
    return [f"macosx_{MACOS[0]}_{MACOS[1]}_{arch}"]


def _platform_fits(tag: str, platform: str) -> bool:
    if tag == "any":
        return True
    if platform == "windows-x64":
        return tag == "win_amd64"
    if platform == "linux-x64":
        m = re.fullmatch(r"manylinux_(\d+)_(\d+)_x86_64", tag)
        if m:
            return (int(m[1]), int(m[2])) <= GLIBC
        legacy = re.fullmatch(r"(manylinux\w+?)_x86_64", tag)
        return bool(legacy) and _LEGACY_MANYLINUX.get(legacy[1], (99, 0)) <= GLIBC
    m = re.fullmatch(r"macosx_(\d+)_(\d+)_(\w+)", tag)
    return bool(m) and m[3] in _MAC_ARCHS.get(platform, ()) and (int(m[1]), int(m[2])) <= MACOS


def _python_fits(py_tags: list[str], abi_tags: list[str]) -> bool:
    """Runs on CPython 3.11: a py3 / cp311 wheel, or a stable-ABI wheel built for <= 3.11."""
    if any(t in ("py3", "py311", "cp311") for t in py_tags) and ({"none", "cp311"} & set(abi_tags)):
        return True
    return "abi3" in abi_tags and any(re.fullmatch(r"cp3(\d+)", t) and int(t[3:]) <= 11 for t in py_tags)


def wheel_platforms(name: str) -> set[str]:
    """Blender platforms a wheel file fits, for CPython 3.11 (none if its Python does not)."""
    parts = Path(name).name[:-4].split("-")
    py_tags, abi_tags, plat_tags = (p.split(".") for p in parts[-3:])
    if not _python_fits(py_tags, abi_tags):
        return set()
    return {p for p in PLATFORMS if any(_platform_fits(t, p) for t in plat_tags)}


# ---- what the staged code imports ------------------------------------------------------------
def _module_files() -> dict[str, Path]:
    """Every module of the extension package by its name inside the package ('' is the root)."""
    files = {}
    for f in sorted((ROOT / "blender_addon").glob("*.py")):
        files["" if f.stem == "__init__" else f.stem] = f
    for f in sorted((ROOT / "engine").rglob("*.py")):
        if ENGINE_EXCLUDE.isdisjoint(f.parts):
            parts = ("engine",) + f.relative_to(ROOT / "engine").with_suffix("").parts
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    files["rigs"] = ROOT / "rigs" / "__init__.py"
    return files


def _guards_imports(node: ast.Try) -> bool:
    """A try block whose handlers catch a failed import (so the import in it is optional)."""
    caught = set()
    for h in node.handlers:
        if h.type is None:
            return True
        for t in (h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]):
            caught.add(getattr(t, "id", getattr(t, "attr", "")))
    return bool(caught & {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def _imports(tree: ast.AST):
    """(module, level, names, optional) of every import statement, nested ones too."""
    def visit(node, optional):
        for child in ast.iter_child_nodes(node):
            opt = optional or (isinstance(node, ast.Try) and child in node.body and _guards_imports(node))
            if isinstance(child, ast.Import):
                yield from ((a.name, 0, [], opt) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                yield child.module or "", child.level, [a.name for a in child.names], opt
            yield from visit(child, opt)
    yield from visit(tree, False)


def runtime_imports() -> dict[str, list[str]]:
    """Third-party top-level modules the add-on can import at run time, each with the files
    that import it: the import graph is followed from every add-on module through the engine
    (relative imports, function-level ones too); imports guarded by `except ImportError` are
    optional and not followed. Stdlib, Blender's own modules and OPTIONAL_IMPORTS are left out."""
    files = _module_files()
    todo, seen, found = [m for m in files if "." not in m and m != "rigs" and not m.startswith("engine")], set(), {}
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        path = files[mod]
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for name, level, names, optional in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if optional:
                continue
            if level == 0:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in BLENDER_MODULES | set(OPTIONAL_IMPORTS) | {"__future__"}:
                    found.setdefault(top, []).append(path.relative_to(ROOT).as_posix())
                continue
            base = package.split(".") if package else []
            base = base[:len(base) - (level - 1)] if level > 1 else base
            target = ".".join(base + ([name] if name else []))
            for m in [target] + [f"{target}.{n}".lstrip(".") for n in names]:
                if m in files:
                    todo.append(m)
    return {k: sorted(set(v)) for k, v in sorted(found.items())}


def check_runtime_covered() -> None:
    """Every third-party import of the add-on's code must have its wheels in RUNTIME."""
    missing = {m: f for m, f in runtime_imports().items() if m not in RUNTIME}
    if missing:
        raise SystemExit("build_extension: no runtime wheel ships for " + "; ".join(
            f"{m} (imported by {', '.join(f)})" for m, f in missing.items()) + ": add it to RUNTIME")


def fetch_wheels(cache: Path, platforms: list[str], download: bool) -> dict[str, list[Path]]:
    """Wheels per platform for every requirement, from the cache or PyPI (pip download)."""
    cache.mkdir(parents=True, exist_ok=True)
    found: dict[str, list[Path]] = {p: [] for p in platforms}
    for plat in platforms:
        for req in requirements(plat):
            dist, version = req.split("==")
            stem = dist.replace("-", "_")

            def present():
                return [w for w in sorted(cache.glob(f"{stem}-{version}-*.whl")) if plat in wheel_platforms(w.name)]
            have = present()
            if not have and download:
                cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--no-deps",
                       "--python-version", PY_VERSION, "--implementation", "cp", "-d", str(cache), req]
                for tag in pip_platform_tags(plat):
                    cmd += ["--platform", tag]
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    raise SystemExit(f"build_extension: pip download {req} for {plat} failed:\n{r.stderr.strip()}")
                have = present()
            if not have:
                raise SystemExit(f"build_extension: no wheel of {req} for {plat} (CPython {PY_VERSION}) in {cache} "
                                 "(run without --no-download to fetch it)")
            found[plat].append(have[0])
    return found


def check_sources(stage: Path) -> None:
    """The staged engine must not import bpy or torch; nothing may mention bl_info."""
    bad = []
    for f in stage.rglob("*.py"):
        text = f.read_text(encoding="utf-8")
        rel = f.relative_to(stage).as_posix()
        if re.search(r"^\s*(import|from)\s+torch\b", text, re.M):
            bad.append(f"{rel} imports torch")
        if rel.startswith("engine/") and re.search(r"^\s*(import|from)\s+bpy\b", text, re.M):
            bad.append(f"{rel} imports bpy")
        if re.search(r"^bl_info\s*=", text, re.M):
            bad.append(f"{rel} defines bl_info")
    if bad:
        raise SystemExit("build_extension: " + "; ".join(bad))


def stage_package(stage: Path) -> None:
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    for f in sorted((ROOT / "blender_addon").rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc":
            dst = stage / f.relative_to(ROOT / "blender_addon")
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, dst)
    for f in sorted((ROOT / "engine").rglob("*.py")):
        if ENGINE_EXCLUDE.isdisjoint(f.parts):
            dst = stage / "engine" / f.relative_to(ROOT / "engine")
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, dst)
    (stage / "rigs").mkdir()
    shutil.copy2(ROOT / "rigs" / "__init__.py", stage / "rigs" / "__init__.py")
    for rel in RIG_FILES:
        dst = stage / "rigs" / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / "rigs" / rel, dst)
    for name in ("LICENSE", "NOTICE"):
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, stage / name)
    check_sources(stage)


def native_library(platform: str) -> str:
    """The compiled muscle step for a platform (engine/native, built by tools/build_native.py),
    relative to the package root; engine.compiled loads it by this name."""
    suffix = {"linux": "so", "windows": "dll", "macos": "dylib"}[platform.split("-")[0]]
    return f"engine/native/sinew_muscle-{platform}.{suffix}"


def platform_payload(wheels: list[Path], platform: str) -> dict[str, Path]:
    """Files only one platform's zip carries, by their path in the package: its runtime wheels
    and its compiled muscle step."""
    lib = native_library(platform)
    if not (ROOT / lib).is_file():
        raise SystemExit(f"build_extension: {lib} missing (run `make compiled`)")
    return {**{f"wheels/{w.name}": w for w in wheels}, lib: ROOT / lib}


def place_payload(stage: Path, payload: dict[str, Path], previous: dict[str, Path]) -> None:
    """Swap the previous platform's payload in the staged package for this one's."""
    for rel in previous:
        (stage / rel).unlink(missing_ok=True)
    for rel, src in payload.items():
        dst = stage / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)


def write_manifest(stage: Path, payload: dict[str, Path], platform: str) -> None:
    """The repository's manifest with `platforms = [platform]` and `wheels = [...]` (the
    payload's wheels)."""
    text = (ROOT / "blender_manifest.toml").read_text(encoding="utf-8")
    text = re.sub(r"(?ms)^\[build\].*?(?=^\[|\Z)", "", text)  # the staged tree needs no excludes
    text = re.sub(r"(?m)^(platforms|wheels)\s*=.*$", "", text)
    lines = ["", f"platforms = [{json.dumps(platform)}]", "wheels = ["]
    lines += [f'  "./{rel}",' for rel in sorted(payload) if rel.endswith(".whl")] + ["]", ""]
    head, sep, tail = text.partition("\n[")  # top-level keys must precede the first table
    text = head.rstrip() + "\n" + "\n".join(lines) + (sep + tail if sep else "")
    (stage / "blender_manifest.toml").write_text(text, encoding="utf-8")


def run_cli(cli: Path, *args: str) -> str:
    r = subprocess.run([sys.executable, str(cli), *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"build_extension: blender_ext {args[0]} failed:\n{r.stdout}{r.stderr}")
    return r.stdout


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="example: python tools/build_extension.py --platforms linux-x64")
    ap.add_argument("--platforms", default=",".join(PLATFORMS),
                    help="comma-separated Blender platforms (default: all four)")
    ap.add_argument("--out", default=str(ROOT / "dist"), help="output folder (default dist/)")
    ap.add_argument("--wheels", default=None, help="wheel cache (default <out>/wheels)")
    ap.add_argument("--no-download", action="store_true", help="use only wheels already in the cache")
    args = ap.parse_args(argv)
    platforms = [p.strip() for p in args.platforms.split(",") if p.strip()]
    unknown = [p for p in platforms if p not in PLATFORMS]
    if unknown:
        raise SystemExit(f"build_extension: unknown platforms {unknown}; choose from {', '.join(PLATFORMS)}")
    out = Path(args.out).resolve()
    stage = out / "stage" / "sinew"
    cli = blender_ext_cli()
    check_runtime_covered()
    wheels = fetch_wheels(Path(args.wheels).resolve() if args.wheels else out / "wheels", platforms,
                          not args.no_download)
    stage_package(stage)
    version = re.search(r'(?m)^version\s*=\s*"([^"]+)"',
                        (ROOT / "blender_manifest.toml").read_text()).group(1)
    zips, previous = {}, {}
    for plat in platforms:
        payload = platform_payload(wheels[plat], plat)
        place_payload(stage, payload, previous)
        previous = payload
        write_manifest(stage, payload, plat)
        run_cli(cli, "validate", str(stage))
        z = out / f"sinew-{version}-{plat.replace('-', '_')}.zip"
        if z.exists():
            z.unlink()
        run_cli(cli, "build", "--source-dir", str(stage), "--output-filepath", str(z))
        run_cli(cli, "validate", str(z))
        with zipfile.ZipFile(z) as zf:
            names = zf.namelist()
        leaked = [n for n in names if n.startswith(("training/", "tests/", "reference/", "stage/"))
                  or "torch" in n.lower() or "__pycache__" in n]
        if leaked:
            raise SystemExit(f"build_extension: {z.name} holds files that must stay out: {leaked[:5]}")
        native = [n for n in names if n.startswith("engine/native/") and not n.endswith("/")]
        if native != [native_library(plat)]:
            raise SystemExit(f"build_extension: {z.name} should carry {native_library(plat)} only, has {native}")
        zips[plat] = dict(path=str(z), bytes=z.stat().st_size, files=len(names), native=native[0],
                          wheels=sorted(n.split("/")[-1] for n in names if n.endswith(".whl")))
    print(json.dumps(dict(version=version, zips=zips)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
