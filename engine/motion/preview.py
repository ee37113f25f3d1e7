"""Pictures of motion without Blender (matplotlib): a reference's contact sheet, stick figures
with the muscles by body part; a take's contact sheet or video, the simulated body with its
muscles coloured by activation and the reference as a grey ghost (`sinew preview`)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..figures import pyplot, save

# Muscle colours per body-part group (rig.GROUPS order: trunk, right leg, left leg, right arm,
# left arm): right side warm, left side cool, trunk neutral.
GROUP_COLOURS = ["#8c6d5a", "#d1495b", "#3d7ab8", "#e07a3f", "#4aa3a2"]
BONE_COLOUR = "#1b1b1f"


def _stage(ax, half_w: float, height: float) -> None:
    """A panel's floor (a line and a strip below it), its limits and a bare frame."""
    ax.axhline(0.0, color="#9a9a9a", lw=1.0, zorder=0)
    ax.fill_between([-half_w, half_w], -0.08, 0.0, color="#eeeae4", zorder=0)
    ax.set_xlim(-half_w, half_w)
    ax.set_ylim(-0.08, height)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    for sp in ax.spines.values():
        sp.set_visible(False)


def contact_sheet(ref, rig, out, frames: int = 8, muscles: bool = True, dpi: int = 110) -> Path:
    """Write a PNG: `frames` evenly spaced frames, side view (top row) and front view (bottom).

    Each panel follows the root horizontally; all panels share one scale and the floor line.
    """
    from matplotlib.collections import LineCollection

    from ..kinematics import MusclePaths
    from .retarget import model_bodies

    plt = pyplot()
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

            _stage(ax, half_w, height)
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
            if row == 0:
                ax.set_title(f"{ref.times[f]:.2f} s", fontsize=8, color="#333333")
            if col == 0:
                ax.set_ylabel(name, fontsize=9, color="#333333")
    m = ref.meta
    met = m.get("metrics", {})
    src = Path(str(m.get("source", ""))).name or "reference"
    title = (f"{src}: {ref.num_frames} frames at {ref.fps:g} Hz, root {met.get('root_speed_mps', 0):.2f} m/s, "
             f"foot skate {met.get('foot_skate_cm_per_s', 0):.0f} cm/s planted, scale {float(m.get('scale', 1)):.3f}")
    fig.suptitle(title, fontsize=9, color="#222222")
    if muscles:
        from matplotlib.lines import Line2D

        from ..rig import GROUPS

        handles = [Line2D([], [], color=c, lw=1.5, label=g.replace("_", " ")) for g, c in zip(GROUPS, GROUP_COLOURS)]
        fig.legend(handles=handles, loc="lower center", ncol=5, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.03 if muscles else 0, 1, 0.96))
    return save(fig, out, layout=False, facecolor="white")


# ---- a take: the simulated body, its muscles by activation, the reference as a ghost --------
ACTIVATION_CMAP = "YlOrRd"  # activation 0 (pale) to 1 (deep red)
GHOST_COLOUR = "#9db4c8"
VIDEO_SUFFIXES = (".gif", ".mp4")
MAX_VIDEO_FRAMES = 900  # a longer take shows every k-th recorded frame, k the least that fits


class TakeFigures:
    """The simulated and the reference figure of a take (engine.take.Take) at its recorded
    frames: joint centres, body centres and the muscles' waypoints, from the take's body
    frames and its q_ref by the rig's forward kinematics; and the character's heading, which
    the views turn with."""

    def __init__(self, take, rig):
        from .. import kinematics as kin
        from ..transforms import quat_to_matrix

        self.take, self.rig = take, rig
        body_rot = quat_to_matrix(np.asarray(take.body_quat, float))
        self.body_pos = np.asarray(take.body_pos, float)
        joint_rot = body_rot @ np.swapaxes(rig.body_rest_rot, -1, -2)  # G = R R_rest^T
        self.joints = self.body_pos - np.einsum("fbij,bj->fbi", joint_rot, rig.body_rest_pos - rig.joint_pos)
        self._paths, self._body_rot, self._last = kin.MusclePaths(rig), body_rot, (None, None)
        root, local = kin.q_to_pose(rig, np.asarray(take.q_ref, float))
        _, self.ref_joints, _, self.ref_body_pos = kin.forward_kinematics(rig, root, local)
        self.activation = np.clip(np.asarray(take.activation, float), 0.0, 1.0)
        # the views turn with the character: its pelvis's heading, averaged over a second so
        # that a step's sway does not swing the camera
        from ..gait import moving_mean
        from ..transforms import quat_heading

        yaw = np.unwrap(quat_heading(np.asarray(take.q, float)[:, 3:7]))
        self.heading = moving_mean(yaw, max(1, int(round(take.fps))))

    def waypoints(self, f: int) -> np.ndarray:
        """The muscles' waypoints (K, 3) at recorded frame f (made when drawn: a sheet shows a
        few frames of a take that may hold thousands; the last frame's kept for the next view)."""
        if self._last[0] != f:
            self._last = (f, self._paths.positions(self._body_rot[f], self.body_pos[f]))
        return self._last[1]

    def local(self, f: int, points: np.ndarray) -> np.ndarray:
        """World points at recorded frame f in the character's frame: about its pelvis, turned
        so that its (averaged) heading is the model's forward, -y."""
        turn = -0.5 * np.pi - self.heading[f]
        c, s = np.cos(turn), np.sin(turn)
        p = points - self.body_pos[f, 0] * np.array([1.0, 1.0, 0.0])
        return np.stack([c * p[..., 0] - s * p[..., 1], s * p[..., 0] + c * p[..., 1], p[..., 2]], -1)

    def sticks(self, joints, body_pos):
        """Bone segments (S, 2, 3): parent joint -> child joint, and each leaf's joint -> its
        body centre mirrored beyond it (the foot's toe, the hand's fingers, the head's top)."""
        rig = self.rig
        segs = [(joints[rig.body_parent[b]], joints[b]) for b in range(1, rig.num_bodies)]
        segs += [(joints[b], 2 * body_pos[b] - joints[b]) for b in range(rig.num_bodies)
                 if not np.any(rig.body_parent == b)]
        return np.array(segs)


