"""The balance planner's settings as command-line flags, one list shared by the benchmarks
that measure a planner against the product's (balance_takes.py, unseen_motion.py). Each flag
defaults to the product's setting (engine.control.balance.BalanceParams, whose comments give
the equations)."""
import argparse
import dataclasses

def zero_or_one(text: str) -> bool:
    """--antithetic's value: 0 or 1, nothing else."""
    if text not in ("0", "1"):
        raise argparse.ArgumentTypeError(f"expected 0 or 1, got {text!r}")
    return text == "1"


# (flag, how its text is read, help); the BalanceParams field is the flag's name with "_"
FLAGS = (
    ("--horizon", int, "the planner's rollout steps"),
    ("--tail", int, "steps the cost stands for beyond the horizon (eq. 3)"),
    ("--candidates", int, "the planner's candidates"),
    ("--extra", int, "plans added where the cheapest turns costly (eq. 4; 0: none)"),
    ("--widen", int, "plans added where the candidates' cheapest costs more than --widen-above x the "
                     "recent median (eq. 6; 0: none)"),
    ("--widen-above", float, "eq. 6's bar, times the recent median"),
    ("--keep-below", float, "eq. 7: keep the last plan, unsearched, where it costs at most this x the recent median"),
    ("--antithetic", zero_or_one, "1: the noisy plans in mirrored pairs; 0: each drawn alone"),
    ("--hips-yaw", float, "the hips' yaw noise, times the other offsets' (0: not sampled)"),
    ("--rescue", int, "plans added, wider, where every plan falls (eq. 9; 0: none)"),
    ("--rescue-sigma", float, "eq. 9's widest noise, rad"),
    ("--feedback", float, "swing-foot placement gain, rad per m/s (engine/control/feedback.py)"),
    ("--halving", lambda s: tuple(int(n) for n in s.split(",") if n.strip()),
     "comma-separated plans kept after each round of successive halving ('' for none)"),
)


def add_planner_flags(ap: argparse.ArgumentParser) -> None:
    """The planner's flags (FLAGS) on a parser, each defaulting to the product's."""
    g = ap.add_argument_group("the balance planner (default: the product's; equations in engine/control/balance.py)")
    for flag, read, text in FLAGS:
        g.add_argument(flag, type=read, default=None, help=text)


def planner_from(args: argparse.Namespace, balance):
    """`balance` (a BalanceParams) with the flags given on the command line in place."""
    fields = (flag[2:].replace("-", "_") for flag, _, _ in FLAGS)
    given = {k: getattr(args, k) for k in fields}
    return dataclasses.replace(balance, **{k: v for k, v in given.items() if v is not None})


def search_line(b: dict) -> str:
    """Where a take's planner searched beyond its candidates (its meta's "balance")."""
    widened = f"{b['widen']} more at {b['widened']} costly decisions (eq. 6), " if b.get("widen") else ""
    return (f"{widened}more at {b['searched_more']} hard decisions (eq. 4), wider at {b['rescues']} where every "
            f"plan fell (eq. 9; one that stays up found at {b['rescued']})")
