"""Figures of a take: muscle activation heat map (MuscleVAE Fig. 7) and fatigue by muscle
group (Fig. 8, 11). matplotlib is imported only here."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .plots import _pyplot, save
from .rig import GROUPS
from .take import is_partial

_COLOURS = {"trunk": "#7f7f7f", "right_leg": "#d62728", "left_leg": "#ff9896", "right_arm": "#1f77b4",
            "left_arm": "#aec7e8"}


def _segments(ax, take):
    for seg in take.meta.get("segments", [])[1:]:
        ax.axvline(seg["start_s"], color="k", lw=0.8, ls=":")
    for seg in take.meta.get("segments", []):
        ax.text(seg["start_s"], 1.01, f" {seg['label']}", transform=ax.get_xaxis_transform(), fontsize=7,
                va="bottom", ha="left", color="0.3")


def activation_heatmap(path, take, rig) -> Path:
    """Activation of every muscle over time, muscles sorted by group (rows), white to red."""
    plt = _pyplot()
    order = np.argsort(rig.muscle_group, kind="stable")
    A = take.activation[:, order].T.astype(float)
    t = take.times
    fig, ax = plt.subplots(figsize=(9, 5), dpi=110)
    extent = (t[0], t[-1] if len(t) > 1 else 1.0, len(order), 0)
    im = ax.imshow(A, aspect="auto", cmap="Reds", vmin=0, vmax=1, extent=extent, interpolation="nearest")
    counts = np.bincount(rig.muscle_group, minlength=len(GROUPS))
    edges = np.cumsum(counts)
    for e in edges[:-1]:
        ax.axhline(e, color="k", lw=0.5)
    ax.set_yticks(edges - counts / 2)
    ax.set_yticklabels([g.replace("_", " ") for g in GROUPS], fontsize=8)
    ax.set_xlabel("time (s)")
    _segments(ax, take)
    fig.colorbar(im, ax=ax, label="activation $M_A$")
    ax.set_title(f"Muscle activation, {len(order)} muscles (fatigue scale {take.meta['fatigue']['scale']:g})",
                 fontsize=9, pad=14)
    return save(fig, path)


def fatigue_by_group(path, take, rig) -> Path:
    """f0-weighted mean M_F and M_A per muscle group over time."""
    plt = _pyplot()
    t = take.times
    mf, ma = take.group_mean("MF", rig), take.group_mean("MA", rig)
    fig, axes = plt.subplots(2, 1, figsize=(8, 5.5), dpi=110, sharex=True)
    for i, g in enumerate(GROUPS):
        c = _COLOURS[g]
        axes[0].plot(t, mf[:, i], color=c, lw=1.6, label=g.replace("_", " "))
        axes[1].plot(t, ma[:, i], color=c, lw=1.0, label=g.replace("_", " "))
    axes[0].set_ylabel("fatigue $M_F$\n(f0-weighted mean)")
    axes[1].set_ylabel("activation $M_A$\n(f0-weighted mean)")
    axes[1].set_xlabel("time (s)")
    axes[0].legend(fontsize=8, loc="upper left")
    for ax in axes:
        ax.grid(alpha=0.25)
        _segments(ax, take)
    if is_partial(take.meta):
        axes[0].axvline(t[-1], color="r", lw=1.2)
        axes[0].text(t[-1], 0.5, " stopped", color="r", transform=axes[0].get_xaxis_transform(), fontsize=8)
    axes[0].set_title(f"Fatigue by muscle group (fatigue scale {take.meta['fatigue']['scale']:g})", fontsize=9, pad=14)
    return save(fig, path)
