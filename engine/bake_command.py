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

from .atomic import check_out_file
from .errors import SinewError
from .interrupt import forward_signals

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "sinew_bake.py"


def cmd_bake(args, extra: list[str] | None = None) -> int:
    scene = Path(args.scene)
    if not scene.is_file():
        print(f"sinew bake: error: {scene}: scene file not found", file=sys.stderr)
        return 2
    if scene.suffix.lower() != ".blend":  # Blender would fail to open it, then hang on the way out
        print(f"sinew bake: error: {scene}: not a Blender scene (expected a .blend file)", file=sys.stderr)
        return 2
    try:
        check_out_file(args.out, suffixes=(".blend",), inputs=[scene])  # the user's scene is never rewritten
    except SinewError as e:
        print(f"sinew bake: error: {e}", file=sys.stderr)
        return 2
    if not SCRIPT.is_file():
        print(f"sinew bake: error: {SCRIPT}: batch script not found (a source checkout is needed)", file=sys.stderr)
        return 2
    passthrough = ["--armature", args.armature, "--out", args.out]
    for c in args.clip:
        passthrough += ["--clip", c]
    for push in args.push:
        passthrough += ["--push", push]
    if args.keep_calibration:
        passthrough.append("--keep-calibration")
    if args.balance is not None:
        passthrough.append("--balance" if args.balance else "--no-balance")
    for flag, value in (("--fatigue-scale", args.fatigue_scale), ("--F", args.F), ("--R", args.R), ("--r", args.r),
                        ("--strength", args.strength), ("--controller", args.controller), ("--policy", args.policy),
                        ("--residual", args.residual), ("--pace", args.pace), ("--seed", args.seed), ("--fps", args.fps),
                        ("--frame-start", args.frame_start), ("--repetitions", args.repetitions)):
        if value is not None:
            passthrough += [flag, str(value)]
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
    return 0


def add_bake_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "bake", help="simulate a fatigued take and bake it into a .blend (headless Blender)",
        description=__doc__.split("\n\n")[0],
        epilog="examples:\n  sinew bake scene.blend --armature Armature --clip walk.bvh:20 --out out/take.blend\n"
               "  sinew bake scene.blend --armature Rig --clip action --fatigue-scale 50 --out o.blend --json\n\n"
               "Ctrl-C (or SIGTERM) stops the simulation at the next step and bakes what was done into\n"
               "--out; the exit status is then 130 (143 for SIGTERM).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scene", help="the .blend holding the armature")
    p.add_argument("--armature", required=True, help="name of the armature object to bake onto")
    p.add_argument("--clip", action="append", required=True, metavar="CLIP[:SECONDS]",
                   help="BVH / reference .npz, or 'action' (the armature's action); repeat to chain")
    p.add_argument("--out", required=True, help="the .blend to write")
    p.add_argument("--repetitions", type=int, help="play each clip this many times (instead of :SECONDS)")
    p.add_argument("--fatigue-scale", type=float, help="multiplies the fatigue and recovery rates F and R (default 1)")
    p.add_argument("--F", type=float, help="3CC-r fatigue rate F, 1/s (default 0.01)")
    p.add_argument("--R", type=float, help="3CC-r recovery rate R, 1/s (default 0.002)")
    p.add_argument("--r", type=float, help="3CC-r rest recovery multiplier r (default 2)")
    p.add_argument("--strength", type=float, help="muscle strength: every muscle's maximum force times this, MASS's "
                   "literature forces being 1 (tracking default 3); a policy runs at the strength it was trained at")
    p.add_argument("--controller", choices=("tracking", "policy"), help="tracking (default, no training) or a trained policy")
    p.add_argument("--policy", help="policy .npz for --controller policy (sinew export-policy)")
    p.add_argument("--residual", type=float, help="for analysis: root residual strength in body weights, a force "
                   "on the pelvis nobody sees (default 0: none; above 0 the balance planner is off)")
    p.add_argument("--balance", action=argparse.BooleanOptionalAction, default=None,
                   help="plan balance ahead so the character carries itself (default on; off with --residual above 0)")
    p.add_argument("--pace", type=float, help="pace governor strength: tired legs play the clip slower "
                   "(default 1; 0 = the clip's own pace)")
    p.add_argument("--seed", type=int, help="random seed (default 0); same inputs and seed give the same take")
    p.add_argument("--push", action="append", default=[], metavar="TIME:FX,FY,FZ:SECONDS[:BODY]",
                   help="an external push: force in N (world frame) at the body's centre of mass (default the "
                        "pelvis) from TIME for SECONDS; repeat for more")
    p.add_argument("--keep-calibration", action="store_true",
                   help="keep a calibration pose (T- or A-pose frames) at the start of a clip (default: skip it)")
    p.add_argument("--fps", type=int, help="output frame rate (default: the scene's)")
    p.add_argument("--frame-start", type=int, help="first frame of the baked action (default: the scene start)")
    p.add_argument("--blender", help="Blender executable (default: $BLENDER or `blender` on PATH)")
    p.add_argument("--json", action="store_true", help="print the JSON summary as the last line of stdout")
    p.set_defaults(func=cmd_bake)
    return p
