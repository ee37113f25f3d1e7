"""MuJoCo backend (PyPI `mujoco`): the default.

The rig becomes an MJCF model whose body frames are the engine's joint frames (origin at the
joint centre, world-aligned at rest), so MuJoCo's qpos/qvel are the engine's generalised
coordinates. Each body's inertial frame is its box (centre and axes), so xipos/ximat are the
engine's body transforms and xfrc_applied acts at the box centre.

- Joints (limits stiffened: solref 2 dt, solimp 0.95-0.99): free root, ball joints limited to one cone angle (MuJoCo limits a ball joint's
  total rotation angle): the largest per-axis bound |lower|, |upper| of that joint, so every
  single-axis motion the rig allows stays allowed; hinges with axis and [lower, upper].
- Damping `joint_damping` on every non-free DOF, integrated implicitly (implicitfast).
- Every body's box collides with the ground plane; bodies never collide with each other.
  Speculative contacts are on (see __init__). MuJoCo's soft friction lets a loaded foot creep
  (a held pose's feet slid 27 cm apart in 14 s, and a standing body turned away on its
  feet); elliptic friction cones with impratio 100 (friction 100x stiffer than the normal
  force, the same friction coefficient) cut that 200-fold (a box pushed at 0.3 of its
  weight: 3 mm in 2 s -> 0.015 mm). MuJoCo's no-slip solver stops it too, but kicks falling
  arms at their joint limits (a hand at 8 m/s against 1.3).
- Lean by construction, each measured to change no trajectory beyond rounding
  (`sinew bench`): the box-ground contacts are explicit <pair>s, so no broad phase runs
  over the 24 geoms (the same contacts, bit for bit); the constraint Jacobian is sparse
  (the Newton solver's Hessian is then factorised sparsely: the same equations, ~25 %
  cheaper for 56 DOFs); island discovery is off (one character is one island).
  lean=False builds the model as before, for the bench's side-by-side.
- Pinned bodies get no joint: welded to their (pinned) parent, the root to the world.

The data is kept "half-stepped": after every state change mj_step1 (kinematics, contacts,
velocities) has run, so body_state() reads xipos/ximat/cvel directly, and step() is
mj_step2 (forces, integration) followed by mj_step1 for the new state.
"""
from __future__ import annotations

import mujoco
import numpy as np

from ..kinematics import BALL, FREE
from ..transforms import matrix_to_quat
from .base import GRAVITY, Backend, BodyState, _finite, ball_cone, state_to_q

# w x r for rows (B, 3) as one product: (w r^T flattened) @ _EPS, _EPS[3 j + k, i] = eps_ijk.
# Every sum is one product minus another plus exact zeros: the same bits as transforms.cross.
_EPS = np.zeros((9, 3))
_EPS[[5, 6, 1], [0, 1, 2]] = 1.0
_EPS[[7, 2, 3], [0, 1, 2]] = -1.0


def _f(v) -> str:
    """Numbers for MJCF, exactly (repr of Python floats: numpy 2's repr of its scalars is
    'np.float64(...)', which MuJoCo cannot read)."""
    return " ".join(repr(float(x)) for x in np.ravel(v))


# friction "harder" than the normal force (elliptic cones, impratio): see the module docstring
CONTACT_OPTIONS = 'cone="elliptic" impratio="100"'


