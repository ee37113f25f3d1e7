"""What a clip asks of the character, before any simulation.

Along one loop of a clip's reference (every frame, or every few for long clips), with the
character placed exactly on it: the inverse dynamics of the reference motion, met as well as
possible by the muscles with their activations free in [0, 1] (no fatigue, no rate limits),
by the ground through the foot corners within 2 cm of the floor, and by an unbounded root
residual, in the tracking controller's own solve. What is left over says how far the clip is
from what this body can do:

- unmet joint torque (N m, norm over the non-root joints): torque no activation pattern
  gives, at these poses and speeds;
- root help (body weights): force on the pelvis that neither the ground nor the muscles
  provide, i.e. the reference's root accelerates in a way its ground contacts cannot explain;
  and its torque (N m): where nothing touches, the rate at which the clip's angular momentum
  changes, which nothing can give in flight (tests/test_tracking.py checks it against
  MuJoCo's own momentum).

Measured on the bundled clips as a take plays them (strength 3, stance feet grounded by
engine.control.grounding): the walk 15 N m of unmet joint torque (mostly the toes), 0.02
body weights and 12 N m of root help; the sprint 43 N m, 0.21 body weights (as retargeted,
feet not grounded: 0.39) and 92 N m. The sprint's root torque is both in flight, where it is
the rate of change of the clip's angular momentum (its flights turn the body ~90 N m forward
and 20-30 N m about the vertical: they are not ballistic), and in stance, where the capture's
rate of angular momentum change is not one a ground force from under the foot can give
(~100-200 N m about the lateral axis, with 100-170 N of fore-aft force, in opposite senses
after landing and before take-off). Making the flights ballistic alone moves that need into
the stance beside them (docs/research/balance.md, eighteenth and nineteenth sessions). The
root help is the residual the solve chose at the tracker's weights; with the residual 100x
dearer the root's rows are left as far unmet (0.23 body weights, 95 N m), so it is what the
contacts cannot give, not a cost trade. A take of a clip that needs much root help leans on
the residual (`--residual`) or falls without it.
"""
from __future__ import annotations

import numpy as np

from .coordination import coordinate
from .grounding import SWING_CLEAR_M
from .plan import CyclicClip

G = 9.81
MARGIN = 0.02  # m: body corners this near the floor may push (the clip's own contacts: feet, a cartwheel's hands)
MAX_SAMPLES = 60  # frames solved per clip (every k-th frame of a long clip)


def reference_demands(ctrl, sim, clip: CyclicClip, trace: list | None = None) -> dict:
    """Demands of `clip` (see the module docstring) using the tracking controller `ctrl`'s
    dynamics, moment arms and contacts on `sim`'s physics. Moves the physics state: the
    caller puts the character back where it starts. `trace`, a list when given, receives
    (frame, root help as the root joint's generalised force (6,), contact rows) per frame
    solved."""
    rig = ctrl.rig
    M = rig.num_muscles
    lo, hi = np.zeros(M), np.ones(M)
    unbounded = np.full(6, 1e6)
    weight = rig.mass_kg * G
    start = rig.dof_start
    frames = range(0, clip.frames, max(1, -(-clip.frames // MAX_SAMPLES)))
    unmet, help_bw, help_nm, per_joint = [], [], [], np.zeros(rig.num_bodies)
    sol = None
    for k in frames:
        q, v, a = clip.q[k], clip.qvel[k], clip.qacc[k]
        sim.physics.set_q(q, v)
        state = sim.physics.body_state()
        Mm, bias = ctrl.dynamics(q, v)
        tau = Mm @ a + bias
        flfv, fpe, A, Jc = ctrl.muscle_terms(sim, state, MARGIN)
        sol = coordinate(tau, A, rig.muscle_f0, flfv, fpe, lo, hi, ctrl.params.weights, Jc=Jc,
                         residual_bound=unbounded, active=None if sol is None else sol.active)  # warm start
        left = tau - sol.achieved - Jc.T @ sol.contact
        left[:6] -= sol.residual
        unmet.append(float(np.linalg.norm(left[6:])))
        help_bw.append(float(np.linalg.norm(sol.residual[:3])) / weight)
        help_nm.append(float(np.linalg.norm(sol.residual[3:])))
        if trace is not None:
            trace.append((k, sol.residual.copy(), len(Jc)))
        for b in range(1, rig.num_bodies):
            per_joint[b] += np.linalg.norm(left[start[b]:start[b + 1]])
    per_joint /= len(unmet)
    worst = np.argsort(per_joint)[::-1][:3]
    return dict(clip=clip.name, frames_solved=len(unmet),
                unmet_joint_torque_Nm_mean=round(float(np.mean(unmet)), 2),
                unmet_joint_torque_Nm_max=round(float(np.max(unmet)), 2),
                root_help_body_weights_mean=round(float(np.mean(help_bw)), 4),
                root_help_body_weights_max=round(float(np.max(help_bw)), 4),
                root_torque_help_Nm_mean=round(float(np.mean(help_nm)), 2),
                root_torque_help_Nm_max=round(float(np.max(help_nm)), 2),
                worst_joints={rig.body_names[b]: round(float(per_joint[b]), 2) for b in worst},
                grounding=clip.grounding)


def figures(d: dict) -> str:
    """The demands of one clip in words, for reports and warnings."""
    out = (f"{d['unmet_joint_torque_Nm_mean']:.0f} N m of joint torque beyond the muscles, "
           f"{d['root_help_body_weights_mean']:.2f} body weights of root help")
    if "root_torque_help_Nm_mean" in d:  # a take saved before it was measured has none
        out += f" and {d['root_torque_help_Nm_mean']:.0f} N m of root torque"
    g = d.get("grounding")  # a take saved before the feet were grounded has none
    if g and g["foot_move_cm"] > 0:
        low = g.get("lowest_in_air_cm")  # a take saved before swinging feet were raised has none
        air = f", a swinging foot raised from {low:.1f} cm" if low is not None and low < 100 * SWING_CLEAR_M else ""
        out += f" (its stance feet moved up to {g['foot_move_cm']:.1f} cm onto the floor{air})"
    return out


def demanding(d: dict) -> bool:
    """A clip beyond the body, by the demands: more than 0.15 body weights of root help or
    60 N m of unmet joint torque on average (the bundled walk: 0.03, 26)."""
    return d["root_help_body_weights_mean"] > 0.15 or d["unmet_joint_torque_Nm_mean"] > 60.0
