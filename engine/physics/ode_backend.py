"""ODE backend (Debian's python3-pyode, module `ode`): optional, used to cross-check MuJoCo.

- Bodies: ODE body frame = box centre, rotation = box axes, explicit diagonal inertia.
- Joints: BallJoint / HingeJoint at the joint centre (child = body 1, parent = body 2),
  built in the rest pose so a hinge angle of 0 is the rest pose; hinge limits as stops.
  ODE ball joints have no limits of their own. To match MuJoCo's cone limit (the same
  angle, base.ball_cone), every step a ball joint whose rotation angle exceeds
  its cone gets a one-step angular motor about its rotation axis with a stop at the cone
  angle (told the current angle via setAngle): a one-sided limit like MuJoCo's.
- Damping: ODE has no joint damping, and explicit damping torques blow up at 120 Hz.
  Each joint gets an angular motor (user mode; 3 body-fixed axes on a ball, the axis on a
  hinge) with target velocity 0, unbounded force and CFM = 1/c. ODE then solves
  tau = -(1/CFM) w_rel at the end of the step: implicit damping with coefficient c, the
  same backward-Euler damping MuJoCo's implicitfast applies.
- Ground: every non-pinned box collides with the plane z = 0 (friction 1, Coulomb-like
  friction pyramid); bodies never collide with each other.
- Pinned bodies are kinematic (infinite mass, zero velocity): they do not move at all.

PyODE's joint-parameter constants do not match ODE 0.16 (ode.ParamFMax is 3, ODE reads 5
as FMax): this module uses ODE 0.16's numbers, below; of PyODE's constants only the stops
(0, 1) and velocity (2) agree. Verified by driving a motor with each candidate number.
"""
from __future__ import annotations

import numpy as np

import ode

from ..kinematics import BALL, HINGE
from ..transforms import matrix_to_axis_angle
from .base import GRAVITY, Backend, BodyState, ball_cone, q_to_state, state_to_q

# ODE 0.16 dJointParam values (group offset 0x100 per motor axis)
P_LOSTOP, P_HISTOP, P_VEL, P_FMAX, P_CFM, P_STOP_ERP, P_STOP_CFM = 0, 1, 2, 5, 8, 9, 10
AXIS_STRIDE = 0x100
# ODE 0.16 dContact mode bits
C_SOFT_ERP, C_SOFT_CFM, C_APPROX1 = 0x008, 0x010, 0x3000

WORLD_ERP, WORLD_CFM = 0.2, 1e-9
CONTACT_MU, CONTACT_ERP, CONTACT_CFM = 1.0, 0.2, 1e-5
CLEAR = 0.01  # m: a box whose lowest corner is higher than this cannot touch the ground


