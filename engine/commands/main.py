"""The `sinew` command line (see CLI.md). Subcommands import only what they need."""
from __future__ import annotations

import argparse
import json
import sys

from ..atomic import FIGURE_SUFFIXES, check_out_dir, check_out_file, write_text
from ..errors import SinewError
from ..interrupt import stopped_line
from ..options import OneLineParser, add_force, number

EPILOG_INFO = """examples:
  sinew info
  sinew info --rig human284 --json
"""
EPILOG_CURVE = """examples:
  sinew fatigue-curve --out fatigue.png
  sinew fatigue-curve --load 0.5 --on 20 --off 40 --F 0.1 --R 0.02 --r 2 --json
  sinew fatigue-curve --load 0.3 --on 600 --off 300      # slow-twitch defaults: ~5 min to fail
"""
EPILOG_BENCH = """examples:
  sinew bench
  sinew bench --seconds 5 --json
  sinew bench --backends --tracking 0 --policy docs/results/dagger_stand_2026-11-24/stand.npz

The controllers are timed on MASS's walk.bvh, read from $SINEW_MOTION_DIR, or else from
../shared/reference/mass/motion beside a source checkout.
"""


def _emit(summary: dict, as_json: bool, lines: list[str]) -> None:
    if not as_json:
        print("\n".join(lines))
    else:
        for line in lines:
            print(line)
        print(json.dumps(summary))


# ---- info -----------------------------------------------------------------------------
def cmd_info(args) -> int:
    from ..rig import load_rig

    rig = load_rig(args.rig)
    s = rig.summary()
    jt = s["joint_types"]
    lines = [
        f"rig        {s['rig']}  ({rig.path})",
        f"bodies     {s['bodies']}",
        f"joints     {s['joints']} ({jt['ball']} ball, {jt['hinge']} hinge) + free root; {s['dofs']} DOFs",
        f"muscles    {s['muscles']}  " + ", ".join(f"{g} {n}" for g, n in s["muscles_by_group"].items()),
        f"waypoints  {s['waypoints']}  ({int((rig.wp_weight[:, 1] > 0).sum())} blended over two bodies)",
        f"mass       {s['mass_kg']:.1f} kg",
        f"height     {s['height_m']:.3f} m",
        f"f0 total   {rig.muscle_f0.sum() / 1000:.1f} kN",
    ]
    _emit(s, args.json, lines if not args.json else [])
    return 0


# ---- fatigue-curve --------------------------------------------------------------------
MAX_CURVE_STEPS = 2e7  # a curve's updates (~0.5 GB of float64 arrays)


def cmd_fatigue_curve(args) -> int:
    import numpy as np

    from .. import fatigue as fat
    from ..errors import ParameterError
    from .plots import fatigue_curve

    out = check_out_file(args.out, suffixes=FIGURE_SUFFIXES)  # before any work
    p = fat.FatigueParams(F=args.F, R=args.R, r=args.r, LD=args.LD, LR=args.LR, scale=args.scale)
    dt = 1.0 / args.hz
    p.validate(dt)
    on, off = round(args.on / dt), round(args.off / dt)
    steps = (on + off) * args.cycles
    if steps > MAX_CURVE_STEPS:
        raise ParameterError("--on", f"--on {args.on:g} and --off {args.off:g} s x {args.cycles} cycles at "
                             f"{args.hz:g} Hz is {steps:.3g} updates; at most {MAX_CURVE_STEPS:.0e} (a day at "
                             "120 Hz is 1e7): shorten the load or lower --hz")
    period = np.concatenate([np.full(on, args.load), np.zeros(off)])
    load = np.tile(period, args.cycles)
    MA, MR, MF = (x[:, 0] for x in fat.simulate_load(load, dt, p))
    t = np.arange(len(load) + 1) * dt
    load_t = np.append(load, 0.0)
    endurance = fat.endurance_time(t, MA, load_t)
    title = (f"3CC-r, load {args.load:g} for {args.on:g} s then rest {args.off:g} s  "
             f"(F={p.F_eff:g}, R={p.R_eff:g}, r={p.r:g}, L_D={p.LD:g}, L_R={p.LR:g}, {args.hz:g} Hz)")
    fatigue_curve(out, t, load_t, MA, MR, MF, title, endurance)
    summary = dict(
        endurance_s=endurance, final_MF=float(MF[-1]), final_MA=float(MA[-1]),
        peak_MF=float(MF.max()), sustainable_load=p.R_eff / (p.F_eff + p.R_eff) if p.F_eff else 1.0,
        out=str(out),
    )
    lines = [
        f"endurance  {'held' if endurance is None else f'{endurance:.1f} s'} at load {args.load:g}"
        f" (sustainable up to {summary['sustainable_load']:.3f})",
        f"M_F        peak {summary['peak_MF']:.3f}, final {summary['final_MF']:.3f}",
        f"plot       {out}",
    ]
    _emit(summary, args.json, lines)
    return 0


