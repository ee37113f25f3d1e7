"""A take's options, each defined once: its flag, type, default, help and checks, and which
front ends offer it.

The front ends: `sinew simulate` (SIMULATE), `sinew bake` and the batch script it runs in
Blender, scripts/sinew_bake.py (BAKE: one set of flags, passed through as given), and the
Simulate panel's properties (PANEL, `Scene.sinew`). The command lines' flags are made here
(add_arguments); the panel's properties take their label, default, bounds and tooltip from
here (panel_settings); tests/test_options.py holds every front end to this table. Here too
the argparse value type that checks a number (number) and the parser every command line uses
(OneLineParser): bad values are refused in one line that names the option.

Standard library only: `sinew bake` and the Blender extension import it without numpy.
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

SIMULATE, BAKE, PANEL = "simulate", "bake", "panel"
EVERYWHERE = (SIMULATE, BAKE, PANEL)
COMMAND_LINES = (SIMULATE, BAKE)
DEFAULT_FPS = 30  # `sinew simulate`'s frame rate; a bake takes its scene's

# Words a help text uses that differ by front end: {name} in a help names another option
# (its flag, or its label in the panel); these name the rest.
TERMS = {
    "repeat": {SIMULATE: "repeat the flag", BAKE: "repeat the flag",
               PANEL: "several separated by spaces or ';'"},
    "action": {SIMULATE: "", BAKE: "; 'action' (or 'action@AT') is the armature's own action", PANEL: ""},
    "this_process": {SIMULATE: "this process", BAKE: "Blender's process", PANEL: "Blender's process"},
    "workers_default": {SIMULATE: "one per CPU core on Linux, 0 elsewhere",
                        BAKE: "the add-on's preference 'Balance on every core': one per CPU core on Linux, "
                              "0 elsewhere", PANEL: ""},
    "fps_default": {SIMULATE: str(DEFAULT_FPS), BAKE: "the scene's", PANEL: "the scene's"},
    "no_length": {SIMULATE: " without :SECONDS", BAKE: " without :SECONDS", PANEL: ""},
}


def number(name: str, lo: float | None = None, hi: float | None = None, positive: bool = False,
           integer: bool = False):
    """A finite float (or whole number) within [lo, hi], > 0 when `positive`."""

    def parse(text: str):
        try:
            v = int(text) if integer else float(text)
        except ValueError:
            kind = "a whole number" if integer else "a number"
            raise argparse.ArgumentTypeError(f"{name} must be {kind}, got {text!r}") from None
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"{name} must be finite, got {text}")
        if positive and v <= 0:
            raise argparse.ArgumentTypeError(f"{name} must be > 0, got {v:g}")
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            bounds = f"lie in [{lo:g}, {hi:g}]" if lo is not None and hi is not None else (
                f"be >= {lo:g}" if lo is not None else f"be <= {hi:g}")
            raise argparse.ArgumentTypeError(f"{name} must {bounds}, got {v:g}")
        return v

    return parse


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments end with one line naming the option, and exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class Checked(list):
    """Items of a take's option, checked against `given` (what the check read: the rig's
    bodies, the controller and mode) and a take's length. Checked again with the same given
    for a take at least as long, unchanged since, they are handed back as they are: the
    Blender add-on checks a take's pushes and goals before its job starts, and
    engine.take.simulate receives them, so each is checked once (engine.push.CheckedPushes,
    engine.control.goals.CheckedGoals)."""

    def __init__(self, items, given: tuple, seconds: float | None):
        super().__init__(items)
        self.checked = (tuple(items), given, seconds)

    def holds_for(self, given: tuple, seconds: float | None) -> bool:
        items, checked_given, checked_seconds = self.checked
        longer = seconds is None or (checked_seconds is not None and checked_seconds <= seconds + 1e-9)
        return tuple(self) == items and self.same(given, checked_given) and longer

    @staticmethod
    def same(given: tuple, checked: tuple) -> bool:
        return given == checked


REPLACED_ANYWAY = "an earlier output of this command is replaced anyway, as re-running it does"


def add_force(parser: argparse.ArgumentParser, same_kind: str = REPLACED_ANYWAY) -> None:
    """The --force flag of every command that writes a file or folder (engine.atomic's
    check_out_file takes it): an output of another kind than the command writes is replaced
    only with it; one of the command's inputs never is. `same_kind`: what becomes of an
    output of the command's own kind."""
    parser.add_argument("--force", action="store_true",
                        help=f"replace an existing output even if it holds another kind of file than this command "
                             f"writes ({same_kind}); never one of this command's inputs")


