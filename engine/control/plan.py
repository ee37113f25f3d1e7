"""Reference motion for the tracking controller: clips made cyclic, looped and chained.

A take plays a list of clips, each for some seconds (`run.bvh:60`, then `walk.bvh:20`). A
clip longer in the plan than in its file loops: `CyclicClip` closes the clip's seam, and
each cycle carries the root's horizontal offset and heading forward, so a 1.1 s walk cycle
becomes a straight (or gently curving) walk of any length. The next clip starts at the
phase whose pose best matches the reference at the switch, turned and moved so its root
continues from there, and the two are cross-faded over `blend` seconds.

Everything is in the engine's generalised coordinates (MuJoCo's qpos/qvel layout) at the
physics rate (120 Hz); positions are combined on the configuration manifold with MuJoCo's
mj_differentiatePos / mj_integratePos on a model of the rig.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import mujoco
import numpy as np

from ..errors import InputFileError, ParameterError
from ..motion.reference import Reference
from ..rig import Rig
from ..transforms import quat_heading
from .loops import best_loop, seam_size_deg

PHYSICS_HZ = 120.0
# Hz: the reference velocities are low-passed before they are differentiated. The MASS
# clips (like much mocap) are 30 Hz captures interpolated linearly to 120 fps, so their raw
# second differences spike on every 4th frame; fed to the inverse dynamics, that ripple made
# the demanded hip torque jump by ~40 N m from one step to the next and the kd term ring.
# Measured on the fresh walk, 60 s (joint error, root residual in body weights): the old
# 5-tap binomial smoothing 4.72 deg / 0.085; cutoff 6 Hz 4.77 / 0.036; 5 Hz 4.51 / 0.033;
# 4 Hz 4.60 / 0.027; 3 Hz falls apart (13.5 deg over 20 s: the velocities stray too far from
# the unfiltered positions the kp term tracks).
REF_CUTOFF_HZ = 5.0
# deg (engine.control.loops.seam_size_deg): a clip whose ends meet this closely loops as it
# is (the bundled run's are 9.1 apart, the walk's 3.9; a CMU walk's 31); a loop found inside a
# clip that is not one must close this well, or the clip is played once (and its segment ends
# with it: a held last pose fell on the muscles, a kick after 12 s of holding and a dance
# after 3.5, issue 44's corpus at 20 s). Its own ends count as one of those loops: a clip whose
# ends meet within SEAM_MAX_DEG, better than any pair inside it, loops whole (the bundled run
# written at 60 fps: 14 deg).
SEAM_OK_DEG, SEAM_MAX_DEG = 12.0, 15.0


class QSpace:
    """Configuration-space arithmetic of the rig (free root, ball, hinge joints)."""

    def __init__(self, rig: Rig):
        from ..physics.mujoco_backend import build_mjcf

        self.rig = rig
        self.model = mujoco.MjModel.from_xml_string(
            build_mjcf(rig, 1.0 / PHYSICS_HZ, 0.0, False, np.zeros(rig.num_bodies, bool)))
        self.nq, self.nv = self.model.nq, self.model.nv

    def diff(self, qa: np.ndarray, qb: np.ndarray) -> np.ndarray:
        """Velocity-space difference qb - qa (rotation vectors in each joint's local frame;
        the root's translation in world coordinates)."""
        out = np.empty(self.nv)
        mujoco.mj_differentiatePos(self.model, out, 1.0, qa, qb)
        return out

    def add(self, q: np.ndarray, dv: np.ndarray) -> np.ndarray:
        """q moved by velocity-space displacement dv."""
        out = np.array(q, dtype=float, copy=True)
        mujoco.mj_integratePos(self.model, out, dv, 1.0)
        return out

    def interp(self, qa, qb, w: float) -> np.ndarray:
        return self.add(qa, w * self.diff(qa, qb))


def _yaw(quat: np.ndarray) -> float:
    """Heading angle about +Z of a root orientation (w, x, y, z) (transforms.quat_heading)."""
    return float(quat_heading(quat))


def _zquat(angle: float) -> np.ndarray:
    return np.array([np.cos(angle / 2), 0.0, 0.0, np.sin(angle / 2)])


def _rot2(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s], [s, c]])