def build_mjcf(rig, dt: float, joint_damping: float, ground: bool, pinned: np.ndarray, lean: bool = True) -> str:
    """MJCF text of the rig (see the module docstring for the conventions). lean=False
    writes the model as it was before the lean settings (geoms filtered by contype and
    conaffinity through MuJoCo's broad phase, dense Jacobian), for `sinew bench`."""
    children = {b: [] for b in range(-1, rig.num_bodies)}
    for b, p in enumerate(rig.body_parent):
        children[int(p)].append(b)
    cone = ball_cone(rig)
    # limits as stiff as MuJoCo allows at this step (time constant 2 dt, critical damping);
    # the default (0.02 s, solimp 0.9..0.95) lets a hanging arm overshoot a cone by 3 deg
    lim = f'solreflimit="{_f(2 * dt)} 1" solimplimit="0.95 0.99 0.001"'
    box_filter, ground_filter = ('contype="0" conaffinity="0"',) * 2 if lean else \
        ('contype="1" conaffinity="2"', 'contype="2" conaffinity="1"')

    def body(b: int, indent: str) -> list[str]:
        p = rig.body_parent[b]
        pos = rig.joint_pos[b] - (rig.joint_pos[p] if p >= 0 else 0.0)
        off = rig.body_rest_pos[b] - rig.joint_pos[b]
        quat = matrix_to_quat(rig.body_rest_rot[b])
        t = rig.joint_type[b]
        out = [f'{indent}<body name="{rig.body_names[b]}" pos="{_f(pos)}">']
        if pinned[b]:
            pass
        elif t == FREE:
            out.append(f'{indent}  <freejoint name="{rig.body_names[b]}"/>')
        elif t == BALL:
            out.append(f'{indent}  <joint name="{rig.body_names[b]}" type="ball" range="0 {_f(cone[b])}" '
                       f'damping="{_f(joint_damping)}" {lim}/>')
        else:
            out.append(f'{indent}  <joint name="{rig.body_names[b]}" type="hinge" axis="{_f(rig.joint_axis[b])}" '
                       f'range="{_f([rig.joint_lower[b, 0], rig.joint_upper[b, 0]])}" damping="{_f(joint_damping)}" {lim}/>')
        out.append(f'{indent}  <inertial pos="{_f(off)}" quat="{_f(quat)}" mass="{_f(rig.body_mass[b])}" '
                   f'diaginertia="{_f(rig.body_inertia[b])}"/>')
        out.append(f'{indent}  <geom name="{rig.body_names[b]}" type="box" size="{_f(0.5 * rig.body_size[b])}" '
                   f'pos="{_f(off)}" quat="{_f(quat)}" {box_filter} mass="0"/>')
        for c in children[b]:
            out += body(c, indent + "  ")
        out.append(f"{indent}</body>")
        return out

    lines = [
        '<mujoco model="sinew">',
        '  <compiler angle="radian" autolimits="true" inertiafromgeom="false"/>',
        f'  <option timestep="{_f(dt)}" gravity="{_f(GRAVITY)}" integrator="implicitfast" '
        f'{CONTACT_OPTIONS} '
        f'jacobian="{"sparse" if lean else "auto"}"/>',
        "  <worldbody>",
    ]
    if ground:
        lines.append(f'    <geom name="ground" type="plane" size="0 0 1" {ground_filter}/>')
    for r in children[-1]:
        lines += body(r, "    ")
    lines.append("  </worldbody>")
    if ground and lean:  # every box that can move against the ground (not welded to the world)
        static = np.zeros(rig.num_bodies, dtype=bool)
        for b, p in enumerate(rig.body_parent):  # parents come first
            static[b] = pinned[b] and (p < 0 or static[p])
        lines += ["  <contact>"] + [f'    <pair geom1="{rig.body_names[b]}" geom2="ground"/>'
                                    for b in np.flatnonzero(~static)] + ["  </contact>"]
    lines.append("</mujoco>")
    return "\n".join(lines)


def full_mass_matrix(model, data, out: np.ndarray) -> np.ndarray:
    """The dense joint-space inertia matrix into `out` (nv, nv): mj_fullM, whose Python
    signature changed in MuJoCo 4 ((m, d, dst); 3.3, which the Intel-Mac extension ships,
    takes (m, dst, qM))."""
    try:
        mujoco.mj_fullM(model, data, out)
    except TypeError:
        mujoco.mj_fullM(model, out, data.qM)
    return out


_WARNING = [""]  # MuJoCo's last warning text (its default handler appends it to MUJOCO_LOG.TXT in the cwd)


def _keep_warning(text) -> None:
    _WARNING[0] = str(text).strip()


