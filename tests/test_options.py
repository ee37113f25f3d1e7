"""A take's options are defined once (engine/options.py): every front end that offers one,
`sinew simulate`, `sinew bake`, the batch script scripts/sinew_bake.py and the Blender panel,
has the same default, help and checks, and the engine resolves an option left out to the
value the help gives (issue 46)."""
import argparse
import importlib
import inspect
import re

import pytest

from engine.options import BAKE, OPTIONS, PANEL, SIMULATE, TAKE_OPTIONS, command_line, help_text, of

# each front end's own flags, beside the take's options (--force: engine.options.add_force,
# which `sinew bake` hands on to the batch script)
OWN_FLAGS = {
    SIMULATE: {"-h", "--help", "--rig", "--out", "--force", "--no-plots", "--json"},
    "sinew bake": {"-h", "--help", "--armature", "--out", "--force", "--blender", "--json"},
    "batch script": {"-h", "--help", "--scene", "--armature", "--out", "--force", "--json"},
}
REQUIRED = {SIMULATE: ["--clip", "w.bvh"],
            "sinew bake": ["s.blend", "--armature", "A", "--clip", "w.bvh", "--out", "o.blend"],
            "batch script": ["--armature", "A", "--clip", "w.bvh", "--out", "o.blend"]}


def _subparser(add):
    ap = argparse.ArgumentParser(prog="sinew")
    return add(ap.add_subparsers(dest="command"))


@pytest.fixture(scope="module")
def parsers(addon):
    from engine.commands.bake import add_bake_parser
    from engine.commands.simulate import add_simulate_parser

    return {SIMULATE: (SIMULATE, _subparser(add_simulate_parser)),
            "sinew bake": (BAKE, _subparser(add_bake_parser)),
            "batch script": (BAKE, importlib.import_module(f"{addon}.batch").parser())}


def _bad_values(o):
    """Values each option's check must refuse, with the words the refusal says."""
    bad = [("nan", "a whole number" if o.kind is int else "finite"), ("x", "must be a")]
    if o.lo is not None:
        bad.append((str(o.lo - 1), f">= {o.lo:g}" if o.hi is None else f"[{o.lo:g}, {o.hi:g}]"))
    if o.hi is not None:
        bad.append((str(o.hi + 1), f"[{o.lo:g}, {o.hi:g}]"))
    if o.positive:
        bad.append(("0", "> 0"))
    if o.kind is int:
        bad.append(("1.5", "a whole number"))
    return bad


def test_every_command_line_has_the_schemas_defaults_help_and_checks(parsers):
    for where, (front, parser) in parsers.items():
        actions = {s: a for a in parser._actions for s in a.option_strings}
        flags = {o.flag for o in of(front)} | {"--no-" + o.flag[2:] for o in of(front) if o.kind is bool
                                                 and o.default is None}
        assert set(actions) == flags | OWN_FLAGS[where], where  # no take option defined by hand
        parsed = vars(parser.parse_args(REQUIRED[where]))
        for o in of(front):
            a = actions[o.flag]
            assert a.help.replace("%%", "%") == help_text(o, front), (where, o.name)
            assert a.metavar == o.metavar and a.required == o.required, (where, o.name)
            assert (a.choices or ()) == tuple(c[0] for c in o.choices), (where, o.name)
            if not o.required:  # no flag: the table's default
                assert parsed[o.name] == ([] if o.repeat else o.default), (where, o.name)
            for text, said in _bad_values(o) if a.type is not None else ():
                with pytest.raises(argparse.ArgumentTypeError, match=re.escape(said)):
                    a.type(text)
                with pytest.raises(argparse.ArgumentTypeError, match=o.flag):
                    a.type(text)
            if a.type is not None and o.runs_with is not None:
                assert a.type(str(o.runs_with)) == o.runs_with, (where, o.name)
    # `sinew bake` and the batch script it runs have one set of take options, --out and --force
    _, bake = parsers["sinew bake"]
    _, batch = parsers["batch script"]
    flags = {o.flag for o in of(BAKE)} | {"--out", "--force"}
    assert [(a.option_strings, a.help, a.default) for a in bake._actions if set(a.option_strings) & flags] == \
        [(a.option_strings, a.help, a.default) for a in batch._actions if set(a.option_strings) & flags]


def test_the_bake_hands_every_option_on_as_the_batch_script_reads_it(parsers):
    """`sinew bake` passes the take's options through to the batch script: what it parsed is
    what the batch script parses, for every option (issue 46: --mode, --noise-scale,
    --heading, --speed and --workers were missing)."""
    _, bake = parsers["sinew bake"]
    _, batch = parsers["batch script"]
    given = ["--repetitions", "3", "--controller", "policy", "--policy", "p.npz", "--mode", "heading",
             "--noise-scale", "0.5", "--heading", "90@5", "--heading=-30@8", "--speed", "1.2",
             "--fatigue-scale", "50", "--F", "0.02", "--R", "0.004", "--r", "3", "--strength", "2.5",
             "--residual", "0.25", "--no-balance", "--workers", "2", "--pace", "0.5", "--no-wait", "--push", "1:0,-120,0:0.2",
             "--keep-calibration", "--seed", "7", "--fps", "24", "--frame-start", "10"]
    assert {a for a in given if a.startswith("--")} >= {o.flag for o in of(BAKE)} - {"--clip", "--balance", "--wait"}
    args = bake.parse_args(REQUIRED["sinew bake"] + given)
    again = batch.parse_args(["--armature", "A", "--out", "o.blend", *command_line(args, BAKE)])
    for o in of(BAKE):
        assert getattr(again, o.name) == getattr(args, o.name), o.name
    # nothing given: nothing handed on but the clip, and the batch script's defaults are the bake's
    args = bake.parse_args(REQUIRED["sinew bake"])
    assert command_line(args, BAKE) == ["--clip", "w.bvh"]
    again = batch.parse_args(["--armature", "A", "--out", "o.blend", "--clip", "w.bvh"])
    assert all(getattr(again, o.name) == getattr(args, o.name) for o in of(BAKE))


