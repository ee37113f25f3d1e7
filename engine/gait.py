"""Tiredness as a gait: speed, cadence, stride, knee flexion, trunk lean and root height of a
take, early against late (issue 16, deliver 4). Pure functions of the recorded frames.

Foot contacts: a foot (talus and toe boxes) is down in a frame when its lowest box corner
is within CONTACT_HEIGHT_M of the floor and slides slower than CONTACT_SPEED_MPS, or
CONTACT_SPEED_SHARE of the pelvis's speed when that is more (that point on the foot,
followed to the next frame: a heel or a ball rolling on the floor is still;
engine.motion.reference.foot_tracks); gaps shorter than GAP_S are closed, and so is a gap
that is no swing: the foot never rose above CONTACT_HEIGHT_M and its ankle (talus) moved
less than MIN_STEP_M across it (a simulated foot pivoting on the floor slides its lowest
corner fast for a frame or three; a tired foot shuffling forward low is still a step).
Contacts shorter than MIN_CONTACT_S are then dropped (a heel and a toe touching in turn is
one contact). A touchdown (a step) is a contact's first frame.

    forward_speed_mps  horizontal path of the pelvis over the window, sampled every
                       PATH_STEP_S (so turning counts and side-to-side sway hardly does),
                       over its length
    cadence_spm        steps per minute: 60 (touchdowns - 1) / (last - first touchdown time),
                       both feet together
    stride_m           horizontal distance between one foot's successive touchdowns, mean
    knee_range_deg     knee flexion range (95th - 5th percentile of the hinge angle), both knees
    trunk_lean_deg     angle from vertical of the line from the pelvis's centre of mass to the
                       torso's, mean
    root_height_m      the pelvis joint's height, mean
"""
from __future__ import annotations

import numpy as np

from .rig import GROUPS, Rig
from .transforms import quat_to_matrix

CONTACT_HEIGHT_M = 0.03
CONTACT_SPEED_MPS = 0.4
CONTACT_SPEED_SHARE = 0.35  # ... or this share of the pelvis's speed, if more (mocap feet skate in a sprint)
GAP_S = 0.1
MIN_CONTACT_S = 0.05
MIN_STEP_M = 0.15  # an ankle that moved this far between two contacts took a step, however low
PATH_STEP_S = 0.5  # the pelvis's path is followed in steps this long: a turn counts, sway not
EARLY_S = 5.0  # the early window: the take's first seconds
LATE_S = 10.0  # the late window: its last seconds
METRICS = ("forward_speed_mps", "cadence_spm", "stride_m", "knee_range_deg", "trunk_lean_deg", "root_height_m")
PACE = ("forward_speed_mps", "cadence_spm", "stride_m")  # the report names which of these changed most