@dataclass(frozen=True)
class Option:
    """One take option. `default` is what a command line parses when the flag is absent
    (None: not given, and the take decides, as the help says); `value` is what the take then
    runs with where that is one number (the panel's default). A help text names another
    option as {name} and a front end's own words as {term} (TERMS)."""

    name: str                       # args.NAME; prepare_simulation's keyword (plural for a list)
    help: str
    kind: type = float              # float, int, str or bool
    default: object = None
    value: object = None            # None: `default`
    lo: float | None = None         # the checks: bounds, > 0, one of `choices`
    hi: float | None = None
    positive: bool = False
    choices: tuple = ()             # (value, panel label, panel description)
    metavar: str | None = None
    repeat: bool = False            # the flag may come again (a list); one text field in the panel
    required: bool = False
    fronts: tuple = EVERYWHERE
    label: str = ""                 # the panel's name for it
    prop: str = ""                  # the panel's property, where it is not `name`

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def runs_with(self):
        """What a take runs with when the option is not given (None: the help says)."""
        return self.default if self.value is None else self.value

    @property
    def prop_name(self) -> str:
        return self.prop or self.name

    def check(self):
        """The argparse type that refuses a value out of bounds in one line naming the flag."""
        if self.kind in (float, int) and not self.choices:
            return number(self.flag, self.lo, self.hi, positive=self.positive, integer=self.kind is int)
        return None


_CHOICES_CONTROLLER = (
    ("tracking", "Tracking", "Inverse dynamics + muscle coordination, no training needed"),
    ("policy", "Policy", "A trained MuscleVAE policy file"),
)
_CHOICES_MODE = (
    ("track", "Track", "Follow the clip through the policy's posterior"),
    ("generate", "Generate", "Let the policy's prior move on its own (the clip sets only the start pose and the "
                             "length)"),
    ("heading", "Heading", "Steer with the policy's high-level heading/speed policy (a policy file trained with "
                           "`sinew train --config heading`)"),
)

