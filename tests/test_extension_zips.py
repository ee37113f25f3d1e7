"""The four platform zips of `make extension`: each carries, for its own platform and CPython
3.11, a wheel for every third-party module the add-on imports (derived from the sources), the
wheels those need, and no wheel that does not fit it. Wheel-tag rules on known file names."""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from io import BytesIO
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("build_extension", REPO / "tools" / "build_extension.py")
build = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build)


@pytest.fixture(scope="module")
def zips() -> dict[str, Path]:
    """dist/'s four zips, built (as `make extension` does) if any is missing or older than the sources."""
    version = re.search(r'(?m)^version\s*=\s*"([^"]+)"', (REPO / "blender_manifest.toml").read_text()).group(1)
    out = {p: REPO / "dist" / f"sinew-{version}-{p.replace('-', '_')}.zip" for p in build.PLATFORMS}
    newest = max(f.stat().st_mtime for d in ("blender_addon", "engine", "tools") for f in (REPO / d).rglob("*.py"))
    if any(not z.is_file() or z.stat().st_mtime < newest for z in out.values()):
        r = subprocess.run([sys.executable, str(REPO / "tools" / "build_extension.py")], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
    return out


def _wheel_modules(data: bytes) -> tuple[set[str], list[str], str]:
    """(top-level modules, non-extra requirements, distribution name) of a wheel."""
    with zipfile.ZipFile(BytesIO(data)) as w:
        names = w.namelist()
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(w.read(meta_name).decode())
    tops = set()
    for n in names:
        first = n.split("/")[0]
        if first.endswith((".dist-info", ".data")) or first.endswith(".libs"):
            continue
        tops.add(first.split(".")[0] if "/" not in n else first)
    reqs = [r for r in meta.get_all("Requires-Dist") or [] if "extra ==" not in r]
    return tops, reqs, meta["Name"]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_runtime_imports_derived_from_the_sources():
    found = build.runtime_imports()
    assert {"mujoco", "scipy", "daqp", "threadpoolctl"} <= set(found)
    assert "engine/control/coordination.py" in found["daqp"]
    # CLI-only and optional imports stay out: plots, training, the ODE backend
    assert not {"matplotlib", "torch", "training", "ode", "bpy", "numpy"} & set(found)
    # the add-on's enable-time check looks for exactly these (runtime.py needs no bpy)
    rspec = importlib.util.spec_from_file_location("sinew_runtime", REPO / "blender_addon" / "runtime.py")
    runtime = importlib.util.module_from_spec(rspec)
    rspec.loader.exec_module(runtime)
    assert set(runtime.REQUIRED) == set(found)
    assert set(found) <= set(build.RUNTIME)


@pytest.mark.parametrize("platform", build.PLATFORMS)
def test_zip_carries_its_platforms_compiled_muscle_step(zips, platform):
    """Each zip holds its own platform's library (engine/native, engine.compiled) and no other."""
    with zipfile.ZipFile(zips[platform]) as zf:
        native = [n for n in zf.namelist() if n.startswith("engine/native/") and not n.endswith("/")]
        data = zf.read(build.native_library(platform))
    assert native == [build.native_library(platform)]
    assert data == (REPO / build.native_library(platform)).read_bytes()


@pytest.mark.parametrize("platform", build.PLATFORMS)
def test_zip_carries_its_platforms_wheels(zips, platform):
    z = zips[platform]
    with zipfile.ZipFile(z) as zf:
        manifest = zf.read("blender_manifest.toml").decode()
        wheels = {n: zf.read(n) for n in zf.namelist() if n.startswith("wheels/") and n.endswith(".whl")}
    assert re.search(rf'(?m)^platforms = \["{platform}"\]$', manifest)
    listed = re.findall(r'"\./(wheels/[^"]+\.whl)"', manifest)
    assert sorted(listed) == sorted(wheels), "manifest's wheels and the zip's differ"
    misfits = [n for n in wheels if platform not in build.wheel_platforms(n)]
    assert not misfits, f"{z.name}: wheels that do not fit {platform} / CPython 3.11: {misfits}"
    provided, dists, needed = set(), set(), {}
    for n, data in wheels.items():
        tops, reqs, dist = _wheel_modules(data)
        provided |= tops
        dists.add(_norm(dist))
        for r in reqs:
            needed[_norm(re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0])] = n
    missing = {m: files for m, files in build.runtime_imports().items() if m not in provided}
    assert not missing, f"{z.name} has no wheel providing {missing}"
    unmet = {d: w for d, w in needed.items() if d not in dists and d not in build.NOT_SHIPPED}
    assert not unmet, f"{z.name}: wheels whose requirements are not in the zip: {unmet}"


def test_wheel_tag_rules():
    fits = build.wheel_platforms
    assert fits("scipy-1.17.1-cp311-cp311-macosx_10_14_x86_64.whl") == {"macos-x64"}  # the tag that broke the build
    assert fits("scipy-1.15.3-cp311-cp311-macosx_12_0_arm64.whl") == {"macos-arm64"}
    assert fits("scipy-1.15.3-cp311-cp311-macosx_14_0_arm64.whl") == set()  # newer than macOS 12
    assert fits("x-1-cp311-cp311-macosx_10_9_universal2.whl") == {"macos-arm64", "macos-x64"}
    assert fits("glfw-2.11.0-py2.py3-none-macosx_10_6_intel.whl") == {"macos-x64"}
    assert fits("mujoco-4.0.0-py3-none-any.whl") == set(build.PLATFORMS)
    assert fits("daqp-0.11.0-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl") == {"linux-x64"}
    assert fits("x-1-cp311-cp311-manylinux_2_34_x86_64.whl") == set()  # newer glibc than Blender's 2.28
    assert fits("x-1-cp311-cp311-linux_x86_64.whl") == set()  # not portable
    assert fits("x-1-cp312-cp312-win_amd64.whl") == set() and fits("x-1-cp39-abi3-win_amd64.whl") == {"windows-x64"}
    assert fits("x-1-cp311-cp311-win32.whl") == set()