_PROPERTY = {float: "FloatProperty", int: "IntProperty", bool: "BoolProperty", str: "StringProperty"}


def test_the_panel_has_the_schemas_defaults_tooltips_and_bounds(addon):
    props = importlib.import_module(f"{addon}.props")
    ns = vars(props)
    panel = {k: eval(v, ns) if isinstance(v, str) else v  # noqa: S307 (the module's own annotations)
             for k, v in props.SINEW_PG_scene.__annotations__.items()}
    for o in of(PANEL):
        p = panel[o.prop_name]
        kind = "EnumProperty" if o.choices else "StringProperty" if o.repeat else _PROPERTY[o.kind]
        assert p.function.__name__ == kind, o.name
        kw = p.keywords
        assert kw["name"] == o.label and kw["description"] == help_text(o, PANEL), o.name
        assert kw["default"] == ("" if o.repeat or (o.kind is str and not o.choices) else o.runs_with), o.name
        assert (kw.get("min"), kw.get("max")) == (o.lo, o.hi), o.name
        if o.choices:
            assert [tuple(i) for i in kw["items"]] == [tuple(c) for c in o.choices], o.name
    # what the panel offers of the command line's options, and only those, by their panel names
    from_table = {o.prop_name for o in TAKE_OPTIONS if PANEL in o.fronts}
    assert from_table <= set(panel)
    # no take option hand-made (the panel's Start frame goes with its Scene start switch)
    assert ({o.name for o in TAKE_OPTIONS} - from_table) & set(panel) == {"frame_start"}


def test_an_option_left_out_runs_with_what_its_help_says(addon):
    """The schema's defaults are the engine's: a flag left out (None) resolves to the value the
    help gives, and prepare_simulation (the panel's and the batch script's entry point) has
    the same keyword defaults."""
    from engine.control.balance import BalanceParams
    from engine.control.goals import DEFAULT_SPEED
    from engine.fatigue import FatigueParams
    from engine.options import DEFAULT_FPS
    from engine.rig import DEFAULT_STRENGTH
    from engine.take import SCENE_FPS, check_balance, check_pace, check_residual, check_strength

    fp = FatigueParams()
    assert (fp.F, fp.R, fp.r, fp.scale) == tuple(OPTIONS[n].default for n in ("F", "R", "r", "fatigue_scale"))
    assert check_strength("tracking") == DEFAULT_STRENGTH == OPTIONS["strength"].runs_with
    assert check_pace("tracking", None) == OPTIONS["pace"].runs_with
    assert check_residual("tracking", None) == OPTIONS["residual"].runs_with
    assert DEFAULT_SPEED == OPTIONS["speed"].runs_with
    assert isinstance(check_balance("tracking", None, None)[0], BalanceParams) is OPTIONS["balance"].runs_with
    assert DEFAULT_FPS in SCENE_FPS
    prepare = importlib.import_module(f"{addon}.prepare")
    keyword = {"heading": "headings", "push": "pushes"}
    sig = inspect.signature(prepare.prepare_simulation).parameters
    for o in of(BAKE):
        if o.name in ("clip", "frame_start"):
            continue
        d = sig[keyword.get(o.name, o.name)].default
        assert (list(d) if o.repeat else d) in (([],) if o.repeat else (o.default, o.runs_with)), o.name


def test_help_texts_name_the_front_ends_own_words():
    """One help text, said in each front end's words: flags on the command line, labels in
    the panel; no placeholder is left over."""
    for o in TAKE_OPTIONS:
        for front in o.fronts:
            text = help_text(o, front)
            assert "{" not in text and "}" not in text and text.strip() == text, (o.name, front)
    assert "--balance" in help_text(OPTIONS["residual"], SIMULATE)
    assert "Balance" in help_text(OPTIONS["residual"], PANEL) and "--" not in help_text(OPTIONS["residual"], PANEL)
    assert "'action'" in help_text(OPTIONS["clip"], BAKE) and "'action'" not in help_text(OPTIONS["clip"], SIMULATE)


def test_a_value_given_in_python_is_checked_as_its_flag_is(addon):
    """prepare_simulation (the panel's and the batch script's entry point) refuses what the
    command line's parser refuses, by the same schema (engine.options.check_value), before
    it looks at the armature."""
    from engine.errors import ParameterError
    from engine.options import check_value

    for name, good, bad in (("repetitions", (1, 3, None), (0, -1, 2.0, True, "2")),
                            ("pace", (0.0, 1, 2.5), (-0.1, float("nan"), "1"))):
        for v in good:
            check_value(name, v)
        for v in bad:
            with pytest.raises(ParameterError, match=OPTIONS[name].flag):
                check_value(name, v)
    prepare = importlib.import_module(f"{addon}.prepare")
    addon_error = importlib.import_module(f"{addon}.engine.errors").ParameterError  # the package's own engine
    with pytest.raises(addon_error, match="--repetitions.*must be >= 1, got 0"):
        prepare.prepare_simulation(None, None, [("walk.bvh", None)], repetitions=0, balance=False, workers=0)
