"""The physics backend interface and the conversions both backends share.

A backend simulates the rig's 23 rigid bodies: ground contact for every body's box, joint
limits, joint damping, pinned bodies. State crosses the interface per body in the world
frame (`BodyState`) or in the engine's generalised coordinates (engine.kinematics: MuJoCo's
qpos/qvel layout over the full rig, pinned joints included).

Pinned bodies are fixed at their rest (T-pose) transform and never move; a pinned body's
parent must be pinned too (pinning is welding to the world, not to a moving parent). In
`set_q` / `set_body_state` the entries of pinned bodies are ignored; `get_q` reports their
rest coordinates.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from ..kinematics import BALL, FREE, HINGE, forward_kinematics, q_to_pose, rest_q
from ..rig import Rig
from ..transforms import cross, matrix_to_quat

GRAVITY = np.array([0.0, 0.0, -9.81])


@dataclass
class BodyState:
    """World-frame state per body (engine body frame = box centre = centre of mass).

    pos (B, 3), rot (B, 3, 3) box axes as columns, linvel (B, 3) velocity of the box
    centre, angvel (B, 3) angular velocity.
    """

    pos: np.ndarray
    rot: np.ndarray
    linvel: np.ndarray
    angvel: np.ndarray

    def copy(self) -> "BodyState":
        return BodyState(self.pos.copy(), self.rot.copy(), self.linvel.copy(), self.angvel.copy())


def ball_cone(rig: Rig) -> np.ndarray:
    """Ball-joint limit as one cone angle (rad) per body, as MuJoCo limits a ball joint's
    total rotation: the largest per-axis bound max(|lower|, |upper|), so every single-axis
    rotation the rig allows stays allowed."""
    return np.maximum(np.abs(rig.joint_lower), np.abs(rig.joint_upper)).max(axis=1)


def _finite(name: str, a, shape) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    if a.shape != tuple(shape):
        raise ParameterError(name, f"shape {a.shape}, expected {tuple(shape)}")
    if not np.isfinite(a).all():  # the method: np.all costs several microseconds more per call
        raise ParameterError(name, "contains NaN or infinite values")
    return a


class Backend(ABC):
    """One simulated character. Subclasses implement the abstract methods.

    dt: time step (s); joint_damping: c in tau = -c * (relative angular velocity), every
    joint; ground: a ground plane z = 0 that every body's box collides with; pinned: names
    of bodies fixed at their rest transform; limits: joint limits on (False is for
    like-for-like backend comparisons: ODE ball joints have no limits).
    """

    name = "?"

    def __init__(self, rig: Rig, dt: float = 1 / 120, joint_damping: float = 10.0,
                 ground: bool = True, pinned=(), limits: bool = True):
        if not (np.isfinite(dt) and 0 < dt <= 0.1):
            raise ParameterError("dt", f"{dt!r} s: expected a time step in (0, 0.1]")
        if not (np.isfinite(joint_damping) and joint_damping >= 0):
            raise ParameterError("joint_damping", f"{joint_damping!r}: expected a finite value >= 0")
        if isinstance(pinned, str):
            pinned = (pinned,)
        pin = np.zeros(rig.num_bodies, dtype=bool)
        for n in pinned:
            if n not in rig.body_names:
                raise ParameterError("pinned", f"rig '{rig.name}' has no body '{n}'")
            pin[rig.body_names.index(n)] = True
        for b in np.flatnonzero(pin):
            p = rig.body_parent[b]
            if p >= 0 and not pin[p]:
                raise ParameterError("pinned", f"body '{rig.body_names[b]}' is pinned but its "
                                     f"parent '{rig.body_names[p]}' is not; pin it too")
        hinge = rig.joint_type == HINGE
        bad = hinge & ~np.isclose(np.linalg.norm(rig.joint_axis, axis=1), 1.0)
        if np.any(bad):
            raise ParameterError("rig", "hinge axis is not a unit vector for body "
                                 f"'{rig.body_names[np.flatnonzero(bad)[0]]}'")
        self.rig, self.dt, self.joint_damping, self.ground = rig, float(dt), float(joint_damping), bool(ground)
        self.limits = bool(limits)
        self.pinned = pin
        self._rest_q = rest_q(rig)
        qstart = rig.q_start
        self._pin_qi = np.concatenate([np.arange(qstart[b], qstart[b + 1]) for b in np.flatnonzero(pin)] + [[]]).astype(int)
        self._pin_vi = np.concatenate([np.arange(rig.dof_start[b], rig.dof_start[b + 1]) for b in np.flatnonzero(pin)] + [[]]).astype(int)
        self.rest_state = q_to_state(rig, self._rest_q, np.zeros(rig.num_dofs))
        self.external_force = np.zeros((rig.num_bodies, 3))  # set_external_force: a push
        self._external = False

    # ---- what a backend implements ------------------------------------------------------
    @abstractmethod
    def body_state(self) -> BodyState:
        """Current world-frame state of every body."""

    @abstractmethod
    def _set_body_state(self, state: BodyState) -> None:
        """Set a validated state (pinned entries already replaced by rest values)."""

    @abstractmethod
    def _apply_wrench(self, force: np.ndarray, torque: np.ndarray) -> None: ...

    @abstractmethod
    def step(self) -> None:
        """Advance one time step dt (applied wrenches are then cleared)."""

    @property
    @abstractmethod
    def time(self) -> float:
        """Simulated time in seconds since construction."""

    @abstractmethod
    def contacts(self) -> np.ndarray:
        """Number of ground contact points per body, (B,) int."""

    # ---- shared -------------------------------------------------------------------------
    def set_body_state(self, state: BodyState) -> None:
        """Set positions and velocities from world-frame body state. Joints stay consistent:
        the state is converted to generalised coordinates (hinges keep only their axial
        rotation, non-root positions follow from the joints)."""
        B = self.rig.num_bodies
        s = BodyState(_finite("state.pos", state.pos, (B, 3)), _finite("state.rot", state.rot, (B, 3, 3)),
                      _finite("state.linvel", state.linvel, (B, 3)),
                      _finite("state.angvel", state.angvel, (B, 3)))
        self._set_body_state(self._with_pins(s))

    def set_q(self, q, qdot=None) -> None:
        """Set the state from the engine's generalised coordinates (nq,) and velocities (nv,)."""
        q = _finite("q", q, self._rest_q.shape)
        qdot = np.zeros(self.rig.num_dofs) if qdot is None else _finite("qdot", qdot, (self.rig.num_dofs,))
        q, qdot = q.copy(), qdot.copy()
        q[self._pin_qi], qdot[self._pin_vi] = self._rest_q[self._pin_qi], 0.0  # pinned joints stay at rest
        self._set_body_state(q_to_state(self.rig, q, qdot))

    def get_q(self) -> tuple[np.ndarray, np.ndarray]:
        """Current (q, qdot) in the engine's generalised coordinates."""
        return state_to_q(self.rig, self.body_state())

    def snapshot(self) -> dict:
        """What `restore` needs to put the backend back in this state: here every body's pose
        and velocities and the push from outside (MuJoCo adds its contact solver's warm start
        and is then exact; ODE's solver keeps a warm start out of PyODE's reach, so a restored
        ODE take continues within millimetres of the original, not to the bit)."""
        return dict(bodies=self.body_state().copy(), external=self.external_force.copy())

    def restore(self, snap: dict) -> None:
        """Back to a `snapshot`, its reported fault forgotten."""
        self.set_body_state(snap["bodies"])
        self.set_external_force(snap["external"])
        self.clear_fault()

    def apply_wrench(self, force, torque) -> None:
        """World-frame force (B, 3) at each box centre and torque (B, 3), for the next step only."""
        B = self.rig.num_bodies
        self._apply_wrench(_finite("force", force, (B, 3)), _finite("torque", torque, (B, 3)))

    def set_external_force(self, force) -> None:
        """World-frame force (B, 3) at each body's centre of mass (its box centre), applied
        on every step from now on until set again (zeros end it): a push from outside the
        character. Kept apart from apply_wrench, whose one-step wrench is the muscles' and
        the root residual's."""
        self.external_force = _finite("external force", force, (self.rig.num_bodies, 3)).copy()
        self._external = bool(np.any(self.external_force))

    def ground_force(self) -> np.ndarray | None:
        """World-frame force (3,) the ground put on the character in the last step, where
        the backend can tell (None otherwise)."""
        return None

    fault: str | None = None  # what went wrong in a step the engine itself reported (None: nothing)

    def clear_fault(self) -> None:
        """Forget a reported fault (a state put back from a snapshot)."""
        self.fault = None

    def kinetic_energy(self) -> float:
        s = self.body_state()
        w_local = np.einsum("bji,bj->bi", s.rot, s.angvel)
        return float(0.5 * np.sum(self.rig.body_mass * np.sum(s.linvel ** 2, 1))
                     + 0.5 * np.sum(self.rig.body_inertia * w_local ** 2))

    def potential_energy(self) -> float:
        """Gravitational potential energy, zero at the ground plane z = 0."""
        return float(-np.sum(self.rig.body_mass * (self.body_state().pos @ GRAVITY)))

    def lowest_point(self) -> float:
        """Lowest z over all box corners (for floor-penetration checks)."""
        s = self.body_state()
        half = 0.5 * self.rig.body_size
        return float(np.min(s.pos[:, 2] - np.sum(np.abs(s.rot[:, 2, :]) * half, 1)))

    def _with_pins(self, s: BodyState) -> BodyState:
        if not self.pinned.any():
            return s
        s = s.copy()
        r, p = self.rest_state, self.pinned
        s.pos[p], s.rot[p], s.linvel[p], s.angvel[p] = r.pos[p], r.rot[p], 0.0, 0.0
        return s


