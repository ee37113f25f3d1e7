"""Pushes: a force from outside the character on one body for a while (a shove, a stumble),
and how the character recovered from each (issue 16).

    --push TIME:FX,FY,FZ:SECONDS[:BODY]    e.g. --push 3:120,0,0:0.2 (120 N along +x at 3 s
                                           for 0.2 s, on the pelvis)

The force is world-frame newtons at the body's centre of mass, through the physics
backend's set_external_force (MuJoCo xfrc_applied, ODE addForce), and is kept apart from
the root residual: a take lists its pushes in meta["pushes"], its residual in arrays.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .errors import ParameterError
from .options import Checked

DEFAULT_BODY = "Pelvis"
SYNTAX = "TIME:FX,FY,FZ:SECONDS[:BODY]"
BASELINE_S = 3.0  # the joint error before a push is measured over this long
AFTER_S = 3.0  # ... and after it (the gait should be back within this)
OFFSET_S = 1.0  # the pelvis's offset from its reference path before a push, averaged this long
BACK_DEG = 2.0  # back: the joint error within this of its mean before the push
SMOOTH_S = 0.5  # the joint error is averaged this long (a stride's half) when judging 'back'
HOLD_S = 1.0  # ... and must stay back this long


@dataclass(frozen=True)
class Push:
    """time (s) when it starts, force (N, world frame), seconds it lasts, body it acts on."""

    time: float
    force: tuple[float, float, float]
    seconds: float
    body: str = DEFAULT_BODY

    @property
    def end(self) -> float:
        return self.time + self.seconds

    def as_dict(self) -> dict:
        return dict(asdict(self), force=[float(f) for f in self.force])


def _number(text: str, what: str, spec: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ParameterError("--push", f"{spec!r}: {what} {text!r} is not a number ({SYNTAX})") from None
    if not np.isfinite(v):
        raise ParameterError("--push", f"{spec!r}: {what} must be finite, got {text}")
    return v


def parse_push(spec: str) -> Push:
    """'3:120,0,0:0.2[:Pelvis]' -> Push; ParameterError naming the part that is wrong."""
    parts = str(spec).split(":")
    if len(parts) not in (3, 4):
        raise ParameterError("--push", f"{spec!r}: expected {SYNTAX}, e.g. 3:120,0,0:0.2")
    comps = parts[1].split(",")
    if len(comps) != 3:
        raise ParameterError("--push", f"{spec!r}: the force needs 3 components FX,FY,FZ in N, got {parts[1]!r}")
    force = tuple(_number(c, "force component", spec) for c in comps)
    body = parts[3].strip() if len(parts) == 4 else DEFAULT_BODY
    return Push(_number(parts[0], "start time", spec), force, _number(parts[2], "duration", spec), body or DEFAULT_BODY)


def as_push(p) -> Push:
    """A Push from a Push, a spec string or a dict like Push.as_dict()."""
    if isinstance(p, Push):
        return p
    if isinstance(p, str):
        return parse_push(p)
    try:
        force = tuple(float(x) for x in p["force"])
        return Push(float(p["time"]), force, float(p["seconds"]), str(p.get("body", DEFAULT_BODY)))
    except (TypeError, KeyError, ValueError, AttributeError):
        raise ParameterError("--push", f"{p!r}: expected {SYNTAX} or a dict with time, force (3 numbers), "
                             "seconds and optionally body") from None


class CheckedPushes(Checked):
    """check_pushes's answer: Push objects checked against a rig's bodies and a take's length,
    handed back as they are when checked again (engine.options.Checked)."""


def check_pushes(pushes, rig, seconds: float | None = None) -> CheckedPushes:
    """Pushes (Push, spec strings or dicts like Push.as_dict) checked before any work:
    finite numbers, a start >= 0 and a duration > 0, a body the rig has (the error lists
    them), and the window inside the take's `seconds` when given. Pushes this already
    checked for these bodies and a take as long come back as they are (CheckedPushes)."""
    bodies = tuple(rig.body_names)
    if isinstance(pushes, CheckedPushes) and pushes.holds_for(bodies, seconds):
        return pushes
    out = []
    for p in pushes or []:
        p = as_push(p)
        where = f"push at {p.time:g} s"
        f = np.asarray(p.force, dtype=float)
        if f.shape != (3,) or not np.all(np.isfinite(f)) or not np.isfinite(p.time) or not np.isfinite(p.seconds):
            raise ParameterError("--push", f"{where}: time, force (3 components) and duration must be finite numbers")
        if p.time < 0 or p.seconds <= 0:
            raise ParameterError("--push", f"{where}: needs a start >= 0 s and a duration > 0 s, got a start at "
                                 f"{p.time:g} s lasting {p.seconds:g} s")
        if p.body not in rig.body_names:
            raise ParameterError("--push", f"{where}: no body {p.body!r} in rig '{rig.name}'; bodies: "
                                 + ", ".join(rig.body_names))
        if seconds is not None and p.end > seconds + 1e-9:
            raise ParameterError("--push", f"{where}: ends at {p.end:g} s, after the take's end at {seconds:g} s")
        out.append(Push(float(p.time), tuple(float(x) for x in f), float(p.seconds), p.body))
    return CheckedPushes(out, bodies, seconds)


class PushSchedule:
    """The pushes as physics steps: apply(sim) before each step sets the backend's external
    force to the sum of the pushes active in that step, step k covering [k dt, (k+1) dt)."""

    def __init__(self, rig, pushes: list[Push], dt: float):
        self.pushes = pushes
        self.start = np.array([round(p.time / dt) for p in pushes], dtype=int)
        self.stop = np.array([max(round(p.end / dt), round(p.time / dt) + 1) for p in pushes], dtype=int)
        self.force = np.zeros((len(pushes), rig.num_bodies, 3))
        for i, p in enumerate(pushes):
            self.force[i, rig.body_names.index(p.body)] = p.force
        self._active = np.zeros(len(pushes), bool)

    def apply(self, sim) -> None:
        if not self.pushes:
            return
        active = (self.start <= sim.steps) & (sim.steps < self.stop)
        if np.any(active != self._active):
            self._active = active
            sim.physics.set_external_force(self.force[active].sum(0))


def _window_mean(t: np.ndarray, x: np.ndarray, lo: float, hi: float):
    """Mean of x over the frames with lo <= t < hi (None when there are none)."""
    sel = (t >= lo) & (t < hi)
    if not sel.any():
        return None
    mean = x[sel].mean(0)
    return float(mean) if np.ndim(mean) == 0 else mean


def recovery(take, push: Push) -> dict:
    """How the character came through one push, from the take's recorded frames.

    baseline_err_deg: mean joint error over the BASELINE_S before the push; peak_err_deg:
    the largest from its start to AFTER_S after its end; err_after_deg: the mean over the
    AFTER_S after its end, back_within_3s whether that is within BACK_DEG of the baseline
    (None when the take ends first); recovered_after_s: seconds after the push's end until
    the joint error (averaged over SMOOTH_S) is back within BACK_DEG of the baseline and
    stays there for HOLD_S (None: never in the take); peak_pelvis_cm: the pelvis's largest departure from where it would
    have been, its reference path plus the offset it had from that path over the OFFSET_S
    before the push; fell: whether the take fell at or after the push's start.
    """
    t, err = np.asarray(take.times), np.asarray(take.joint_err_deg, float)
    m = take.meta
    out = dict(push.as_dict(), reached=bool(t[-1] >= push.time))
    if not out["reached"]:
        return dict(out, fell=False, baseline_err_deg=None, peak_err_deg=None, err_after_deg=None,
                    back_within_3s=None, recovered_after_s=None, peak_pelvis_cm=None)
    base = _window_mean(t, err, max(push.time - BASELINE_S, 1e-9), push.time)
    span = (t >= push.time) & (t <= push.end + AFTER_S)
    off = np.asarray(take.q, float)[:, :3] - np.asarray(take.q_ref, float)[:, :3]
    off0 = _window_mean(t, off, max(push.time - OFFSET_S, 0.0), push.time)
    pelvis = None if off0 is None else float(100 * np.linalg.norm(off[span] - off0, axis=1).max())
    after = _window_mean(t, err, push.end, push.end + AFTER_S) if t[-1] >= push.end + AFTER_S - 1e-9 else None
    recovered = None
    if base is not None:
        n = max(int(round(SMOOTH_S * take.fps)), 1)
        h = max(int(round(HOLD_S * take.fps)), 1)
        smooth = np.convolve(err, np.ones(n) / n, mode="valid")  # smooth[i]: mean of err[i:i+n]
        bad = np.concatenate([[0], np.cumsum(smooth > base + BACK_DEG)])
        held = bad[h:] - bad[:-h] == 0 if len(smooth) >= h else np.zeros(0, bool)  # held[i]: smooth[i:i+h] all back
        ok = np.flatnonzero((t[:len(held)] >= push.end) & held)
        recovered = round(float(t[ok[0]] - push.end), 3) if ok.size else None
    stopped = m.get("stopped_at_s")
    return dict(out, fell=bool(m.get("fell") and stopped is not None and stopped >= push.time),
                baseline_err_deg=None if base is None else round(base, 3),
                peak_err_deg=round(float(err[span].max()), 3),
                err_after_deg=None if after is None else round(after, 3),
                back_within_3s=None if after is None or base is None else bool(after <= base + BACK_DEG),
                recovered_after_s=recovered, peak_pelvis_cm=None if pelvis is None else round(pelvis, 2))


def recoveries(take) -> list[dict]:
    """recovery() of every push in the take's meta (an empty list without pushes)."""
    return [recovery(take, as_push(p)) for p in take.meta.get("pushes") or []]