# ---- arm-hold -------------------------------------------------------------------------
EPILOG_ARM = """examples:
  sinew arm-hold --out arm_hold/
  sinew arm-hold --backend ode --hold 60 --rest 30 --rehold 30 --json
  sinew arm-hold --fatigue-scale 0      # no fatigue: the arms stay up

Ctrl-C (or SIGTERM) stops at the next step and writes the run so far (partial: true in
arm_hold.json); the exit status is then 130 (143 for SIGTERM).
"""


def cmd_arm_hold(args) -> int:
    from ..interrupt import stop_on_signals

    with stop_on_signals() as stop:  # Ctrl-C / SIGTERM: stop at the next step, keep the series
        return _arm_hold(args, stop)


def _arm_hold(args, stop) -> int:
    from ..experiments.arm_hold import ArmHoldSetup, run_arm_hold
    from .plots import arm_hold as plot_arm_hold
    from ..rig import load_rig

    setup = ArmHoldSetup(hold=args.hold, rest=args.rest, rehold=args.rehold,
                         fatigue_scale=args.fatigue_scale, backend=args.backend).validate()
    out = check_out_dir(args.out)
    rig = load_rig(args.rig)
    result = run_arm_hold(rig, setup, stop=stop)
    write_text(out / "arm_hold.json", json.dumps(result, indent=1))
    s = result["summary"]
    title = (f"Arm hold ({setup.backend}): F = 0.1, F/R = 20, fatigue scale {setup.fatigue_scale:g}; "
             f"hold {setup.hold:g} s, rest {setup.rest:g} s, hold {setup.rehold:g} s")
    plot_arm_hold(out / "arm_hold.png", result["series"], result["setup"], title)
    def fmt(v, digits=1):
        return "-" if v is None else f"{v:.{digits}f}"

    lines = [
        f"arm elevation  start {fmt(s['elevation_start_deg'])} deg, end of hold "
        f"{fmt(s['elevation_end_hold_deg'])} deg, early re-hold {fmt(s['elevation_rehold_deg'])} deg",
        f"shoulder M_F   end of hold {fmt(s['shoulder_MF_end_hold'], 3)}, "
        f"end of rest {fmt(s['shoulder_MF_end_rest'], 3)}",
        f"wrote          {out / 'arm_hold.json'}, {out / 'arm_hold.png'}",
    ]
    _emit(dict(s, out=str(out)), args.json, lines)
    if stop.requested:
        total = setup.hold + setup.rest + setup.rehold
        print(stopped_line("arm-hold", stop, f"at t = {s['simulated_seconds']:.2f} s of {total:g} s",
                           f"the {'partial ' if s['partial'] else ''}run in {out}: arm_hold.json, arm_hold.png"),
              file=sys.stderr)
        return stop.exit_code
    return 0


