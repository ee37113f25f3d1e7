#!/usr/bin/env python3
"""Build Sinew's compiled library (engine/native/*.c: the muscle step and the coordination
solve's Newton method) for every Blender platform.

    python tools/build_native.py [--platforms linux-x64,...] [--zig "python -m ziglang"]

Cross-compiles with Zig's C compiler (PyPI `ziglang`: one pip install, no system toolchain)
into engine/native/sinew_muscle-<platform>.<so|dll|dylib>. The outputs are committed, so
neither a user nor CI needs a compiler; `make compiled` reruns this after the C file
changes. Each library carries the SHA-256 of the source it was built from, and the engine
refuses (falling back to numpy) a library whose hash differs from the C file next to it.
The build is reproducible: the same source and Zig version give the same bytes.

Flags: -O2; -ffp-contract=off (no fused multiply-add, which would round differently from
numpy); -s (stripped); the Linux build links against glibc 2.17, as manylinux2014 wheels do.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NATIVE = ROOT / "engine" / "native"
SOURCES = sorted(NATIVE.glob("*.c"))  # muscle_step.c, dual_newton.c, decision_terms.c: one library
HASHED = sorted([*SOURCES, *NATIVE.glob("*.h")], key=lambda p: p.name)  # the sources and their header

# Blender platform -> Zig target triple and library suffix (engine.compiled names the files).
TARGETS = {
    "linux-x64": ("x86_64-linux-gnu.2.17", "so"),
    "windows-x64": ("x86_64-windows-gnu", "dll"),
    "macos-arm64": ("aarch64-macos.11.0", "dylib"),
    "macos-x64": ("x86_64-macos.11.0", "dylib"),
}
FLAGS = ["-O2", "-s", "-shared", "-fPIC", "-ffp-contract=off", "-std=c99", "-Wall", "-Werror"]


def source_hash(paths=HASHED) -> str:
    """SHA-256 (hex, first 16 digits) of the C sources and headers in name order, line endings normalised
    (engine.compiled.source_hash, the same)."""
    h = hashlib.sha256()
    for path in paths:
        h.update(path.name.encode() + b"\0" + path.read_bytes().replace(b"\r\n", b"\n"))
    return h.hexdigest()[:16]


def library_name(platform: str) -> str:
    return f"sinew_muscle-{platform}.{TARGETS[platform][1]}"


def build(platform: str, zig: list[str], out_dir: Path = NATIVE) -> Path:
    """Compile one platform's library into out_dir; returns its path."""
    triple, _ = TARGETS[platform]
    dst = out_dir / library_name(platform)
    with tempfile.TemporaryDirectory() as tmp:  # Windows builds leave .pdb/.lib beside the .dll
        tmp_lib = Path(tmp) / dst.name
        cmd = [*zig, "cc", "-target", triple, *FLAGS, f'-DSINEW_SOURCE_HASH="{source_hash()}"',
               "-o", str(tmp_lib), *map(str, SOURCES)]
        if platform.startswith("macos"):  # else the temporary path becomes the install name
            cmd[-2 - len(SOURCES):-2 - len(SOURCES)] = [f"-Wl,-install_name,@rpath/{dst.name}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"build_native: {platform} failed ({shlex.join(cmd)}):\n{r.stderr.strip()}")
        part = dst.with_name(dst.name + ".part")
        shutil.copyfile(tmp_lib, part)
        os.replace(part, dst)  # a new file: a process that has the old one loaded keeps it intact
    return dst


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="example: python tools/build_native.py --platforms linux-x64")
    ap.add_argument("--platforms", default=",".join(TARGETS), help="comma-separated (default: all four)")
    ap.add_argument("--zig", default=f"{shlex.quote(sys.executable)} -m ziglang",
                    help="command that runs Zig (default: this Python's ziglang module)")
    args = ap.parse_args(argv)
    platforms = [p.strip() for p in args.platforms.split(",") if p.strip()]
    unknown = [p for p in platforms if p not in TARGETS]
    if unknown:
        raise SystemExit(f"build_native: unknown platforms {unknown}; choose from {', '.join(TARGETS)}")
    zig = shlex.split(args.zig)
    built = {p: build(p, zig) for p in platforms}
    print(json.dumps(dict(source_hash=source_hash(),
                          libraries={p: dict(path=str(f.relative_to(ROOT)), bytes=f.stat().st_size)
                                     for p, f in built.items()})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