@dataclass(frozen=True)
class Planar:
    """A turn about +Z by `yaw` followed by a horizontal shift `shift` (x, y): how a clip's
    root is carried from one cycle to the next, or placed where the previous clip left off."""

    yaw: float = 0.0
    shift: tuple = (0.0, 0.0)

    def inverse(self) -> "Planar":
        """The transform that undoes this one."""
        back = -(_rot2(-self.yaw) @ np.asarray(self.shift))
        return Planar(-self.yaw, (float(back[0]), float(back[1])))

    def then(self, other: "Planar") -> "Planar":
        """self first, then other."""
        s = _rot2(other.yaw) @ np.asarray(self.shift) + np.asarray(other.shift)
        return Planar(self.yaw + other.yaw, (float(s[0]), float(s[1])))

    # the turn as a 2 x 2 matrix and a quaternion, the shift as an array: worked out once
    # per transform (a clip samples the same few every step)
    @cached_property
    def _r2(self) -> np.ndarray:
        return _rot2(self.yaw)

    @cached_property
    def _zq(self) -> np.ndarray:
        return _zquat(self.yaw)

    @cached_property
    def _shift(self) -> np.ndarray:
        return np.asarray(self.shift)

    def apply_q(self, q: np.ndarray) -> np.ndarray:
        if self.yaw == 0.0 and self.shift == (0.0, 0.0):
            return q
        q = q.copy()
        q[:2] = self._r2 @ q[:2] + self._shift
        turned = np.empty(4)
        mujoco.mju_mulQuat(turned, self._zq, q[3:7])  # the Hamilton product, as transforms.quat_multiply
        q[3:7] = turned
        return q

    def apply_v(self, v: np.ndarray) -> np.ndarray:
        """Velocities (and accelerations): only the root's world-frame linear part turns."""
        if self.yaw == 0.0:
            return v
        v = v.copy()
        v[..., :2] = v[..., :2] @ self._r2.T
        return v


def loop_velocities(space: QSpace, q: np.ndarray, cycle: Planar, cutoff_hz: float) -> np.ndarray:
    """Velocities (F, nv) of the looped clip q (F, nq; frame F is cycle.apply_q(q[0])):
    central differences across the closed loop, low-passed at cutoff_hz (`lowpass_loop`)."""
    F = len(q)
    dt = 1.0 / PHYSICS_HZ
    before = cycle.inverse().apply_q(q[F - 1])  # the previous cycle's last frame
    qvel = np.empty((F, space.nv))
    for i in range(F):
        a = before if i == 0 else q[i - 1]
        b = cycle.apply_q(q[0]) if i == F - 1 else q[i + 1]
        qvel[i] = space.diff(a, b) / (2 * dt)
    return lowpass_loop(qvel, cycle, cutoff_hz)


def once_velocities(space: QSpace, q: np.ndarray, cutoff_hz: float) -> np.ndarray:
    """Velocities (F, nv) of a clip played once: central differences (one-sided at the ends),
    low-passed at cutoff_hz as lowpass_loop does, over the clip and its mirror image (so the
    ends do not wrap onto each other)."""
    F = len(q)
    dt = 1.0 / PHYSICS_HZ
    qvel = np.empty((F, space.nv))
    for i in range(F):
        a, b = q[max(i - 1, 0)], q[min(i + 1, F - 1)]
        qvel[i] = space.diff(a, b) / (dt * (min(i + 1, F - 1) - max(i - 1, 0)))
    if not cutoff_hz or cutoff_hz <= 0:
        return qvel
    both = np.concatenate([qvel, qvel[::-1]])
    return lowpass_loop(both, Planar(), cutoff_hz)[:F]


def loop_accelerations(cycle: Planar, v: np.ndarray) -> np.ndarray:
    """Central differences of a looped clip's velocities v (F, nv, or any (F, d) whose first
    two columns are a world-frame horizontal velocity): the last frame's successor is frame 0
    of the next cycle, whose world-frame velocity is turned by the cycle's yaw."""
    v_next = np.concatenate([v[1:], cycle.apply_v(v[:1])])
    v_prev = np.concatenate([Planar(-cycle.yaw).apply_v(v[-1:]), v[:-1]])
    return (v_next - v_prev) / (2.0 / PHYSICS_HZ)  # as (2 dt), bit for bit


