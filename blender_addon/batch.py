"""The batch bake behind scripts/sinew_bake.py and `sinew bake` (same code path as the
Simulate Fatigued Take operator: core.prepare_simulation -> SimulationJob.run -> bake_take)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="sinew_bake.py",
        description="Simulate a fatigued take for an armature and bake it into a new Action.",
        epilog="examples:\n"
               "  blender -b scene.blend -P scripts/sinew_bake.py -- --armature Armature "
               "--clip walk.bvh:20 --out out/take.blend\n"
               "  python scripts/sinew_bake.py --scene scene.blend --armature Armature --clip action --out o.blend",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scene", help="the .blend to open (plain python with the bpy module; "
                                    "under blender -b the opened file is used)")
    ap.add_argument("--armature", required=True, help="name of the armature object")
    ap.add_argument("--clip", action="append", required=True, metavar="CLIP[@AT][:SECONDS]",
                    help="BVH or reference .npz, or 'action' for the armature's action; repeat to chain. "
                    "CLIP@AT holds the clip's pose at AT seconds still (with --residual 0 the character "
                    "stands it on its muscles alone)")
    ap.add_argument("--repetitions", type=int, default=None, help="play a clip without :SECONDS this many times")
    ap.add_argument("--fatigue-scale", type=float, default=50.0)
    ap.add_argument("--F", type=float, default=0.01)
    ap.add_argument("--R", type=float, default=0.002)
    ap.add_argument("--r", type=float, default=2.0)
    ap.add_argument("--strength", type=float, default=None,
                    help="muscle strength: every muscle's maximum force times this, MASS's literature forces "
                         "being 1 (tracking default 3; lower tires sooner); a policy runs at the strength it "
                         "was trained at")
    ap.add_argument("--controller", choices=("tracking", "policy"), default="tracking")
    ap.add_argument("--policy", default=None)
    ap.add_argument("--mode", choices=("track", "generate", "heading"), default="track",
                    help="policy mode: track the clips (default), generate (the prior alone) or heading "
                         "(the high-level policy steers to --heading at --speed)")
    ap.add_argument("--noise-scale", type=float, default=None,
                    help="policy latent noise, a multiple of the prior's sigma (default 1 in generate mode, else 0)")
    ap.add_argument("--heading", action="append", default=[], metavar="TURN[@TIME]",
                    help="heading mode: face TURN degrees to the left of the starting facing from TIME s on; repeat")
    ap.add_argument("--speed", type=float, default=None, help="heading mode's target speed in m/s (default 1)")
    ap.add_argument("--residual", type=float, default=None,
                    help="for analysis: the tracking controller's root residual strength in body weights, a force "
                         "on the pelvis nobody sees (default 0: none; above 0 the balance planner is off); a "
                         "policy applies none")
    ap.add_argument("--balance", action=argparse.BooleanOptionalAction, default=None,
                    help="tracking controller: plan balance ahead so the character carries itself with no root "
                         "residual (predictive sampling; on by default, off with --residual above 0; slow: "
                         "~8 s of computing a simulated second on 2 cores, ~15 s on one)")
    ap.add_argument("--workers", type=int, default=None, metavar="N",
                    help="processes that play --balance's candidates, forked from Blender's (default: the "
                         "add-on's preference, one per CPU core on Linux; 0 = Blender's process); the take is "
                         "the same whatever N")
    ap.add_argument("--pace", type=float, default=None,
                    help="tracking controller's pace governor strength: tired legs play the clip slower, by "
                         "STRENGTH %% per %% of their motor units fatigued beyond a tenth, down to half pace "
                         "(default 1; 0 = the clip's own pace); a policy plays at its own pace")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--push", action="append", default=[], metavar="TIME:FX,FY,FZ:SECONDS[:BODY]",
                    help="an external push: force in N (world frame) at the body's centre of mass (default the "
                         "pelvis) from TIME for SECONDS; repeat for more")
    ap.add_argument("--keep-calibration", action="store_true",
                    help="keep a calibration pose (T- or A-pose frames) at the start of a clip (default: skip it)")
    ap.add_argument("--fps", type=int, default=None, help="output frame rate (default: the scene's)")
    ap.add_argument("--frame-start", type=int, default=None, help="first frame of the take (default: scene start)")
    ap.add_argument("--out", required=True, help="the .blend to write")
    ap.add_argument("--json", action="store_true", help="print the JSON summary as the last stdout line")
    return ap


def run(argv) -> int:
    from .engine.interrupt import stop_on_signals

    with stop_on_signals() as stop:  # Ctrl-C / SIGTERM: stop at the next step, bake what was done
        return _run(argv, stop)


def _run(argv, stop) -> int:
    import bpy

    from . import core
    from .engine.atomic import atomic_path, check_out_file
    from .engine.control.plan import parse_clip_arg
    from .engine.errors import ParameterError, SinewError
    from .engine.interrupt import take_stopped_line
    from .engine.take import check_balance, check_pace

    args = parser().parse_args(argv)
    t0 = time.perf_counter()
    try:
        out = check_out_file(Path(args.out).resolve(), suffixes=(".blend",),
                             inputs=[args.scene or bpy.data.filepath or None])  # the scene is never rewritten
        if args.scene:
            bpy.ops.wm.open_mainfile(filepath=args.scene)
        arm = bpy.data.objects.get(args.armature)
        if arm is None:
            arms = [o.name for o in bpy.data.objects if o.type == "ARMATURE"]
            raise SinewError(f"no object named {args.armature!r} in the scene (armatures: {arms or 'none'})")
        clips = []
        for c in args.clip:
            path, seconds = parse_clip_arg(c)
            head, at = path.partition("@")[::2]
            if head.lower() == "action":  # the armature's action (ACTION@AT: its pose at AT s, held)
                path = "ACTION" + (f"@{at}" if at else "")
            clips.append((path, seconds))
        planner, residual = check_balance(args.controller, args.balance, args.residual)
        if args.workers is not None and (args.workers < 0 or planner is None):
            raise ParameterError("--workers", f"{args.workers}: must be a whole number >= 0" if args.workers < 0 else
                                 "sets the processes of the balance planner, which this take does not use (a "
                                 "policy, --residual or --no-balance); leave it out")
        pace = check_pace(args.controller, args.pace)
        context = bpy.context
        job = core.prepare_simulation(context, arm, clips, fps=args.fps, controller=args.controller,
                                      policy=args.policy, fatigue_scale=args.fatigue_scale, F=args.F, R=args.R,
                                      r=args.r, residual=residual, seed=args.seed,
                                      repetitions=args.repetitions, keep_calibration=args.keep_calibration,
                                      pushes=args.push, pace=pace, mode=args.mode, noise_scale=args.noise_scale,
                                      headings=args.heading, speed=args.speed, balance=planner is not None,
                                      strength=args.strength, workers=args.workers)
        job.stop = stop
        take = job.run(keep_partial=True)
        sim_s = time.perf_counter() - t0
        start = args.frame_start if args.frame_start is not None else context.scene.frame_start
        info = core.bake_take(context, arm, take, start)
        scene = context.scene
        scene.frame_end = max(scene.frame_end, info["frame_end"])
        with atomic_path(out) as tmp:
            tmp.unlink()  # Blender would keep the empty placeholder as a .blend1 backup
            bpy.ops.wm.save_as_mainfile(filepath=str(tmp), check_existing=False, copy=True)
    except SinewError as e:
        print(f"sinew bake: error: {e}", file=sys.stderr)
        return 2
    summ = take.meta.get("summary", {})
    out_info = dict(action=info["action"], frames=info["frames"], out=str(out), armature=arm.name,
                    frame_start=info["frame_start"], frame_end=info["frame_end"], fps=info["fps"],
                    simulate_s=round(sim_s, 3), bake_s=info["bake_s"], fell=summ.get("fell"), fall=summ.get("fall"),
                    partial=summ.get("partial"), seconds=summ.get("seconds"),
                    MF_mean_by_group=summ.get("MF_mean_by_group"), pace=summ.get("pace"),
                    pushes=summ.get("pushes", []))
    print(json.dumps(out_info))
    if stop.requested:
        print(take_stopped_line("bake", stop, take.meta, "baking", info["frames"],
                                f"baked into action '{info['action']}' in {out}"), file=sys.stderr)
        return stop.exit_code
    return 0
