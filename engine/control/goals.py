"""What a policy take is asked to do beside tracking a clip (issue 20, MuscleVAE section 5 and
appendix B.3): its mode, the latent noise, and the heading and speed goals of the high-level
policy, with how well the character met each heading goal.

    --mode track       follow the clips through the posterior (default)
    --mode generate    the prior alone: z ~ p(z | s), its sigma x --noise-scale (default 1)
    --mode heading     the high-level policy steers: --heading TURN[@TIME] (degrees to the
                       character's left of the way it faces at the start, from TIME s on;
                       repeatable) at --speed M/S

In generate and heading modes the clips only set the start pose and the take's length; the
joint error the report gives is still measured against them.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..errors import ParameterError
from ..options import Checked

MODES = ("track", "generate", "heading")
HEADING_SYNTAX = "TURN[@TIME]"
DEFAULT_SPEED = 1.0  # m/s: a walk
REACHED_DEG = 15.0  # a heading goal is met once the facing stays within this of it ...
HOLD_S = 1.0  # ... for this long


@dataclass(frozen=True)
class Goal:
    """From `time` (s) on, face `turn_deg` to the left of the start's facing, at `speed` m/s."""

    time: float
    turn_deg: float
    speed: float = DEFAULT_SPEED

    def as_dict(self) -> dict:
        return asdict(self)


def parse_heading(spec: str, speed: float = DEFAULT_SPEED) -> Goal:
    """'90@5' -> Goal(5, 90, speed); '-45' -> from the start. ParameterError naming the part."""
    turn, _, at = str(spec).partition("@")
    try:
        values = [float(turn)] + ([float(at)] if at else [0.0])
    except ValueError:
        raise ParameterError("--heading", f"{spec!r}: expected {HEADING_SYNTAX} in degrees and seconds, "
                             "e.g. 90@5") from None
    if not all(np.isfinite(values)):
        raise ParameterError("--heading", f"{spec!r}: the turn and the time must be finite")
    return Goal(values[1], values[0], speed)


def goals_from_specs(mode: str, specs, speed: float | None = None) -> list[Goal]:
    """The heading goals of --heading specs (a list, or one text field with the specs separated
    by spaces or ';', as the Blender panel has) at `speed` (None: DEFAULT_SPEED); heading mode
    without any goes straight on. A speed outside heading mode is refused."""
    if speed is not None and mode != "heading":
        raise ParameterError("--speed", "is heading mode's target speed: choose the heading mode (policy controller)")
    if isinstance(specs, str):
        specs = specs.replace(";", " ").split()
    speed = DEFAULT_SPEED if speed is None else float(speed)
    goals = [parse_heading(spec, speed) for spec in specs]
    return goals or ([Goal(0.0, 0.0, speed)] if mode == "heading" else [])


def check_heading_policy(policy) -> None:
    """Heading mode needs a policy file (engine.control.policy.PolicyFile) with a high-level policy."""
    if not policy.has_task:
        name = f"{policy.path.name} has" if getattr(policy, "path", None) else "this policy file has"
        raise ParameterError("mode", f"{name} no heading (high-level) policy; train one with "
                             "`sinew train --config heading --out RUN --resume` and export it again")


class CheckedGoals(Checked):
    """check_policy_options's answer: the goals, checked with a controller, mode, noise scale
    and loaded policy against a take's length, handed back as they are when checked again
    (engine.options.Checked)."""

    @staticmethod
    def same(given: tuple, checked: tuple) -> bool:  # the policy by identity (its arrays do not compare)
        return given[:-1] == checked[:-1] and given[-1] is checked[-1]


