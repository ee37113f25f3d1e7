"""A policy in the balance planner's action space (issue 47): the network chooses the offsets
the planner would search for, and the tracker's coordination solve turns them into
activations inside the 3CC-r bounds, as in a tracked take.

Every `period` physics steps (the planner's replan, 0.1 s) the MuscleVAE networks (prior,
posterior, mixture-of-experts decoder; engine.control.policy) map what the character observes
to the first two knots of an offset plan on the reference (the offsets now and one knot on,
at engine.control.balance.offset_dofs):

    s = [state features, fatigue parts, the offsets played now]      (policy.state_features)
    t = target features of the reference `period` steps on, as the tracker plays it (its pace)
    z = mu_prior(s) + mu_posterior(s, t)                             (track mode, the mean latent)
    (u_0, u_1) = clip(action_scale pi(s, z), +-OFFSET_LIMIT)         (eq. 1)

and the tracker plays its reference with the offsets linear from u_0 to u_1 over a knot and
u_1 held after (`held_plan`): a plan's first two knots are all of it that is played before the
next decision. The teacher (training/dagger.py, action "offset") is the planner's candidates
from the same carried plan, each played to its horizon, weighted MPPI-style
(engine.control.balance.weighted_plan): its label is that plan's first two knots. A policy
that outputs zeros is the tracker alone (with the swing-foot law, engine.control.feedback,
where the file records its gain: its teacher's tracker added it), bit for bit
(tests/test_offset_policy.py).

Why offsets and not activations: the planner's activations as labels did not generalise
(held-out RMS 0.09-0.14 against 0.15 for predicting nothing), while its offsets, taught this
way, kept the walk 3.5x as long as the tracker alone (docs/research/policy_from_expert.md,
thirty-third session). MASS (Lee et al. 2019) splits its controller the same way: joint-target
offsets learnt above, muscles below.
"""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from .controller import Controller
from .policy import fatigue_parts, fatigue_weights, state_features, target_features

KNOTS_OUT = 2  # the network's output: the plan's offsets now and one knot on
# rad: the most an offset policy turns a joint off its reference. The planner's own offsets
# stay within ~0.5 rad (its noise reaches 0.3 rad a knot where the going gets hard); a policy
# off its training states must not fold the character up
OFFSET_LIMIT = 0.6


def offset_meta(rig, balance, smooth: float) -> dict:
    """What an offset policy file records of its action space (meta "offsets", checked by the
    controller): the offset DOFs, the knot spacing, the tracker's smoothing weight and the
    swing-foot law's gain the tracker adds after the offsets (balance.feedback)."""
    from .balance import offset_dofs

    return dict(dofs=[int(i) for i in offset_dofs(rig, balance.knees, balance.hips_yaw)], knot=int(balance.knot),
                knees=bool(balance.knees), hips_yaw=bool(balance.hips_yaw), smooth=float(smooth),
                feedback=float(balance.feedback))


def held_plan(y: np.ndarray, knots: int) -> np.ndarray:
    """The plan (knots x D) a network output y = (u_0, u_1) stands for: u_0 now, u_1 from one
    knot on (linear between, as offsets_at interpolates), held to the horizon."""
    u0, u1 = np.asarray(y, float).reshape(KNOTS_OUT, -1)
    U = np.repeat(u1[None], knots, axis=0)
    U[0] = u0
    return U


def observe(sim, tracker, W: np.ndarray, ahead: int) -> tuple[np.ndarray, np.ndarray]:
    """(s, t) of the module docstring at the simulation's state: the state features with the
    fatigue parts and the tracker's offsets now, and the target features of its reference
    (paced) `ahead` steps on. The trainer labels and the controller acts on the same."""
    from ..physics.base import q_to_state

    st, f = sim.state, sim.fatigue
    s = state_features(st.pos, st.rot, st.linvel, st.angvel, fatigue_parts(f.MA, f.MR, f.MF, W))
    q, v, _ = tracker.reference(sim.steps + ahead)
    r = q_to_state(sim.rig, q[None], v[None])
    t = target_features(st.pos, st.rot, r.pos[0], r.rot[0], r.linvel[0], r.angvel[0])
    return np.concatenate([s, tracker.offsets(sim.steps)]), t


