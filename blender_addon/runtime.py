"""What the extension needs from Blender's Python, checked when it is enabled, and the BLAS
thread cap for simulations.

Blender's Python has only its own modules, numpy and the wheels the zip carries, so a zip
built for another platform, or one missing a wheel, must fail when the add-on is enabled,
naming what is missing, not at the first simulation. No bpy here.
"""
from __future__ import annotations

import importlib
import platform
import re
import sys
from pathlib import Path

# Third-party modules the add-on imports at run time, each from a wheel in the zip. The
# build derives the same set from the sources (tools/build_extension.py runtime_imports) and
# a test holds the two equal.
REQUIRED = ("daqp", "mujoco", "scipy", "threadpoolctl")


class RuntimeMissing(RuntimeError):
    """The installed extension cannot run in this Blender (wrong platform, missing wheel)."""


def blender_platform(system: str | None = None, machine: str | None = None) -> str:
    """This machine as a Blender extension platform name (linux-x64, macos-arm64, ...)."""
    system = (system or platform.system()).lower()
    machine = (machine or platform.machine()).lower()
    os_name = {"darwin": "macos", "windows": "windows"}.get(system, system)
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64"}.get(machine, machine)
    return f"{os_name}-{arch}"


def manifest_platforms(root: Path) -> list[str]:
    """The `platforms` the installed package's blender_manifest.toml was built for ([] = any)."""
    path = root / "blender_manifest.toml"
    if not path.is_file():
        return []
    m = re.search(r"(?m)^platforms\s*=\s*\[([^\]]*)\]", path.read_text(encoding="utf-8"))
    return re.findall(r'"([^"]+)"', m.group(1)) if m else []


def check(root: Path, here: str | None = None, modules=REQUIRED) -> None:
    """Raise RuntimeMissing naming the problem if the package at `root` cannot run here:
    built for another platform, or a required module that does not import."""
    here = here or blender_platform()
    built = manifest_platforms(root)
    if built and here not in built:
        raise RuntimeMissing(f"Sinew: this extension zip is for {', '.join(built)} but Blender runs on {here}; "
                             f"install the sinew-*-{here.replace('-', '_')}.zip built for it")
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as e:  # not there, or a wheel for another Python/numpy
            missing.append(f"{name} ({type(e).__name__}: {e})")
    if missing:
        raise RuntimeMissing(f"Sinew: the extension's runtime wheels are missing or broken for Python "
                             f"{sys.version_info.major}.{sys.version_info.minor} on {here}: {'; '.join(missing)}. "
                             f"Reinstall the {here} zip from `make extension`")


