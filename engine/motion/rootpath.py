"""A clip exported "in place": its root's path rebuilt from its feet.

Game and library exports often take the root's travel out of a walk or run cycle (Mixamo's
"In Place", a root-motion extraction, a treadmill capture): the body steps on the spot and its
planted feet slide backwards under it. A character on muscles moves only by pushing on feet
that stay where they are put, so tracked as it is such a clip asks for a walk that goes
nowhere. Here the root is moved as the feet say it went.

Were a foot planted, it would give the root the velocity

    w_k = v_root - u_k = -(u_k - v_root)                                                    (1)

where u_k is the horizontal velocity of the foot's lowest point (engine.motion.reference.
foot_tracks) and v_root the root's: minus the foot's velocity relative to the root, which an
export that removed the root's travel leaves as it was, smoothed over SMOOTH_S (a capture's
jitter: 0.5 deg on every joint at 120 fps moves a foot ~1 m/s from frame to frame, and the
mode below then locked onto the noise, a walk's rebuilt path 57 cm off its original's on
average; smoothed, 7 cm, and 5 cm without the jitter). Over a short window (WINDOW_S each
side) the planted foot's samples of (1) agree, since a body's velocity changes smoothly, while
a swinging foot's spread over metres per second; the root's velocity is their mode: the
median of the samples of both feet near the floor (within NEAR_FLOOR_M of each foot's own
lowest level), then SHIFTS steps of mean shift with a Gaussian of SPREAD_MPS. Where no foot is
near the floor for a whole window (a run's flight, a jump), the velocity is interpolated
between the windows around it.

A clip is in place when its root travels less than IN_PLACE_SHARE of what its feet give by
(1), counted as net displacement over half-second windows, and the feet give at least
MOVING_MPS. Measured on the MASS clips and the real captures of issue 44's corpus (the walk, run,
kick, dance, balance, pirouette, cartwheel, backflip; the CMU walk and run; the Mixamo
fixture): their roots travel 0.8-1.3x what their feet give; the same clips with the root's
horizontal travel removed 0.00x. Rebuilt, the copies' root paths lie 4-16 cm from the
originals' on average over the clip (the walk's 5, the run's 14, the pirouette's 16), a gap
that is mostly the captures' own foot skate (docs/research/balance.md, thirty-second session).
"""
from __future__ import annotations

import warnings

import numpy as np

SMOOTH_S = 0.03  # s: each foot's velocity relative to the root is smoothed by a Gaussian this wide
WINDOW_S = 0.15  # s each side of a frame whose root velocity the feet's samples give
SPREAD_MPS = 0.3  # m/s: the mean shift's Gaussian (a swinging foot is metres per second away)
SHIFTS = 3
NEAR_FLOOR_M = 0.05  # a foot this far above its own lowest level (5th percentile) is not counted
MIN_SAMPLES = 3  # samples a window needs to give a velocity
TRAVEL_WINDOW_S = 0.5  # s: travel is counted as net displacement over windows this long
IN_PLACE_SHARE = 0.25  # a root travelling less than this share of what its feet give is in place
MOVING_MPS = 0.2  # m/s: feet that give less than this are not stepping anywhere