# ---- generalised coordinates <-> body state -----------------------------------------------
def q_to_state(rig: Rig, q: np.ndarray, qdot: np.ndarray) -> BodyState:
    """Body state of generalised coordinates and velocities (MuJoCo's qvel convention);
    batched over leading axes of q (..., nq) and qdot (..., nv)."""
    qdot = np.asarray(qdot, dtype=float)
    root_pos, local_rot = q_to_pose(rig, q)
    G, x, body_rot, body_pos = forward_kinematics(rig, root_pos, local_rot)
    w, vj = np.zeros(x.shape), np.zeros(x.shape)  # angular velocity, velocity of joint origin
    mv = lambda R, v: np.einsum("...ij,...j->...i", R, v)
    for b in range(rig.num_bodies):
        i, t, p = rig.dof_start[b], rig.joint_type[b], rig.body_parent[b]
        if t == FREE:
            vj[..., b, :], w[..., b, :] = qdot[..., i:i + 3], mv(G[..., b, :, :], qdot[..., i + 3:i + 6])
            continue
        vj[..., b, :] = vj[..., p, :] + cross(w[..., p, :], x[..., b, :] - x[..., p, :])
        if t == BALL:
            w[..., b, :] = w[..., p, :] + mv(G[..., b, :, :], qdot[..., i:i + 3])
        else:
            w[..., b, :] = w[..., p, :] + (G[..., p, :, :] @ rig.joint_axis[b]) * qdot[..., i, None]
    return BodyState(body_pos, body_rot, vj + cross(w, body_pos - x), w)