if mujoco.get_mju_user_warning() is None:  # another handler (a host application's) is left as it is
    mujoco.set_mju_user_warning(_keep_warning)


class MujocoBackend(Backend):
    """MuJoCo simulation of the rig; see the module docstring."""

    name = "mujoco"

    def __init__(self, rig, dt=1 / 120, joint_damping=10.0, ground=True, pinned=(), limits=True, lean=True):
        super().__init__(rig, dt, joint_damping, ground, pinned, limits)
        self.xml = build_mjcf(rig, self.dt, self.joint_damping, self.ground, self.pinned, lean)
        self.model = mujoco.MjModel.from_xml_string(self.xml)
        m = self.model
        # speculative contacts (MuJoCo >= 4): a fast body is caught before it passes into the
        # floor; halves the impact penetration of a falling head at 120 Hz (4.3 -> 2.5 cm).
        # The Intel-Mac extension ships MuJoCo 3.3 (no wheel of 4 there), which has none.
        speculative = getattr(mujoco.mjtEnableBit, "mjENBL_SPECULATIVE", None)
        if speculative is not None:
            m.opt.enableflags |= int(speculative)
        if lean:
            m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_ISLAND)
        if not self.limits:
            m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_LIMIT)
        self.data = mujoco.MjData(m)
        names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, i) for i in range(1, m.nbody)]
        if names != list(rig.body_names):
            raise RuntimeError("MuJoCo body order differs from the rig's")  # a bug, not bad input
        # engine q / qdot index of every MuJoCo qpos / qvel entry (pinned joints are absent)
        qi, vi = [], []
        for b in np.flatnonzero(~self.pinned):
            qi += range(rig.q_start[b], rig.q_start[b + 1])
            vi += range(rig.dof_start[b], rig.dof_start[b + 1])
        self._qi, self._vi = np.array(qi, dtype=int), np.array(vi, dtype=int)
        assert len(qi) == m.nq and len(vi) == m.nv
        self._geom_body = m.geom_bodyid - 1  # rig body of each geom (-1: ground)
        # Views into MjData, made once (each attribute access builds a new array object);
        # one tree, so every body's cvel is about the subtree centre of mass of body 1.
        d = self.data
        if not (m.body_rootid[1:] == 1).all():
            raise RuntimeError("MuJoCo model has more than one body tree")  # a bug, not bad input
        self._xipos, self._ximat = d.xipos[1:], d.ximat[1:].reshape(-1, 3, 3)
        self._cvel, self._com = d.cvel[1:], d.subtree_com[1]
        self._xfrc, self._xfrc_bodies = d.xfrc_applied, d.xfrc_applied[1:]
        self._warnings = [int(w) for w in (mujoco.mjtWarning.mjWARN_BADQACC, mujoco.mjtWarning.mjWARN_BADQVEL,
                                           mujoco.mjtWarning.mjWARN_BADQPOS)]
        # the warnings' counts as one live array (a view into MjData; one struct per warning otherwise)
        self._warning_numbers = getattr(d.warning, "number", None)
        self._everything_moves = bool(len(qi) == len(self._rest_q) and (self._qi == np.arange(m.nq)).all()
                                      and (self._vi == np.arange(m.nv)).all())  # get_q: qpos and qvel as they are
        self._warned = self._warning_count()
        mujoco.mj_forward(m, self.data)

    # ---- state --------------------------------------------------------------------------
    def set_q(self, q, qdot=None) -> None:
        """Direct: MuJoCo's qpos/qvel are the engine's coordinates (pinned joints left out).
        The contact solver's warm start is cleared, so what follows depends on the state set
        here and not on what the backend simulated before."""
        q = _finite("q", q, self._rest_q.shape)
        qdot = np.zeros(self.rig.num_dofs) if qdot is None else _finite("qdot", qdot, (self.rig.num_dofs,))
        self.data.qpos[:] = q[self._qi]
        self.data.qvel[:] = qdot[self._vi]
        self.data.qacc_warmstart[:] = 0.0
        mujoco.mj_forward(self.model, self.data)

    def snapshot(self) -> dict:
        """MuJoCo's whole dynamic state: qpos, qvel, the contact solver's warm start and the
        clock, and the push from outside; restored, the steps that follow are the same to the bit."""
        d = self.data
        return dict(qpos=d.qpos.copy(), qvel=d.qvel.copy(), warm=d.qacc_warmstart.copy(), time=float(d.time),
                    external=self.external_force.copy())

    def restore(self, snap: dict) -> None:
        m, d = self.model, self.data
        d.qpos[:], d.qvel[:], d.qacc_warmstart[:], d.time = snap["qpos"], snap["qvel"], snap["warm"], snap["time"]
        self.set_external_force(snap["external"])
        d.xfrc_applied[:] = 0.0
        self.clear_fault()
        mujoco.mj_step1(m, d)  # the data is kept half-stepped (step)

    def get_q(self):
        if self._everything_moves:  # no pinned joint: MuJoCo's qpos and qvel are q and qdot
            return self.data.qpos.copy(), self.data.qvel.copy()
        q, qd = self._rest_q.copy(), np.zeros(self.rig.num_dofs)
        q[self._qi], qd[self._vi] = self.data.qpos, self.data.qvel
        return q, qd

    def _set_body_state(self, state: BodyState) -> None:
        q, qd = state_to_q(self.rig, state)
        self.data.qpos[:] = q[self._qi]
        self.data.qvel[:] = qd[self._vi]
        mujoco.mj_forward(self.model, self.data)

    def body_state(self) -> BodyState:
        pos, cvel = self._xipos.copy(), self._cvel  # cvel: [angular, linear at the tree's centre of mass]
        w = cvel[:, :3].copy()
        v = (w[:, :, None] * (pos - self._com)[:, None, :]).reshape(-1, 9) @ _EPS  # w x (pos - com)
        v += cvel[:, 3:]
        return BodyState(pos, self._ximat.copy(), v, w)

    # ---- dynamics -----------------------------------------------------------------------
    def _apply_wrench(self, force, torque) -> None:
        self._xfrc_bodies[:, :3] = force
        self._xfrc_bodies[:, 3:] = torque

    def step(self) -> None:
        m, d = self.model, self.data
        if self._external:  # a push (set_external_force), on top of this step's wrench
            self._xfrc_bodies[:, :3] += self.external_force
        mujoco.mj_step2(m, d)
        self._xfrc.fill(0.0)
        mujoco.mj_step1(m, d)
        n = self._warning_count()
        if n != self._warned:  # MuJoCo met a bad acceleration, velocity or position and reset its state
            self._warned = n
            said = f": {_WARNING[0].rstrip('.')}" if _WARNING[0] else ""
            self.fault = self.fault or ("MuJoCo found the state unsound (an acceleration, velocity or position "
                                        f"out of bounds, as after a push no body takes) and reset it{said}")

    def _warning_count(self) -> int:
        n = self._warning_numbers
        if n is None:  # bindings without the struct list's field arrays
            w = self.data.warning
            return sum(int(w[i].number) for i in self._warnings)
        a, b, c = self._warnings
        return int(n[a]) + int(n[b]) + int(n[c])

    def ground_force(self):
        """World-frame force (3,) the ground put on the character in the last step: the
        constraint force on the free root's translation, which sums every contact force
        (joint limits act on joint coordinates only). None when the root is pinned."""
        if self.pinned[0]:
            return None
        return self.data.qfrc_constraint[:3].copy()

    @property
    def time(self) -> float:
        return float(self.data.time)

    def contacts(self) -> np.ndarray:
        d = self.data
        g = d.contact.geom[: d.ncon].ravel()
        b = self._geom_body[g]
        return np.bincount(b[b >= 0], minlength=self.rig.num_bodies)


__all__ = ["MujocoBackend", "build_mjcf", "ball_cone", "full_mass_matrix"]