def feet_velocity(tracks, root_pos: np.ndarray, fps: float) -> np.ndarray:
    """(F-1, 2) the horizontal root velocity the feet give (eq. 1, the module docstring), from
    foot_tracks() of the frames (each foot's lowest corner and where it is a frame later) and
    the root's positions (F, 3) at `fps`."""
    h = np.stack([low[:-1, 2] for low, _ in tracks], 1)  # (N, feet)
    v = np.diff(root_pos[:, :2], axis=0) * fps
    rel = np.stack([(nxt - low[:-1])[:, :2] * fps - v for low, nxt in tracks], 1)  # (N, feet, 2)
    w = -smoothed(rel, SMOOTH_S * fps)  # eq. 1
    near = h < np.percentile(h, 5, axis=0) + NEAR_FLOOR_M
    N, feet = h.shape
    n = max(int(round(WINDOW_S * fps)), 1)
    span = 2 * n + 1
    wp = np.pad(w, ((n, n), (0, 0), (0, 0)))
    mp = np.pad(near, ((n, n), (0, 0)))
    # each frame's window of samples, both feet: (N, feet * span, 2) and its mask
    X = np.lib.stride_tricks.sliding_window_view(wp, span, axis=0).transpose(0, 1, 3, 2).reshape(N, feet * span, 2)
    M = np.lib.stride_tricks.sliding_window_view(mp, span, axis=0).reshape(N, feet * span)
    ok = M.sum(1) >= MIN_SAMPLES
    V = np.full((N, 2), np.nan)
    if not ok.any():
        return np.zeros((N, 2))
    X, M = X[ok], M[ok]
    with warnings.catch_warnings():  # (rows with some samples masked: nanmedian of the rest)
        warnings.simplefilter("ignore", RuntimeWarning)
        c = np.nanmedian(np.where(M[..., None], X, np.nan), axis=1)
    for _ in range(SHIFTS):  # mean shift towards the densest samples: the planted foot's
        g = np.exp(-np.sum((X - c[:, None]) ** 2, axis=-1) / (2 * SPREAD_MPS ** 2)) * M
        c = np.einsum("ns,nsk->nk", g, X) / np.maximum(g.sum(1), 1e-300)[:, None]
    V[ok] = c
    idx = np.flatnonzero(ok)
    return np.stack([np.interp(np.arange(N), idx, V[idx, k]) for k in range(2)], 1)


def smoothed(x: np.ndarray, sigma: float) -> np.ndarray:
    """x (N, ...) smoothed along its first axis by a Gaussian of `sigma` samples, the ends
    held (edge padding)."""
    r = int(np.ceil(3 * sigma))
    if r < 1:
        return x
    k = np.exp(-0.5 * (np.arange(-r, r + 1) / sigma) ** 2)
    xp = np.pad(x, ((r, r),) + ((0, 0),) * (x.ndim - 1), mode="edge")
    return np.lib.stride_tricks.sliding_window_view(xp, 2 * r + 1, axis=0) @ (k / k.sum())


def travel_speed(velocity: np.ndarray, fps: float) -> float:
    """Mean horizontal speed of a path (velocities (N, 2) at `fps`) counted as net displacement
    over TRAVEL_WINDOW_S windows: a pelvis swaying on the spot counts little, a walk its speed."""
    n = max(int(round(TRAVEL_WINDOW_S * fps)), 1)
    k = len(velocity) // n
    if k == 0:
        return float(np.linalg.norm(velocity.sum(0)) / fps / max(len(velocity) / fps, 1e-12))
    net = np.linalg.norm(velocity[:k * n].reshape(k, n, 2).sum(1) / fps, axis=1)
    return float(net.sum() / (k * n / fps))


def rebuilt_root(tracks, root_pos: np.ndarray, fps: float) -> tuple[np.ndarray | None, dict]:
    """The root's positions (F, 3) with the horizontal path the feet give where the clip is in
    place (the module docstring), else None; and what was measured (for the reference's meta:
    root_mps, feet_mps, rebuilt)."""
    if len(root_pos) < 3:
        return None, dict(rebuilt=False, root_mps=0.0, feet_mps=0.0)
    V = feet_velocity(tracks, root_pos, fps)
    root_mps = travel_speed(np.diff(root_pos[:, :2], axis=0) * fps, fps)
    feet_mps = travel_speed(V, fps)
    found = feet_mps >= MOVING_MPS and root_mps < IN_PLACE_SHARE * feet_mps
    meta = dict(rebuilt=bool(found), root_mps=round(root_mps, 3), feet_mps=round(feet_mps, 3))
    if not found:
        return None, meta
    out = root_pos.copy()
    out[1:, :2] = root_pos[0, :2] + np.cumsum(V / fps, axis=0)
    return out, meta


def describe(meta: dict | None) -> str:
    """One line for a rebuilt root path ("" when the clip's own was kept)."""
    if not meta or not meta.get("rebuilt"):
        return ""
    return (f"rebuilt from the feet: the clip's root stays in place ({meta['root_mps']:.2f} m/s) while its feet "
            f"step at {meta['feet_mps']:.2f} m/s (an \"in place\" export); the take travels as the feet say")
