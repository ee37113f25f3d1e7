"""The batch bake behind scripts/sinew_bake.py and `sinew bake` (same code path as the
Simulate Fatigued Take operator: prepare.prepare_simulation -> job.SimulationJob.run -> bake.bake_take)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .engine.options import BAKE, OneLineParser, add_arguments, add_force


def parser() -> argparse.ArgumentParser:
    ap = OneLineParser(  # a bad flag: one line naming it, exit 2
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
    ap.add_argument("--out", required=True, help="the .blend to write (never the scene itself)")
    add_force(ap)  # as `sinew bake` has it, and handed on by it
    add_arguments(ap, BAKE)  # the take's options, as `sinew bake` has them (engine/options.py)
    ap.add_argument("--json", action="store_true", help="print the JSON summary as the last stdout line")
    return ap


def run(argv) -> int:
    from .engine.interrupt import stop_on_signals

    try:
        args = parser().parse_args(argv)
    except SystemExit as e:  # a bad flag (argparse said which) or --help: out through the script's own exit
        return e.code if isinstance(e.code, int) else 2
    with stop_on_signals() as stop:  # Ctrl-C / SIGTERM: stop at the next step, bake what was done
        return _run(args, stop)


def _run(args, stop) -> int:
    import bpy

    from . import bake, prepare
    from .engine import take_notes
    from .engine.atomic import atomic_path, check_out_file, held_not_blend
    from .engine.control.plan import parse_clip_arg
    from .engine.errors import InputFileError, ParameterError, SinewError
    from .engine.interrupt import take_stopped_line
    from .engine.take import check_balance, check_pace, check_policy_given, check_wait

    t0 = time.perf_counter()
    try:
        check_policy_given(args.controller, args.policy)
        out = check_out_file(Path(args.out).resolve(), suffixes=(".blend",), held=held_not_blend, force=args.force,
                             inputs=[args.scene or bpy.data.filepath or None])  # the scene is never rewritten
        if args.scene:
            try:
                bpy.ops.wm.open_mainfile(filepath=args.scene)
            except RuntimeError as e:  # not a .blend inside, or damaged: Blender's own reason, one line
                reason = str(e).strip().splitlines()[0].removeprefix("Error: ")
                raise InputFileError(args.scene, f"Blender cannot open this scene ({reason})") from None
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
        if args.workers is not None and planner is None:
            raise ParameterError("--workers", "sets the processes of the balance planner, which this take does not "
                                 "use (a policy, --residual or --no-balance); leave it out")
        pace = check_pace(args.controller, args.pace)
        wait = check_wait(args.controller, args.wait)
        context = bpy.context
        job = prepare.prepare_simulation(context, arm, clips, fps=args.fps, controller=args.controller,
                                         policy=args.policy, fatigue_scale=args.fatigue_scale, F=args.F, R=args.R,
                                         r=args.r, residual=residual, seed=args.seed,
                                         repetitions=args.repetitions, keep_calibration=args.keep_calibration,
                                         pushes=args.push, pace=pace, wait=wait, mode=args.mode,
                                         noise_scale=args.noise_scale,
                                         headings=args.heading, speed=args.speed, balance=planner is not None,
                                         strength=args.strength, workers=args.workers)
        job.stop = stop
        take = job.run(keep_partial=True)
        sim_s = time.perf_counter() - t0
        start = args.frame_start if args.frame_start is not None else context.scene.frame_start
        info = bake.bake_take(context, arm, take, start, rt=job.retargeter)
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
                    pushes=summ.get("pushes", []), notes=take_notes.notes(take))
    print(json.dumps(out_info))
    if stop.requested:
        print(take_stopped_line("bake", stop, take.meta, "baking", info["frames"],
                                f"baked into action '{info['action']}' in {out}"), file=sys.stderr)
        return stop.exit_code
    return 0
