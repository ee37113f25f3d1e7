"""The pace governor: tired legs play the reference slower (issue 16, "fatigue becomes a gait").

A tracking take follows its clips at their recorded pace unless the legs tire. Each physics
step the governor reads the legs' mean fatigued fraction M_F (3CC-r, engine.fatigue) and sets
the playback rate of the reference

    rate* = clip(1 - strength (M_F,legs - THRESHOLD), FLOOR, 1)                        (1)

which the rate follows with time constant TAU_S (a first-order lag, so the gait slows over
a few steps, not in one). The reference is then sampled `lag` steps behind the take's clock,
lag growing by (1 - rate) a step; its velocities scale by rate and its accelerations by
rate^2 (the chain rule for q(t - lag(t)) with a slowly changing rate). Slower playback of a
walk is a lower cadence at the recorded stride: the speed, cadence and the effort they cost
fall together, and they come back as the legs recover (the rate follows (1) up again).

The clip also waits for a body that fell behind it in time, at its turns and stops above all
(`sync_rate`, the tracker's `sync`): every SYNC_EVERY steps the body's root is compared with
the clip's root now and every SYNC_EVERY steps earlier, up to SYNC_WINDOW_S (position and
heading, the heading at SYNC_YAW_M metres a radian), d_0, d_1, ...; the sync factor, which
multiplies the rate, follows (time constant SYNC_TAU_S)

    sync* = FLOOR  if  min_k d_k < d_0 - SYNC_GAIN_M,  else 1                             (2)

so the clip plays at half pace while the body is where the clip was, clearly, a moment ago
(half of the fatigue governor's pace: the two together may play a tired clip below FLOOR for
the moments it waits).
No clip loses its end by waiting or tiring: a clip on its own clock (at its own length, or
played once) that the pace held back runs on at its segment's end until it has played its
last frame, the clips after it and the take's end moving on as much (TrackingController's
take_steps, MotionPlan.delay; the report says how long the take ran on). A looped clip
(Segment.repeats) ends on the take's clock, after fewer loops. (Before the take could run on,
only looped clips waited: a kick 1.9 s long waited 0.15-0.57 s on three draws, up to a third
of it cut off.)
Measured on a turn in place (the Mixamo fixture: walk a metre, turn 180 deg, walk back): the
body reaches the apex too fast, turns ~0.3 s late and leaves the turn 0.4-0.6 m behind the
clip, a lag the balance planner's path term makes up only by the next turn; a clip that
waits turns with the body (10 s, four draws: 33 -> 12 cm from the clip, 5.1 -> 4.2 deg;
docs/research/balance.md, thirty-sixth session). Gentler versions (waiting only for lags
over 0.1 s, or 5-10 cm nearer, in proportion) helped less (16 and 21 cm).

Each clip of a chain keeps its own lag: a clip starts on its own clock, matched again to the
phase the slowed clip before it had got to (MotionPlan.rebase), and the clip it cross-fades
from plays on at the same rate behind its own clock (prev_lag) until the fade is over.

Measured on the walk at fatigue scale 50 over 60 s, with the root residual at its default:
without the governor the pelvis keeps the reference's 1.24 m/s to the end (legs' M_F 0.62,
residual 0.55 body weights); with strength 1 it slows from 1.15 to 0.63 m/s over the take
(residual 0.37 body weights). At fatigue scale 1 the legs' M_F stays near 0.01 over a minute's
walk, far below THRESHOLD, so ordinary takes play at their recorded pace.
"""
from __future__ import annotations

import math

import numpy as np

