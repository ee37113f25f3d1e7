"""Contact sheet of a reference trajectory: stick figures with the muscles (matplotlib)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..plots import save

# Muscle colours per body-part group (rig.GROUPS order: trunk, right leg, left leg, right arm,
# left arm): right side warm, left side cool, trunk neutral.
GROUP_COLOURS = ["#8c6d5a", "#d1495b", "#3d7ab8", "#e07a3f", "#4aa3a2"]
BONE_COLOUR = "#1b1b1f"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def contact_sheet(ref, rig, out, frames: int = 8, muscles: bool = True, dpi: int = 110) -> Path:
    """Write a PNG: `frames` evenly spaced frames, side view (top row) and front view (bottom).

    Each panel follows the root horizontally; all panels share one scale and the floor line.
    """
    from matplotlib.collections import LineCollection

    from ..kinematics import MusclePaths
    from .retarget import model_bodies

    plt = _pyplot()
    F = ref.num_frames
    idx = np.unique(np.linspace(0, F - 1, max(1, min(frames, F))).round().astype(int))
    n = len(idx)
    G = ref.local_rot[idx]
    Gw = np.empty_like(G)
    from ..transforms import quat_multiply

    for b in range(rig.num_bodies):
        p = rig.body_parent[b]
        Gw[:, b] = G[:, b] if p < 0 else quat_multiply(Gw[:, p], G[:, b])
    body_rot, body_pos = model_bodies(rig, ref.root_pos[idx], Gw)
    # joint centres: forward kinematics gives them as the body positions minus rest offsets
    from ..transforms import quat_rotate

    joints = body_pos - quat_rotate(Gw, rig.body_rest_pos - rig.joint_pos)
    wp = MusclePaths(rig).positions(body_rot, body_pos) if muscles else None
    # bone sticks: parent joint -> child joint; leaves: joint -> body centre extended
    sticks = [(rig.body_parent[b], b) for b in range(1, rig.num_bodies)]
    leaves = [b for b in range(rig.num_bodies) if not np.any(rig.body_parent == b)]

    views = [("side", 1, -1.0), ("front", 0, 1.0)]  # (name, horizontal axis, sign)
    height = max(float(joints[..., 2].max()) + 0.3, 1.6)
    half_w = 0.75
    fig, axes = plt.subplots(2, n, figsize=(1.55 * n + 0.6, 2 * 2.9 + 0.3), dpi=dpi, squeeze=False)
    fig.patch.set_facecolor("white")
    for col, f in enumerate(idx):
        for row, (name, ax_i, sign) in enumerate(views):
            ax = axes[row, col]
            cx = ref.root_pos[f, ax_i]

            def h(p):
                return sign * (p[..., ax_i] - cx)

            ax.axhline(0.0, color="#9a9a9a", lw=1.0, zorder=0)
            ax.fill_between([-half_w, half_w], -0.08, 0.0, color="#eeeae4", zorder=0)
            if wp is not None:
                w = wp[col]
                segs = np.stack([np.stack([h(w[rig.seg_a]), w[rig.seg_a, 2]], -1),
                                 np.stack([h(w[rig.seg_b]), w[rig.seg_b, 2]], -1)], 1)
                colours = np.array(GROUP_COLOURS)[rig.muscle_group[rig.seg_muscle]]
                # draw the far side first, faintly, so the near side reads on top
                depth = w[rig.seg_a, 0 if ax_i == 1 else 1] * (1 if ax_i == 1 else -1)
                order = np.argsort(-depth)
                ax.add_collection(LineCollection(segs[order], colors=colours[order], linewidths=0.45,
                                                 alpha=0.55, zorder=2))
            J = joints[col]
            for p, c in sticks:
                ax.plot([h(J[p]), h(J[c])], [J[p, 2], J[c, 2]], color=BONE_COLOUR, lw=1.6,
                        solid_capstyle="round", zorder=3)
            for b in leaves:
                tip = 2 * body_pos[col, b] - J[b]
                ax.plot([h(J[b]), h(tip)], [J[b, 2], tip[2]], color=BONE_COLOUR, lw=1.6,
                        solid_capstyle="round", zorder=3)
            ax.scatter(h(J), J[:, 2], s=5, color="white", edgecolors=BONE_COLOUR, linewidths=0.6, zorder=4)
            ax.set_xlim(-half_w, half_w)
            ax.set_ylim(-0.08, height)
            ax.set_aspect("equal")
            ax.set_xticks([])
            ax.set_yticks([])
            for sp in ax.spines.values():
                sp.set_visible(False)
            if row == 0:
                ax.set_title(f"{ref.times[f]:.2f} s", fontsize=8, color="#333333")
            if col == 0:
                ax.set_ylabel(name, fontsize=9, color="#333333")
    m = ref.meta
    met = m.get("metrics", {})
    src = Path(str(m.get("source", ""))).name or "reference"
    title = (f"{src}: {ref.num_frames} frames at {ref.fps:g} Hz, root {met.get('root_speed_mps', 0):.2f} m/s, "
             f"foot skate {met.get('foot_skate_cm', 0):.2f} cm/frame, scale {float(m.get('scale', 1)):.3f}")
    fig.suptitle(title, fontsize=9, color="#222222")
    if muscles:
        from matplotlib.lines import Line2D

        from ..rig import GROUPS

        handles = [Line2D([], [], color=c, lw=1.5, label=g.replace("_", " ")) for g, c in zip(GROUPS, GROUP_COLOURS)]
        fig.legend(handles=handles, loc="lower center", ncol=5, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.03 if muscles else 0, 1, 0.96))
    return save(fig, out, layout=False, facecolor="white")
