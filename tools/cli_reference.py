#!/usr/bin/env python3
"""Write CLI.md, the command-line reference, from the `sinew` parser itself.

    python tools/cli_reference.py [--check]

Every subcommand's --help, as `sinew` prints it at 100 columns, under a short introduction.
tests/test_cli_reference.py fails when CLI.md differs from what this writes, so the
reference stays true to the code; --check says so without writing.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "CLI.md"

INTRO = """# The `sinew` command line

Written by `tools/cli_reference.py` from the parser itself (tests/test_cli_reference.py fails
when it is stale): each command's `--help` as `sinew` prints it.

One console script, `sinew`, installed with the project. A command imports only what it needs:
only `train` and `export-policy` import torch (they come from the training package, through
the entry points "sinew.commands"), only `bake` runs Blender. Bad input ends a command with one
line naming the file, flag or value at fault and exit status 2; nothing a user gives is
written over (an output that is one of the inputs, or of another kind than the command
writes, is refused). Every command that writes takes `--force`, which replaces an output of
another kind, never an input; its own earlier output a command replaces anyway. With `--json`,
a command prints one JSON object, its summary, as the last line of stdout.
"""


def reference() -> str:
    """CLI.md's text."""
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: the same width everywhere
    sys.path.insert(0, str(ROOT))
    from engine.commands.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    parts = [INTRO, "## sinew\n", "```text", parser.format_help().rstrip(), "```", ""]
    for name, p in sub.choices.items():
        parts += [f"## sinew {name}\n", "```text", p.format_help().rstrip(), "```", ""]
    return "\n".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if CLI.md is stale, writing nothing")
    a = ap.parse_args(argv)
    text = reference()
    if a.check:
        same = OUT.is_file() and OUT.read_text(encoding="utf-8") == text
        print("CLI.md is current" if same else "CLI.md is stale: run python tools/cli_reference.py")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
