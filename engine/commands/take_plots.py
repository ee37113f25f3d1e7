"""Figures of a take: muscle activation heat map (MuscleVAE Fig. 7) and fatigue by muscle
group (Fig. 8, 11), gait against time; drawn through engine.figures."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..figures import pyplot, save
from ..rig import GROUPS
from ..take import is_partial

_COLOURS = {"trunk": "#7f7f7f", "right_leg": "#d62728", "left_leg": "#ff9896", "right_arm": "#1f77b4",
            "left_arm": "#aec7e8"}


def _segments(ax, take):
    for seg in take.meta.get("segments", [])[1:]:
        ax.axvline(seg["start_s"], color="k", lw=0.8, ls=":")
    for seg in take.meta.get("segments", []):
        ax.text(seg["start_s"], 1.01, f" {seg['label']}", transform=ax.get_xaxis_transform(), fontsize=7,
                va="bottom", ha="left", color="0.3")


def _by_group(ax, t, values, lw: float, ylabel: str) -> None:
    """One line per muscle group (values (N, 5) in GROUPS order), coloured as everywhere."""
    for i, g in enumerate(GROUPS):
        ax.plot(t, values[:, i], color=_COLOURS[g], lw=lw, label=g.replace("_", " "))
    ax.set_ylabel(ylabel)


def _finish(axes, take) -> None:
    """Time axis, grid, clip switches and pushes (shaded) on stacked axes; a red line
    where the take stopped."""
    axes[-1].set_xlabel("time (s)")
    for ax in axes:
        ax.grid(alpha=0.25)
        _segments(ax, take)
        for p in take.meta.get("pushes") or []:
            ax.axvspan(p["time"], p["time"] + max(p["seconds"], 0.05), color="#ff7f0e", alpha=0.3, lw=0)
    if is_partial(take.meta):
        t = take.times[-1]
        axes[0].axvline(t, color="r", lw=1.2)
        axes[0].text(t, 0.5, " stopped", color="r", transform=axes[0].get_xaxis_transform(), fontsize=8)


def activation_heatmap(path, take, rig) -> Path:
    """Activation of every muscle over time, muscles sorted by group (rows), white to red."""
    plt = pyplot()
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
    plt = pyplot()
    fig, axes = plt.subplots(2, 1, figsize=(8, 5.5), dpi=110, sharex=True)
    _by_group(axes[0], take.times, take.group_mean("MF", rig), 1.6, "fatigue $M_F$\n(f0-weighted mean)")
    _by_group(axes[1], take.times, take.group_mean("MA", rig), 1.0, "activation $M_A$\n(f0-weighted mean)")
    axes[0].legend(fontsize=8, loc="upper left")
    _finish(axes, take)
    axes[0].set_title(f"Fatigue by muscle group (fatigue scale {take.meta['fatigue']['scale']:g})", fontsize=9, pad=14)
    return save(fig, path)


def gait_plot(path, take, rig) -> Path:
    """Tiredness as a gait (engine.gait): speed, cadence and stride against their early
    values, knee flexion range, trunk lean and root height, over sliding 2 s windows, above
    M_F by muscle group."""
    from ..gait import EARLY_S, gait_series

    plt = pyplot()
    centres, g = gait_series(take, rig)
    fig, axes = plt.subplots(3, 1, figsize=(8, 7.5), dpi=110, sharex=True)
    early = centres <= take.times[0] + EARLY_S
    for k, label, c in (("forward_speed_mps", "speed", "k"), ("cadence_spm", "cadence", "#2ca02c"),
                        ("stride_m", "stride length", "#9467bd")):
        base = np.nanmean(g[k][early]) if np.any(np.isfinite(g[k][early])) else np.nan
        axes[0].plot(centres, 100 * (g[k] / base - 1), color=c, lw=1.5, marker=".", label=label)
    axes[0].axhline(0, color="0.6", lw=0.8)
    axes[0].set_ylabel(f"change from the\nfirst {EARLY_S:g} s (%)")
    axes[0].legend(fontsize=8, loc="lower left")
    axes[1].plot(centres, g["knee_range_deg"], color="#d62728", lw=1.3, marker=".", label="knee flexion range")
    axes[1].plot(centres, g["trunk_lean_deg"], color="#1f77b4", lw=1.3, marker=".", label="trunk lean")
    axes[1].set_ylabel("deg")
    twin = axes[1].twinx()
    twin.plot(centres, g["root_height_m"], color="#ff7f0e", lw=1.3, marker=".", label="root height")
    twin.set_ylabel("root height (m)", color="#ff7f0e")
    axes[1].legend(fontsize=8, loc="center left")
    _by_group(axes[2], take.times, take.group_mean("MF", rig), 1.5, "fatigue $M_F$\n(f0-weighted mean)")
    axes[2].legend(fontsize=8, loc="upper left")
    _finish(axes, take)
    axes[0].set_title(f"Gait as the muscles tire (fatigue scale {take.meta['fatigue']['scale']:g}; sliding 2 s windows)",
                      fontsize=9, pad=14)
    return save(fig, path)