def lowpass_loop(v: np.ndarray, cycle: Planar, cutoff_hz: float) -> np.ndarray:
    """Zero-phase low-pass of a looped clip's velocities v (F, nv): |H(f)|^2 =
    1 / (1 + (f / cutoff)^8), a forward-backward 4th-order Butterworth's response, applied
    to the cycle's Fourier series. The root's world-frame linear velocity turns by the
    cycle's yaw each loop; it is filtered in a frame turning with it at a steady rate, so the
    series is periodic. A cutoff of 0 leaves v as it is."""
    if not cutoff_hz or cutoff_hz <= 0:
        return v
    F = len(v)
    turn = np.arange(F) / F * cycle.yaw
    c, s = np.cos(turn), np.sin(turn)
    v = v.copy()
    x, y = v[:, 0].copy(), v[:, 1].copy()
    v[:, 0], v[:, 1] = c * x + s * y, -s * x + c * y  # into the turning frame
    spec = np.fft.rfft(v, axis=0)
    f = np.fft.rfftfreq(F, 1.0 / PHYSICS_HZ)
    spec *= (1.0 / (1.0 + (f / cutoff_hz) ** 8))[:, None]
    v = np.fft.irfft(spec, n=F, axis=0)
    x, y = v[:, 0].copy(), v[:, 1].copy()
    v[:, 0], v[:, 1] = c * x - s * y, s * x + c * y
    return v


