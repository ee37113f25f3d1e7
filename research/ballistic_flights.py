"""Ballistic flights: a looped clip's velocities made physical where no foot is near the floor.
Built and measured in the nineteenth session (docs/research/balance.md); not in the product:
under the balance planner the sprint fell sooner with it.

In flight nothing but gravity acts on a body, so its centre of mass moves on a parabola and
its angular momentum about the centre of mass stays constant; the limbs can only trade
rotation between themselves and the trunk. A capture does not obey this: retargeted onto
another body, low-passed and looped, the bundled sprint's angular momentum changes across
each 58 ms flight by 1.7-4.7 kg m^2/s (rates of 30-80 N m) and its centre of mass falls at
14-18 m/s^2.

`ballistic_flights` replaces the root's velocity (the free joint's six) in each flight frame
of the reference, keeping every joint's: the angular velocity that gives the flight's mean
angular momentum L0 at that pose and those joint rates, and the linear velocity that puts the
centre of mass on a line whose slope is gravity (least squares to the clip's own centre-of-mass
velocity). Angular momentum and centre-of-mass velocity are linear in the generalised
velocity, so each frame's root velocity is one 3 x 3 solve:

    L(q, v) = L(q, v with the root at rest) + A(q) w = L0                           (1)
    c'(q, v) = c'(q, v with the root at rest) + C(q) w + u = c'0 + g (t - t0)        (2)

w the root's angular velocity (its own frame), u its linear velocity (world): a translation
of the whole body moves the centre of mass by u and leaves L about it unchanged. The
accelerations follow from these velocities as for any frame (central differences), and the
step between the stance's momentum and the flight's is spread over RAMP_FRAMES of each
neighbouring stance, where the ground could give it. Positions are left as they are (under a
degree and a few millimetres). A flight is a run of frames in which every foot's lowest
corner is above CONTACT_HEIGHT_M; a walk has none and is left exactly as it was.

What it changed (strength 3): the sprint's demands, root force 0.21 -> 0.15 body weights
(flight frames 50-90 N m -> 4-23 N m of root torque, but the mean 92 -> 89 N m: the rest is
in stance, where ~100-200 N m about the lateral axis stays); the tracker with the residual
(analysis mode), fresh sprint 10 s: 5.22 -> 4.96 deg, residual 0.41 -> 0.31 body weights;
under the balance planner (fresh, seeds 0-3, seconds to the fall): 3.8 / 3.5 / 2.2 / 5.4
against 3.7 / 8+ / 6.7 / 7.7 as captured. The flights' inconsistency moved into the stance
next to them, which could not give it either.

    python research/ballistic_flights.py            # the demands, as captured and ballistic
    python research/sprint_levers.py --ballistic --name bf0 --seconds 8 --seed 0
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mujoco
import numpy as np

from engine.control.plan import PHYSICS_HZ, loop_accelerations

# a foot corner this close to the floor counts as touching it (engine.motion.reference's rule
# when these were measured; the engine now asks for a planted foot: reference.planted)
CONTACT_HEIGHT_M = 0.02


def rot2(angle: float) -> np.ndarray:
    """The 2-D rotation by `angle`."""
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s], [s, c]])


GRAVITY = np.array([0.0, 0.0, -9.81])
RAMP_FRAMES = 4  # the stance frames either side over which the root's velocity eases into the flight's


def flight_spans(h: np.ndarray, height: float = CONTACT_HEIGHT_M) -> list[np.ndarray]:
    """Frame indices of each flight of a looped clip from its feet's lowest corner heights
    h (F, feet): runs of frames where every foot is above `height`, each ascending from its
    first airborne frame, which is at least 1 (indices past F - 1 are the next cycle's
    frames)."""
    air = h.min(axis=1) > height
    F = len(air)
    if air.all() or not air.any():  # never off the ground, or never on it: no flight to fix
        return []
    starts = np.flatnonzero(air & ~np.roll(air, 1))
    starts[starts == 0] = F  # a flight from frame 0 is taken as the next cycle's: its frame before is F - 1
    spans = []
    for s in starts:
        n = 1
        while air[(s + n) % F]:
            n += 1
        spans.append(np.arange(s, s + n))
    return spans


def momentum(model, data, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Angular momentum about the centre of mass (world) and the centre of mass's velocity
    at state (q, v), as MuJoCo's subtree of the root body gives them."""
    data.qpos[:], data.qvel[:] = q, v
    mujoco.mj_forward(model, data)
    mujoco.mj_subtreeVel(model, data)
    return data.subtree_angmom[1].copy(), data.subtree_linvel[1].copy()


def root_maps(model, data, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, ...]:
    """Eqs. (1)-(2)'s parts at (q, v): angular momentum and centre-of-mass velocity with the
    root at rest, and A, C (3 x 3): what a unit root angular velocity (its own frame) adds."""
    rest = v.copy()
    rest[:6] = 0.0
    L_rest, c_rest = momentum(model, data, q, rest)
    A, C = np.empty((3, 3)), np.empty((3, 3))
    for i in range(3):
        e = np.zeros_like(v)
        e[3 + i] = 1.0
        A[:, i], C[:, i] = momentum(model, data, q, e)
    return L_rest, c_rest, A, C


