"""Figures the command line writes (matplotlib, imported only here)."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def fatigue_curve(path: Path, t: np.ndarray, load: np.ndarray, MA: np.ndarray, MR: np.ndarray,
                  MF: np.ndarray, title: str, endurance_s: float | None = None) -> Path:
    """3CC-r compartments under a target load, in the style of MuscleVAE Fig. 15."""
    plt = _pyplot()
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
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