def came_back(r: dict, digits: int = 2) -> str:
    """When the gait came back after a push (recovery()'s recovered_after_s), in words. At 0 s
    the error's SMOOTH_S averages never left BACK_DEG of the baseline, which "back after 0 s"
    beside a peak of several degrees would hide: the peak was a moment's."""
    after = r["recovered_after_s"]
    if after is None:
        return "not back within the take"
    if after == 0:
        return f"its gait never off by more than {BACK_DEG:g} deg in {SMOOTH_S:g} s averages"
    return f"back after {after:.{digits}f} s"


def describe(r: dict) -> str:
    """One line on a push's recovery for the command line."""
    f = ",".join(f"{x:g}" for x in r["force"])
    head = f"{r['time']:g} s: ({f}) N for {r['seconds']:g} s on {r['body']}"
    if not r["reached"]:
        return f"{head}: not reached (the take stopped before)"
    if r["fell"]:
        return f"{head}: FELL (peak joint error {r['peak_err_deg']:.1f} deg)"
    back = came_back(r)
    pelvis = "" if r["peak_pelvis_cm"] is None else f", pelvis pushed {r['peak_pelvis_cm']:.1f} cm off its path"
    base = "" if r["baseline_err_deg"] is None else f" (before: {r['baseline_err_deg']:.1f} deg)"
    return f"{head}: peak joint error {r['peak_err_deg']:.1f} deg{base}{pelvis}, {back}"


