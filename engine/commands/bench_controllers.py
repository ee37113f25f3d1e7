"""Speed of the controllers (for `sinew bench`): the tracking controller on a short fresh walk
take, split into its preparation (reference, inverse dynamics, moment arms, contacts), its
muscle-coordination solve, and the muscle step + physics; the stand controller; the balance
planner; a policy."""
from __future__ import annotations

import os
import time
from pathlib import Path

from . import take_report
from .sample_data import motion_clip


def _walk() -> Path:
    """The bundled walk the benches time (engine/commands/sample_data.py finds it)."""
    return motion_clip("walk.bvh")


def bench_tracking(seconds: float = 2.0, rig_name: str = "human284", clip: str | None = None,
                   backend: str = "mujoco"):
    """Returns (summary dict, lines)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from .. import compiled
    from .. import fatigue as fat
    from ..physics import make_backend
    from ..rig import load_rig
    from ..take import simulate

    rig = load_rig(rig_name)
    muscle_path = "compiled" if compiled.library() is not None else "numpy"
    clip = clip or str(_walk())
    take = simulate(rig, [(clip, float(seconds))], fatigue=fat.FatigueParams(scale=0.0), backend=backend,
                    label="bench tracking")
    t = take.meta["timing"]
    steps = max(t["steps"], 1)
    bare = make_backend(backend, rig)
    n = 240
    t0 = time.perf_counter()
    for _ in range(n):
        bare.step()
        bare.body_state()
    physics_us = 1e6 * (time.perf_counter() - t0) / n
    per = {k: 1e6 * t[k] / steps for k in ("prepare_s", "solve_s", "muscles_and_physics_s")}
    total_us = 1e6 * t["wall_s"] / steps
    summary = dict(
        step_us=dict(tracking_prepare=round(per["prepare_s"], 1), tracking_solve=round(per["solve_s"], 1),
                     muscles_and_physics=round(per["muscles_and_physics_s"], 1),
                     physics_bare=round(physics_us, 1), tracking_total=round(total_us, 1)),
        realtime_factor=dict(tracking=round((1 / 120) / (total_us * 1e-6), 3)),
        decisions_per_s=round(t["decisions"] / max(take.meta["simulated_seconds"], 1e-9), 1),
        muscle_path=muscle_path,
        joint_err_deg_mean=take.meta["summary"]["joint_err_deg_mean"],
        ground_force_gap_body_weights=take.meta["summary"]["ground_force_gap_body_weights"],
        newton_steps_per_decision=round(t["solver_steps"] / max(t["decisions"], 1), 2),
        solver_fallbacks=t["solver_fallbacks"],
    )
    lines = [f"tracking controller, fresh walk, {take.meta['simulated_seconds']:.1f} s ({backend}, one core):",
             f"  prepare (reference, inverse dynamics, moment arms, contacts) {per['prepare_s']:9.1f} us/step",
             f"  muscle coordination solve                                  {per['solve_s']:9.1f} us/step"
             f" ({summary['newton_steps_per_decision']} Newton steps a decision, {t['solver_fallbacks']} fallbacks)",
             f"  muscles ({muscle_path}) + physics{' ' * (39 - len(muscle_path))}"
             f"{per['muscles_and_physics_s']:9.1f} us/step",
             f"  bare physics step                                          {physics_us:9.1f} us/step",
             f"  whole loop {total_us:9.1f} us/step = {summary['realtime_factor']['tracking']}x real time"]
    gap = summary["ground_force_gap_body_weights"]
    if gap is not None:
        lines.append(f"  ground force planned vs given by the physics: {gap:.3f} body weights apart a step (mean)")
    return summary, lines


def _per_step(take, elapsed: float) -> tuple[float, float, float, float]:
    """From a take's timing: the controller's and the whole loop's us a step, the set-up (s:
    `elapsed` less the loop) and the real-time factor."""
    t = take.meta["timing"]
    steps = max(t["steps"], 1)
    controller_us, total_us = 1e6 * t["controller_s"] / steps, 1e6 * t["wall_s"] / steps
    return controller_us, total_us, round(elapsed - t["wall_s"], 2), round((1 / 120) / (total_us * 1e-6), 3)


def bench_stand(seconds: float = 2.0, rig_name: str = "human284", clip: str | None = None):
    """Speed of the stand controller (engine.control.stand) holding the walk's pose at 0.25 s
    without the residual: its set-up (balanced pose, linearisation, LQR) and its steps.
    Returns (summary dict, lines)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from .. import fatigue as fat
    from ..control.tracking import TrackingParams
    from ..rig import load_rig
    from ..take import simulate

    rig = load_rig(rig_name)
    clip = clip or f"{_walk()}@0.25"
    t0 = time.perf_counter()
    take = simulate(rig, [(clip, float(seconds))], params=TrackingParams(residual=0.0),
                    fatigue=fat.FatigueParams(scale=0.0), label="bench stand")
    controller_us, total_us, setup_s, rtf = _per_step(take, time.perf_counter() - t0)
    summary = dict(setup_s=setup_s, step_us=dict(stand_controller=round(controller_us, 1),
                   stand_total=round(total_us, 1)), realtime_factor=rtf, fell=take.meta["summary"]["fell"])
    lines = [f"stand controller, a held pose without the residual, {take.meta['simulated_seconds']:.1f} s:",
             f"  set-up (balanced pose, linearisation, LQR, demands) {summary['setup_s']:.2f} s",
             f"  controller {controller_us:9.1f} us/step; whole loop {total_us:9.1f} us/step = "
             f"{summary['realtime_factor']}x real time"]
    return summary, lines


