"""Swing-foot placement by the centre of mass's velocity error: a feedback law on the
reference that the balance planner's tracker adds after its sampled offsets.

SIMBICON's balance law (Yin, Loken and van de Panne 2007, eq. 1, there on the swing hip's
target angle; Lee, Park, Kwon and Lee 2014 edit a reference the same way): where the centre of
mass moves faster than the reference's, forward or sideways, the swing leg reaches further
that way, so the next step catches it:

    swing hip pitch, roll  -=  w_swing  clip(c_v (v - v_ref) . (forward, left), +-limit)     (1)

v and v_ref the centre of mass's horizontal velocity in the simulation and in the reference,
in the simulated pelvis's heading frame; w_swing the weight of the leg whose foot is higher in
the reference (a logistic over SWING_BLEND_M, so the swing passes from one leg to the other
smoothly). The rig's frames: +pitch at the hip swings the leg back, +roll to the character's
right; forward is the pelvis's -y. By itself the law does not keep the tracker up (fifty-five
gain settings fell, docs/research/balance.md, twenty-fourth session); beside the planner it
carries part of its load, so fewer candidates do.
"""
from __future__ import annotations

import math

import mujoco
import numpy as np

SWING_BLEND_M = 0.01  # m of foot height difference over which the swing passes between legs
LIMIT_RAD = 0.4  # the most the law moves a hip (eq. 1's limit)


class SwingPlacement:
    """Eq. (1) for one tracker: its rig's hip DOFs, the reference's model for the reference's
    centre of mass, and the tracker's MuJoCo data for the simulation's."""

    def __init__(self, rig, reference_model, gain: float):
        dof = lambda body, k: int(rig.dof_start[rig.body_index(body)]) + k  # noqa: E731
        self.hips = [(dof("Femur" + s, 0), dof("Femur" + s, 1)) for s in "RL"]
        self.feet = [rig.body_index("Talus" + s) + 1 for s in "RL"]  # MuJoCo body ids
        self.gain, self.nv = float(gain), rig.num_dofs
        self._rm, self._rd = reference_model, mujoco.MjData(reference_model)
        self._jac = np.zeros((3, reference_model.nv))

    def _com_velocity(self, model, data, qvel) -> tuple[float, float]:
        mujoco.mj_jacSubtreeCom(model, data, self._jac, 1)
        v = self._jac @ qvel
        return float(v[0]), float(v[1])

    def __call__(self, model, data, q_ref: np.ndarray, v_ref: np.ndarray) -> np.ndarray:
        """The velocity-space change (nv,) eq. (1) makes to the reference pose q_ref (with its
        velocity v_ref), `data` the simulation's MuJoCo data (forwarded at its state)."""
        rd = self._rd
        rd.qpos[:] = q_ref
        mujoco.mj_kinematics(self._rm, rd)
        mujoco.mj_comPos(self._rm, rd)
        rvx, rvy = self._com_velocity(self._rm, rd, v_ref)
        vx, vy = self._com_velocity(model, data, data.qvel)
        R = data.xmat[1]  # the pelvis's rotation, row-major: its -y axis is forward
        fx, fy = -R[1], -R[4]
        n = max(math.hypot(fx, fy), 1e-9)
        fx, fy = fx / n, fy / n
        ex, ey = vx - rvx, vy - rvy
        ahead, aside = ex * fx + ey * fy, -ex * fy + ey * fx  # forward and to the left
        lim = LIMIT_RAD
        pitch = -min(max(self.gain * ahead, -lim), lim)
        roll = -min(max(self.gain * aside, -lim), lim)
        z_right, z_left = rd.xpos[self.feet[0], 2], rd.xpos[self.feet[1], 2]
        w_right = 1.0 / (1.0 + math.exp(-(z_right - z_left) / SWING_BLEND_M))  # right foot higher: right swings
        dv = np.zeros(self.nv)
        for (p, r), w in zip(self.hips, (w_right, 1.0 - w_right)):
            dv[p], dv[r] = w * pitch, w * roll
        return dv
