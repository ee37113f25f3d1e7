"""`sinew bake`: headless Blender bake of a fatigued take (wraps scripts/sinew_bake.py).

    sinew bake scene.blend --armature Armature --clip walk.bvh:20 --out out/take.blend [--json]

Runs `blender -b scene.blend -P scripts/sinew_bake.py -- ARGS` when a Blender binary is
found (--blender, $BLENDER, or `blender` on PATH), else the same script under this Python
with the `bpy` module (pip install 'bpy==4.5.*'). The script's arguments are the batch
script's (see `python scripts/sinew_bake.py --help`). No bpy is imported here.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..atomic import check_out_file, held_not_blend
from ..errors import SinewError
from ..interrupt import forward_signals
from ..options import BAKE, add_arguments, add_force, command_line

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "sinew_bake.py"


def cmd_bake(args, extra: list[str] | None = None) -> int:
    scene = Path(args.scene)
    if not scene.is_file():
        print(f"sinew bake: error: {scene}: scene file not found", file=sys.stderr)
        return 2
    if scene.suffix.lower() != ".blend":  # Blender would fail to open it, then hang on the way out
        print(f"sinew bake: error: {scene}: not a Blender scene (expected a .blend file)", file=sys.stderr)
        return 2
    try:
        # the user's scene is never rewritten; a file not a .blend only with --force
        check_out_file(args.out, suffixes=(".blend",), inputs=[scene], held=held_not_blend, force=args.force)
        from ..take import check_policy_given

        check_policy_given(args.controller, args.policy)  # before Blender starts, as the batch script would
    except SinewError as e:
        print(f"sinew bake: error: {e}", file=sys.stderr)
        return 2
    if not SCRIPT.is_file():
        print(f"sinew bake: error: {SCRIPT}: batch script not found (a source checkout is needed)", file=sys.stderr)
        return 2
    passthrough = ["--armature", args.armature, "--out", args.out, *command_line(args, BAKE)]
    if args.force:
        passthrough.append("--force")
    blender = args.blender or os.environ.get("BLENDER") or shutil.which("blender")
    if blender:
        cmd = [blender, "-b", str(scene), "--python-exit-code", "2", "-P", str(SCRIPT), "--", *passthrough]
    else:
        try:
            import importlib.util

            if importlib.util.find_spec("bpy") is None:
                raise ImportError
        except ImportError:
            print("sinew bake: error: no Blender found (give --blender PATH or set $BLENDER) and no bpy module "
                  "in this Python (pip install 'bpy==4.5.*')", file=sys.stderr)
            return 2
        cmd = [sys.executable, str(SCRIPT), "--scene", str(scene), *passthrough]
    # its own session: a terminal's Ctrl-C reaches the bake once, forwarded from here
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    with forward_signals(proc):
        stdout, stderr = proc.communicate()
    r = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
    lines = r.stdout.strip().splitlines()
    summary = next((ln for ln in reversed(lines) if ln.startswith("{")), None)
    if r.returncode in (130, 143) and summary is not None:  # stopped by a signal: the bake kept the partial take
        print(r.stderr.strip().splitlines()[-1], file=sys.stderr)
        if args.json:
            print(summary)
        return r.returncode
    if r.returncode != 0 or summary is None:
        reason = [ln for ln in r.stderr.strip().splitlines() if "error" in ln.lower()] or r.stderr.strip().splitlines()
        print(reason[-1] if reason else f"sinew bake: error: the bake exited with status {r.returncode}",
              file=sys.stderr)
        return r.returncode or 2
    if args.json:
        print(summary)
    else:
        import json

        s = json.loads(summary)
        print(f"baked {s['frames']} frames into action '{s['action']}' -> {s['out']}")
        if s.get("notes"):  # the Blender panel's notes on the take (engine.take_notes)
            print("in short: " + "; ".join(s["notes"]))
    return 0


def add_bake_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "bake", help="simulate a fatigued take and bake it into a .blend (headless Blender)",
        description=__doc__.split("\n\n")[0],
        epilog="examples:\n  sinew bake scene.blend --armature Armature --clip walk.bvh:20 --out out/take.blend\n"
               "  sinew bake scene.blend --armature Rig --clip action --fatigue-scale 50 --out o.blend --json\n"
               "  sinew bake scene.blend --armature Rig --clip walk.bvh:15 --controller policy --policy P.npz "
               "--mode heading --heading 90@5 --speed 1.2 --out o.blend\n\n"
               "Ctrl-C (or SIGTERM) stops the simulation at the next step and bakes what was done into\n"
               "--out; the exit status is then 130 (143 for SIGTERM).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scene", help="the .blend holding the armature")
    p.add_argument("--armature", required=True, help="name of the armature object to bake onto")
    p.add_argument("--out", required=True, help="the .blend to write (never the scene itself)")
    add_force(p)
    add_arguments(p, BAKE)  # the take's options (engine/options.py), handed on to the batch script as given
    p.add_argument("--blender", help="Blender executable (default: $BLENDER or `blender` on PATH)")
    p.add_argument("--json", action="store_true", help="print the JSON summary as the last line of stdout")
    p.set_defaults(func=cmd_bake)
    return p