def check_policy_options(controller: str, mode: str, noise_scale: float | None, goals, seconds: float | None = None,
                         policy=None) -> CheckedGoals:
    """The goals sorted by time, after checking that the options fit together: a mode and
    noise only for the policy controller, goals only in heading mode, each goal's time inside
    the take (when `seconds` is known) and, given the loaded `policy` (a PolicyFile), its
    speed inside what the policy's heading task was trained for and a heading task at all.
    Goals this already checked with these options and policy for a take as long come back as
    they are (CheckedGoals)."""
    given = (controller, mode, noise_scale, policy)
    if isinstance(goals, CheckedGoals) and goals.holds_for(given, seconds):
        return goals
    speed_range = policy.speed_range if policy is not None else None
    goals = sorted((g if isinstance(g, Goal) else Goal(**g) for g in goals), key=lambda g: g.time)
    if mode not in MODES:
        raise ParameterError("--mode", f"{mode!r}: choose one of {', '.join(MODES)}")
    if controller != "policy" and (mode != "track" or noise_scale is not None or goals):
        flag = "--heading" if goals else "--noise-scale" if noise_scale is not None else "--mode"
        raise ParameterError(flag, "only for --controller policy (the tracking controller follows the clips)")
    if noise_scale is not None and not (np.isfinite(noise_scale) and noise_scale >= 0):
        raise ParameterError("--noise-scale", f"{noise_scale!r}: expected a finite value >= 0")
    if mode != "track" and getattr(policy, "action_kind", None) == "offset":
        raise ParameterError("--mode", f"{mode}: this policy offsets a clip's reference (action 'offset', "
                             "engine/control/offset_policy.py); it plays mode 'track' only")
    if goals and mode != "heading":
        raise ParameterError("--heading", f"needs --mode heading (the mode is {mode})")
    for g in goals:
        if not (np.isfinite(g.speed) and g.speed >= 0):
            raise ParameterError("--speed", f"{g.speed!r}: expected a finite speed >= 0 in m/s")
        if speed_range is not None and not speed_range[0] <= g.speed <= speed_range[1]:
            raise ParameterError("--speed", f"{g.speed:g} m/s is outside the {speed_range[0]:g}-{speed_range[1]:g} m/s "
                                 "this policy's heading task was trained for")
        if g.time < 0 or (seconds is not None and g.time >= seconds):
            raise ParameterError("--heading", f"{g.turn_deg:g}@{g.time:g}: the time must be inside the take "
                                 f"(0 to {seconds:g} s)" if seconds is not None else "the time must be >= 0")
    if mode == "heading" and policy is not None:
        check_heading_policy(policy)
    if mode == "heading" and (not goals or goals[0].time > 0):  # straight on until the first goal
        speed = goals[0].speed if goals else DEFAULT_SPEED
        goals = [Goal(0.0, 0.0, speed)] + goals
    return CheckedGoals(goals, given, seconds)


class GoalSchedule:
    """Sets a heading-mode controller's goal as the take reaches each Goal: the turn is taken
    from the facing at the first call (world heading = start facing + turn)."""

    def __init__(self, goals: list[Goal]):
        self.goals, self._next, self.facing0 = list(goals), 0, None

    def apply(self, ctrl, time_s: float, facing: float) -> None:
        if self.facing0 is None:
            self.facing0 = facing
        while self._next < len(self.goals) and self.goals[self._next].time <= time_s + 1e-9:
            g = self.goals[self._next]
            ctrl.set_goal(self.facing0 + np.radians(g.turn_deg), g.speed)
            self._next += 1


def wrap_deg(a):
    return (np.asarray(a) + 180.0) % 360.0 - 180.0


def heading_report(times: np.ndarray, facing: np.ndarray, goals: list[Goal], end_s: float | None = None) -> list[dict]:
    """For each goal, from its time to the next goal's (or the take's end): when the facing
    first came within REACHED_DEG of it and stayed HOLD_S (reached_after_s, None if never),
    and the mean and largest error after that (deg). `facing` in radians, as engine.control.policy.facing_angle."""
    if not goals or len(times) == 0:
        return []
    f0 = float(facing[0])
    end_s = float(times[-1]) if end_s is None else end_s
    rows = []
    for i, g in enumerate(goals):
        stop = goals[i + 1].time if i + 1 < len(goals) else end_s
        sel = (times >= g.time) & (times <= stop)
        t, err = times[sel], np.abs(wrap_deg(np.degrees(facing[sel] - f0) - g.turn_deg))
        reached = None
        for k in np.flatnonzero(err <= REACHED_DEG):
            hold = (t >= t[k]) & (t <= t[k] + HOLD_S)
            if t[k] + HOLD_S <= stop + 1e-9 and (err[hold] <= REACHED_DEG).all():
                reached = k
                break
        row = dict(goal=g.as_dict(), reached_after_s=None, error_deg_mean=None, error_deg_max=None,
                   final_error_deg=round(float(err[-1]), 2) if len(err) else None)
        if reached is not None:
            row.update(reached_after_s=round(float(t[reached] - g.time), 3),
                       error_deg_mean=round(float(err[reached:].mean()), 2),
                       error_deg_max=round(float(err[reached:].max()), 2))
        rows.append(row)
    return rows


def describe(row: dict) -> str:
    g = row["goal"]
    head = f"turn {g['turn_deg']:+g} deg at {g['speed']:g} m/s from {g['time']:g} s: "
    if row["reached_after_s"] is None:
        return head + f"not reached (final error {row['final_error_deg']} deg)"
    return head + (f"reached after {row['reached_after_s']:.1f} s, then within {row['error_deg_mean']:.1f} deg "
                   f"on average ({row['error_deg_max']:.0f} at most)")