def state_to_q(rig: Rig, s: BodyState) -> tuple[np.ndarray, np.ndarray]:
    """Generalised coordinates of a body state: joint frames from the body rotations, the
    root position from the root body; hinges keep the rotation about their axis."""
    G = s.rot @ np.swapaxes(rig.body_rest_rot, 1, 2)  # joint-frame rotations
    q, qd = [], []
    for b, t in enumerate(rig.joint_type):
        p = rig.body_parent[b]
        if t == FREE:
            x = s.pos[b] + G[b] @ (rig.joint_pos[b] - rig.body_rest_pos[b])
            q += [*x, *matrix_to_quat(G[b])]
            qd += [*(s.linvel[b] + np.cross(s.angvel[b], x - s.pos[b])), *(G[b].T @ s.angvel[b])]
            continue
        local = G[p].T @ G[b]
        w_rel = s.angvel[b] - s.angvel[p]
        if t == BALL:
            q += list(matrix_to_quat(local))
            qd += list(G[b].T @ w_rel)
        else:
            a = rig.joint_axis[b]
            # twist angle about a: R - R^T = 2 sin(t) [a]x, trace(R) - a.R.a = 2 cos(t)
            skew_part = np.array([local[2, 1] - local[1, 2], local[0, 2] - local[2, 0], local[1, 0] - local[0, 1]])
            q.append(np.arctan2(0.5 * skew_part @ a, 0.5 * (np.trace(local) - a @ local @ a)))
            qd.append(a @ (G[p].T @ w_rel))
    return np.array(q), np.array(qd)
