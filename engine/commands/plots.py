"""The figures of `sinew fatigue-curve` and `sinew arm-hold` (drawn through engine.figures)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..figures import pyplot, save


def fatigue_curve(path: Path, t: np.ndarray, load: np.ndarray, MA: np.ndarray, MR: np.ndarray,
                  MF: np.ndarray, title: str, endurance_s: float | None = None) -> Path:
    """3CC-r compartments under a target load, in the style of MuscleVAE Fig. 15."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 3.6), dpi=120)
    ax.plot(t, load, color="0.55", lw=1.2, ls="--", label="target load u")
    ax.plot(t, MA, color="#d62728", lw=2, label="$M_A$ (activated)")
    ax.plot(t, MR, color="#1f77b4", lw=2, label="$M_R$ (resting)")
    ax.plot(t, MF, color="#7fbf00", lw=2, label="$M_F$ (fatigued)")
    if endurance_s is not None:
        ax.axvline(endurance_s, color="k", lw=0.8, ls=":")
        ax.annotate(f"endurance {endurance_s:.1f} s", (endurance_s, 0.96), fontsize=8,
                    ha="right", va="top", rotation=90)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("fraction of muscle (MVC)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlim(t[0], t[-1])
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.25)
    ax.legend(loc="center right", fontsize=8, framealpha=0.9)
    return save(fig, path)


def arm_hold(path: Path, series: dict, setup: dict, title: str) -> Path:
    """Arm elevation, activation and fatigue of the arm muscle sets over time (MuscleVAE Fig. 10)."""
    plt = pyplot()
    t = np.asarray(series["time_s"])
    fig, axes = plt.subplots(3, 1, figsize=(8, 7.5), dpi=120, sharex=True)
    rest0, rest1 = setup["hold"], setup["hold"] + setup["rest"]
    for ax in axes:
        ax.axvspan(rest0, rest1, color="0.92", zorder=0)
        ax.grid(alpha=0.25)
    axes[0].plot(t, series["elevation_right_deg"], color="#d62728", lw=1.8, label="right arm")
    axes[0].plot(t, series["elevation_left_deg"], color="#1f77b4", lw=1.2, ls="--", label="left arm")
    axes[0].axhline(0, color="k", lw=0.6)
    axes[0].set_ylabel("arm elevation (deg)")
    axes[0].legend(loc="lower left", fontsize=8)
    axes[0].text((rest0 + rest1) / 2, 0.95, "rest", transform=axes[0].get_xaxis_transform(),
                 ha="center", va="top", fontsize=9, color="0.4")
    colours = {"forearm": "#2ca02c", "upper_arm": "#ff7f0e", "shoulder": "#9467bd"}
    for name, c in colours.items():
        label = name.replace("_", " ")
        axes[1].plot(t, series[f"{name}_MA"], color=c, lw=1.5, label=label)
        axes[2].plot(t, series[f"{name}_MF"], color=c, lw=1.5, label=label)
    axes[1].set_ylabel("activation $M_A$\n(f0-weighted mean)")
    axes[2].set_ylabel("fatigue $M_F$\n(f0-weighted mean)")
    axes[1].legend(loc="upper right", fontsize=8)
    axes[2].set_xlabel("time (s)")
    axes[2].set_xlim(t[0], t[-1])
    axes[0].set_title(title, fontsize=9)
    return save(fig, path)
