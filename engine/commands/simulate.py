"""`sinew simulate`: a take from clips, with its report and plots (CLI.md).

engine/commands/main.py wires it in with `add_simulate_parser(subparsers)`.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import take_report
from .. import take_notes
from ..options import DEFAULT_FPS, SIMULATE, add_arguments, add_force

EPILOG = """examples:
  sinew simulate --clip walk.bvh:60 --fatigue-scale 50 --out tired_walk/
  sinew simulate --clip walk.bvh:20 --strength 1.5 --fatigue-scale 50 --out frail_walk/
  sinew simulate --clip run.bvh:60 --clip walk.bvh:20 --fatigue-scale 50 --residual 1 --out run_walk/ --json
  sinew simulate --clip ref.npz:30 --residual 0.5 --fps 24 --seed 3
  sinew simulate --clip walk.bvh:10 --controller policy --policy walk_policy.npz
  sinew simulate --clip walk.bvh:20 --controller policy --policy P.npz --mode generate --noise-scale 0.5
  sinew simulate --clip walk.bvh:15 --controller policy --policy P.npz --mode heading --heading 90@5 --speed 1.2
  sinew simulate --clip walk.bvh:10 --push 4:0,-120,0:0.2 --push 7:120,0,0:0.2:Torso
  sinew simulate --clip walk.bvh@0.25:60 --fatigue-scale 50 --out held_pose/
  sinew simulate --clip cmu_walk.bvh:20 --keep-calibration

--push TIME:FX,FY,FZ:SECONDS[:BODY] shoves the character: a world-frame force in newtons
at the body's centre of mass (default the pelvis; x is the character's left, -y its
facing at the start of the bundled clips, z up) from TIME for SECONDS. The report says
how it recovered: its joint error before, at its peak and after, how far the pelvis went
off its path, whether it fell, and when the gait was back (joint error within 2 deg of
the 3 s before the push). A calibration pose at the start of a BVH clip (T- or A-pose
frames that jump or ease into the motion) is skipped and said so; --keep-calibration
keeps it.

The character carries itself: by default the tracking controller plays with no root
residual and plans its balance ahead (--balance, engine/control/balance.py): every 0.1 s,
8 plans of small offsets to the clip's hips, ankles and spine (8 more where they all cost
more than usual) are each played 0.8 s ahead on a copy of the simulation, and the cheapest
(pelvis height and tilt, speed and joint error against the clip, a fall seen coming) is
followed; a swing-foot law steps the swing leg toward where the body is going too fast. The bundled walk walks on its muscles and
the ground alone, fresh or tired; it costs ~3.5 s of computing a simulated second on two
cores (--workers N processes, default one per core on Linux and 0 elsewhere; the take is
the same whatever N). The report's "balance" line says how it steered. A still pose
(CLIP@AT) is stood by an LQR instead. --residual W (above 0) is for analysis,
OpenSim-style: the tracker alone, helped by a bounded force on the pelvis that nobody could
see, reported as such.

--strength S multiplies every muscle's maximum isometric force (MASS's literature forces
are 1; default 3, as the MuscleVAE release's stronger muscles: at 1 a tracked walk asks the
legs for more than 3CC-r sustains, and a tired one gives way within seconds).

--controller policy follows the chained clips through the policy's posterior, with the
muscles alone (no residual: a policy that has not learnt balance falls, and the take
stops there). --mode generate lets the policy's prior move on its own (its latent noise
times --noise-scale, default 1); --mode heading steers with the high-level policy (a policy
file trained with `sinew train --config heading`): --heading TURN[@TIME] turns the goal
TURN degrees to the character's left of its starting facing from TIME s on (repeatable),
at --speed m/s; the report says when each heading was reached and how well it was held.
In those modes the clips set only the start pose and the take's length.

A clip is a BVH file (retargeted on the fly) or a reference .npz from `sinew retarget`;
CLIP:SECONDS plays it (looping) for that long, default one pass. Clips play in order,
cross-faded at each switch. Writes take.npz, report.json, report.md, activation.png
(muscle activation heat map), fatigue.png (M_F by muscle group) and gait.png (speed,
cadence, stride, knee flexion, trunk lean and root height over the take, beside M_F).

Before simulating, each clip is solved along its reference with the muscles free (no
fatigue): the report says how much joint torque it asks beyond the muscles and how much
root help beyond its foot contacts, and flags a clip beyond this body (the bundled sprint
is; the walk is not): such a take falls, or leans on --residual if asked to.

