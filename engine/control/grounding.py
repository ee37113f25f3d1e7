"""Feet on the floor: a looped clip's stance feet put on the ground, every frame.

Retargeting (engine.motion.retarget) shifts a whole clip up or down once, so that its stance
feet sit on the floor on average. A capture retargeted onto another body still has each foot
at its own height from step to step: the bundled sprint lands its right foot 2-4 cm above
the floor and slides it 5 cm into the floor by mid-stance while its left foot lands at 0-1
cm; the bundled walk holds its left foot 1 cm up through its stance and its right foot 2 cm
up for a third of its stance. Tracked as it is, a hovering stance foot lands late while the
reference's pelvis is already being caught (the sprint asked ~0.4 body weights of root help
that no contact could give, engine.control.demands), and a sunken one is pushed out.

A clip whose planted feet are in the floor on average (placed too low on this body: the
CMU walk's stand 1.6 and 2.8 cm deep) is first raised whole by that much; then `ground_feet`
moves each foot straight up or down by dz in each frame (the talus kept at its
orientation, so the toes follow rigidly), by damped least squares over both legs' hip, knee
and ankle and, only where a leg cannot reach (a stance knee already straight: no knee is bent
past its limit), by lowering the pelvis; the arms, trunk and the pelvis's path otherwise stay
the clip's. dz puts the foot's lowest corner at PLANT_M where the foot is planted
(engine.motion.reference.planted: its lowest corner near the floor and still, relative to the
foot's own peak speed), and is interpolated around the loop between plantings, so the swing
keeps its shape relative to the corrected landings; a foot in the air (moving faster than
AIRBORNE_SHARE of its own peak speed) is raised to SWING_CLEAR_M where it would pass lower.
That is a capture's defect on another body: the CMU walk on the model's proportions swings
each heel 1.1-1.7 cm into the floor at 4-5 m/s in the last ~70 ms before it lands, and its
20 s take stumbled on it and fell at 12.2 s (seed 0); with this and the lift above, three
draws of 20 s walked at 4.4-5.0 deg, 6-10 cm (docs/research/balance.md, twenty-ninth session). A still clip (a held pose) is left as it
is: its feet never move, so none is planted by this rule, and the stand controller places
them. A planted foot's slide across the floor is reported (`slide_cm_per_s`), not undone:
holding each planted foot where the clip has it at mid-stance, the legs taking the change
(the same IK), made the bundled walk track a little closer (10 s: 3.1 against 3.3 deg) and
the CMU walk worse on each of three draws (4 s: one fell at 1.5 s; 4.8 and 5.3 against 4.7
and 4.6 deg; docs/research/balance.md, twenty-eighth session).

PLANT_M is below the floor because MuJoCo's contacts are soft: a loaded simulated foot sinks
into the floor (its lowest corner 1.3 cm down at the median of a balanced walk's stance). The
tracker with the residual (analysis mode) on the fresh walk, 20 s: as retargeted 4.23 deg
mean joint error, 0.040 body weights of residual; grounded at 0: 2.77 deg, 0.076; at -5 mm:
2.42 deg, 0.044 (docs/research/balance.md, seventeenth session).
"""
from __future__ import annotations

import mujoco
import numpy as np

from ..motion.reference import foot_tracks, planted, slides
from ..transforms import quat_to_axis_angle

PLANT_M = -0.005  # m: where a planted foot's lowest corner is put: pressed into the soft floor
SWING_CLEAR_M = 0.005  # m: the least height of a foot's lowest corner while it is in the air
AIRBORNE_SHARE = 0.5  # a foot moving faster than this share of its own peak speed is in the air
SMOOTH_FRAMES = 1.0  # Gaussian sigma (frames at 120 Hz) of the correction along the loop
IK_ITERATIONS = 60
IK_TOLERANCE = 1e-5  # m and rad
IK_DAMPING = 1e-4  # damped least squares: lambda^2 per joint DOF
ROOT_WEIGHT = 100.0  # the pelvis height is damped this much harder than a joint
FEET = ("R", "L")  # the order of engine.motion.reference.foot_tracks


def corrections(h: np.ndarray, stance: np.ndarray, airborne: np.ndarray | None = None,
                once: bool = False) -> np.ndarray:
    """(F, 2) vertical move of each foot: PLANT_M - h where planted, linear around the loop
    between plantings (a clip played `once`: between them, and held before the first and
    after the last, its ends not meeting) and, where the foot is `airborne` (F, 2), at least
    SWING_CLEAR_M - h, smoothed (SMOOTH_FRAMES); 0 for a foot never planted."""
    F = len(h)
    dz = np.zeros_like(h)
    for s in range(h.shape[1]):
        idx = np.flatnonzero(stance[:, s])
        if len(idx):
            xs, reps = (idx, 1) if once else (np.concatenate([idx - F, idx, idx + F]), 3)
            x = np.interp(np.arange(F), xs, np.tile(PLANT_M - h[idx, s], reps))
            if airborne is not None:  # a swinging foot clears the floor
                air = airborne[:, s]
                x[air] = np.maximum(x[air], SWING_CLEAR_M - h[air, s])
            dz[:, s] = smooth_loop(x, once)
    return dz