class OdeBackend(Backend):
    """ODE simulation of the rig; see the module docstring."""

    name = "ode"

    def __init__(self, rig, dt=1 / 120, joint_damping=10.0, ground=True, pinned=(), limits=True):
        super().__init__(rig, dt, joint_damping, ground, pinned, limits)
        self.world = w = ode.World()
        w.setGravity(tuple(GRAVITY))
        w.setERP(WORLD_ERP)
        w.setCFM(WORLD_CFM)
        self.bodies, self.joints, self.motors, self.geoms = [], [], [], []
        for b in range(rig.num_bodies):
            body = ode.Body(w)
            m = ode.Mass()
            m.setParameters(float(rig.body_mass[b]), 0.0, 0.0, 0.0, *map(float, rig.body_inertia[b]), 0.0, 0.0, 0.0)
            body.setMass(m)
            body.setPosition(tuple(rig.body_rest_pos[b]))
            body.setRotation(tuple(rig.body_rest_rot[b].ravel()))
            if self.pinned[b]:
                body.setKinematic()
            self.bodies.append(body)
        for b in range(rig.num_bodies):
            p = rig.body_parent[b]
            if p < 0 or self.pinned[b]:
                continue
            self._add_joint(b, p)
        self.space = ode.SimpleSpace()
        self.plane = ode.GeomPlane(self.space, (0.0, 0.0, 1.0), 0.0) if self.ground else None
        for b in np.flatnonzero(~self.pinned):
            g = ode.GeomBox(None, tuple(rig.body_size[b]))
            g.setBody(self.bodies[b])
            self.geoms.append((int(b), g))
        self.contact_group = ode.JointGroup()
        self.limit_group = ode.JointGroup()
        ball = (rig.joint_type == BALL) & ~self.pinned
        self._ball = np.flatnonzero(ball) if self.limits else np.zeros(0, dtype=int)
        self._cone = ball_cone(rig)[self._ball]
        self._contacts = np.zeros(rig.num_bodies, dtype=int)
        self._time = 0.0
        self._free = [int(b) for b in np.flatnonzero(~self.pinned)]
        self._cos_cone = np.cos(self._cone)
        self._seen = None  # (pos, rot) of the current state, read by body_state; None: unknown

    def _add_joint(self, b: int, p: int) -> None:
        rig, w = self.rig, self.world
        child, parent = self.bodies[b], self.bodies[p]
        if rig.joint_type[b] == BALL:
            j = ode.BallJoint(w)
            j.attach(child, parent)
            j.setAnchor(tuple(rig.joint_pos[b]))
            axes = np.eye(3)
        elif rig.joint_type[b] == HINGE:
            j = ode.HingeJoint(w)
            j.attach(child, parent)
            j.setAnchor(tuple(rig.joint_pos[b]))
            j.setAxis(tuple(rig.joint_axis[b]))
            if self.limits:
                j.setParam(P_LOSTOP, float(rig.joint_lower[b, 0]))
                j.setParam(P_HISTOP, float(rig.joint_upper[b, 0]))
            axes = rig.joint_axis[b][None]
        else:
            raise ValueError(f"body {rig.body_names[b]}: a free joint below the root")
        self.joints.append(j)
        if self.joint_damping > 0:
            mot = ode.AMotor(w)
            mot.attach(child, parent)
            mot.setMode(ode.AMotorUser)
            mot.setNumAxes(len(axes))
            for k, a in enumerate(axes):
                mot.setAxis(k, 1, tuple(a))  # anchored to the child body
                mot.setParam(P_VEL + k * AXIS_STRIDE, 0.0)
                mot.setParam(P_FMAX + k * AXIS_STRIDE, ode.Infinity)
                mot.setParam(P_CFM + k * AXIS_STRIDE, 1.0 / self.joint_damping)
            self.motors.append(mot)

    # ---- state --------------------------------------------------------------------------
    def _pose(self):
        """World positions and rotations of the bodies now (kept from body_state when the
        state has not changed since: PyODE reads them one call per body)."""
        if self._seen is None:
            bs = self.bodies
            self._seen = (np.array([b.getPosition() for b in bs]),
                          np.array([b.getRotation() for b in bs]).reshape(-1, 3, 3))
        return self._seen

    def body_state(self) -> BodyState:
        self._seen = None
        pos, rot = self._pose()
        self._seen = pos.copy(), rot.copy()  # the caller may change what it gets
        bs = self.bodies
        v = np.array([b.getLinearVel() for b in bs])
        w = np.array([b.getAngularVel() for b in bs])
        return BodyState(pos, rot, v, w)

    def _set_body_state(self, state: BodyState) -> None:
        # project onto the joints' manifold (hinges keep their axial part), as MuJoCo does
        s = q_to_state(self.rig, *state_to_q(self.rig, state))
        self._seen = None
        for b in self._free:
            body = self.bodies[b]
            body.setPosition(tuple(s.pos[b]))
            body.setRotation(tuple(s.rot[b].ravel()))
            body.setLinearVel(tuple(s.linvel[b]))
            body.setAngularVel(tuple(s.angvel[b]))

    # ---- dynamics -----------------------------------------------------------------------
    def _apply_wrench(self, force, torque) -> None:
        force, torque = force.tolist(), torque.tolist()
        for b in self._free:
            self.bodies[b].addForce(force[b])
            self.bodies[b].addTorque(torque[b])

    def _collide(self) -> None:
        self.contact_group.empty()
        self._contacts[:] = 0
        if self.plane is None:
            return
        # a box whose lowest corner is clear of the plane has no contact: skip asking ODE
        pos, rot = self._pose()
        lowest = pos[:, 2] - 0.5 * (np.abs(rot[:, 2, :]) * self.rig.body_size).sum(1)
        for b, g in self.geoms:
            if lowest[b] > CLEAR:
                continue
            cs = ode.collide(g, self.plane)
            for c in cs:
                c.setMode(C_APPROX1 | C_SOFT_ERP | C_SOFT_CFM)
                c.setMu(CONTACT_MU)
                c.setSoftERP(CONTACT_ERP)
                c.setSoftCFM(CONTACT_CFM)
                j = ode.ContactJoint(self.world, self.contact_group, c)
                j.attach(self.bodies[b], None)
            self._contacts[b] = len(cs)

    def _ball_limits(self) -> None:
        """One-step cone stops for the ball joints beyond their cone angle."""
        self.limit_group.empty()
        if not len(self._ball):
            return
        G = self._pose()[1] @ np.swapaxes(self.rig.body_rest_rot, 1, 2)  # joint frames
        c, p = self._ball, self.rig.body_parent[self._ball]
        rel = np.swapaxes(G[p], 1, 2) @ G[c]  # in the parent joint frame
        # cos(angle) from the trace picks the joints near or past their cone cheaply; only
        # those get the exact (and costlier) axis-angle the stop is set from
        near = np.flatnonzero(0.5 * (np.trace(rel, axis1=1, axis2=2) - 1.0) < self._cos_cone + 1e-6)
        if not len(near):
            return
        rv = np.zeros((len(c), 3))
        rv[near] = matrix_to_axis_angle(rel[near])
        angle = np.linalg.norm(rv, axis=1)
        for k in np.flatnonzero(angle > self._cone):
            axis = G[p[k]] @ (rv[k] / angle[k])
            mot = ode.AMotor(self.world, self.limit_group)
            mot.attach(self.bodies[c[k]], self.bodies[p[k]])
            mot.setMode(ode.AMotorUser)
            mot.setNumAxes(1)
            mot.setAxis(0, 0, tuple(axis))
            mot.setAngle(0, float(angle[k]))
            mot.setParam(P_HISTOP, float(self._cone[k]))

    def step(self) -> None:
        if self._external:  # a push (set_external_force); ODE clears added forces each step
            for b in np.flatnonzero(np.any(self.external_force != 0, axis=1) & ~self.pinned):
                self.bodies[b].addForce(tuple(self.external_force[b]))
        self._collide()
        self._ball_limits()
        self.world.step(self.dt)
        self._seen = None
        self._time += self.dt

    @property
    def time(self) -> float:
        return self._time

    def contacts(self) -> np.ndarray:
        return self._contacts.copy()