def markdown(rows: list[dict]) -> list[str]:
    """report.md lines: a table of the pushes and how the character came through each."""
    if not rows:
        return []

    def cell(v, fmt="{:.1f}"):
        return "-" if v is None else fmt.format(v)

    out = ["", f"Pushes (external forces at the body's centre of mass, kept apart from the residual). 'Back' is "
           f"when the joint error, averaged over {SMOOTH_S:g} s, is within {BACK_DEG:g} deg of its mean over the "
           f"{BASELINE_S:g} s before the push, and stays so for {HOLD_S:g} s; the pelvis departure is from its reference path plus the offset it "
           f"had over the {OFFSET_S:g} s before.", "",
           "| start (s) | force (N) | seconds | body | fell | joint error before / peak / 3 s after (deg) "
           "| pelvis off its path (cm) | back after (s) |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        force = ", ".join(f"{x:g}" for x in r["force"])
        errs = " / ".join(cell(r[k]) for k in ("baseline_err_deg", "peak_err_deg", "err_after_deg"))
        fell = "not reached" if not r["reached"] else ("yes" if r["fell"] else "no")
        out.append(f"| {r['time']:g} | {force} | {r['seconds']:g} | {r['body']} | {fell} | {errs} | "
                   f"{cell(r['peak_pelvis_cm'])} | {cell(r['recovered_after_s'], '{:.2f}')} |")
    return out


def parse_pushes(text: str) -> list[Push]:
    """Pushes written in one text field (the Blender panel): specs separated by spaces or
    semicolons, e.g. '2:0,-120,0:0.2; 6:120,0,0:0.2:Torso'; '' is none."""
    return [parse_push(spec) for spec in str(text or "").replace(";", " ").split()]