def ballistic_flights(space, q: np.ndarray, v: np.ndarray, cycle, h: np.ndarray, fps: float) -> tuple[np.ndarray, dict]:
    """The looped clip's velocities v (F, nv) with each flight's root velocity replaced by
    eqs. (1)-(2) (module docstring); q (F, nq) its poses, `cycle` the per-cycle transform
    (engine.control.plan.Planar) that carries frame i to frame F + i, h (F, feet) its feet's
    lowest corner heights. Returns the new velocities and a summary: the flights and their
    frames, and the largest change of the root's angular velocity (rad/s) and of the centre
    of mass's velocity (m/s) over the flights."""
    m, data = space.model, mujoco.MjData(space.model)
    F = len(q)
    out = v.copy()
    spans = flight_spans(h)
    ramp = np.arange(RAMP_FRAMES, 0, -1) / (RAMP_FRAMES + 1)
    turn, push = 0.0, 0.0
    for span in spans:
        # the flight and the contact frame either side (so each airborne frame's central
        # difference is ballistic), in the world of the flight's first cycle
        core = np.arange(span[0] - 1, span[-1] + 2)
        qs = [cycle.apply_q(q[k - F]) if k >= F else q[k] for k in core]
        vs = [cycle.apply_v(v[k - F]) if k >= F else v[k] for k in core]
        t = core / fps
        clip = [momentum(m, data, qk, vk) for qk, vk in zip(qs, vs)]
        L0 = np.mean([L for L, _ in clip], axis=0)
        c0 = np.mean([c - GRAVITY * tk for (_, c), tk in zip(clip, t)], axis=0)  # least squares, slope g
        change = np.empty((len(core), 6))
        for j, (qk, vk, tk) in enumerate(zip(qs, vs, t)):
            L_rest, c_rest, A, C = root_maps(m, data, qk, vk)
            w = np.linalg.solve(A, L0 - L_rest)  # eq. (1)
            u = c0 + GRAVITY * tk - c_rest - C @ w  # eq. (2)
            change[j] = np.concatenate([u, w]) - vk[:6]
            push = max(push, float(np.linalg.norm(c0 + GRAVITY * tk - clip[j][1])))
        turn = max(turn, float(np.linalg.norm(change[:, 3:], axis=1).max()))
        # the step between the stance's velocity and the flight's, spread over RAMP_FRAMES
        # of each neighbouring stance
        frames = np.concatenate([core[0] - RAMP_FRAMES + np.arange(RAMP_FRAMES), core,
                                 core[-1] + 1 + np.arange(RAMP_FRAMES)])
        changes = np.concatenate([ramp[::-1, None] * change[0], change, ramp[:, None] * change[-1]])
        for k, dv in zip(frames, changes):
            turned = rot2(-(k // F) * cycle.yaw) @ dv[:2]  # into frame k's own cycle
            out[k % F, :2] += turned
            out[k % F, 2:6] += dv[2:]
    return out, dict(flights=len(spans), frames=int(sum(len(s) for s in spans)),
                     root_turn_change_rad_s=round(turn, 3), com_velocity_change_m_s=round(push, 3))


def install() -> None:
    """Every CyclicClip made from here on has its flights made ballistic (`flights` says
    what changed)."""
    import engine.control.plan as plan
    from engine.control.grounding import stance_frames

    init = plan.CyclicClip.__init__

    def ballistic_init(self, space, *args, **kw):
        init(self, space, *args, **kw)
        h, _ = stance_frames(space, self.q, self.cycle, PHYSICS_HZ)
        self.qvel, self.flights = ballistic_flights(space, self.q, self.qvel, self.cycle, h, PHYSICS_HZ)
        self.qacc = loop_accelerations(self.cycle, self.qvel)
    plan.CyclicClip.__init__ = ballistic_init


def demands_before_after(install_edit, label: str, names) -> None:
    """Print the demands (engine.control.demands, strength 3) of the bundled clips `names`
    as captured, then after `install_edit()` has hooked a reference edit in."""
    from engine import fatigue as fat
    from engine.control import TrackingController
    from engine.control.demands import reference_demands
    from engine.control.plan import MotionPlan, load_clip
    from engine.rig import load_rig
    from engine.simulation import Simulation

    rig = load_rig().with_strength(3.0)
    motion = Path(__file__).resolve().parents[2] / "shared" / "reference" / "mass" / "motion"
    clips = {name: load_clip(rig, motion / f"{name}.bvh")[0] for name in names}
    for edit in ("as captured", label):
        if edit == label:
            install_edit()
        for name, ref in clips.items():
            plan = MotionPlan(rig, [(ref, 1.0, name)])
            sim = Simulation(rig, "mujoco", fatigue=fat.FatigueParams(scale=0.0))
            clip = plan.segments[0].clip
            d = reference_demands(TrackingController(sim, plan), sim, clip)
            print(name, edit, getattr(clip, "flights", None),
                  {k: v for k, v in d.items() if k.startswith(("root", "unmet"))}, flush=True)


if __name__ == "__main__":
    demands_before_after(install, "ballistic", sys.argv[1:] or ("run", "walk"))