def bench_balance(seconds: float = 1.0, rig_name: str = "human284", workers: int = 0):
    """Speed of the balance planner (engine.control.balance) on the fresh walk without the
    residual: its rollouts (us a step; steps played a take step) and the whole take's real-time
    factor, in this process (workers 0: one core) or with worker processes (wall time).
    Returns (summary dict, lines)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from .. import fatigue as fat
    from ..control.balance import BalanceParams
    from ..control.tracking import TrackingParams
    from ..interrupt import StopFlag
    from ..rig import load_rig
    from ..take import simulate

    rig = load_rig(rig_name)
    # the first `seconds` of a take one horizon longer, so that no timed decision's rollouts
    # are cut by the take's end (balance eq. 8): the steady cost of a long take
    balance = BalanceParams(workers=int(workers))
    plan_s = float(seconds) + balance.horizon / 120.0
    stop = StopFlag()

    def timed_part(fraction: float) -> None:
        if fraction * plan_s >= float(seconds) - 1e-9:
            stop.request("the timed seconds are over")

    t0 = time.perf_counter()
    take = simulate(rig, [(str(_walk()), plan_s)], fatigue=fat.FatigueParams(scale=0.0), label="bench balance",
                    params=TrackingParams(residual=0.0, balance=balance), progress=timed_part, stop=stop)
    controller_us, total_us, setup_s, rtf = _per_step(take, time.perf_counter() - t0)
    b, t = take.meta["balance"], take.meta["timing"]
    per_rollout_us = 1e6 * t["controller_s"] / max(b["rollout_steps"], 1) if not workers else None
    summary = dict(workers=int(workers), step_us=dict(balance_total=round(total_us, 1)), realtime_factor=rtf,
                   seconds_per_simulated_s=round(total_us * 120e-6, 2),
                   rollout_steps_per_step=round(b["rollout_steps"] / max(t["steps"], 1), 1),
                   continued_share=b.get("continued_share"),
                   rollout_step_us=None if per_rollout_us is None else round(per_rollout_us, 1),
                   fell=take.meta["summary"]["fell"])
    split = b.get("rollout_step_us")
    if split:
        summary["rollout_step_us_by_part"] = split
    where = "one core" if not workers else f"{workers} worker processes, wall time"
    lines = [f"balance planner, fresh walk without the residual, {take.meta['simulated_seconds']:.1f} s ({where}):",
             f"  {summary['rollout_steps_per_step']} rollout steps played a take step ({b['candidates']} candidates "
             f"x {b['horizon_s']:g} s every {take.meta['tracking']['balance']['replan']} steps{take_report.widened(b)}"
             f"{take_report.halved(b)}, "
             "cut short once dearer than the best; "
             f"the last plan's rollout continued at {100 * (b.get('continued_share') or 0):.0f} % of the decisions)"
             + (f", {per_rollout_us:.0f} us each" if per_rollout_us is not None else ""),
             f"  whole loop {total_us / 1e3:9.1f} ms/step = {summary['seconds_per_simulated_s']} s a simulated second "
             f"= {rtf}x real time"]
    if split:
        lines.insert(2, "  a rollout step: " + ", ".join(f"{k} {v:.0f} us" for k, v in split.items()))
    return summary, lines


def bench_policy(policy, seconds: float = 2.0, rig_name: str = "human284"):
    """Speed of a policy take (engine.control.policy, at the policy's own decision rate) on
    the clip it was trained on (its file's training clips, looked up beside the bundled walk;
    else the walk): the policy's evaluation and the whole loop per step. Returns (summary, lines)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from .. import fatigue as fat
    from ..control.plan import split_hold
    from ..control.policy import load_policy
    from ..rig import load_rig
    from ..take import simulate

    rig = load_rig(rig_name)
    pf = load_policy(policy, rig)
    walk = _walk()
    trained_on = [walk.parent / c for c in (pf.meta.get("training") or {}).get("clips", [])]
    clip = str(trained_on[0]) if trained_on and split_hold(trained_on[0])[0].is_file() else str(walk)
    t0 = time.perf_counter()
    take = simulate(rig, [(clip, float(seconds))], controller="policy", policy=pf,
                    fatigue=fat.FatigueParams(scale=0.0), label="bench policy")
    policy_us, total_us, setup_s, rtf = _per_step(take, time.perf_counter() - t0)
    period = pf.period
    summary = dict(clip=Path(clip).name, period=period, parameters=pf.parameters, setup_s=setup_s,
                   step_us=dict(policy=round(policy_us, 1), policy_total=round(total_us, 1)),
                   realtime_factor=rtf, fell=take.meta["summary"]["fell"])
    every = (f"the network every {period} steps, the tracker's solve every step" if pf.action_kind == "offset"
             else f"a decision every {period} step(s)")
    lines = [f"policy {Path(str(policy)).name} ({pf.parameters} parameters, {every}) "
             f"on {summary['clip']}, {take.meta['simulated_seconds']:.1f} s:",
             f"  policy {policy_us:9.1f} us/step; whole loop {total_us:9.1f} us/step = "
             f"{summary['realtime_factor']}x real time"]
    return summary, lines
