"""3CC-r muscle fatigue (Looft et al. 2018) as MuscleVAE uses it (eq. 2-3, 26-28, 32-37).

Each muscle is split into Activated (M_A), Resting (M_R) and Fatigued (M_F) fractions that
always sum to 1. M_A is the muscle's activation. A step either follows a target load u
(eq. 28) or accepts the activation a controller asks for, clipped to what fatigue allows
(eq. 34-36); both then advance the compartments by forward Euler (eq. 26, 27, 37).

The math is pure functions with an `xp` array-module argument (numpy or torch), shared by
the engine and training.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import ParameterError


@dataclass(frozen=True)
class FatigueParams:
    """3CC-r coefficients (per second). Defaults: MuscleVAE appendix C.1, slow-twitch muscles.

    `scale` multiplies F and R (the run-walk experiment of MuscleVAE sec. 5.2 uses 50);
    scale 0 switches fatigue and recovery off.
    """

    F: float = 0.01
    R: float = 0.002
    r: float = 2.0
    LD: float = 50.0
    LR: float = 50.0
    scale: float = 1.0

    @classmethod
    def arm_hold(cls, scale: float = 1.0) -> "FatigueParams":
        """The arm-hold experiment's coefficients (appendix C.1): F = 0.1, F/R = 20."""
        return cls(F=0.1, R=0.005, scale=scale)

    @property
    def F_eff(self) -> float:
        return self.F * self.scale

    @property
    def R_eff(self) -> float:
        return self.R * self.scale

    def validate(self, dt: float) -> "FatigueParams":
        """Refuse NaN, negative, or step-unstable values, naming the parameter."""
        for name in ("F", "R", "r", "LD", "LR", "scale"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ParameterError(name, f"must be a finite number, got {v!r}")
            if v < 0:
                raise ParameterError(name, f"must be >= 0, got {v}")
        if not (math.isfinite(dt) and dt > 0):
            raise ParameterError("dt", f"must be a positive time step, got {dt!r}")
        # Forward Euler keeps every compartment in [0, 1] only while each rate * dt <= 1.
        for name, rate in (("F", self.F_eff), ("R", self.R_eff * max(self.r, 1.0)),
                           ("LD", self.LD), ("LR", self.LR + self.F_eff)):
            if rate * dt > 1.0:
                raise ParameterError(
                    name, f"rate {rate:g}/s times the step {dt:g} s exceeds 1: the update "
                    "would leave [0, 1]; lower it or the fatigue scale")
        return self


@dataclass
class FatigueState:
    """Compartment fractions per muscle; arrays of one shape."""

    MA: np.ndarray
    MR: np.ndarray
    MF: np.ndarray

    @classmethod
    def fresh(cls, n: int) -> "FatigueState":
        """Unfatigued and relaxed: M_R = 1."""
        return cls(np.zeros(n), np.ones(n), np.zeros(n))

    def copy(self) -> "FatigueState":
        return FatigueState(self.MA.copy(), self.MR.copy(), self.MF.copy())


# ---- the equations --------------------------------------------------------------------
def activation_bounds(MA, MR, dt, F, LD, LR, xp=np):
    """Reachable next activation (eq. 32-35), K = 1 - dt F:

    alpha_lb = max(0, K alpha - dt L_R alpha),  alpha_ub = min(1, K alpha + dt L_D M_R).
    """
    K = 1.0 - dt * F
    lb = xp.clip(K * MA - dt * LR * MA, 0.0, None)
    ub = xp.clip(K * MA + dt * LD * MR, None, 1.0)
    return lb, ub


def clip_activation(alpha_pd, lb, ub, xp=np):
    """alpha* = clip(alpha_pd, alpha_lb, alpha_ub) (eq. 36)."""
    return xp.clip(alpha_pd, lb, ub)


def transfer_rate(alpha_star, MA, dt, F):
    """C(u*) that produces alpha* from alpha, by inverting eq. 32 (eq. 37)."""
    return (alpha_star - (1.0 - dt * F) * MA) / dt


def target_load_rate(u, MA, MR, LD, LR, xp=np):
    """C(u), the Resting -> Activated transfer rate for a target load u (eq. 28)."""
    gap = u - MA
    develop = LD * xp.where(MR > gap, gap, MR)
    return xp.where(MA >= u, LR * gap, develop)


def recovery_coefficient(R, r, demanding, xp=np):
    """R_r = R while the load exceeds the activation (M_A < u), r R otherwise (eq. 27)."""
    return xp.where(demanding, R + 0.0 * r, r * R)


def compartment_step(MA, MR, MF, C, demanding, dt, F, R, r, xp=np):
    """Forward Euler of eq. 26: the new (M_A, M_R, M_F). Their sum is conserved exactly.

    `demanding` marks muscles whose target load exceeds their activation (eq. 27).
    M_F's rate uses the current activation (MuscleVAE appendix A.3.1).
    """
    Rr = recovery_coefficient(R, r, demanding, xp)
    MA_new = MA + dt * (C - F * MA)
    MR_new = MR + dt * (-C + Rr * MF)
    MF_new = MF + dt * (F * MA - Rr * MF)
    return MA_new, MR_new, MF_new


# ---- one step, in the two ways a caller drives it ----------------------------------------
def step_with_activation(state: FatigueState, alpha_pd, dt: float, p: FatigueParams, xp=np):
    """Clip the wanted activation to the 3CC-r bounds and advance the state (eq. 34-37, 26).

    Returns (alpha*, new state). The muscle is 'demanding' when it asked for more than it
    got or its activation is being raised (C > 0): both mean the target load exceeds M_A.
    """
    F, R = p.F_eff, p.R_eff
    lb, ub = activation_bounds(state.MA, state.MR, dt, F, p.LD, p.LR, xp)
    alpha = clip_activation(alpha_pd, lb, ub, xp)
    C = transfer_rate(alpha, state.MA, dt, F)
    demanding = (C > 0) | (alpha_pd > ub)
    MA, MR, MF = compartment_step(state.MA, state.MR, state.MF, C, demanding, dt, F, R, p.r, xp)
    return alpha, FatigueState(alpha, MR, MF)


def step_with_load(state: FatigueState, u, dt: float, p: FatigueParams) -> FatigueState:
    """Advance the compartments under a target load u in [0, 1] (eq. 26-28)."""
    F, R = p.F_eff, p.R_eff
    C = target_load_rate(u, state.MA, state.MR, p.LD, p.LR)
    demanding = state.MA < u
    return FatigueState(*compartment_step(state.MA, state.MR, state.MF, C, demanding, dt, F, R, p.r))


def simulate_load(u_of_t: np.ndarray, dt: float, p: FatigueParams, n: int = 1):
    """Response of `n` identical fresh muscles to a target-load time series (one value per step).

    Returns arrays (T+1, n) of M_A, M_R, M_F including the initial state.
    """
    p.validate(dt)
    s = FatigueState.fresh(n)
    out = np.empty((3, len(u_of_t) + 1, n))
    out[:, 0] = s.MA, s.MR, s.MF
    for t, u in enumerate(u_of_t):
        s = step_with_load(s, u, dt, p)
        out[:, t + 1] = s.MA, s.MR, s.MF
    return out[0], out[1], out[2]


ENDURANCE_TOLERANCE = 0.01  # M_A this far (1 % MVC) below the load counts as failing to hold it


def endurance_time(t: np.ndarray, MA: np.ndarray, load: np.ndarray,
                   tol: float = ENDURANCE_TOLERANCE) -> float | None:
    """First time a held load is lost: M_A, having reached u - tol, falls below it again
    while the load is still on. None when every load phase is held to its end."""
    on = load > 0
    reached = np.maximum.accumulate(on & (MA >= load - tol))
    lost = on & reached & (MA < load - tol)
    idx = np.flatnonzero(lost)
    return float(t[idx[0]]) if len(idx) else None


def endurance_limit(p: FatigueParams) -> float:
    """The constant load (fraction of a muscle's strength) that 3CC-r holds indefinitely:
    held at M_A = u, M_F settles at F u / R (eq. 26), which leaves M_R >= 0 only while
    u <= R / (F + R) (1/6 for MuscleVAE's F/R = 5). The fatigue scale multiplies F and R
    alike, so it changes how soon a heavier load is lost, not this limit."""
    return p.R / (p.F + p.R) if p.F + p.R > 0 else 1.0


def exhaustion_time(u: float, p: FatigueParams) -> float | None:
    """Analytic time at which a constant load u exhausts M_R (continuous eq. 26, M_A = u):
    M_F(t) = (F u / R)(1 - exp(-R t)) reaches 1 - u. None when nothing tires (fatigue scale
    0) or u <= endurance_limit(p)."""
    F, R = p.F_eff, p.R_eff
    if F <= 0 or u <= endurance_limit(p):
        return None
    if R <= 0:  # no recovery: M_F = F u t
        return (1.0 - u) / (F * u)
    x = R * (1.0 - u) / (F * u)
    return None if x >= 1.0 else -math.log(1.0 - x) / R