class CyclicClip:
    """One clip made seamlessly cyclic at the physics rate.

    The frame after the last is predicted from the last frame and its velocity; the turn
    and shift that carry frame 0's root (heading, horizontal position) onto that prediction
    is the per-cycle `cycle` transform. What still differs (joint angles, root height and
    tilt: `seam` in the velocity space) is spread linearly over the clip, so cycle k + 1
    starts exactly where cycle k ends. With `ground` (the default) the stance feet are then
    put on the floor in every frame (engine.control.grounding; `grounding` says how far).
    Velocities are central differences across the closed loop, low-passed at `cutoff_hz`
    (REF_CUTOFF_HZ by default; 0 leaves them raw), and the accelerations central differences
    of those.
    """

    def __init__(self, space: QSpace, ref: Reference, name: str = "clip", cutoff_hz: float | None = None,
                 ground: bool = True, loops: bool | None = None):
        cutoff_hz = REF_CUTOFF_HZ if cutoff_hz is None else cutoff_hz
        self.name = name
        self.space = space
        fps = ref.fps
        if abs(fps - PHYSICS_HZ) > 1e-6:
            raise ParameterError(f"clip {name}", f"reference is at {fps:g} fps; retarget it at "
                                 f"{PHYSICS_HZ:g} fps (sinew retarget writes 120 fps)")
        q0 = np.asarray(ref.q, dtype=float)
        v0 = np.asarray(ref.qvel, dtype=float)
        F = len(q0)
        if F < 4:
            raise ParameterError(f"clip {name}", f"has {F} frames; at least 4 are needed")
        if q0.shape[1] != space.nq or v0.shape[1] != space.nv:
            raise ParameterError(f"clip {name}", f"q has {q0.shape[1]} coordinates, the rig {space.nq}")
        self._close(q0, v0)
        # A clip whose ends do not meet (engine.control.loops): played once, it is played as it
        # is (and held at its end, should a caller sample past it); looped (loops=True), it loops
        # where it loops best, or is played once when no pair of frames makes a seam (MotionPlan
        # then ends its segment with it). loops=None: as a cycle.
        self.once, self.loop = False, None
        ends = seam_size_deg(space.rig, self.seam)
        if loops is not None and ends > SEAM_OK_DEG:
            i, j, best = best_loop(ref) if loops else (0, F, None)
            if loops and (best is None or best >= ends) and ends <= SEAM_MAX_DEG:
                i, j, best = 0, F, ends  # its own ends are the best seam it has (the bundled run at 60 fps: 14 deg)
            if best is not None and best <= SEAM_MAX_DEG and best <= ends:
                if (i, j) != (0, F):
                    q0, v0 = q0[i:j], v0[i:j]
                    self._close(q0, v0)
                self.loop = dict(kind="loop", start_s=round(i / fps, 4), end_s=round(j / fps, 4),
                                 seam_deg=round(float(best), 2), ends_deg=round(ends, 2))
            else:
                self.once = True
                self.loop = dict(kind="ended" if loops else "once", ends_deg=round(ends, 2),
                                 best_seam_deg=None if best is None else round(float(best), 2))
        F = len(q0)
        q = q0.copy() if self.once else np.stack([space.add(q0[i], (i / F) * self.seam) for i in range(F)])
        self.grounding = None  # what engine.control.grounding moved, when it did
        if ground:  # the stance feet exactly on the floor
            from .grounding import ground_feet

            q, self.grounding = ground_feet(space, q, self.cycle, PHYSICS_HZ, self.once)
        if self.once:
            qvel = once_velocities(space, q, cutoff_hz)
            qacc = np.gradient(qvel, 1.0 / PHYSICS_HZ, axis=0)
        else:
            qvel = loop_velocities(space, q, self.cycle, cutoff_hz)
            qacc = loop_accelerations(self.cycle, qvel)
        self.q, self.qvel, self.qacc = q, qvel, qacc
        self.frames = F
        from .grounding import stance_frames

        # frames where a foot of the clip is planted: where its playback may wait for the body
        # (engine.control.pace eq. 2: a step can be held back, a flight or a handspring cannot)
        self.supported = stance_frames(space, q, self.cycle, PHYSICS_HZ, self.once)[1].any(axis=1)
        self.seconds = F * (1.0 / PHYSICS_HZ)
        self._powers = [Planar()]
        self._placed: dict[tuple[int, Planar], Planar] = {}

    def _close(self, q0: np.ndarray, v0: np.ndarray) -> None:
        """The per-cycle transform of clip q0 (its frame after the last predicted from the last
        frame and its velocity) and the seam that transform leaves."""
        space = self.space
        q_next = space.add(q0[-1], v0[-1] * (1.0 / PHYSICS_HZ))  # predicted frame F
        yaw = _yaw(q_next[3:7]) - _yaw(q0[0, 3:7])
        shift = q_next[:2] - _rot2(yaw) @ q0[0, :2]
        self.cycle = Planar(float(yaw), (float(shift[0]), float(shift[1])))
        self.seam = space.diff(q_next, self.cycle.apply_q(q0[0]))

    def describe(self) -> str:
        """One line on what was done with a clip whose ends do not meet, or ''."""
        lp = self.loop
        if not lp:
            return ""
        if lp["kind"] == "loop" and lp["start_s"] == 0 and lp["end_s"] * PHYSICS_HZ >= self.frames - 0.5:
            return f"its ends are {lp['ends_deg']:.1f} deg apart, the best seam it has: looped whole"
        if lp["kind"] == "loop":
            return (f"its ends are {lp['ends_deg']:.0f} deg apart: looped {lp['start_s']:.2f}-{lp['end_s']:.2f} s "
                    f"of it, where it loops best (a {lp['seam_deg']:.1f} deg seam)")
        if lp["kind"] == "ended":
            return (f"not a loop (its ends {lp['ends_deg']:.0f} deg apart, the best seam {lp['best_seam_deg']:.0f} deg): "
                    f"played once, {self.seconds:.2f} s, shorter than asked (to hold its last pose after it, "
                    f"chain the clip at {self.seconds:.2f} s: --clip CLIP@{self.seconds:.2f}:SECONDS)")
        return ""

    def cycle_transform(self, k: int) -> Planar:
        while len(self._powers) <= k:
            self._powers.append(self._powers[-1].then(self.cycle))
        return self._powers[k]

    def sample(self, frame: int, place: Planar = Planar()):
        """(q, qvel, qacc) at integer frame >= 0 of the looped clip, then moved by `place`;
        a clip played once holds its last pose, still, after its end."""
        if self.once and frame >= self.frames:
            z = np.zeros_like(self.qvel[0])
            return place.apply_q(self.q[-1]), z, z
        k, i = divmod(int(frame), self.frames)
        T = self._placed.get((k, place))
        if T is None:  # one per cycle and placement: a take meets a few dozen
            T = self._placed[(k, place)] = self.cycle_transform(k).then(place)
        return T.apply_q(self.q[i]), T.apply_v(self.qvel[i]), T.apply_v(self.qacc[i])


@dataclass
class Segment:
    clip: CyclicClip
    start: int  # first physics step of the segment
    steps: int  # its length in steps
    phase: int  # clip frame played at `start`
    place: Planar  # where the clip's root is put
    label: str
    # the clip asked for longer than it lasts and looped: the segment ends on the take's clock
    # (fewer loops where the pace held it back); otherwise it ends on the clip's own clock, once
    # the clip has played to its end (MotionPlan.delay: the take runs on)
    repeats: bool = False


