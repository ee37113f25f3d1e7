"""A looped clip's centre of mass made to brake and push as its stance foot asks (balance.md,
nineteenth session): the spring-mass runner's horizontal force, applied to a capture.

A ground force from under the foot points near the centre of mass, so a foot planted ahead
of the body brakes it and one left behind pushes it on:

    f_h = f_z (c_h - p) / c_z                                                         (1)

f_z the clip's own vertical force (m (c_z'' + g)), c the centre of mass, p the centre of
pressure: the mean of the foot corners within CONTACT_HEIGHT_M of the floor (heel at
landing, toes at take-off); 0 in flight. The clip's centre of mass is given the horizontal
acceleration f_h / m instead of its own (the difference scaled so that it sums to 0 over the
loop: the clip keeps its speed), integrated twice around the loop into a horizontal shift
of the pelvis, and each planted foot moved back by the same shift (engine.control.grounding's
leg solve) so it does not slide. The joints, the vertical and the heading are the clip's.

What it changed (strength 3, three passes, `BRAKE_PASSES`): the sprint's demands, root help
0.21 -> 0.14 body weights and root torque 92 -> 51 N m, the pelvis moved by 1.7 cm at most;
the walk's 0.017 -> 0.014 and 12.4 -> 11.2 N m. Under the balance planner (fresh sprint, seeds
0-3, seconds to the fall) 2.4 / 4.7 / 5.9 / 2.9 against 3.7 / 8+ / 6.7 / 7.7 as captured: not
kept (docs/research/balance.md, nineteenth session).

    python research/braking_stance.py               # the demands, as captured and braked
    python research/sprint_levers.py --braking --name b0 --seconds 8 --seed 0
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import mujoco
import numpy as np

from engine.control.plan import REF_CUTOFF_HZ, loop_accelerations, loop_velocities
from engine.motion.reference import foot_points

# a foot corner this close to the floor counts as touching it (engine.motion.reference's rule
# when this was measured; the engine now asks for a planted foot: reference.planted)
CONTACT_HEIGHT_M = 0.02
G = 9.81


def braked(space, q: np.ndarray, cycle, fps: float) -> tuple[np.ndarray, dict]:
    """The looped clip q (F, nq) with its centre of mass braking and pushing as eq. (1) asks,
    and a summary (largest pelvis shift, cm; mean change of the horizontal acceleration)."""
    from engine.control.grounding import move_feet

    m, data = space.model, mujoco.MjData(space.model)
    rig = space.rig
    F = len(q)
    mass = m.body_subtreemass[1]
    com, cop, down = np.empty((F, 3)), np.full((F, 2, 2), np.nan), np.zeros((F, 2), bool)
    for k in range(F):
        data.qpos[:] = q[k]
        mujoco.mj_kinematics(m, data)
        mujoco.mj_comPos(m, data)
        com[k] = data.subtree_com[1]
        pos, rot = data.xipos[1:], data.ximat[1:].reshape(-1, 3, 3)
        for s, side in enumerate(("R", "L")):
            pts = foot_points(rig, rot[None], pos[None], side)[0]
            near = pts[pts[:, 2] < CONTACT_HEIGHT_M]
            if len(near):
                cop[k, s], down[k, s] = near[:, :2].mean(axis=0), True
    # the clip's centre-of-mass velocity as a take would play it, and its acceleration
    qvel = loop_velocities(space, q, cycle, REF_CUTOFF_HZ)
    vc = np.empty((F, 3))
    for k in range(F):
        data.qpos[:], data.qvel[:] = q[k], qvel[k]
        mujoco.mj_forward(m, data)
        mujoco.mj_subtreeVel(m, data)
        vc[k] = data.subtree_linvel[1]
    acc = loop_accelerations(cycle, vc)
    fz = mass * (acc[:, 2] + G)
    p = np.where(down[..., None], cop, 0.0).sum(axis=1) / np.maximum(down.sum(axis=1), 1)[:, None]
    a_new = np.where(down.any(axis=1)[:, None], (fz / mass / com[:, 2])[:, None] * (com[:, :2] - p), 0.0)  # eq. (1)
    da = a_new - acc[:, :2]
    da -= np.outer(fz * down.any(axis=1), da.sum(axis=0) / max((fz * down.any(axis=1)).sum(), 1e-9))  # keep the speed
    dv = np.cumsum(da, axis=0) / fps
    dv -= dv.mean(axis=0)
    shift = np.cumsum(dv, axis=0) / fps
    shift -= shift.mean(axis=0)
    out = q.copy()
    out[:, :2] += shift
    for k in range(F):
        if down[k].any():
            back = np.zeros((2, 3))
            back[down[k], :2] = -shift[k]
            out[k] = move_feet(space, data, out[k], back, 0.0)
    return out, dict(pelvis_shift_cm=round(100 * float(np.abs(shift).max()), 2),
                     acceleration_change_m_s2=round(float(np.linalg.norm(da, axis=1).mean()), 2))


def install() -> None:
    """Every clip grounded from here on is braked too (after engine.control.grounding)."""
    import engine.control.grounding as grounding

    ground = grounding.ground_feet

    def ground_and_brake(space, q, cycle, fps):
        q, summary = ground(space, q, cycle, fps)
        for _ in range(int(__import__("os").environ.get("BRAKE_PASSES", "1"))):
            q, summary["braking"] = braked(space, q, cycle, fps)
        print(f"braked: {summary['braking']}", file=sys.stderr)
        return q, summary
    grounding.ground_feet = ground_and_brake


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ballistic_flights import demands_before_after

    demands_before_after(install, "braked", sys.argv[1:] or ("run", "walk"))