TAKE_OPTIONS = (
    Option("clip", kind=str, repeat=True, required=True, metavar="CLIP[@AT][:SECONDS]", fronts=COMMAND_LINES,
           label="Clip",
           help="a .bvh or reference .npz, optionally :SECONDS to play (looped; default one pass); repeat to "
                "chain{action}. CLIP@AT holds the pose at AT seconds into the clip still (with {residual} 0 the "
                "character stands it on its muscles alone)"),
    Option("repetitions", kind=int, lo=1, value=1, metavar="N", fronts=(BAKE, PANEL), label="Repetitions",
           help="play each clip{no_length} this many times (default 1: once)"),
    Option("controller", kind=str, default="tracking", choices=_CHOICES_CONTROLLER, label="Controller",
           help="tracking (inverse dynamics and muscle coordination, no training needed; default) or policy "
                "(a trained MuscleVAE policy, {policy})"),
    Option("policy", kind=str, label="Policy", prop="policy_path",
           help="policy .npz for {controller} policy (`sinew export-policy` writes one)"),
    Option("mode", kind=str, default="track", choices=_CHOICES_MODE, label="Mode", prop="policy_mode",
           help="policy mode: track the clips (the posterior, default), generate (the prior alone) or heading "
                "(the high-level policy steers to {heading} at {speed})"),
    Option("noise_scale", lo=0.0, value=1.0, metavar="S", label="Noise",
           help="policy latent noise: the prior's sigma times S (default 1 in generate mode, 0 otherwise; "
                "0 = the prior's mean)"),
    Option("heading", kind=str, repeat=True, metavar="TURN[@TIME]", label="Headings", prop="headings",
           help="heading mode's goal: TURN degrees to the left of the starting facing (negative: right) from "
                "TIME s on (default 0), e.g. 90@5; {repeat} to change it during the take; none = straight on"),
    Option("speed", lo=0.0, value=1.0, metavar="M/S", label="Speed",
           help="heading mode's target speed in m/s (default 1)"),
    Option("fatigue_scale", lo=0.0, default=1.0, label="Fatigue scale",
           help="multiplies the 3CC-r fatigue and recovery rates F and R (default 1, the rates as measured: a "
                "minute's walk barely tires, M_F ~0.01; 50 as MuscleVAE's run-walk, where a minute's walk tires "
                "into a slower gait; 0 = no fatigue)"),
    Option("F", lo=0.0, metavar="F", default=0.01, label="F",
           help="3CC-r fatigue rate F in 1/s, before {fatigue_scale} (default 0.01, MuscleVAE's slow-twitch "
                "muscles)"),
    Option("R", lo=0.0, metavar="R", default=0.002, label="R",
           help="3CC-r recovery rate R in 1/s, before {fatigue_scale} (default 0.002)"),
    Option("r", lo=0.0, metavar="r", default=2.0, label="r",
           help="3CC-r rest recovery multiplier r: a muscle at rest recovers r times faster (default 2)"),
    Option("strength", lo=0.1, hi=10.0, value=3.0, metavar="S", label="Strength",
           help="muscle strength: every muscle's maximum isometric force times S, MASS's literature forces being "
                "1 (default 3 for the tracking controller: a tracked walk tires into a slower gait, where at 1 it "
                "asks the legs for more than 3CC-r sustains and a tired take gives way within seconds; the "
                "MuscleVAE release runs its legs at ~5). Lower tires sooner. A policy runs at the strength it "
                "was trained at"),
    Option("residual", lo=0.0, value=0.0, label="Residual",
           help="tracking controller's root residual strength, for analysis: bound on a 'hand of god' force on "
                "the pelvis in body weights (and torque in body weight x 1 m), the OpenSim practice. Default 0: "
                "none, the character carries itself. A residual plays the tracker alone ({balance} off); "
                "with neither, a held pose stands on its muscles alone and a moving clip falls within seconds. "
                "A policy applies none"),
    Option("balance", kind=bool, value=True, label="Balance",
           help="tracking controller: plan balance ahead so the character carries itself on its muscles and "
                "the ground, with no root residual (predictive sampling over small hip, ankle and spine offsets "
                "of the clip beside a swing-foot law, 8 candidates 0.8 s ahead every 0.1 s, 8 more where their "
                "cheapest costs more than usual, 16 more where it turns costly: a turn on the spot coming, a shove; "
                "engine/control/balance.py). On by default "
                "(MuJoCo; off when {residual} asks for a residual). Slow: ~3.5 s of computing a simulated second "
                "on 2 cores, ~6.5 s on one. Off: the tracker alone, which stands a still pose (an LQR) but lets a "
                "moving clip fall after ~3 s without a residual"),
    Option("workers", kind=int, lo=0, metavar="N", fronts=COMMAND_LINES, label="Workers",
           help="processes that play {balance}'s candidates, forked from {this_process} (default: "
                "{workers_default}; 0 = {this_process}); the take is the same whatever N"),
    Option("pace", lo=0.0, value=1.0, metavar="STRENGTH", label="Pace Governor",
           help="tracking controller's pace governor: as the legs tire (their mean fatigued fraction M_F above "
                "0.1) the clips play slower, by STRENGTH % per % of M_F, down to half pace, and speed up again "
                "as they recover; 0 = always the recorded pace (default 1). A policy plays at its own pace"),
    Option("wait", kind=bool, value=True, label="Clip Waits",
           help="tracking controller: where the body falls behind the clip in time (a turn on the spot, a "
                "stop it overran), the clip plays at half pace until the body is back with it "
                "(engine/control/pace.py eq. 2; the report says how long it waited). A clip that is not looped "
                "still plays to its end: the take runs on by what it waited. On by default; off keeps every "
                "clip's own clock (motion timed to music), at the price of a body that trails its turns. A "
                "policy plays at its own pace"),
    Option("push", kind=str, repeat=True, metavar="TIME:FX,FY,FZ:SECONDS[:BODY]", label="Pushes", prop="pushes",
           help="an external push: a force in N (world frame) at the body's centre of mass from TIME for "
                "SECONDS, e.g. 2:0,-120,0:0.2; BODY defaults to the pelvis; {repeat} for more"),
    Option("keep_calibration", kind=bool, default=False, label="Keep calibration pose",
           help="keep a calibration pose (T- or A-pose frames that jump or ease into the motion, or that it "
                "ends in) at the start or the end of a clip (default: found and skipped)"),
    Option("seed", kind=int, lo=0, default=0, label="Seed",
           help="random seed (default 0); the same inputs and seed give the same take"),
    Option("backend", kind=str, default="mujoco", fronts=(SIMULATE,), label="Backend",
           choices=(("mujoco", "MuJoCo", ""), ("ode", "ODE", "")),
           help="physics backend (default mujoco; the balance planner needs MuJoCo)"),
    Option("fps", positive=True, fronts=COMMAND_LINES, label="Frame rate",
           help="output frame rate: 24, 25, 30, 50, 60 or 120 (default: {fps_default})"),
    Option("frame_start", kind=int, fronts=(BAKE,), label="Start frame",
           help="first frame of the baked action (default: the scene's start)"),
)
OPTIONS = {o.name: o for o in TAKE_OPTIONS}


