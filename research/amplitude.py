"""A clip's motion scaled about its mean pose: a less powerful version of the same gait.

    python research/amplitude.py 1 0.9 0.8 0.7 0.6 0.5    # the sprint's demands at each scale

Every joint's rotation away from its mean over the clip (in the tangent space), the root's
height about its mean, its tilt about its mean tilt, its heading about the clip's steady turn,
and its horizontal progress from the first frame are all multiplied by `scale`; the frame
count (the cadence) is kept. At 0.5 the bundled sprint (5.4 m/s) becomes a 2.7 m/s run at
the same cadence. `install(scale)` makes every CyclicClip of this process scaled
(sprint_levers.py --amplitude).
"""
import sys
import types
from pathlib import Path

import mujoco
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import engine.control.plan as plan_mod
from engine.transforms import quat_heading


def zquat(angle: float) -> np.ndarray:
    """The rotation by `angle` about +Z as a quaternion (w, x, y, z)."""
    return np.array([np.cos(angle / 2), 0.0, 0.0, np.sin(angle / 2)])


def scale_amplitude(space, q0: np.ndarray, v0: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(q, qvel) of the clip (q0, v0) with its motion scaled by `scale` about its mean pose."""
    F = len(q0)
    yaw = np.unwrap([float(quat_heading(x[3:7])) for x in q0])
    yaw_end = float(quat_heading(space.add(q0[-1], v0[-1] / plan_mod.PHYSICS_HZ)[3:7]))
    yaw_end = yaw[0] + np.angle(np.exp(1j * (yaw_end - yaw[0])))
    yaw_lin = yaw[0] + np.arange(F) / F * (yaw_end - yaw[0])  # the clip's steady turn
    tilt = np.empty((F, 3))  # the root's orientation without its heading, as a rotation vector
    for i in range(F):
        t = np.empty(4)
        mujoco.mju_mulQuat(t, zquat(-yaw[i]), q0[i, 3:7])
        mujoco.mju_quat2Vel(tilt[i], t, 1.0)
    tilt_mean = tilt.mean(0)
    m = q0[0].copy()  # the joints' mean pose (the root's part of each difference is 0)
    for _ in range(5):
        m = space.add(m, np.mean([space.diff(m, np.concatenate([m[:7], x[7:]])) for x in q0], axis=0))
    z_mean = q0[:, 2].mean()
    q = q0.copy()
    for i in range(F):
        qi = np.concatenate([q0[i, :7], m[7:]])
        qi = space.add(qi, scale * space.diff(qi, q0[i]))
        qi[:2] = q0[0, :2] + scale * (q0[i, :2] - q0[0, :2])
        qi[2] = z_mean + scale * (q0[i, 2] - z_mean)
        r = tilt_mean + scale * (tilt[i] - tilt_mean)
        t, o = np.empty(4), np.empty(4)
        mujoco.mju_axisAngle2Quat(t, r / max(np.linalg.norm(r), 1e-12), np.linalg.norm(r))
        mujoco.mju_mulQuat(o, zquat(yaw_lin[i] + scale * (yaw[i] - yaw_lin[i])), t)
        qi[3:7] = o
        q[i] = qi
    return q, frame_velocities(space, q)


def frame_velocities(space, q: np.ndarray) -> np.ndarray:
    """Velocities (F, nv) of frames q (F, nq) at the physics rate: central differences,
    one-sided at the ends."""
    F = len(q)
    v = np.empty((F, space.nv))
    for i in range(F):
        i0, i1 = max(i - 1, 0), min(i + 1, F - 1)
        v[i] = space.diff(q[i0], q[i1]) * plan_mod.PHYSICS_HZ / (i1 - i0)
    return v


def install_edit(edit, label: str) -> None:
    """Every CyclicClip made from here on plays edit(space, q, qvel) -> (q, qvel) of its
    clip instead of the clip (printing `label` and the edited loop's length)."""
    init = plan_mod.CyclicClip.__init__

    def edited_init(self, space, ref, *args, **kw):
        q, v = edit(space, np.asarray(ref.q, float), np.asarray(ref.qvel, float))
        init(self, space, types.SimpleNamespace(q=q, qvel=v, fps=ref.fps), *args, **kw)
        print(f"{label} on {self.name}: {np.hypot(*self.cycle.shift):.3f} m a cycle", file=sys.stderr)
    plan_mod.CyclicClip.__init__ = edited_init


def install(scale: float) -> None:
    """Every CyclicClip made from here on plays its clip scaled by `scale`."""
    install_edit(lambda space, q, v: scale_amplitude(space, q, v, scale), f"amplitude {scale:g}")


if __name__ == "__main__":
    from engine import fatigue as fat
    from engine.control import TrackingController
    from engine.control.demands import reference_demands
    from engine.control.plan import MotionPlan, load_clip
    from engine.rig import load_rig
    from engine.simulation import Simulation

    rig = load_rig().with_strength(3.0)
    motion = Path(__file__).resolve().parents[2] / "shared" / "reference" / "mass" / "motion"
    ref = load_clip(rig, motion / "run.bvh")[0]
    original = plan_mod.CyclicClip.__init__
    for s in map(float, sys.argv[1:] or (1.0, 0.5)):
        plan_mod.CyclicClip.__init__ = original
        install(s)
        plan = MotionPlan(rig, [(ref, 1.0, "run")])
        sim = Simulation(rig, "mujoco", fatigue=fat.FatigueParams(scale=0.0))
        d = reference_demands(TrackingController(sim, plan), sim, plan.segments[0].clip)
        print(s, {k: v for k, v in d.items() if k.startswith(("root", "unmet"))}, flush=True)