class MotionPlan:
    """Clips played one after another, each looping for its duration, cross-faded over
    `blend` seconds at each switch. `sample(step)` gives the reference at a physics step. A
    clip asked for longer than it lasts that cannot loop (CyclicClip.loop kind "ended") is
    played once: its segment is its own length, and the plan is shorter than asked."""

    def __init__(self, rig: Rig, clips: list[tuple[Reference, float, str]], blend: float = 0.4):
        if not clips:
            raise ParameterError("clips", "at least one clip is needed")
        self.space = QSpace(rig)
        self.blend_steps = max(int(round(blend * PHYSICS_HZ)), 0)
        self.segments: list[Segment] = []
        cache: dict[tuple[int, bool], CyclicClip] = {}
        start = 0
        for ref, seconds, label in clips:
            loops = seconds > ref.seconds + 0.5 / PHYSICS_HZ  # asked for longer than it lasts
            clip = cache.get((id(ref), loops)) or CyclicClip(self.space, ref, label, loops=loops)
            cache[(id(ref), loops)] = clip
            steps = int(round(seconds * PHYSICS_HZ))
            if clip.loop and clip.loop["kind"] == "ended":
                steps = min(steps, clip.frames)
            seg = Segment(clip, start, steps, 0, Planar(), label, repeats=loops and not clip.once)
            if self.segments:
                seg.phase, seg.place = self._continue(clip, self._sample_segment(self.segments[-1], start)[0])
            self.segments.append(seg)
            start += steps
        self.total_steps = self.asked_steps = start

    def segment_end(self, i: int) -> int:
        """The physics step at which segment i ends (the next one starts, or the take ends)."""
        return self.segments[i + 1].start if i + 1 < len(self.segments) else self.total_steps

    def delay(self, i: int, steps: int) -> None:
        """Start segment i and those after it `steps` later, and end the take as much later:
        the clip before it was held back by the pace (engine.control.pace) and has not yet
        played to its end. Changes the plan in place, as rebase does (snapshots of the take's
        tracker keep the segments' starts and the plan's length)."""
        for seg in self.segments[i:]:
            seg.start += steps
        self.total_steps += steps

    def _continue(self, clip: CyclicClip, q_prev: np.ndarray) -> tuple[int, Planar]:
        """The phase of `clip` that best continues pose q_prev, and the turn and shift that put
        its root where q_prev's is."""
        phase = self._best_phase(clip, q_prev)
        q_new = clip.q[phase]
        yaw = _yaw(q_prev[3:7]) - _yaw(q_new[3:7])
        shift = q_prev[:2] - _rot2(yaw) @ q_new[:2]
        return phase, Planar(float(yaw), (float(shift[0]), float(shift[1])))

    def rebase(self, i: int, prev_lag: float) -> None:
        """Match segment i again to the clip before it as that was played, `prev_lag` steps
        behind the plan's clock (engine.control.pace): a slowed clip reaches the switch at
        another phase than planned, and the next clip must continue from there. Changes the
        plan in place: a plan serves one take (engine.take.simulate builds one for each)."""
        seg = self.segments[i]
        seg.phase, seg.place = self._continue(seg.clip, self._sample_segment(self.segments[i - 1], seg.start, prev_lag)[0])

    @staticmethod
    def _best_phase(clip: CyclicClip, q: np.ndarray) -> int:
        """Frame of the clip whose pose (joints and root height, not where it stands or
        faces) is closest to q."""
        d = np.linalg.norm(clip.q[:, 7:] - q[7:], axis=1) + 3.0 * np.abs(clip.q[:, 2] - q[2])
        return int(np.argmin(d))

    def _sample_segment(self, seg: Segment, step: int, lag: float = 0.0):
        """The segment's clip `lag` steps behind the take's clock (engine.control.pace); a
        fractional frame interpolates its two neighbours (positions on the manifold)."""
        frame = seg.phase + step - seg.start - lag
        k = int(np.floor(frame))
        if k == frame:
            return seg.clip.sample(max(k, 0), seg.place)
        w = frame - k
        qa, va, aa = seg.clip.sample(max(k, 0), seg.place)
        qb, vb, ab = seg.clip.sample(max(k + 1, 0), seg.place)
        return self.space.interp(qa, qb, w), (1 - w) * va + w * vb, (1 - w) * aa + w * ab

    def supported(self, step: int, lag: float = 0.0) -> bool:
        """Whether the clip played at `step`, `lag` steps behind the take's clock, has a foot
        planted there (CyclicClip.supported; a clip played once holds its last frame)."""
        seg = self.segments[self.segment_index(step)]
        k = max(int(np.floor(seg.phase + step - seg.start - lag)), 0)
        clip = seg.clip
        return bool(clip.supported[min(k, clip.frames - 1) if clip.once else k % clip.frames])

    def segment_index(self, step: int) -> int:
        for i in range(len(self.segments) - 1, -1, -1):
            if step >= self.segments[i].start:
                return i
        return 0

    def sample(self, step: int, lag: float = 0.0, prev_lag: float = 0.0):
        """(q, qvel, qacc) of the reference at physics step `step`, the current clip played
        `lag` steps behind the take's clock and the one it cross-fades from `prev_lag` steps
        (engine.control.pace; 0: the recorded pace). The velocities and accelerations are the
        clip's own; a caller playing it at a rate scales them."""
        i = self.segment_index(step)
        seg = self.segments[i]
        q, v, a = self._sample_segment(seg, step, lag)
        into = step - seg.start
        if i > 0 and into < self.blend_steps:
            w = (into + 1) / (self.blend_steps + 1)
            w = w * w * (3 - 2 * w)  # smoothstep
            qp, vp, ap = self._sample_segment(self.segments[i - 1], step, prev_lag)
            q = self.space.interp(qp, q, w)
            v = (1 - w) * vp + w * v
            a = (1 - w) * ap + w * a
        return q, v, a