# ---- bench ----------------------------------------------------------------------------
def cmd_bench(args) -> int:
    from .bench import run_bench

    if args.tracking > 0 or args.balance > 0 or args.policy:  # they walk the sample clip: find it before any timing
        from .sample_data import motion_dir

        motion_dir()
    summary, lines = run_bench(seconds=args.seconds, rig_name=args.rig, backends=args.backends)
    if args.tracking > 0:
        from .bench_controllers import bench_stand, bench_tracking

        summary["tracking"], more = bench_tracking(seconds=args.tracking, rig_name=args.rig)
        lines += more
        summary["stand"], more = bench_stand(seconds=args.tracking, rig_name=args.rig)
        lines += more
    if args.balance > 0:
        from .bench_controllers import bench_balance

        from ..control.balance import BalanceParams, default_workers

        summary["balance"], more = bench_balance(seconds=args.balance, rig_name=args.rig)
        lines += more
        cores = min(default_workers(), BalanceParams().candidates)
        if cores > 1:  # and on every core, as a take plans by default
            summary["balance_all_cores"], more = bench_balance(seconds=args.balance, rig_name=args.rig, workers=cores)
            lines += more
    if args.policy:
        from .bench_controllers import bench_policy

        summary["policy"], more = bench_policy(args.policy, seconds=max(args.tracking, 2.0), rig_name=args.rig)
        lines += more
    _emit(summary, args.json, lines)
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = OneLineParser(
        prog="sinew",
        description="Sinew: muscle-driven, fatigue-aware character animation (284-muscle MASS human, "
        "Hill-type muscles, 3CC-r fatigue).",
    )
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=OneLineParser)
    fmt = argparse.RawDescriptionHelpFormatter

    p = sub.add_parser("info", help="describe the musculoskeletal model", epilog=EPILOG_INFO,
                       formatter_class=fmt, description="Counts, mass and height of a rig.")
    p.add_argument("--rig", default="human284", help="rig name or path to a rig .npz (default: human284)")
    p.add_argument("--json", action="store_true", help="print one JSON summary as the last line")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser(
        "fatigue-curve", help="3CC-r response of one muscle to a square-wave load (MuscleVAE Fig. 15)",
        epilog=EPILOG_CURVE, formatter_class=fmt,
        description="Drive one fresh muscle with a target load for --on seconds, then rest for --off "
        "seconds, and plot M_A, M_R, M_F. Endurance is the time at which M_A first falls 0.01 (1%% MVC) "
        "below a load it had reached.")
    p.add_argument("--load", type=number("--load", 0.0, 1.0), default=0.5, help="target load u in [0, 1] (default 0.5)")
    p.add_argument("--on", type=number("--on", positive=True), default=20.0, help="seconds under load (default 20)")
    p.add_argument("--off", type=number("--off", 0.0), default=40.0, help="seconds of rest after it (default 40)")
    p.add_argument("--cycles", type=int, default=1, help="repeat the on/off period (default 1)")
    p.add_argument("--F", type=number("--F", 0.0), default=0.01, help="fatigue rate F, 1/s (default 0.01)")
    p.add_argument("--R", type=number("--R", 0.0), default=0.002, help="recovery rate R, 1/s (default 0.002)")
    p.add_argument("--r", type=number("--r", 0.0), default=2.0, help="rest recovery multiplier r (default 2)")
    p.add_argument("--LD", type=number("--LD", 0.0), default=50.0, help="development factor L_D, 1/s (default 50)")
    p.add_argument("--LR", type=number("--LR", 0.0), default=50.0, help="relaxation factor L_R, 1/s (default 50)")
    p.add_argument("--scale", type=number("--scale", 0.0), default=1.0, help="fatigue scale multiplying F and R (default 1)")
    p.add_argument("--hz", type=number("--hz", positive=True), default=120.0, help="update rate (default 120, the physics rate)")
    p.add_argument("--out", default="fatigue_curve.png", help="figure to write, .png, .pdf or .svg (default fatigue_curve.png)")
    add_force(p)
    p.add_argument("--json", action="store_true", help="print one JSON summary as the last line")
    p.set_defaults(func=cmd_fatigue_curve)

    from .bake import add_bake_parser
    from .preview import add_preview_parser
    from .retarget import add_retarget_parser
    from .simulate import add_simulate_parser

    add_retarget_parser(sub)
    add_preview_parser(sub)
    add_simulate_parser(sub)

    p = sub.add_parser(
        "arm-hold", help="the arm-holding fatigue experiment (MuscleVAE Fig. 9-10)", epilog=EPILOG_ARM,
        formatter_class=fmt,
        description="Pelvis and trunk pinned, both arms held out by muscle-space PD on their T-pose "
        "lengths; hold, rest with the arm muscles relaxed, hold again. Uses the paper's arm-hold "
        "fatigue rates (F = 0.1, F/R = 20, r = 2). Writes arm_hold.json and arm_hold.png.")
    p.add_argument("--backend", choices=("mujoco", "ode"), default="mujoco", help="physics backend (default mujoco)")
    p.add_argument("--fatigue-scale", type=number("--fatigue-scale", 0.0), default=1.0,
                   help="multiplies F and R (default 1; 0 switches fatigue off)")
    p.add_argument("--hold", type=number("--hold", positive=True), default=120.0, help="seconds of the first hold (default 120)")
    p.add_argument("--rest", type=number("--rest", 0.0), default=60.0, help="seconds of rest (default 60)")
    p.add_argument("--rehold", type=number("--rehold", 0.0), default=60.0, help="seconds of the second hold (default 60)")
    p.add_argument("--rig", default="human284", help="rig name or path (default: human284)")
    p.add_argument("--out", default="arm_hold", help="output folder (default ./arm_hold)")
    add_force(p)
    p.add_argument("--json", action="store_true", help="print one JSON summary as the last line")
    p.set_defaults(func=cmd_arm_hold)

    p = sub.add_parser("bench", help="speed of each stage of the engine step", epilog=EPILOG_BENCH,
                       formatter_class=fmt,
                       description="Times the muscle step (LBS, lengths, Hill, PD, fatigue, per-body "
                       "force sums) over all muscles on one core: the numpy path stage by stage, then "
                       "the numpy and the compiled path side by side; then, per physics backend, the "
                       "bare physics step and the whole simulation loop before (numpy muscles, MuJoCo "
                       "without its lean settings) and now, interleaved, with ratios; then the "
                       "tracking controller on a fresh walk, split into preparation, solve, and "
                       "muscles + physics, and the stand controller; with --policy, a policy take. Times are CPU time, so other load on the machine moves "
                       "them little.")
    p.add_argument("--seconds", type=number("--seconds", positive=True), default=2.0,
                   help="simulated seconds to time at 120 Hz (default 2)")
    p.add_argument("--rig", default="human284", help="rig name or path (default: human284)")
    p.add_argument("--backends", nargs="*", choices=("mujoco", "ode"), default=["mujoco", "ode"],
                   help="physics backends to time (default: both; none for the muscle step only)")
    p.add_argument("--tracking", type=number("--tracking", 0.0), default=2.0,
                   help="simulated seconds of the tracking-controller walk to time (default 2; 0 skips it)")
    p.add_argument("--balance", type=number("--balance", 0.0), default=0.0, metavar="SECONDS",
                   help="simulated seconds of the balance planner's residual-free walk to time, on one core and "
                   "then on every core (default 0: skipped; slow: ~6.5 s of computing a simulated second on one core of a 2-core machine, ~3.5 s on two)")
    p.add_argument("--policy", default=None, metavar="P.npz",
                   help="also time a take of this policy (sinew export-policy) on the clip it was trained on")
    p.add_argument("--json", action="store_true", help="print one JSON summary as the last line")
    p.set_defaults(func=cmd_bench)

    # Commands of packages beside the engine (training's train and export-policy), registered as
    # the entry points "sinew.commands" (pyproject.toml): the engine names no such package (it
    # depends on the engine, not the other way round), and where one is not installed (the
    # Blender extension ships without training) its commands are simply absent.
    from importlib.metadata import entry_points

    for ep in sorted(entry_points(group="sinew.commands"), key=lambda e: e.name):
        ep.load()(sub)
    add_bake_parser(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "cycles", 1) < 1:
        parser.error("--cycles must be >= 1")
    try:
        return args.func(args)
    except (SinewError, KeyError) as e:
        msg = e.args[0] if isinstance(e, KeyError) else str(e)
        print(f"sinew {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C outside a run that keeps its work, or pressed twice
        print(f"sinew {args.command}: interrupted; nothing more was written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
