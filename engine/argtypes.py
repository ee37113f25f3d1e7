"""argparse value types and the parser shared by the `sinew` subcommands and the batch
script: bad values are refused in one line that names the option."""
from __future__ import annotations

import argparse
import math


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