def _view(points, axis: int, sign: float):
    """(horizontal, height) of points in the character's frame (TakeFigures.local) seen from
    its side (axis 1, forward to the left) or its front (axis 0)."""
    return np.stack([sign * points[..., axis], points[..., 2]], -1)


class _Panel:
    """One view of a take drawn with reusable artists, so a video only moves them."""

    VIEWS = {"side": (1, -1.0), "front": (0, 1.0)}

    def __init__(self, ax, figs: TakeFigures, view: str, height: float, half_w: float = 0.8):
        from matplotlib.collections import LineCollection

        self.ax, self.figs = ax, figs
        self.axis, self.sign = self.VIEWS[view]
        _stage(ax, half_w, height)
        self.ghost = LineCollection([], colors=GHOST_COLOUR, linewidths=2.2, alpha=0.55, zorder=1,
                                    capstyle="round")
        self.muscles = LineCollection([], linewidths=0.6, zorder=2)
        self.bones = LineCollection([], colors=BONE_COLOUR, linewidths=1.6, zorder=3, capstyle="round")
        for c in (self.ghost, self.muscles, self.bones):
            ax.add_collection(c)
        self.cmap = pyplot().get_cmap(ACTIVATION_CMAP)
        ax.set_ylabel(view, fontsize=9, color="#333333")

    def draw(self, f: int) -> None:
        F, rig = self.figs, self.figs.rig
        h = lambda p: _view(F.local(f, p), self.axis, self.sign)  # noqa: E731  the simulated pelvis, followed
        self.ghost.set_segments(h(F.sticks(F.ref_joints[f], F.ref_body_pos[f])))
        self.bones.set_segments(h(F.sticks(F.joints[f], F.body_pos[f])))
        w = F.waypoints(f)
        segs = np.stack([h(w[rig.seg_a]), h(w[rig.seg_b])], 1)
        a = F.activation[f][rig.seg_muscle]
        depth = self.sign * F.local(f, w[rig.seg_a])[:, 1 - self.axis]  # the far side first, the near on top
        order = np.lexsort((a, -depth))
        self.muscles.set_segments(segs[order])
        self.muscles.set_colors(self.cmap(0.15 + 0.85 * a[order]))


def _take_title(take, short: bool = False) -> str:
    m = take.meta
    names = ", ".join(Path(str(c["name"])).name for c in m.get("clips", [])) or "take"
    partial = m.get("fell") or m.get("diverged") or m.get("interrupted")
    end = f"stopped at {take.times[-1]:.2f} s" if partial else "complete"
    if short:
        return f"{names}: {take.times[-1]:.1f} s, {end}"
    err = m.get("summary", {}).get("joint_err_deg_mean", float(np.mean(take.joint_err_deg)))
    return (f"{names}: {take.times[-1]:.1f} s, {m.get('controller', '')} controller, {end}; joint error "
            f"{err:.1f} deg (grey: the reference; muscles by activation)")


def _figure_height(figs: TakeFigures) -> float:
    return max(float(np.nanmax(figs.joints[..., 2])) + 0.3, float(np.nanmax(figs.ref_joints[..., 2])) + 0.3, 1.6)


def _colorbar(fig, rect) -> None:
    import matplotlib as mpl

    cax = fig.add_axes(rect)
    norm = mpl.colors.Normalize(0.0, 1.0)
    cmap = mpl.colors.LinearSegmentedColormap.from_list(
        "act", pyplot().get_cmap(ACTIVATION_CMAP)(np.linspace(0.15, 1.0, 64)))
    cb = fig.colorbar(mpl.cm.ScalarMappable(norm=norm, cmap=cmap), cax=cax, orientation="horizontal")
    cb.set_label("activation", fontsize=7)
    cb.ax.tick_params(labelsize=6)