def moving_mean(x: np.ndarray, n: int) -> np.ndarray:
    """x (N,) averaged over n samples about each one, the ends held (edge padding)."""
    return np.convolve(np.pad(x, (n // 2, n - 1 - n // 2), mode="edge"), np.ones(n) / n, mode="valid")


def _runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (exclusive) indices of the runs of True in a 1-D mask."""
    d = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return np.flatnonzero(d == 1), np.flatnonzero(d == -1)


def trunk_lean_deg(rig: Rig, body_pos: np.ndarray) -> np.ndarray:
    """(N,) angle from vertical of the line from the pelvis's centre of mass to the torso's
    (deg), for body positions (N, B, 3)."""
    trunk = body_pos[:, rig.body_index("Torso")] - body_pos[:, rig.body_index("Pelvis")]
    return np.degrees(np.arctan2(np.linalg.norm(trunk[:, :2], axis=1), np.ascontiguousarray(trunk[:, 2])))  # DESIGN.md 'Same bits'


def _clean(mask: np.ndarray, gap: int, shortest: int, swing=None) -> np.ndarray:
    """Close gaps of False shorter than `gap` frames inside runs, and those that are no
    `swing(start, end)` (when given), then drop runs of True shorter than `shortest` frames."""
    out = mask.copy()
    starts, ends = _runs(~mask)
    for s, e in zip(starts, ends):
        if 0 < s and e < len(mask) and (e - s < gap or (swing is not None and not swing(s, e))):
            out[s:e] = True
    starts, ends = _runs(out)
    for s, e in zip(starts, ends):
        if e - s < shortest:
            out[s:e] = False
    return out


def foot_contacts(rig, times: np.ndarray, body_pos: np.ndarray, body_quat: np.ndarray) -> np.ndarray:
    """(N, 2) contact of the right and left foot per frame (see the module's rule)."""
    from .motion.reference import foot_tracks

    dt = float(np.median(np.diff(times))) if len(times) > 1 else 1.0
    out = np.zeros((len(times), 2), bool)
    if len(times) < 2:
        return out
    pelvis = np.linalg.norm(np.gradient(body_pos[:, rig.body_index("Pelvis"), :2], times, axis=0), axis=1)
    n = min(max(int(round(1.0 / dt)), 1), len(times))  # the pelvis's speed over about a second
    pace = np.convolve(pelvis, np.ones(n) / n, mode="same")
    slow = np.maximum(CONTACT_SPEED_MPS, CONTACT_SPEED_SHARE * pace)
    for k, (low, nxt) in enumerate(foot_tracks(rig, quat_to_matrix(body_quat), body_pos)):
        # the lowest corner's slide to the next frame (the same point on the foot); the last frame repeats
        slide = np.linalg.norm(nxt[:, :2] - low[:-1, :2], axis=1) / np.diff(times)
        down = (low[:, 2] < CONTACT_HEIGHT_M) & (np.concatenate([slide, slide[-1:]]) < slow)
        ankle = body_pos[:, rig.body_index("Talus" + "RL"[k]), :2]

        def swing(s, e, low=low, ankle=ankle):  # frames s..e-1 off the floor, between two contacts
            lifted = (low[s:e, 2] >= CONTACT_HEIGHT_M).any()
            return bool(lifted or np.linalg.norm(ankle[e] - ankle[s - 1]) >= MIN_STEP_M)

        out[:, k] = _clean(down, max(int(round(GAP_S / dt)), 1), max(int(round(MIN_CONTACT_S / dt)), 1), swing)
    return out


def touchdowns(contacts: np.ndarray) -> list[np.ndarray]:
    """Per foot, the frames where a contact starts (a contact already under way at the
    first frame is not a touchdown)."""
    out = []
    for k in range(contacts.shape[1]):
        starts, _ = _runs(contacts[:, k])
        out.append(starts[starts > 0])
    return out


def knee_flexion_deg(rig, q: np.ndarray) -> np.ndarray:
    """(N, 2) hinge angle (deg) of the right and left knee (TibiaR/L) from q."""
    return np.degrees(q[:, [rig.q_start[rig.body_index(f"Tibia{s}")] for s in "RL"]])


def window_metrics(rig, times, body_pos, body_quat, q, lo: float, hi: float, steps=None) -> dict:
    """METRICS over the frames with lo <= t <= hi (None where the window has too little:
    fewer than 2 frames, or fewer than 3 touchdowns for cadence, 2 of one foot for stride).
    steps: touchdowns() of the whole take, when already found."""
    times = np.asarray(times, float)
    sel = np.flatnonzero((times >= lo) & (times <= hi))
    out = dict.fromkeys(METRICS)
    if len(sel) < 2:
        return out
    a, b = sel[0], sel[-1]
    pelvis = body_pos[:, rig.body_index("Pelvis")]
    every = max(int(round(PATH_STEP_S / max(float(np.median(np.diff(times[sel]))), 1e-9))), 1)
    path = np.append(sel[::every], b) if (len(sel) - 1) % every else sel[::every]
    length = np.linalg.norm(np.diff(pelvis[path, :2], axis=0), axis=1).sum()
    out["forward_speed_mps"] = float(length / (times[b] - times[a]))
    if steps is None:
        steps = touchdowns(foot_contacts(rig, times, body_pos, body_quat))
    inside = [s[(s >= a) & (s <= b)] for s in steps]
    both = np.sort(np.concatenate(inside))
    if len(both) >= 3 and times[both[-1]] > times[both[0]]:
        out["cadence_spm"] = float(60.0 * (len(both) - 1) / (times[both[-1]] - times[both[0]]))
    strides = [np.linalg.norm(np.diff(body_pos[s, rig.body_index(f"Talus{side}"), :2], axis=0), axis=1)
               for s, side in zip(inside, "RL")]
    strides = np.concatenate(strides)
    if strides.size:
        out["stride_m"] = float(strides.mean())
    knees = knee_flexion_deg(rig, q[sel])
    out["knee_range_deg"] = float(np.mean(np.percentile(knees, 95, axis=0) - np.percentile(knees, 5, axis=0)))
    out["trunk_lean_deg"] = float(trunk_lean_deg(rig, body_pos[sel]).mean())
    out["root_height_m"] = float(q[sel, 2].mean())
    return out


# Below these early values a relative change says nothing (a character standing still drifts a
# few mm/s and flexes its knees a degree): it is not reported.
MEASURABLE = {"forward_speed_mps": 0.05, "knee_range_deg": 2.0}


def _change(early, late, floor: float = 0.0):
    return None if early is None or late is None or abs(early) <= floor else (late - early) / abs(early)


def gait_summary(rig, times, body_pos, body_quat, q) -> dict:
    """Early (first EARLY_S) and late (last LATE_S) METRICS, their relative change
    (late - early) / |early|, which of PACE changed most and which fell most (None when
    none could be measured, or none fell). Windows overlap in takes shorter than
    EARLY_S + LATE_S (`overlap` says so)."""
    times = np.asarray(times, float)
    t0, t1 = float(times[0]), float(times[-1])
    steps = touchdowns(foot_contacts(rig, times, body_pos, body_quat))
    early = window_metrics(rig, times, body_pos, body_quat, q, t0, t0 + EARLY_S, steps)
    late = window_metrics(rig, times, body_pos, body_quat, q, max(t1 - LATE_S, t0), t1, steps)
    change = {k: _change(early[k], late[k], MEASURABLE.get(k, 0.0)) for k in METRICS}
    pace = [k for k in PACE if change[k] is not None]
    most = max(pace, key=lambda k: abs(change[k])) if pace else None
    fell = min(pace, key=lambda k: change[k]) if pace else None
    fell = fell if fell is not None and change[fell] < 0 else None
    r = lambda d: {k: None if v is None else round(v, 4) for k, v in d.items()}  # noqa: E731
    return dict(early=r(early), late=r(late), change=r(change), most_changed=most, fell_most=fell,
                early_s=[t0, min(t0 + EARLY_S, t1)], late_s=[max(t1 - LATE_S, t0), t1],
                overlap=bool(t1 - t0 < EARLY_S + LATE_S), steps=int(sum(len(s) for s in steps)))


def take_gait(take, rig) -> dict:
    """gait_summary of a Take's recorded frames, with each muscle group's mean M_F over the
    same early and late windows (MF_early / MF_late)."""
    g = gait_summary(rig, take.times, take.body_pos, take.body_quat, take.q)
    mf, t = take.group_mean("MF", rig), np.asarray(take.times)
    for key, (lo, hi) in (("MF_early", g["early_s"]), ("MF_late", g["late_s"])):
        sel = (t >= lo) & (t <= hi)
        g[key] = {name: round(float(mf[sel, i].mean()), 4) for i, name in enumerate(GROUPS)}
    return g


def gait_series(take, rig, window: float = 2.0, every: float = 1.0) -> tuple[np.ndarray, dict]:
    """METRICS over sliding windows of `window` s every `every` s: (window centres, {metric:
    (W,) array with NaN where not measured}), for plots."""
    t = np.asarray(take.times, float)
    steps = touchdowns(foot_contacts(rig, t, take.body_pos, take.body_quat))
    starts = np.arange(t[0], max(t[-1] - window, t[0]) + 1e-9, every)
    rows = [window_metrics(rig, t, take.body_pos, take.body_quat, take.q, s, s + window, steps) for s in starts]
    return starts + window / 2, {k: np.array([np.nan if r[k] is None else r[k] for r in rows]) for k in METRICS}


_LABELS = {"forward_speed_mps": ("speed", "m/s", "{:.2f}"), "cadence_spm": ("cadence", "steps/min", "{:.0f}"),
           "stride_m": ("stride", "m", "{:.2f}"), "knee_range_deg": ("knee flexion range", "deg", "{:.0f}"),
           "trunk_lean_deg": ("trunk lean", "deg", "{:.1f}"), "root_height_m": ("root height", "m", "{:.3f}")}


def _value(k: str, v) -> str:
    return "-" if v is None else _LABELS[k][2].format(v)


def _pct(c) -> str:
    return "-" if c is None else f"{100 * c:+.0f} %"


def describe(g: dict) -> str:
    """One line: early -> late of the pace figures and posture, and which pace figure
    changed most."""
    parts = [f"{_LABELS[k][0]} {_value(k, g['early'][k])} -> {_value(k, g['late'][k])} {_LABELS[k][1]} "
             f"({_pct(g['change'][k])})" for k in METRICS]
    most, fell = g["most_changed"], g.get("fell_most")
    tail = f"; changed most: {_LABELS[most][0]}" if most else ""
    tail += f"; fell most: {_LABELS[fell][0]}" if fell and fell != most else ""
    return (f"first {_span(g['early_s'])} s -> last {_span(g['late_s'])} s: "
            + ", ".join(parts) + tail)


def _span(window) -> str:
    """A window's length in seconds as the report prints it: '5', '7.1' (not 7.06667)."""
    return f"{round(window[1] - window[0], 1):g}"


def markdown(g: dict) -> list[str]:
    """report.md lines: the gait early and late beside M_F by muscle group."""
    early = f"first {_span(g['early_s'])} s"
    late = f"last {_span(g['late_s'])} s"
    out = ["", f"Gait, early ({early}) against late ({late}), from the simulated body ({g['steps']} steps found "
           "from foot contacts)" + ("; the take is short, so the windows overlap" if g["overlap"] else "") + ".", "",
           f"| figure | {early} | {late} | change |", "|---|---|---|---|"]
    for k in METRICS:
        out.append(f"| {_LABELS[k][0]} ({_LABELS[k][1]}) | {_value(k, g['early'][k])} | {_value(k, g['late'][k])} | "
                   f"{_pct(g['change'][k])} |")
    for name in g.get("MF_early", {}):
        e, l = g["MF_early"][name], g["MF_late"][name]
        out.append(f"| M_F, {name.replace('_', ' ')} | {e:.3f} | {l:.3f} | {l - e:+.3f} |")
    most, fell = g["most_changed"], g.get("fell_most")
    if most:
        out += ["", f"Of speed, cadence and stride, the **{_LABELS[most][0]}** changed most ({_pct(g['change'][most])})"
                + (f"; the **{_LABELS[fell][0]}** fell most ({_pct(g['change'][fell])})." if fell and fell != most
                   else ".")]
    return out
