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

import numpy as np

THRESHOLD = 0.1  # legs' mean M_F where slowing starts: a tenth of their motor units fatigued
FLOOR = 0.5  # the slowest playback: half the recorded pace
TAU_S = 1.0  # s: time constant the rate follows its target with


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
        self.rate = 1.0
        self.lag = self.prev_lag = 0.0
        self.segment = 0
        self.rate_sum, self.rate_min, self.updates = 0.0, 1.0, 0

    def update(self, mf_legs: float, segment: int) -> bool:
        """Advance one step: follow eq. (1) and grow the lags by what the rate leaves out;
        when `segment` is a new clip, that clip starts at lag 0 and the one before keeps the
        lag it reached. Returns whether the clip changed."""
        if self.strength > 0:
            self.rate += self.alpha * (target_rate(mf_legs, self.strength) - self.rate)
            self.lag += 1.0 - self.rate
            self.prev_lag += 1.0 - self.rate
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
                    lag_s=round(self.lag * self.dt, 3))
