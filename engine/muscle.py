"""Hill-type muscle (MuscleVAE eq. 1, 21-25; MASS appendix) and muscle-space PD control (eq. 4, 5, 11).

Pure functions on arrays batched over muscles. Each takes `xp`, the array module (numpy
by default; training passes torch), and uses only operations both provide, so the engine
and the training code share one definition of every equation.
"""
from __future__ import annotations

import math

import numpy as np

V_MAX = 10.0  # maximum shortening speed, normalised lengths per second (eq. 25)
PE_SCALE = math.exp(4.0) - 1.0
LBAR_GUARD = 10.0  # f_PE's exponent is capped here so that a broken pose cannot overflow
FLFV_FLOOR = 1e-6  # f_l * f_v below this counts as "cannot produce active force" (eq. 5)


def normalized_length(l, l_rest, lt, lm):
    """l_bar = (l / l_ori - l_Tnorm) / l_MTnorm (eq. 23)."""
    return (l / l_rest - lt) / lm


def normalized_velocity(l_dot, l_rest, lm):
    """d l_bar / dt from the physical rate dl/dt in m/s (eq. 24, per second, not per step)."""
    return l_dot / (l_rest * lm)


def force_length(lbar, xp=np):
    """Active force-length curve f_l = exp(-(l_bar - 1)^2 / 0.5) (eq. 25)."""
    return xp.exp(-((lbar - 1.0) ** 2) / 0.5)


def force_velocity(v, xp=np):
    """Active force-velocity curve f_v(v), v = d l_bar/dt (eq. 25, both pieces equal 1 at v = 0).

    Lengthening (v > 0): 1.5 + 0.5 (v - 10) / (37.8 v + 10), rising towards 1.513.
    Shortening (v <= 0): (-10 - v) / (-10 + 5 v), reaching 0 at v = -10 and held at 0 beyond.
    """
    vp = xp.where(v > 0, v, 0.0 * v)
    vn = xp.where(v > 0, 0.0 * v, v)
    lengthening = 1.5 + 0.5 * (vp - V_MAX) / (37.8 * vp + V_MAX)
    shortening = xp.clip((-V_MAX - vn) / (-V_MAX + 5.0 * vn), 0.0, None)
    return xp.where(v > 0, lengthening, shortening)


def force_passive(lbar, xp=np):
    """Passive elastic force f_PE = (exp(4 (l_bar - 1) / 0.6) - 1) / (e^4 - 1) for l_bar >= 1, else 0."""
    stretch = xp.clip(lbar, 1.0, LBAR_GUARD) - 1.0
    return (xp.exp(4.0 * stretch / 0.6) - 1.0) / PE_SCALE


def active_and_passive(lbar, vbar, xp=np):
    """The two Hill factors every force needs: f_l(l_bar) f_v(v) and f_PE(l_bar) (eq. 25)."""
    return force_length(lbar, xp) * force_velocity(vbar, xp), force_passive(lbar, xp)


def force_from_factors(alpha, f0, flfv, fpe):
    """f_m = f0 (alpha f_l f_v + f_PE) in newtons (eq. 22), from active_and_passive()."""
    return f0 * (alpha * flfv + fpe)


def activation_from_factors(f, f0, flfv, fpe, xp=np):
    """The activation that produces force f, inverting eq. 22: (f / f0 - f_PE) / (f_l f_v) (eq. 5).

    Where f_l f_v vanishes (too fast shortening) no activation suffices; the result is then
    large and positive for any force the passive part does not cover, and the fatigue
    bounds clip it (eq. 36).
    """
    return (f / f0 - fpe) / xp.clip(flfv, FLFV_FLOOR, None)


def muscle_force(alpha, lbar, vbar, f0, xp=np):
    """f_m = f0 (alpha f_l(l_bar) f_v(v) + f_PE(l_bar)) in newtons (eq. 22)."""
    return force_from_factors(alpha, f0, *active_and_passive(lbar, vbar, xp))


def target_length(action, l_tpose):
    """Target muscle length l~ = (a + 1) l_tpose (eq. 11)."""
    return (action + 1.0) * l_tpose


def pd_force(l, l_dot, l_target, kp, kd, xp=np):
    """Muscle-space PD force f_pd = max(0, k_p (l - l~) + k_d dl/dt) (eq. 4, sign as DESIGN.md).

    A muscle longer than its target, or lengthening, pulls; eq. 4 as printed has the sign
    turned round and would pull hardest on a muscle that is already too short.
    """
    return xp.clip(kp * (l - l_target) + kd * l_dot, 0.0, None)


def pd_action_for_force(f, l, l_dot, l_tpose, kp, kd):
    """The PD action a whose force (eq. 4) at length l and rate dl/dt is f > 0: eq. 4 and 11
    solved for a (a muscle-space PD target that asks for a given force, e.g. an expert's)."""
    return (l - (f - kd * l_dot) / kp) / l_tpose - 1.0


def pd_activation(f_pd, f0, lbar, vbar, xp=np):
    """Activation that produces the PD force: alpha_pd = (f_pd / f0 - f_PE) / (f_l f_v) (eq. 5)."""
    return activation_from_factors(f_pd, f0, *active_and_passive(lbar, vbar, xp), xp)