def policy_plan(pf, sim, tracker, W: np.ndarray, z_noise: np.ndarray | None = None) -> np.ndarray:
    """The plan an offset policy file `pf` chooses at the simulation's state, for `tracker`
    (an OffsetTracker) to play from now; `z_noise` is added to the mean latent."""
    s, t = observe(sim, tracker, W, pf.period)
    sn, tn = pf.norm_state(s), pf.norm_target(t)
    z = pf.prior_mean(sn) + pf.posterior_offset(sn, tn)
    if z_noise is not None:
        z = z + z_noise
    return held_plan(np.clip(pf.action(sn, z), -OFFSET_LIMIT, OFFSET_LIMIT), tracker.balance.knots)


class OffsetPolicyController(Controller):
    """Plays an offset policy (PolicyFile.action_kind "offset") on a take's plan: the tracker
    (residual 0, as trained) steered by the network's plan, renewed every `pf.period` steps.
    Only mode "track": the offsets are to a clip's reference."""

    period = 1  # the tracker decides every step; the network every pf.period

    def __init__(self, pf, sim, plan, mode: str = "track", noise_scale: float | None = None, seed: int = 0):
        import dataclasses

        from .balance import BalanceParams, OffsetTracker
        from .tracking import TrackingParams

        if mode != "track":
            raise ParameterError("mode", f"{mode!r}: an offset policy (action 'offset') steers a clip's "
                                 "reference; it plays mode 'track' only")
        om = pf.meta["offsets"]
        # a file from before the hips' yaw was sampled records no "hips_yaw": its 10 offsets;
        # one from before the swing-foot law was the planner's default records no "feedback"
        balance = BalanceParams(knot=int(om["knot"]), replan=pf.period, knees=bool(om["knees"]),
                                hips_yaw=1.0 if om.get("hips_yaw", False) else 0.0,
                                feedback=float(om.get("feedback", 0.0)))
        have = offset_meta(sim.rig, balance, 0.0)["dofs"]
        if list(om["dofs"]) != have:
            raise ParameterError("policy", f"offsets at DOFs {om['dofs']}, this engine offsets {have}: "
                                 "train the policy again")
        params = TrackingParams(residual=0.0)
        params = dataclasses.replace(params, weights=dataclasses.replace(params.weights, smooth=float(om["smooth"])))
        self.policy, self.plan = pf, plan
        self.tracker = OffsetTracker(sim, plan, params, balance)
        self.stats = self.tracker.stats
        self.W = fatigue_weights(sim.rig)
        self.noise_scale = 0.0 if noise_scale is None else float(noise_scale)  # of sigma_prior, on the latent
        if not (np.isfinite(self.noise_scale) and self.noise_scale >= 0):
            raise ParameterError("noise_scale", f"{noise_scale!r}: expected a finite value >= 0")
        self.noise = self.noise_scale * float(pf.meta["sigma_prior"])
        self.rng = np.random.default_rng(seed)
        self.decisions = 0
        self.offset_sum, self.offset_max = 0.0, 0.0

    def advance_pace(self, sim) -> None:
        self.tracker.advance_pace(sim)

    def reference_now(self, sim):
        return self.tracker.reference_now(sim)

    def act(self, sim, state):
        tr = self.tracker
        if sim.steps % self.policy.period == 0:
            tr.advance_pace(sim)
            noise = self.noise * self.rng.standard_normal(self.policy.latent_dim) if self.noise else None
            tr.U, tr.plan_start = policy_plan(self.policy, sim, tr, self.W, noise), sim.steps
            u = np.abs(tr.U[0])
            self.decisions += 1
            self.offset_sum += float(u.mean())
            self.offset_max = max(self.offset_max, float(u.max()))
        return tr.act(sim, state)

    def snapshot(self) -> dict:
        return dict(self.tracker.snapshot(), U=self.tracker.U.copy(), plan_start=self.tracker.plan_start,
                    rng=self.rng.bit_generator.state)

    def restore(self, snap: dict) -> None:
        self.tracker.restore(snap)
        self.tracker.U, self.tracker.plan_start = snap["U"].copy(), snap["plan_start"]
        self.rng.bit_generator.state = snap["rng"]

    def report(self) -> dict:
        n = max(self.decisions, 1)
        return dict(self.tracker.report(), offset_policy=dict(
            decisions=self.decisions, offset_deg_mean=round(float(np.degrees(self.offset_sum / n)), 3),
            offset_deg_max=round(float(np.degrees(self.offset_max)), 3)))
