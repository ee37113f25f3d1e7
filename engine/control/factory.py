"""Which controller plays a take: the one place that decides (engine.take, the add-on and the
training code ask here).

- "policy": the exported MuscleVAE policy (engine.control.policy) following the plan; a held
  pose standing on its feet starts balanced, as the stand controller starts it. A policy whose
  action is "offset" steers the tracker (engine.control.offset_policy).
- "tracking": the stand controller for a still pose standing on its feet without the root
  residual (engine.control.stand); else the tracker steered by the balance planner when
  TrackingParams.balance is set (engine.control.balance, seeded by the take's seed); else the
  tracker alone (engine.control.tracking).
"""
from __future__ import annotations

from ..errors import ParameterError
from .controller import Controller

KINDS = ("tracking", "policy")


def tracking_controller(sim, plan, params, seed: int = 0) -> Controller:
    """The controller for a tracking take (the module docstring's "tracking")."""
    from .stand import StandController, is_stance
    from .tracking import TrackingController

    if params.residual == 0 and is_stance(sim, plan):
        return StandController(sim, plan, params)
    if params.balance is not None:
        from .balance import BalancePlanner

        return BalancePlanner(sim, plan, params, params.balance, seed)
    return TrackingController(sim, plan, params)


def make_controller(kind: str, sim, plan, params=None, policy=None, mode: str = "track",
                    noise_scale: float | None = None, seed: int = 0) -> Controller:
    """The controller of `kind` (KINDS) for a take of `plan` on `sim`: TrackingParams `params`
    for "tracking", a loaded PolicyFile `policy` and its mode and latent noise for "policy"."""
    if kind == "tracking":
        from .tracking import TrackingParams

        return tracking_controller(sim, plan, params or TrackingParams(), seed)
    if kind == "policy":
        from .policy import PlanTrack, PolicyController
        from .stand import is_stance, start_stance

        if policy is None:
            raise ParameterError("policy", "controller 'policy' needs a policy file (sinew export-policy)")
        if policy.action_kind == "offset":  # the tracker below, the network choosing its offsets
            from .offset_policy import OffsetPolicyController

            return OffsetPolicyController(policy, sim, plan, mode=mode, noise_scale=noise_scale, seed=int(seed))
        track = PlanTrack(sim.rig, plan, policy.period)  # every clip of the chain, cross-fades included
        ctrl = PolicyController(policy, sim.rig, mode=mode, reference=track, seed=int(seed), noise_scale=noise_scale)
        if is_stance(sim, plan):  # a held pose starts balanced, as the stand controller starts it
            start_stance(sim, plan)
        return ctrl
    raise ParameterError("controller", f"{kind!r}: choose {' or '.join(KINDS)}")