# ---- clips from files ---------------------------------------------------------------------
def parse_clip_arg(text: str) -> tuple[str, float | None]:
    """'walk.bvh:20' -> ('walk.bvh', 20.0); 'walk.bvh' -> ('walk.bvh', None). A Windows drive
    letter (C:\\...) is not taken for a duration."""
    path, sep, tail = text.rpartition(":")
    if sep and path and not (len(path) == 1 and path.isalpha()):
        try:
            seconds = float(tail)
        except ValueError:
            if Path(split_hold(path)[0]).is_file() and not Path(text).is_file():
                raise ParameterError("--clip", f"{text}: {tail!r} after the ':' is not a number of seconds") from None
            return text, None
        return path, seconds
    return text, None


def split_hold(source) -> tuple[Path, float | None]:
    """'walk.bvh@0.5' -> (walk.bvh, 0.5): the pose at 0.5 s into the clip, held still. A file
    whose own name has an '@' is taken as it is."""
    path = Path(source)
    head, sep, tail = str(source).rpartition("@")
    if sep and head and not path.is_file():
        try:
            return Path(head), float(tail)
        except ValueError:
            pass
    return path, None


def load_clip(rig: Rig, source, keep_calibration: bool = False) -> tuple[Reference, str]:
    """A clip as a Reference: a Reference passes through, a .bvh file is retargeted (its
    bone names picked up by the presets; a calibration pose at its start skipped unless
    keep_calibration), an .npz is read as a saved reference. PATH@SECONDS holds the pose at
    that time of the clip still (Reference.held_at)."""
    if isinstance(source, Reference):
        held = source.meta.get("held_at_s")
        return source, str(source.meta.get("source") or "reference") + (f"@{held:g}" if held is not None else "")
    path, at = split_hold(source)
    if at is not None:
        ref, name = load_clip(rig, path, keep_calibration)
        held = ref.held_at(at, name)
        return held, f"{name}@{held.meta['held_at_s']:g}"
    if not path.is_file():
        raise InputFileError(path, "clip file not found")
    suffix = path.suffix.lower()
    if suffix == ".npz":
        from ..motion.reference import load_reference

        return load_reference(path), path.name
    if suffix == ".bvh":
        from ..motion.retarget import retarget_file

        ref, _, _ = retarget_file(path, rig, keep_calibration=keep_calibration)
        return ref, path.name
    raise InputFileError(path, "unknown clip type: expected a .bvh file or a reference .npz "
                         "(from sinew retarget)")
