"""The Blender-like Python itself, what the installed extension brings into it, and the zips
that must not install: another platform's, or one that lacks a wheel."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

import pytest

from .conftest import RUNTIME, ROOT, WALK, _zip, sub

pytestmark = pytest.mark.smoke

USER = Path(os.environ["BLENDER_USER_RESOURCES"]).resolve()


def _isolated(code: str, env=None) -> subprocess.CompletedProcess:
    """`code` in a fresh process of this Python, as `make test-blender` runs it (-I), from the
    repository root (so the source tree would be found if the working directory counted)."""
    return subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)


def test_nothing_of_the_project_outside_the_extension(sinew):
    """Without the extension nothing the engine needs is importable here, and with it every
    such module comes from the extension's own wheels, the engine from inside its package."""
    env = {k: v for k, v in os.environ.items() if k != "BLENDER_USER_RESOURCES"}
    for name in (*RUNTIME, "engine", "sinew", "training"):
        r = _isolated(f"import {name}", env)
        assert r.returncode != 0 and "ModuleNotFoundError" in r.stderr, f"{name} imports outside the extension"
    # the environment holds bpy, what it pulls in and pytest, nothing more
    site = Path(sysconfig.get_paths()["purelib"])
    dists = sorted(d.name.split("-")[0].lower() for d in site.glob("*.dist-info"))
    allowed = {"bpy", "numpy", "cython", "requests", "certifi", "charset_normalizer", "idna", "urllib3", "zstandard",
               "pytest", "pluggy", "iniconfig", "packaging", "pygments", "pip", "setuptools"}
    assert set(dists) <= allowed, f"unexpected packages in the Blender-like Python: {set(dists) - allowed}"
    # in this process: the runtime modules from the installed wheels, no source tree anywhere
    sub(sinew, "model").load_model()
    sub(sinew, "engine.control.tracking")
    for name in RUNTIME:
        mod = __import__(name)
        assert Path(mod.__file__).resolve().is_relative_to(USER), f"{name} from {mod.__file__}"
    assert not any(m == "engine" or m.startswith("engine.") for m in sys.modules)
    for name in ("engine", "sinew", "training"):
        with pytest.raises(ModuleNotFoundError):
            __import__(name)
    for d in ("engine", "blender_addon", "training", ".venv"):
        leaked = [m for m, mod in list(sys.modules.items())
                  if getattr(mod, "__file__", None) and Path(mod.__file__).resolve().is_relative_to(ROOT / d)]
        assert not leaked, f"modules loaded from the source tree's {d}/: {leaked[:5]}"


def test_one_blas_thread_while_simulating(sinew):
    """Blender's Python has no OPENBLAS_NUM_THREADS; the extension caps BLAS at one thread for
    the simulation (threadpoolctl) and gives the user's setting back afterwards."""
    from threadpoolctl import threadpool_info

    assert "OPENBLAS_NUM_THREADS" not in os.environ, "run as Blender would, without the variable"
    before = {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}
    jobs = sub(sinew, "job")
    job = jobs.SimulationJob([(sub(sinew, "clips").check_clip_file(str(WALK)), 0.2)], 30, fatigue=jobs.fatigue_params())
    seen = []
    progress = job._progress

    def spy(fraction):
        seen.append([(i["filepath"], i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"])
        progress(fraction)

    job._progress = spy
    job.run()
    libs = {path for s in seen for path, _ in s}
    assert any("scipy" in p for p in libs) and any("numpy" in p for p in libs), libs
    assert {n for s in seen for _, n in s} == {1}
    after = {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}
    assert {p: n for p, n in after.items() if p in before} == before
    if os.cpu_count() > 1:
        assert max(before.values()) > 1, "numpy's BLAS was already capped: the test would prove nothing"


def _install_in_fresh_blender(zip_path: Path) -> str:
    """Install and enable a zip in a new process with its own user folder; its output."""
    code = (f"import bpy\n"
            f"try:\n"
            f"    bpy.ops.extensions.package_install_files(filepath={str(zip_path)!r}, repo='user_default',"
            f" enable_on_install=True)\n"
            f"except Exception as e:\n"
            f"    print('EXCEPTION', e)\n"
            f"print('ENABLED', [k for k in bpy.context.preferences.addons.keys() if k.endswith('sinew')])\n")
    with tempfile.TemporaryDirectory(prefix="sinew-bad-zip-") as user:
        r = _isolated(code, dict(os.environ, BLENDER_USER_RESOURCES=user))
    return r.stdout + r.stderr


def _edited_zip(tmp_path: Path, name: str, drop: str = "", platform: str = "") -> Path:
    """The linux zip without the wheels matching `drop` or with another `platforms` line."""
    out = tmp_path / name
    with zipfile.ZipFile(_zip()) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            if drop and item.filename.startswith(f"wheels/{drop}-"):
                continue
            data = src.read(item)
            if item.filename == "blender_manifest.toml":
                text = data.decode()
                if drop:
                    text = re.sub(rf'(?m)^\s*"\./wheels/{drop}-[^"]*",\n', "", text)
                if platform:
                    text = re.sub(r"(?m)^platforms = .*$", f"platforms = [{json.dumps(platform)}]", text)
                data = text.encode()
            dst.writestr(item, data)
    return out


def test_zip_missing_a_wheel_fails_on_enable(tmp_path):
    out = _install_in_fresh_blender(_edited_zip(tmp_path, "no_daqp.zip", drop="daqp"))
    assert "ENABLED []" in out, out
    assert "missing or broken" in out and "daqp (ModuleNotFoundError" in out, out


def test_zip_for_another_platform_refused(sinew, tmp_path):
    out = _install_in_fresh_blender(_edited_zip(tmp_path, "mac.zip", platform="macos-arm64"))
    assert "ENABLED []" in out and "macos-arm64" in out, out
    # and if such a package is there anyway (copied by hand), enabling it says which zip to take
    runtime = sub(sinew, "runtime")
    root = Path(sinew.__file__).parent
    with pytest.raises(runtime.RuntimeMissing, match=r"zip is for linux-x64 but Blender runs on windows-x64.*"
                                                     r"sinew-\*-windows_x64\.zip"):
        runtime.check(root, here="windows-x64")
    with pytest.raises(runtime.RuntimeMissing, match="no_such_wheel"):
        runtime.check(root, modules=("daqp", "no_such_wheel"))
    runtime.check(root)
    assert runtime.blender_platform("Darwin", "arm64") == "macos-arm64"
    assert runtime.blender_platform("Windows", "AMD64") == "windows-x64"
    assert runtime.blender_platform("Linux", "x86_64") == "linux-x64"