def take_sheet(take, rig, out, frames: int = 8, dpi: int = 110) -> Path:
    """A PNG of a take: `frames` evenly spaced recorded frames from the side (top row) and the
    front, the simulated body's bones and muscles coloured by activation, the reference's
    bones as a grey ghost; each panel follows the simulated pelvis."""
    plt = pyplot()
    figs = TakeFigures(take, rig)
    N = take.num_frames
    idx = np.unique(np.linspace(0, N - 1, max(1, min(frames, N))).round().astype(int))
    height = _figure_height(figs)
    fig, axes = plt.subplots(2, len(idx), figsize=(1.6 * len(idx) + 0.6, 2 * 2.9 + 0.6), dpi=dpi, squeeze=False)
    fig.patch.set_facecolor("white")
    for col, f in enumerate(idx):
        for row, view in enumerate(("side", "front")):
            panel = _Panel(axes[row, col], figs, view, height)
            panel.draw(f)
            if col:
                axes[row, col].set_ylabel("")
        axes[0, col].set_title(f"{take.times[f]:.2f} s, {take.joint_err_deg[f]:.1f} deg", fontsize=7.5,
                               color="#333333")
    fig.suptitle(_take_title(take), fontsize=9, color="#222222")
    fig.tight_layout(rect=(0, 0.06, 1, 0.96))
    _colorbar(fig, (0.35, 0.025, 0.3, 0.015))
    return save(fig, out, layout=False, facecolor="white")


def take_video(take, rig, out, dpi: int = 90, progress=None) -> tuple[Path, int]:
    """A .gif or .mp4 (ffmpeg) of a take in real time: the side and the front view as in
    take_sheet, the time and joint error in the title. A take longer than MAX_VIDEO_FRAMES
    recorded frames shows every k-th of them (at 1 / k of the frame rate, still in real
    time). Returns (path, k). The GIF's frames are drawn and palettised here (Pillow's
    FASTOCTREE, 64 colours): ~6x faster than matplotlib's PillowWriter, which saves a whole
    figure a frame."""
    from ..atomic import atomic_path
    from ..errors import ParameterError

    out = Path(out)
    gif = out.suffix.lower() == ".gif"
    if not gif:
        from matplotlib import animation

        if not animation.writers.is_available("ffmpeg"):
            raise ParameterError("--out", f"{out}: writing .mp4 needs ffmpeg on the PATH, and there is none "
                                 "here; write a .gif instead (no ffmpeg needed)")
    plt = pyplot()
    figs = TakeFigures(take, rig)
    N = take.num_frames
    k = max(1, -(-N // MAX_VIDEO_FRAMES))
    idx = np.arange(0, N, k)
    fps = take.fps / k
    fig, axes = plt.subplots(1, 2, figsize=(6.4, 3.6), dpi=dpi)
    fig.patch.set_facecolor("white")
    height = _figure_height(figs)
    panels = [_Panel(ax, figs, view, height) for ax, view in zip(axes, ("side", "front"))]
    head = fig.suptitle("", fontsize=7.5, color="#222222")
    fig.tight_layout(rect=(0, 0.08, 1, 0.9))
    _colorbar(fig, (0.35, 0.05, 0.3, 0.02))
    title = _take_title(take, short=True)

    def draw(i: int) -> None:
        f = idx[i]
        for p in panels:
            p.draw(f)
        head.set_text(f"{title}\n{take.times[f]:.2f} s, joint error {take.joint_err_deg[f]:.1f} deg (grey: the reference)")
        if progress is not None:
            progress(i / len(idx))

    try:
        with atomic_path(out) as tmp:
            if gif:
                from PIL import Image

                frames = []
                for i in range(len(idx)):
                    draw(i)
                    fig.canvas.draw()
                    rgb = Image.fromarray(np.asarray(fig.canvas.buffer_rgba())[..., :3])
                    frames.append(rgb.quantize(colors=64, method=Image.Quantize.FASTOCTREE))
                # GIF keeps 10 ms steps: each frame's duration rounded so that the sum keeps time
                ends = np.round(np.arange(1, len(frames) + 1) * (100.0 / fps)) * 10
                durations = np.diff(np.r_[0.0, ends]).astype(int).tolist()
                frames[0].save(tmp, save_all=True, append_images=frames[1:], duration=durations, loop=0)
            else:
                from matplotlib import animation

                writer = animation.FFMpegWriter(fps=fps)
                with writer.saving(fig, str(tmp), dpi):
                    for i in range(len(idx)):
                        draw(i)
                        writer.grab_frame(facecolor="white")
    finally:
        plt.close(fig)
    return out, k