def in_the_air(speed: np.ndarray) -> np.ndarray:
    """(F-1, 2) whether each foot is in the air: its lowest point moving faster than
    AIRBORNE_SHARE of that foot's peak speed in the clip. speed: slides(foot_tracks) x fps."""
    return speed > AIRBORNE_SHARE * speed.max(axis=0, keepdims=True)


def smooth_loop(x: np.ndarray, once: bool = False) -> np.ndarray:
    """x (F,) convolved around the loop with a Gaussian of SMOOTH_FRAMES (a clip played
    `once`: its end values held beyond its ends instead)."""
    r = int(4 * SMOOTH_FRAMES)
    k = np.arange(-r, r + 1)
    w = np.exp(-0.5 * (k / SMOOTH_FRAMES) ** 2)
    padded = np.pad(x, r, mode="edge" if once else "wrap")
    return sum(wi * padded[r + ki:r + ki + len(x)] for ki, wi in zip(k, w / w.sum()))


def move_feet(space, data, q: np.ndarray, dz: np.ndarray, root_weight: float) -> np.ndarray:
    """q with both feet's tali moved by dz (2,) straight up, or by dz (2, 3) in any direction
    (orientations kept), by damped least squares over both legs' hip, knee and ankle DOFs and
    the pelvis height, the height damped `root_weight` times harder than a joint (so the legs
    move first and the pelvis only where a leg cannot reach; 0: the pelvis height stays). A
    knee is held where a step would bend it past its limit (a straight knee is not flipped
    through), and steps that do not bring the feet closer are halved."""
    m, rig = space.model, space.rig
    tali = [rig.body_index("Talus" + side) + 1 for side in FEET]
    dofs = np.concatenate([np.arange(rig.dof_start[rig.body_index("Femur" + side)],
                                     rig.dof_start[rig.body_index("Talus" + side) + 1]) for side in FEET])
    data.qpos[:] = q
    mujoco.mj_kinematics(m, data)
    goals = [(data.xipos[b] + (np.array([0.0, 0.0, z]) if np.ndim(z) == 0 else z), data.ximat[b].reshape(3, 3).copy())
             for b, z in zip(tali, dz)]
    knees = [rig.body_index("Tibia" + side) for side in FEET]  # hinges: kept inside their limits
    knee_q = np.array([rig.q_start[b] for b in knees])
    knee_lo = np.array([rig.joint_lower[b][0] for b in knees])
    knee_hi = np.array([rig.joint_upper[b][0] for b in knees])
    if root_weight > 0:
        dofs = np.concatenate([[2], dofs])
    knee_at = np.array([int(np.flatnonzero(dofs == rig.dof_start[b])[0]) for b in knees])  # in dofs
    damp = np.full(len(dofs), IK_DAMPING)
    if root_weight > 0:
        damp[0] *= root_weight
    jp, jr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
    quat = np.empty(4)

    def error():
        out = []
        for b, (p_goal, R_goal) in zip(tali, goals):
            mujoco.mju_mat2Quat(quat, (R_goal @ data.ximat[b].reshape(3, 3).T).ravel())
            out += [p_goal - data.xipos[b], quat_to_axis_angle(quat)]
        return np.concatenate(out)

    e = error()
    for _ in range(IK_ITERATIONS):
        if np.abs(e).max() < IK_TOLERANCE:
            break
        mujoco.mj_comPos(m, data)
        rows = []
        for b in tali:
            mujoco.mj_jac(m, data, jp, jr, data.xipos[b], b)
            rows += [jp[:, dofs], jr[:, dofs]]
        J = np.concatenate(rows)
        free = np.ones(len(dofs), bool)
        for _ in range(len(knees) + 1):  # a knee the step would bend past its limit is held
            step = np.zeros(len(dofs))
            Jf = J[:, free]
            step[free] = np.linalg.solve(Jf.T @ Jf + np.diag(damp[free]), Jf.T @ e)
            bent = q[knee_q] + step[knee_at]
            past = free[knee_at] & (((bent < knee_lo) & (step[knee_at] < 0)) | ((bent > knee_hi) & (step[knee_at] > 0)))
            if not past.any():
                break
            free[knee_at[past]] = False
        for _half in range(8):
            dv = np.zeros(m.nv)
            dv[dofs] = step
            trial = space.add(q, dv)
            trial[knee_q] = np.clip(trial[knee_q], np.minimum(knee_lo, q[knee_q]), np.maximum(knee_hi, q[knee_q]))
            data.qpos[:] = trial
            mujoco.mj_kinematics(m, data)
            e_new = error()
            if e_new @ e_new < e @ e:
                q, e = trial, e_new
                break
            step = 0.5 * step
        else:
            break
    return q


