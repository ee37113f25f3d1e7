#!/usr/bin/env python3
"""Build Sinew's Blender extension: one validated zip per platform in dist/.

    python tools/build_extension.py [--platforms linux-x64,...] [--no-download] [--out dist]

Steps (no Blender binary needed; Blender's own extension builder, shipped inside the PyPI
`bpy` module, runs under plain Python):

1. Stage the package in dist/stage/sinew/: the add-on (blender_addon/*.py) becomes the
   package root, the engine is copied to sinew/engine/ and the model data to sinew/rigs/
   (imported relatively, as bl_ext.<repo>.sinew.engine) with the platform's compiled muscle
   step (engine/native/, step 3). Training code, tests, reference
   data and caches stay out; a check refuses any staged file that imports torch or bpy
   inside the engine.
2. Fetch the runtime wheels for Python 3.11 (mujoco, its core and glfw, scipy) per platform
   into dist/wheels/ with `pip download --only-binary=:all: --no-deps` (cached: a wheel
   already there is not fetched again).
3. Per platform, stage its compiled library (engine/native/sinew_muscle-<platform>.*) and
   write the staged blender_manifest.toml (the repository's manifest plus
   `platforms = [that one]` and `wheels = [its wheels]`), `blender_ext build` it to
   dist/sinew-<version>-<platform>.zip and `blender_ext validate` the zip. (Not
   --split-platforms: Intel Macs need another mujoco than the "any" wheel the others use.)

Prints one JSON summary line at the end; exits non-zero on any failure.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY_VERSION = "3.11"

# Runtime wheels: the engine needs mujoco (its package is split into mujoco + mujoco-core;
# `import mujoco` also imports glfw) and scipy (sparse LBS matrices, bounded least squares).
# numpy comes with Blender. Pinned to the versions the project is tested with.
WHEELS = ["mujoco==4.0.0", "mujoco-core==4.0.0", "glfw==2.11.0", "scipy==1.17.1"]
# mujoco 4 publishes no macOS x86_64 wheels: Intel Macs get the last monolithic 3.3 release
# (same Python API for what the engine uses; its __init__ also needs typing_extensions).
WHEELS_BY_PLATFORM = {
    "macos-x64": ["mujoco==3.3.7", "glfw==2.11.0", "scipy==1.17.1", "typing-extensions==4.16.0"],
}

# Blender platform name -> pip platform tags accepted for it (best first).
PLATFORMS = {
    "linux-x64": ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
                  "manylinux2014_x86_64", "manylinux1_x86_64", "linux_x86_64"],
    "windows-x64": ["win_amd64"],
    # oldest first: pip prefers earlier tags, and Blender 4.2 runs on macOS 11.2+
    "macos-arm64": ["macosx_10_9_universal2", "macosx_11_0_arm64", "macosx_12_0_arm64", "macosx_13_0_arm64",
                    "macosx_14_0_arm64"],
    "macos-x64": ["macosx_10_6_intel", "macosx_10_9_universal2", "macosx_10_9_x86_64", "macosx_10_15_x86_64",
                  "macosx_10_16_x86_64", "macosx_11_0_x86_64", "macosx_12_0_x86_64", "macosx_13_0_x86_64",
                  "macosx_14_0_x86_64"],
}

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


def wheel_platform(name: str) -> set[str]:
    """Blender platforms a wheel file name fits ('any' wheels fit all)."""
    tags = name[:-4].split("-")[-1].split(".")
    out = set()
    for plat, accepted in PLATFORMS.items():
        if "any" in tags or any(t in accepted for t in tags):
            out.add(plat)
    return out


def fetch_wheels(cache: Path, platforms: list[str], download: bool) -> dict[str, list[Path]]:
    """Wheels per platform for every requirement, from the cache or PyPI (pip download)."""
    cache.mkdir(parents=True, exist_ok=True)
    found: dict[str, list[Path]] = {p: [] for p in platforms}
    for plat in platforms:
        for req in WHEELS_BY_PLATFORM.get(plat, WHEELS):
            dist, version = req.split("==")
            stem = dist.replace("-", "_")
            def present():
                return [w for w in sorted(cache.glob(f"{stem}-{version}-*.whl")) if plat in wheel_platform(w.name)]
            have = present()
            if not have and download:
                cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--no-deps",
                       "--python-version", PY_VERSION, "--implementation", "cp", "-d", str(cache), req]
                for tag in PLATFORMS[plat]:
                    cmd += ["--platform", tag]
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    raise SystemExit(f"build_extension: pip download {req} for {plat} failed:\n{r.stderr.strip()}")
                have = present()
            if not have:
                raise SystemExit(f"build_extension: no wheel of {req} for {plat} in {cache} "
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


def stage_native(stage: Path, platform: str) -> None:
    """Put this platform's compiled library, and no other's, into the staged engine."""
    ndir = stage / "engine" / "native"
    if ndir.exists():
        shutil.rmtree(ndir)
    ndir.mkdir(parents=True)
    src = ROOT / native_library(platform)
    if not src.is_file():
        raise SystemExit(f"build_extension: {src.relative_to(ROOT)} missing (run `make compiled`)")
    shutil.copy2(src, stage / native_library(platform))


def write_manifest(stage: Path, wheels: list[Path], platform: str) -> None:
    """The repository's manifest with `platforms` and `wheels = [...]` for one platform
    (its wheels copied to stage/wheels/, replacing any earlier platform's)."""
    text = (ROOT / "blender_manifest.toml").read_text(encoding="utf-8")
    text = re.sub(r"(?ms)^\[build\].*?(?=^\[|\Z)", "", text)  # the staged tree needs no excludes
    text = re.sub(r"(?m)^(platforms|wheels)\s*=.*$", "", text)
    wdir = stage / "wheels"
    if wdir.exists():
        shutil.rmtree(wdir)
    wdir.mkdir()
    for w in wheels:
        shutil.copy2(w, wdir / w.name)
    lines = ["", f"platforms = [{json.dumps(platform)}]", "wheels = ["]
    lines += [f'  "./wheels/{w.name}",' for w in sorted(wheels)] + ["]", ""]
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
    wheels = fetch_wheels(Path(args.wheels).resolve() if args.wheels else out / "wheels", platforms,
                          not args.no_download)
    stage_package(stage)
    version = re.search(r'(?m)^version\s*=\s*"([^"]+)"',
                        (ROOT / "blender_manifest.toml").read_text()).group(1)
    zips = {}
    for plat in platforms:
        write_manifest(stage, wheels[plat], plat)
        stage_native(stage, plat)
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
