"""Why a take fell: which way, when it began, and what the take shows led to it (issue 16:
"if the character falls the take keeps everything up to the fall and the report says when
and why").

A take ends in a fall when the pelvis joint is down (engine.take.is_down: below
FALL_ROOT_HEIGHT, and FALL_DROP_M below the reference's). Read
from the take's own frames:

- which way: where the head lies from the feet at the last frame, in the heading frame the
  pelvis had when the fall began (its facing; x the character's left at rest), one of eight
  directions;
- when it began (the onset): after the last frame at which the character was still up - the
  pelvis within ONSET_DROP_M of the reference's height and the trunk's lean (the gait
  report's) within ONSET_TILT_DEG of its median over the take;
- what led to it, every one of these the take shows: a push that ended less than PUSH_S
  before the onset (its direction in the facing it found); tired legs (their f0-weighted
  mean M_F, the report's figure, at least TIRED_MF at the onset); the clip lost before the onset (the joint error over the second
  before it at least OFF_FACTOR times its mean before, and OFF_DEG more); the clip's path
  left (the root at least PATH_M off it at the onset, and PATH_FACTOR times its mean before),
  with where the body ran on through a stop or a turn on the spot the clip made (the clip's
  root below STOP_MPS while the body's was RUN_ON_MPS faster); a clip beyond the body
  (engine.control.demands); nothing to balance it (the tracking controller alone with no
  residual). When none shows, the cause is said to be the balance itself. A policy that
  generates its own motion or steers by heading has no clip to lose or path to leave.
"""
from __future__ import annotations

import numpy as np

from .control.policy import heading_cs
from .gait import moving_mean, trunk_lean_deg
from .rig import GROUPS, Rig
from .transforms import quat_to_matrix

ONSET_DROP_M = 0.10  # m: the pelvis this far below the reference's height is going down
ONSET_TILT_DEG = 20.0  # deg: the trunk leaning this far past its median is going down
PUSH_S = 2.0  # s: a push that ended this long before the onset is named
TIRED_MF = 0.2  # legs' mean M_F from which they are named: a fifth of their motor units fatigued
OFF_S = 1.0  # s: the joint error before the onset is averaged this long ...
OFF_FACTOR, OFF_DEG = 1.5, 3.0  # ... and is 'off the clip' at this many times its mean before, and this much more
PATH_M, PATH_FACTOR = 0.5, 3.0  # m: the root this far off the clip's path at the onset, and this many times its mean before
STOP_MPS, RUN_ON_MPS = 0.3, 0.5  # m/s: the clip's root this slow (a stop, a turn) while the body's is this much faster
SPEED_S = 0.2  # s: root speeds are averaged over this long

# the eight directions, counter-clockwise from forward (45 degree sectors)
DIRECTIONS = ("forward", "forward and to its left", "to its left", "backward and to its left", "backward",
              "backward and to its right", "to its right", "forward and to its right")