def _foot_tracks(space, q: np.ndarray, cycle, once: bool = False) -> list:
    """foot_tracks of the frames of q and, after them, cycle.apply_q(q[0]) (the next cycle's
    first frame; a clip played `once`: its last frame moved on as it moved from the one
    before, since its first frame does not follow its last), with every body placed as the
    physics places it. (Followed by its first frame, a clip that is not a loop had its feet
    jump 75-95 m/s at its end, which made that the feet's peak speed: every frame near the
    floor counted planted, none in the air.)"""
    m, data = space.model, mujoco.MjData(space.model)
    after = space.add(q[-1], space.diff(q[-1], q[-2])) if once else cycle.apply_q(q[0])
    looped = np.concatenate([q, after[None]])
    pos, rot = np.empty((len(looped), m.nbody - 1, 3)), np.empty((len(looped), m.nbody - 1, 3, 3))
    for i, qi in enumerate(looped):  # MuJoCo body 0: the world
        data.qpos[:] = qi
        mujoco.mj_kinematics(m, data)
        pos[i], rot[i] = data.xipos[1:], data.ximat[1:].reshape(-1, 3, 3)
    return foot_tracks(space.rig, rot, pos)


def stance_frames(space, q: np.ndarray, cycle, fps: float, once: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(F, 2) lowest corner height of each foot (right, left) in each frame of the looped clip
    q (F, nq; frame F is cycle.apply_q(q[0])), or of the clip played `once`, and whether it
    is planted there (`planted`)."""
    return planted(_foot_tracks(space, q, cycle, once), fps)


def ground_feet(space, q: np.ndarray, cycle, fps: float, once: bool = False) -> tuple[np.ndarray, dict]:
    """The looped clip q (F, nq; frame F is cycle.apply_q(q[0])), or the clip played `once`,
    with its feet on the floor (module docstring), and a summary: the share of frames each foot (right, left) is
    planted, how far the whole clip was raised first (cm), the largest foot and pelvis moves
    (cm) after that, how low the clip had a foot in the air
    (cm; below SWING_CLEAR_M it was raised) and how fast each planted foot slides across the
    floor (cm/s)."""
    data = mujoco.MjData(space.model)
    tracks = _foot_tracks(space, q, cycle, once)
    h, stance = planted(tracks, fps)
    if not stance.any():  # a still clip: nothing to do
        return q.copy(), dict(planted_share=[0.0, 0.0], lift_cm=0.0, foot_move_cm=0.0, pelvis_move_cm=0.0,
                              lowest_in_air_cm=None, slide_cm_per_s=[0.0, 0.0])
    # stance feet in the floor on average (a capture placed too low on this body): the whole
    # clip goes up first, so the legs bend only for each foot's own difference (a leg near
    # straight bends ~17 deg to raise its foot 1 cm); too high, the pelvis comes down below
    lift = max(PLANT_M - float(h[stance].mean()), 0.0)
    if lift > 0:
        q = q.copy()
        q[:, 2] += lift
        h = h + lift
    slide = slides(tracks) * fps
    airborne = in_the_air(slide)
    dz = corrections(h, stance, airborne, once)
    # a foot can always be raised (the knee bends), not always lowered (a stance leg is
    # nearly straight): first both legs and, where they cannot reach, the pelvis height;
    # then the legs alone for what is left
    free = np.array([move_feet(space, data, qi, dz_i, ROOT_WEIGHT)[2] - qi[2] for qi, dz_i in zip(q, dz)])
    root = np.minimum(free, 0.0)
    legs = dz - root[:, None]
    out = q.copy()
    out[:, 2] += root
    for i in range(len(q)):
        if np.abs(legs[i]).max() > 1e-4:
            out[i] = move_feet(space, data, out[i], legs[i], 0.0)
    low = h[airborne].min() if airborne.any() else np.inf
    return out, dict(planted_share=[round(float(x), 3) for x in stance.mean(axis=0)],
                     lift_cm=round(100 * lift, 2), foot_move_cm=round(100 * float(np.abs(dz).max()), 2),
                     lowest_in_air_cm=round(100 * float(low), 2) if np.isfinite(low) else None,
                     pelvis_move_cm=round(100 * float(np.abs(root).max()), 2),
                     slide_cm_per_s=[round(100 * float(slide[stance[:, k], k].mean()), 1) if stance[:, k].any() else 0.0
                                     for k in range(2)])
