"""`sinew bench`: time each stage of the engine step on one core.

Stages of the muscle step (DESIGN.md "One physics step", no physics): LBS waypoints and
their velocities, muscle lengths and rates, Hill curves + PD + alpha_pd, the 3CC-r clip and
update, and the per-body force and torque sums. The poses swing the limbs so lengths and
rates vary from step to step as they would in a take.
"""
from __future__ import annotations

import os
import time

import numpy as np

from .progress import Progress


def _poses(rig, n: int):
    """n body states along a smooth limb swing (FK of sinusoidal joint rotations)."""
    from . import kinematics as kin
    from .transforms import axis_angle_to_matrix

    rng = np.random.default_rng(0)
    amp = rng.normal(scale=0.3, size=(rig.num_bodies, 3))
    phase = rng.uniform(0, 2 * np.pi, size=(rig.num_bodies, 3))
    t = np.arange(n)[:, None, None] / 120.0
    rotvec = amp * np.sin(2 * np.pi * 1.0 * t + phase)
    _, _, body_rot, body_pos = kin.forward_kinematics(rig, np.array([0.0, 0.0, 1.0]),
                                                      axis_angle_to_matrix(rotvec))
    lin = np.gradient(body_pos, 1 / 120.0, axis=0)
    ang = rng.normal(scale=1.0, size=body_pos.shape)
    return body_rot, body_pos, lin, ang


def run_bench(seconds: float = 2.0, rig_name: str = "human284", backends=("mujoco", "ode")):
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from . import fatigue as fat
    from . import muscle as hill
    from .muscle_step import MuscleSystem
    from .rig import load_rig

    rig = load_rig(rig_name)
    ms = MuscleSystem(rig)
    n = max(int(seconds * 120), 10)
    br, bp, lv, av = _poses(rig, n)
    action = np.random.default_rng(1).uniform(-0.1, 0.1, rig.num_muscles)
    state = fat.FatigueState.fresh(rig.num_muscles)
    stages = {k: 0.0 for k in ("lbs", "lengths", "hill_pd", "fatigue", "forces")}
    total = 0.0
    clock = time.perf_counter
    xp = ms._xp
    f0, l_rest = rig.muscle_f0, rig.muscle_rest_length
    with Progress("bench muscle step", 2 * n) as bar:
        for i in range(n):  # stage by stage, as MuscleSystem.step runs them
            t0 = clock()
            ms.paths.positions_and_velocities(br[i], bp[i], lv[i], av[i])
            t1 = clock()
            u, length, rate = ms.kinematics(br[i], bp[i], lv[i], av[i])
            t2 = clock()
            lbar = hill.normalized_length(length, l_rest, rig.muscle_lt, rig.muscle_lm)
            vbar = hill.normalized_velocity(rate, l_rest, rig.muscle_lm)
            f_pd = hill.pd_force(length, rate, hill.target_length(action, l_rest), ms.gains.kp, ms.gains.kd, xp)
            flfv, fpe = hill.active_and_passive(lbar, vbar, xp)
            alpha_pd = hill.activation_from_factors(f_pd, f0, flfv, fpe, xp)
            t3 = clock()
            alpha, state = fat.step_with_activation(state, alpha_pd, ms.dt, ms.params, xp)
            t4 = clock()
            ms.body_wrench(br[i], u, hill.force_from_factors(alpha, f0, flfv, fpe))
            t5 = clock()
            stages["lbs"] += t1 - t0  # all waypoints and their velocities (not needed by the step)
            stages["lengths"] += t2 - t1  # segment vectors, muscle lengths and rates
            stages["hill_pd"] += t3 - t2
            stages["fatigue"] += t4 - t3
            stages["forces"] += t5 - t4
            bar.update(i)
        state = fat.FatigueState.fresh(rig.num_muscles)
        for i in range(n):  # the whole step as the simulation calls it
            t0 = clock()
            res = ms.step(br[i], bp[i], lv[i], av[i], action, state)
            total += clock() - t0
            state = res.fatigue
            bar.update(n + i)
    step_us = {k: 1e6 * v / n for k, v in stages.items()}
    step_us["muscle_step_total"] = 1e6 * total / n
    summary = dict(
        step_us={k: round(v, 1) for k, v in step_us.items()},
        steps=n,
        muscles=rig.num_muscles,
        waypoints=rig.num_waypoints,
        muscle_realtime_factor=round((1.0 / 120.0) / (total / n), 1),
    )
    lines = [f"muscle step over {rig.num_muscles} muscles, {rig.num_waypoints} waypoints, {n} steps (one core):"]
    lines += [f"  {k:<18} {v:8.1f} us" for k, v in step_us.items()]
    lines.append(f"  muscle-only real-time factor at 120 Hz: {summary['muscle_realtime_factor']}x")
    if backends:
        physics = bench_backends(rig, n, backends)
        summary["step_us"].update({f"physics_{b}": v["physics_us"] for b, v in physics.items()})
        summary["step_us"].update({f"loop_{b}": v["loop_us"] for b, v in physics.items()})
        summary["realtime_factor"] = {b: v["realtime_factor"] for b, v in physics.items()}
        summary["physics_realtime_factor"] = {b: v["physics_realtime_factor"] for b, v in physics.items()}
        lines.append("whole step (muscles + fatigue + physics), free character on the ground:")
        for b, v in physics.items():
            lines.append(f"  {b:<7} bare physics step {v['physics_us']:8.1f} us ({v['physics_realtime_factor']:6.1f}x real time)"
                         f" | whole loop {v['loop_us']:8.1f} us ({v['realtime_factor']:6.1f}x real time)")
    return summary, lines


def bench_backends(rig, n: int, backends) -> dict:
    """Bare physics step (the floor: step + reading the body state, no muscles) and the whole
    simulation loop, per backend, from the same standing start with the T-pose hold."""
    from .physics import make_backend
    from .simulation import Simulation

    out = {}
    clock = time.perf_counter
    hold = np.zeros(rig.num_muscles)
    for name in backends:
        try:
            sim = Simulation(rig, name)
        except Exception as e:  # an optional backend that is not installed is reported, not fatal
            out[name] = dict(physics_us=float("nan"), loop_us=float("nan"), realtime_factor=None,
                             physics_realtime_factor=None, error=str(e))
            continue
        bare = make_backend(name, rig)
        bare.set_body_state(sim.state)
        t0 = clock()
        for _ in range(n):
            bare.step()
            bare.body_state()
        physics = (clock() - t0) / n
        t0 = clock()
        for _ in range(n):
            sim.step(hold)
        loop = (clock() - t0) / n
        out[name] = dict(physics_us=round(1e6 * physics, 1), loop_us=round(1e6 * loop, 1),
                         realtime_factor=round(sim.dt / loop, 1),
                         physics_realtime_factor=round(sim.dt / physics, 1))
    return out