Ctrl-C (or SIGTERM) stops at the next step and writes the take so far, marked partial in
take.npz and the report; the exit status is then 130 (143 for SIGTERM).
"""


def add_simulate_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "simulate", help="simulate a fatigued take from mocap clips (tracking controller)",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Track clips with the 284-muscle model: inverse dynamics, a muscle-coordination "
        "solve inside the 3CC-r fatigue bounds, optional root residual forces. Muscles tire and "
        "recover as the take plays; a take that falls or diverges is kept up to that point, and the "
        "report's fall line says when it began, which way and why.")
    add_arguments(p, SIMULATE)  # the take's options (engine/options.py)
    p.add_argument("--rig", default="human284", help="rig name or path (default: human284)")
    p.add_argument("--out", default="take", help="output folder (default ./take)")
    add_force(p)
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--json", action="store_true", help="print one JSON summary as the last line")
    p.set_defaults(func=cmd_simulate)
    return p


def parse_clips(items) -> list[tuple[str, float | None]]:
    from ..control.plan import parse_clip_arg

    return [parse_clip_arg(s) for s in items]


def cmd_simulate(args) -> int:
    from ..errors import SinewError
    from ..interrupt import stop_on_signals

    out = Path(args.out)
    made = not out.exists()
    try:
        with stop_on_signals() as stop:  # Ctrl-C / SIGTERM: stop at the next step, keep the take
            return _simulate(args, stop)
    except SinewError:  # refused (a clip, a push, a policy): the --out folder made for it goes again
        if made and out.is_dir() and not any(out.iterdir()):
            out.rmdir()
        raise


def _simulate(args, stop) -> int:
    from .. import fatigue as fat
    from ..atomic import check_out_dir
    from ..control.plan import split_hold
    from ..errors import InputFileError, ParameterError
    from ..control.goals import goals_from_specs
    from ..npzfile import check_out_npz
    from ..push import parse_push
    from ..take import FORMAT as TAKE_FORMAT, check_balance, check_pace, check_policy_given, check_wait

    # everything checked before any simulation work, one line each: the flags here, the take's
    # own options (fps, pushes, goals, clip lengths) once by engine.take.simulate
    pushes = [parse_push(spec) for spec in args.push]
    goals = goals_from_specs(args.mode, args.heading, args.speed)
    check_policy_given(args.controller, args.policy)
    clips = []
    for path, seconds in parse_clips(args.clip):
        p = split_hold(path)[0]
        if not p.is_file():
            raise InputFileError(p, "clip file not found")
        clips.append((path, seconds))
    fps = DEFAULT_FPS if args.fps is None else args.fps
    fatigue = fat.FatigueParams(F=args.F, R=args.R, r=args.r, scale=args.fatigue_scale).validate(1 / 120)
    from ..control.balance import default_workers

    workers = default_workers() if args.workers is None else int(args.workers)
    balance, residual = check_balance(args.controller, args.balance, args.residual, workers, args.backend)
    if args.workers is not None and balance is None:
        raise ParameterError("--workers", "sets the processes of the balance planner, which this take does not "
                             "use (a policy, --residual, --no-balance or --backend ode); leave it out")
    pace = check_pace(args.controller, args.pace)
    wait = check_wait(args.controller, args.wait)
    out = check_out_dir(args.out)
    check_out_npz(out / "take.npz", TAKE_FORMAT, "take", inputs=[split_hold(p)[0] for p, _ in clips] +
                  [args.policy, args.rig], force=args.force)  # a take replaces a take, not a reference
    if args.controller == "policy":
        if not Path(args.policy).is_file():
            raise InputFileError(args.policy, "policy file not found")
    from ..control import TrackingParams
    from ..control.plan import load_clip
    from ..rig import load_rig

    rig = load_rig(args.rig)
    params = TrackingParams(residual=residual, pace=pace, sync=wait, balance=balance).validate()
    loaded = []
    for path, seconds in clips:  # read/retarget the clips (fails fast on a bad file)
        ref, _ = load_clip(rig, path, keep_calibration=args.keep_calibration)
        loaded.append((ref, path, ref.seconds if seconds is None else seconds))
    from ..take import simulate

    policy = None
    if args.controller == "policy":
        from ..control.policy import load_policy

        policy = load_policy(args.policy, rig)  # refuses another rig, version or a broken file
    take = simulate(rig, [(r, s) for r, _, s in loaded], controller=args.controller, fatigue=fatigue, strength=args.strength,
                    backend=args.backend, seed=int(args.seed), fps=fps, params=params, policy=policy,
                    pushes=pushes, stop=stop, mode=args.mode, noise_scale=args.noise_scale, goals=goals)
    for c, (_, path, _) in zip(take.meta["clips"], loaded):
        c["source"] = str(path)
    files = write_outputs(take, rig, out, plots=not args.no_plots)
    s = dict(take.meta["summary"], out=str(out))
    lines = report_lines(take, files)
    if args.json:
        for line in lines:
            print(line, file=sys.stderr)
        print(json.dumps(s))
    else:
        print("\n".join(lines))
    if stop.requested:
        from ..interrupt import take_stopped_line

        kept = f"in {out}: " + ", ".join(Path(f).name for f in files)
        print(take_stopped_line("simulate", stop, take.meta, "writing", take.num_frames, kept), file=sys.stderr)
        return stop.exit_code
    return 0


def write_outputs(take, rig, out: Path, plots: bool = True) -> list[Path]:
    from ..atomic import write_text

    out.mkdir(parents=True, exist_ok=True)
    files = [take.save(out / "take.npz")]
    report = dict(summary=take.meta["summary"], meta={k: v for k, v in take.meta.items()
                                                       if k not in ("muscle_names", "summary")})
    write_text(out / "report.json", json.dumps(report, indent=1))
    files.append(out / "report.json")
    if plots:
        from .take_plots import activation_heatmap, fatigue_by_group, gait_plot

        files.append(activation_heatmap(out / "activation.png", take, rig))
        files.append(fatigue_by_group(out / "fatigue.png", take, rig))
        files.append(gait_plot(out / "gait.png", take, rig))
    write_text(out / "report.md", report_markdown(take, files))
    files.append(out / "report.md")
    return files


def report_lines(take, files) -> list[str]:
    from ..fall import describe as describe_fall
    from ..take import is_partial

    s = take.meta["summary"]
    played = take_report.pace(take)
    status = "complete"
    if is_partial(take.meta):
        status = f"STOPPED: {take.meta['stop_reason']} (take kept up to {s['seconds']:.2f} s)"
    clips = ", ".join(f"{c['name']} {c['seconds']:g} s" for c in take.meta["clips"])
    short = take_notes.notes(take)  # the notes the Blender panel gives
    return [
        f"take        {s['seconds']:.2f} s of {s['planned_seconds']:.2f} s ({clips}); {status}",
        *([f"fall        {describe_fall(s['fall'])}"] if s.get("fall") else []),
        f"speed       {s['realtime_factor']}x real time",
        f"tracking    joint error {s['joint_err_deg_mean']:.2f} deg, root error {s['root_err_cm_mean']:.2f} cm (means)",
        f"muscles     strength {s.get('strength', 1.0):g} (x MASS's f0)",
        f"residual    strength {s['residual_strength']:g}: mean {s['residual_mean_N']:.1f} N "
        f"({s['residual_mean_body_weights']:.3f} body weights), max {s['residual_max_N']:.0f} N, "
        f"torque mean {s['residual_torque_mean_Nm']:.1f} N m" if take.meta["controller"] == "tracking"
        else "residual    none (the policy's muscles alone)",
        *([f"pace        {played}"] if played else []),
        "M_F mean    " + ", ".join(f"{g} {v:.3f}" for g, v in s["MF_mean_by_group"].items()),
    ] + effort_lines(take) + demand_lines(take) + take_report.extra_lines(take) + [
        *([f"in short    {'; '.join(short)}"] if short else []),
        "wrote       " + ", ".join(str(f) for f in files),
    ]


def effort_lines(take) -> list[str]:
    """The opening effort per muscle group against what 3CC-r holds indefinitely, and when
    the groups above it run out (engine.take.effort). Empty for takes saved before 2026-11."""
    from ..take import EFFORT_WINDOW_S

    s = take.meta["summary"]
    if "effort_by_group" not in s:
        return []
    ends = [f"{g} ~{t:.0f} s" for g, t in s["exhausted_after_s_by_group"].items() if t is not None]
    if take.meta["fatigue"]["scale"] == 0:
        tail = "; fatigue off"
    elif ends:
        tail = "; a quarter of the strength runs out: " + ", ".join(ends)
    else:
        tail = "; every group can keep it up"
    return ["effort      " + ", ".join(f"{g} {v:.2f}" for g, v in s["effort_by_group"].items())
            + f" (mean activation, first {EFFORT_WINDOW_S:g} s; 3CC-r holds {s['endurance_limit']:.2f} for ever){tail}"]


def demand_lines(take) -> list[str]:
    """One line per clip of what it asks of the body (engine.control.demands), flagged when
    it is beyond what the muscles and the ground can do."""
    from ..control.demands import demanding, figures

    out = []
    for d in take.meta.get("demands", []):
        line = f"clip needs  {Path(d['clip']).name}: {figures(d)} (reference, mean)"
        if demanding(d):
            line += "; beyond this body: expect the residual to carry it, or a fall without it"
        out.append(line)
    return out


def report_markdown(take, files) -> str:
    s, m = take.meta["summary"], take.meta
    from ..take import is_partial

    lines = ["# Sinew take", ""]
    if is_partial(m):
        lines += [f"**The take stopped early: {m['stop_reason']}.** It is kept up to {s['seconds']:.2f} s "
                  f"of the planned {s['planned_seconds']:.2f} s.", ""]
    lines += take_report.glance_lines(take)
    lines += ["| clip | seconds |", "|---|---|"] + [f"| {c['source']} | {c['seconds']:g} |" for c in m["clips"]]
    lines += ["", "| figure | value |", "|---|---|"]
    for k in ("seconds", "realtime_factor", "joint_err_deg_mean", "root_err_cm_mean", "fell", "diverged", "partial",
              "strength", "residual_strength", "residual_mean_N", "residual_max_N", "residual_torque_mean_Nm",
              "residual_mean_body_weights"):
        lines.append(f"| {k} | {s.get(k, '-')} |")  # a take saved before a figure existed: -
    for g, v in s["MF_mean_by_group"].items():
        lines.append(f"| M_F mean, {g} | {v:.4f} |")
    for g, v in s["MF_final_by_group"].items():
        lines.append(f"| M_F final, {g} | {v:.4f} |")
    if "effort_by_group" in s:
        from ..take import EFFORT_WINDOW_S

        lines += ["", f"Effort: each group's f0-weighted mean activation over the first {EFFORT_WINDOW_S:g} s. "
                  f"3CC-r holds a constant load of R / (F + R) = {s['endurance_limit']:.3f} of a muscle's strength "
                  "indefinitely, at any fatigue scale; a heavier one empties M_R (engine.fatigue.exhaustion_time). "
                  "'Exhausted after' is when the muscles holding a quarter of the group's strength have run out, "
                  "each at its own opening effort: from then on the group cannot keep up the motion.", "",
                  "| group | effort | exhausted after (s) |", "|---|---|---|"]
        for g, v in s["effort_by_group"].items():
            t_end = s["exhausted_after_s_by_group"][g]
            lines.append(f"| {g} | {v:.3f} | {'-' if t_end is None else f'{t_end:.1f}'} |")
    if m.get("demands"):
        lines += ["", "What each clip asks of the body, solved along its reference with activations free in "
                  "[0, 1] (engine.control.demands; the bundled walk at strength 3: 15 N m, 0.02 body weights), and how far "
                  "its stance feet were moved onto the floor (engine.control.grounding):", "",
                  "| clip | unmet joint torque, mean / max (N m) | root help, mean / max (body weights) "
                  "| root torque help, mean / max (N m) | worst joints (N m) "
                  "| feet grounded: foot / pelvis moved (cm), share planted (right, left) "
                  "| planted feet's slide (cm/s, right, left) |",
                  "|---|---|---|---|---|---|---|"]
        for d in m["demands"]:
            worst = ", ".join(f"{k} {v:.0f}" for k, v in d["worst_joints"].items())
            torque = (f"{d['root_torque_help_Nm_mean']:.0f} / {d['root_torque_help_Nm_max']:.0f}"
                      if "root_torque_help_Nm_mean" in d else "-")
            g = d.get("grounding")
            moved = "-" if not g else (f"{g['foot_move_cm']:.1f} / {g['pelvis_move_cm']:.1f}, "
                                       f"{g['planted_share'][0]:.2f} / {g['planted_share'][1]:.2f}")
            slid = "-" if not (g and g.get("slide_cm_per_s")) else "{:.0f} / {:.0f}".format(*g["slide_cm_per_s"])
            lines.append(f"| {Path(d['clip']).name} | {d['unmet_joint_torque_Nm_mean']:.0f} / {d['unmet_joint_torque_Nm_max']:.0f} | "
                         f"{d['root_help_body_weights_mean']:.2f} / {d['root_help_body_weights_max']:.2f} | {torque} | {worst} | {moved} "
                         f"| {slid} |")
    lines += take_report.extra_markdown(take)
    lines += ["", f"Controller: {m['controller']}, backend {m['backend']}, fatigue scale "
              f"{m['fatigue']['scale']:g} (F = {m['fatigue']['F']:g}, R = {m['fatigue']['R']:g}, r = {m['fatigue']['r']:g}), "
              f"seed {m['seed']}, {m['fps']} fps.",
              f"Per physics step: controller {s['step_ms']['controller_per_step']:.2f} ms (solve "
              f"{s['step_ms']['solve_per_step']:.2f} ms), muscles + physics {s['step_ms']['muscles_and_physics_per_step']:.2f} ms.",
              "", "The residual is a force and torque on the pelvis (OpenSim practice) that the muscles "
              "and the ground could not supply; it is bounded by the residual strength and reported above."
              if m["controller"] == "tracking" else "A policy drives the muscles alone: no residual.", ""]
    for f in files:
        if str(f).endswith(".png"):
            lines.append(f"![{Path(f).stem}]({Path(f).name})")
    return "\n".join(lines) + "\n"