def heading_frame(pelvis_quat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(forward, left) unit vectors in the ground plane of a pelvis orientation (w, x, y, z):
    the heading a policy sees (engine.control.policy.heading_cs: the pelvis's x axis, the
    character's left, +x at rest) and forward 90 degrees clockwise from it (-y at rest)."""
    c, s = heading_cs(quat_to_matrix(np.asarray(pelvis_quat, float))[None])
    return np.array([s, -c]), np.array([c, s])


def direction(v: np.ndarray, forward: np.ndarray, left: np.ndarray) -> str:
    """The name of a ground-plane direction v in a heading frame (DIRECTIONS)."""
    angle = np.degrees(np.arctan2(float(v @ left), float(v @ forward)))
    return DIRECTIONS[int(np.round(angle / 45.0)) % 8]


def onset_index(height: np.ndarray, height_ref: np.ndarray, lean_deg: np.ndarray, end: int) -> int:
    """The first frame of the fall ending at frame `end`: the one after the last frame at which
    the pelvis was within ONSET_DROP_M of the reference's height and the trunk's lean within
    ONSET_TILT_DEG of its median before (0 when it never was)."""
    up = (height[:end + 1] >= height_ref[:end + 1] - ONSET_DROP_M) & \
         (lean_deg[:end + 1] <= np.median(lean_deg[:end + 1]) + ONSET_TILT_DEG)
    ups = np.flatnonzero(up[:end])
    return int(ups[-1] + 1) if ups.size else 0


def diagnose(take, rig: Rig) -> dict | None:
    """Why the take fell (module docstring), or None when it did not: time_s, onset_s,
    direction, the legs' M_F at the onset and at the start, and causes (phrases, in the
    order above)."""
    from .control.demands import demanding, figures
    from .push import as_push

    m = take.meta
    if not m.get("fell"):
        return None
    t = np.asarray(take.times, float)
    end = len(t) - 1
    b = {name: rig.body_index(name) for name in ("Pelvis", "Head", "TalusR", "TalusL")}
    lean = trunk_lean_deg(rig, np.asarray(take.body_pos, float))
    i0 = onset_index(np.asarray(take.q, float)[:, 2], np.asarray(take.q_ref, float)[:, 2], lean, end)
    onset = float(t[i0])
    forward, left = heading_frame(take.body_quat[i0, b["Pelvis"]])
    feet = 0.5 * (take.body_pos[end, b["TalusR"], :2] + take.body_pos[end, b["TalusL"], :2])
    way = direction(take.body_pos[end, b["Head"], :2] - feet, forward, left)
    legs = take.group_mean("MF", rig)[:, [GROUPS.index("right_leg"), GROUPS.index("left_leg")]].mean(1)

    causes = []
    for p in m.get("pushes") or []:
        push = as_push(p)
        if push.time <= t[end] and push.end >= onset - PUSH_S:
            f = np.asarray(push.force, float)
            at = int(np.searchsorted(t, push.time).clip(0, end))  # in the facing the push found
            toward = direction(f[:2], *heading_frame(take.body_quat[at, b["Pelvis"]])) \
                if np.linalg.norm(f[:2]) > 1e-9 else "up or down"
            causes.append(f"a push of {np.linalg.norm(f):.0f} N {toward} at {push.time:g} s "
                          f"({push.seconds:g} s on {push.body})")
    if legs[i0] >= TIRED_MF:
        causes.append(f"tired legs (M_F {legs[i0]:.2f} at the onset, {legs[0]:.2f} at the start)")
    follows = (m.get("policy") or {}).get("mode", "track") == "track"  # generate, heading: no clip to keep to
    err = np.asarray(take.joint_err_deg, float)
    before, last = (t > 0) & (t < onset - OFF_S), (t >= onset - OFF_S) & (t <= onset)
    if follows and before.any() and last.any():
        e0, e1 = float(err[before].mean()), float(err[last].mean())
        if e1 >= OFF_FACTOR * e0 and e1 >= e0 + OFF_DEG:
            causes.append(f"the clip lost before it (joint error {e1:.1f} deg in the second before the onset, "
                          f"{e0:.1f} on average until then)")
    left = follows and path_left(t, np.asarray(take.q, float)[:, :2], np.asarray(take.q_ref, float)[:, :2], i0)
    if left:
        causes.append(left)
    seg = int(take.segment[i0]) if len(take.segment) else 0
    demands = m.get("demands") or []
    if seg < len(demands) and demanding(demands[seg]):
        causes.append(f"a clip beyond the body ({figures(demands[seg])})")
    tracking = m.get("tracking") or {}
    if (m.get("controller") == "tracking" and not m.get("balance") and not m.get("stand")
            and not tracking.get("residual")):
        causes.append("nothing to balance it (the tracking controller alone with no residual: --balance plans it)")
    if not causes:
        causes.append("its balance lost with none of a push, tired legs, a lost clip or a clip beyond the body "
                      "in sight" + (" (the planner's sampling: another --seed may hold)" if m.get("balance") else ""))
    return dict(time_s=round(float(m.get("stopped_at_s") or t[end]), 3), onset_s=round(onset, 3), direction=way,
                legs_MF_onset=round(float(legs[i0]), 4), legs_MF_start=round(float(legs[0]), 4), causes=causes)


def root_speed(t: np.ndarray, xy: np.ndarray) -> np.ndarray:
    """(N,) horizontal speed of a root path xy (N, 2) at times t, averaged over SPEED_S."""
    if len(t) < 2:
        return np.zeros(len(t))
    v = np.linalg.norm(np.gradient(xy, t, axis=0), axis=1)
    k = max(int(round(SPEED_S / float(np.median(np.diff(t))))), 1)
    return moving_mean(v, k)


def path_left(t: np.ndarray, xy: np.ndarray, xy_ref: np.ndarray, i0: int) -> str | None:
    """'off the clip's path ...' when the root was PATH_M off the clip's at frame i0 and
    PATH_FACTOR times its mean before, naming the last stop or turn on the spot of the clip's
    that the body ran on through while still on its path (module docstring); None when the
    take kept to the path."""
    off = np.linalg.norm(xy - xy_ref, axis=1)
    v, v_ref = root_speed(t, xy), root_speed(t, xy_ref)
    ran = (v_ref[:i0] < STOP_MPS) & (v[:i0] > v_ref[:i0] + RUN_ON_MPS)
    starts = np.flatnonzero(ran & ~np.concatenate([[False], ran[:-1]]) & (off[:i0] < PATH_M))
    start = int(starts[-1]) if starts.size else i0  # the path before it is the path the take kept
    before = float(off[:max(start, 1)].mean())
    if off[i0] < PATH_M or off[i0] < PATH_FACTOR * before:
        return None
    text = f"off the clip's path ({off[i0]:.1f} m at the onset, {before:.1f} m on average before)"
    if starts.size:
        end = start + int(np.argmin(ran[start:])) if not ran[start:].all() else i0  # the run-on's last frame + 1
        j = start + int(np.argmin(v_ref[start:end]))  # where the clip was slowest
        text += (f": it ran on at {v[j]:.1f} m/s through the clip's stop or turn at {t[j]:.2f} s "
                 f"(the clip's root at {v_ref[j]:.1f} m/s)")
    return text


def describe(d: dict) -> str:
    """A fall's diagnosis in one line: 'at 3.12 s, forward, going down from 2.61 s: a push of
    ...; tired legs (...)'."""
    return f"at {d['time_s']:.2f} s, {d['direction']}, going down from {d['onset_s']:.2f} s: " + "; ".join(d["causes"])
