"""The muscle half of one physics step (DESIGN.md "One physics step", stages 1-6).

Body transforms and velocities in, per-body force and torque out, the 3CC-r state
advanced. Everything is batched over muscles, segments and waypoints; the only Python
work per step is a handful of numpy calls.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import fatigue as fat
from . import kinematics as kin
from . import muscle as hill
from .errors import ParameterError
from .rig import Rig
from .transforms import cross


@dataclass(frozen=True)
class PDGains:
    """Muscle-space PD gains per muscle: kp in N/m, kd in N s/m (eq. 4).

    Appendix C.1 sets k_p = f0 (per metre of length error) and k_d = 0.1 k_p; `kp_scale`
    multiplies both (the physics work tunes it by measurement).
    """

    kp: np.ndarray
    kd: np.ndarray

    @classmethod
    def paper(cls, rig: Rig, kp_scale: float = 1.0) -> "PDGains":
        if not np.isfinite(kp_scale) or kp_scale < 0:
            raise ParameterError("kp_scale", f"must be a finite number >= 0, got {kp_scale!r}")
        kp = rig.muscle_f0 * kp_scale
        return cls(kp=kp, kd=0.1 * kp)


@dataclass
class MuscleStep:
    """What one step computed, per muscle (M,) and per body (B, 3)."""

    length: np.ndarray
    length_rate: np.ndarray
    activation: np.ndarray
    force: np.ndarray
    body_force: np.ndarray
    body_torque: np.ndarray
    fatigue: fat.FatigueState


class MuscleSystem:
    """Muscles of one rig with their PD gains, 3CC-r parameters and time step."""

    def __init__(self, rig: Rig, fatigue: fat.FatigueParams | None = None,
                 dt: float = 1.0 / 120.0, gains: PDGains | None = None):
        self.rig = rig
        self.dt = float(dt)
        self.params = (fatigue or fat.FatigueParams()).validate(self.dt)
        self.gains = gains or PDGains.paper(rig)
        self.paths = kin.MusclePaths(rig)
        self._seg_a, self._seg_b = rig.seg_a, rig.seg_b
        self._seg_muscle = rig.seg_muscle
        # Each segment pulls both of its end waypoints (eq. 20); the pull acts on the
        # waypoint's force body. The 2S end contributions are sorted by body once, so that
        # one reduceat sums them per body every step.
        ends = np.concatenate([self._seg_a, self._seg_b])
        end_body = rig.wp_force_body[ends]
        self._order = np.argsort(end_body, kind="stable")
        self._end_wp = ends[self._order]
        self._end_sign = np.concatenate([np.ones(len(self._seg_a)), -np.ones(len(self._seg_a))])[self._order]
        self._end_seg = np.concatenate([np.arange(len(self._seg_a))] * 2)[self._order]
        counts = np.bincount(end_body, minlength=rig.num_bodies)
        self._bodies_hit = np.flatnonzero(counts)
        self._body_start = (np.cumsum(counts) - counts)[self._bodies_hit]

    def kinematics(self, body_rot, body_pos, body_linvel, body_angvel):
        """Waypoints, segment directions, muscle lengths and length rates (stage 1)."""
        start = self.rig.muscle_seg_start
        wp, wv = self.paths.positions_and_velocities(body_rot, body_pos, body_linvel, body_angvel)
        d = wp[self._seg_b] - wp[self._seg_a]
        seg_len = np.sqrt(np.einsum("si,si->s", d, d))
        u = d / seg_len[:, None]
        dv = wv[self._seg_b] - wv[self._seg_a]
        length = np.add.reduceat(seg_len, start)
        rate = np.add.reduceat(np.einsum("si,si->s", u, dv), start)
        return wp, u, length, rate

    def body_wrench(self, wp, u, force, origin):
        """Per-body force and torque about `origin` (B, 3) from muscle tensions (stage 6).

        Each segment pulls its two end waypoints towards each other with the muscle's
        tension (eq. 20); the pull is applied to the waypoint's force body.
        """
        f = force[self._seg_muscle][self._end_seg, None] * u[self._end_seg]
        f *= self._end_sign[:, None]
        moment = cross(wp[self._end_wp], f)
        sums = np.add.reduceat(np.concatenate([f, moment], axis=1), self._body_start, axis=0)
        out = np.zeros((self.rig.num_bodies, 6))
        out[self._bodies_hit] = sums
        body_force = out[:, :3]
        return body_force, out[:, 3:] - cross(origin, body_force)

    def step(self, body_rot, body_pos, body_linvel, body_angvel, action, state: fat.FatigueState,
             body_origin=None) -> MuscleStep:
        """Stages 1-6 for a PD action a (eq. 11): lengths, Hill, PD, fatigue clip, forces, update.

        Torques are about body_origin (default body_pos, the body frame origin).
        """
        rig, p = self.rig, self.params
        wp, u, length, rate = self.kinematics(body_rot, body_pos, body_linvel, body_angvel)
        lbar = hill.normalized_length(length, rig.muscle_rest_length, rig.muscle_lt, rig.muscle_lm)
        vbar = hill.normalized_velocity(rate, rig.muscle_rest_length, rig.muscle_lm)
        l_target = hill.target_length(action, rig.muscle_rest_length)
        f_pd = hill.pd_force(length, rate, l_target, self.gains.kp, self.gains.kd)
        alpha_pd = hill.pd_activation(f_pd, rig.muscle_f0, lbar, vbar)
        alpha, new_state = fat.step_with_activation(state, alpha_pd, self.dt, p)
        force = hill.muscle_force(alpha, lbar, vbar, rig.muscle_f0)
        origin = body_pos if body_origin is None else body_origin
        body_force, body_torque = self.body_wrench(wp, u, force, origin)
        return MuscleStep(length, rate, alpha, force, body_force, body_torque, new_state)