def of(front: str) -> list[Option]:
    """The options a front end offers, in the table's order."""
    return [o for o in TAKE_OPTIONS if front in o.fronts]


def help_text(option: Option, front: str) -> str:
    """The option's help as `front` shows it: other options by flag (or panel label)."""
    names = {o.name: (o.label if front == PANEL else o.flag) for o in TAKE_OPTIONS}
    names.update({k: v[front] for k, v in TERMS.items()})
    text = option.help.format_map(names)
    return text[:1].upper() + text[1:] if front == PANEL else text


def add_arguments(parser: argparse.ArgumentParser, front: str) -> None:
    """The front end's take options as flags on `parser`, each checked as it is parsed."""
    for o in of(front):
        kw = dict(help=help_text(o, front).replace("%", "%%"))
        if o.kind is bool and o.default is False:
            kw["action"] = "store_true"
        elif o.kind is bool:  # --balance / --no-balance, None when neither is given
            kw.update(action=argparse.BooleanOptionalAction, default=None)
        else:
            kw.update(default=[] if o.repeat else o.default, metavar=o.metavar, type=o.check())
            if o.repeat:
                kw["action"] = "append"
            if o.choices:
                kw["choices"] = tuple(c[0] for c in o.choices)
            if o.required:
                kw.update(required=True, default=None)
        parser.add_argument(o.flag, **kw)


def command_line(args, front: str = BAKE) -> list[str]:
    """The flags that give `args`'s take options again (those that differ from the parse
    default), for a command that hands them on: `sinew bake` to the batch script."""

    def flag(o, v) -> list[str]:
        text = repr(v) if isinstance(v, float) else str(v)
        # a value starting with '-' (--heading -30@8) would read as a flag: --heading=-30@8
        return [f"{o.flag}={text}"] if text.startswith("-") else [o.flag, text]

    out = []
    for o in of(front):
        v = getattr(args, o.name)
        if o.repeat:
            for item in v or ():
                out += flag(o, item)
        elif o.kind is bool:
            if v is not None and v != o.default:
                out.append(o.flag if v else "--no-" + o.flag[2:])
        elif v is not None and v != o.default:
            out += flag(o, v)
    return out


def panel_settings(name: str, **extra) -> dict:
    """Keyword arguments of the panel's bpy property for option `name`: its label, tooltip,
    default and bounds; `extra` adds the panel's own (soft_max, unit, subtype, ...)."""
    o = OPTIONS[name]
    kw = dict(name=o.label, description=help_text(o, PANEL))
    if o.choices:
        kw.update(items=[tuple(c) for c in o.choices], default=o.runs_with)
    elif o.repeat or o.kind is str:
        kw["default"] = ""
    else:
        kw["default"] = o.kind(o.runs_with)
        if o.lo is not None:
            kw["min"] = o.kind(o.lo)
        if o.hi is not None:
            kw["max"] = o.kind(o.hi)
    kw.update(extra)
    return kw


def check_value(name: str, value) -> None:
    """A value of option `name` as a Python caller gives it (the add-on's prepare_simulation),
    held to the checks its flag's parser makes: a ParameterError naming the flag."""
    from .errors import ParameterError

    o = OPTIONS[name]
    parse = o.check()
    if parse is None or value is None:
        return
    whole = o.kind is int
    if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
        raise ParameterError(o.flag, f"{value!r}: must be {'a whole number' if whole else 'a number'}")
    try:
        parse(repr(value))
    except argparse.ArgumentTypeError as e:
        raise ParameterError(o.flag, str(e).removeprefix(o.flag + " ")) from None