THRESHOLD = 0.1  # legs' mean M_F where slowing starts: a tenth of their motor units fatigued
FLOOR = 0.5  # the slowest playback: half the recorded pace
TAU_S = 1.0  # s: time constant the rate follows its target with
SYNC_EVERY = 12  # physics steps between the sync's looks at where the body is (0.1 s)
SYNC_WINDOW_S = 0.6  # s: how far back the clip's root is searched for the body's
SYNC_YAW_M = 0.3  # m a radian of heading error, in the body's distance from the clip's root
SYNC_GAIN_M = 0.03  # m: the clip waits only where it was this much nearer the body earlier
SYNC_TAU_S = 0.1  # s: time constant the sync factor follows eq. (2) with (no jumps in the reference's speed)


def heading(quat) -> float:
    """Yaw (rad) of a root orientation (w, x, y, z): where its x axis points in the ground
    plane (in floats: it runs every SYNC_EVERY steps of every rollout)."""
    w, x, y, z = (float(v) for v in quat)
    return math.atan2(2.0 * (x * y + w * z), 1.0 - 2.0 * (y * y + z * z))


def sync_rate(gaps: list[float]) -> float:
    """Eq. (2) from the body's distances to the clip's root `gaps` (m), gaps[k] k SYNC_EVERY
    steps back (gaps[0]: now): FLOOR where an earlier clip time was SYNC_GAIN_M nearer, else 1."""
    return FLOOR if min(gaps) < gaps[0] - SYNC_GAIN_M else 1.0


def target_rate(mf_legs: float, strength: float) -> float:
    """Eq. (1): the playback rate the governor heads for at the legs' mean M_F."""
    return float(np.clip(1.0 - strength * (mf_legs - THRESHOLD), FLOOR, 1.0))


class Pace:
    """Playback rate and lag of a take's reference, one update per physics step.

    `lag` is in physics steps, counted from the start of the current clip (segment);
    `prev_lag` is the previous clip's lag, which goes on growing at the same rate while the
    two cross-fade."""

    def __init__(self, strength: float, dt: float):
        self.strength = float(strength)
        self.dt = float(dt)
        self.alpha = self.dt / TAU_S
        self.rate = 1.0  # the playback rate: the fatigue's (eq. 1, lagged) times the sync's (eq. 2)
        self.fatigue_rate = 1.0
        self.sync = self.sync_target = 1.0
        self.sync_alpha = self.dt / SYNC_TAU_S
        self.waited = 0.0  # steps of the clip's clock the sync held back
        self.lag = self.prev_lag = 0.0
        self.segment = 0
        self.rate_sum, self.rate_min, self.updates = 0.0, 1.0, 0

    def update(self, mf_legs: float, segment: int) -> bool:
        """Advance one step: follow eq. (1) and grow the lags by what the rate leaves out;
        when `segment` is a new clip, that clip starts at lag 0 and the one before keeps the
        lag it reached. Returns whether the clip changed."""
        if self.strength > 0:
            self.fatigue_rate += self.alpha * (target_rate(mf_legs, self.strength) - self.fatigue_rate)
        if self.sync != self.sync_target:
            self.sync += self.sync_alpha * (self.sync_target - self.sync)
            if abs(self.sync - self.sync_target) < 1e-6:
                self.sync = self.sync_target
        if self.strength > 0 or self.sync != 1.0:
            self.rate = self.fatigue_rate * self.sync
            self.lag += 1.0 - self.rate
            self.prev_lag += 1.0 - self.rate
            self.waited += 1.0 - self.sync
        switched = segment != self.segment
        if switched:
            self.segment, self.prev_lag, self.lag = segment, self.lag, 0.0
        self.rate_sum += self.rate
        self.rate_min = min(self.rate_min, self.rate)
        self.updates += 1
        return switched

    def summary(self) -> dict:
        """What the take's metadata keeps: the strength, the final, lowest and mean rates and
        how far the last clip ended behind its own clock (s)."""
        return dict(strength=self.strength, final_rate=round(self.rate, 4), min_rate=round(self.rate_min, 4),
                    mean_rate=round(self.rate_sum / self.updates, 4) if self.updates else 1.0,
                    lag_s=round(self.lag * self.dt, 3), waited_s=round(self.waited * self.dt, 3))
