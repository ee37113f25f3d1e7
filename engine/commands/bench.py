"""`sinew bench`: time each stage of the engine step on one core.

Stages of the muscle step (DESIGN.md "One physics step", no physics) on the numpy path:
LBS waypoints and their velocities, muscle lengths and rates, Hill curves + PD + alpha_pd,
the 3CC-r clip and update, and the per-body force and torque sums; then the whole step on
the numpy and the compiled path (engine.compiled). Per backend the bare physics step and
the whole loop, before (numpy muscles; MuJoCo's model without the lean settings) and now.
Old and new run interleaved in short blocks, so load on a shared machine hits both alike
and their ratio means more than either time. The poses swing the limbs so lengths and
rates vary from step to step as they would in a take. Times are CPU time on one core.
"""
from __future__ import annotations

import os
import time

import numpy as np

from ..progress import Progress


def _poses(rig, n: int):
    """n body states along a smooth limb swing (FK of sinusoidal joint rotations)."""
    from .. import kinematics as kin
    from ..transforms import axis_angle_to_matrix

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


BLOCK = 10  # steps per interleaved block
# CPU time of this process, not wall time: what a step costs one core, barely moved by other
# work on a shared machine (which stretches wall time 2x and more)
CLOCK = time.process_time


def interleaved(steppers: dict, n: int) -> dict:
    """Seconds per call of each zero-argument stepper, called n times each in alternating
    blocks of BLOCK calls."""
    total = dict.fromkeys(steppers, 0.0)
    clock = CLOCK
    for start in range(0, n, BLOCK):
        for name, step in steppers.items():
            t0 = clock()
            for i in range(start, min(n, start + BLOCK)):
                step(i)
            total[name] += clock() - t0
    return {k: v / n for k, v in total.items()}


def run_bench(seconds: float = 2.0, rig_name: str = "human284", backends=("mujoco", "ode")):
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from .. import compiled
    from .. import fatigue as fat
    from .. import muscle as hill
    from ..muscle_step import MuscleSystem
    from ..rig import load_rig

    rig = load_rig(rig_name)
    ms = MuscleSystem(rig, compiled=False)
    fast = MuscleSystem(rig)
    n = max(int(seconds * 120), 10)
    br, bp, lv, av = _poses(rig, n)
    action = np.random.default_rng(1).uniform(-0.1, 0.1, rig.num_muscles)
    state = fat.FatigueState.fresh(rig.num_muscles)
    stages = {k: 0.0 for k in ("lbs", "lengths", "hill_pd", "fatigue", "forces")}
    clock = CLOCK
    xp = ms._xp
    f0, l_rest = rig.muscle_f0, rig.muscle_rest_length
    with Progress("bench muscle step", n) as bar:
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
    states = {}

    def whole(system):  # the whole step as the simulation calls it, from its own fatigue state
        states[system] = fat.FatigueState.fresh(rig.num_muscles)

        def step(i):
            states[system] = system.step(br[i], bp[i], lv[i], av[i], action, states[system]).fatigue
        return step

    per = interleaved({"numpy": whole(ms), fast.path: whole(fast)}, n)
    step_us = {k: 1e6 * v / n for k, v in stages.items()}
    step_us["muscle_step_total"] = 1e6 * per[fast.path]  # the path the engine runs
    step_us.update({f"muscle_step_{k}": 1e6 * v for k, v in per.items()})
    rt = {k: round((1.0 / 120.0) / v, 1) for k, v in per.items()}
    summary = dict(
        step_us={k: round(v, 1) for k, v in step_us.items()},
        steps=n,
        muscles=rig.num_muscles,
        waypoints=rig.num_waypoints,
        muscle_path=fast.path,
        compiled_status=compiled.status(),
        muscle_realtime_factor=rt[fast.path],
        speedup=dict(muscle_step=round(per["numpy"] / per[fast.path], 2)),
    )
    lines = [f"muscle step over {rig.num_muscles} muscles, {rig.num_waypoints} waypoints, {n} steps (one core):",
             "  numpy path, stage by stage:"]
    lines += [f"    {k:<16} {v:8.1f} us" for k, v in step_us.items() if k in stages]
    for k, v in per.items():
        lines.append(f"  {k + ' step':<18} {1e6 * v:8.1f} us ({rt[k]:7.1f}x real time at 120 Hz)")
    used = f"engine runs: {fast.path}" + ("" if fast.path == "compiled" else f" ({compiled.status()})")
    lines.append(f"  compiled / numpy: {summary['speedup']['muscle_step']}x faster; {used}")
    if backends:
        physics = bench_backends(rig, n, backends)
        for b, v in physics.items():
            for k in ("physics_us", "loop_us", "physics_before_us", "loop_before_us"):
                if k in v:
                    summary["step_us"][f"{k[:-3]}_{b}"] = v[k]
        summary["not_timed"] = {b: v["error"] for b, v in physics.items() if "error" in v}
        summary["realtime_factor"] = {b: v["realtime_factor"] for b, v in physics.items()}
        summary["realtime_factor_before"] = {b: v.get("realtime_factor_before") for b, v in physics.items()}
        summary["physics_realtime_factor"] = {b: v["physics_realtime_factor"] for b, v in physics.items()}
        summary["speedup"].update({f"loop_{b}": v.get("loop_speedup") for b, v in physics.items()})
        summary["speedup"].update({f"physics_{b}": v["physics_speedup"] for b, v in physics.items()
                                   if "physics_speedup" in v})
        lines.append("whole step (muscles + fatigue + physics), free character on the ground; "
                     "before (numpy muscles, MuJoCo's model before the lean settings) | now:")
        for b, v in physics.items():
            if "error" in v:
                lines.append(f"  {b:<7} not timed: {v['error']}")
                continue
            bare = f"{v['physics_us']:6.1f} us"
            if "physics_before_us" in v:
                bare = f"{v['physics_before_us']:6.1f} | {bare} ({v['physics_speedup']}x)"
            lines.append(f"  {b:<7} bare physics step {bare}; whole loop {v['loop_before_us']:6.1f} | "
                         f"{v['loop_us']:6.1f} us = {v['realtime_factor_before']}x | {v['realtime_factor']}x "
                         f"real time ({v['loop_speedup']}x)")
    return summary, lines


def bench_backends(rig, n: int, backends) -> dict:
    """Bare physics step (the floor: step + reading the body state, no muscles) and the whole
    simulation loop, per backend, from the same standing start with the T-pose hold; each
    before (numpy muscles; for MuJoCo the model without its lean settings) and now,
    interleaved."""
    from ..physics import make_backend
    from ..simulation import Simulation

    out = {}
    hold = np.zeros(rig.num_muscles)
    before_options = {"mujoco": {"lean": False}}
    for name in backends:
        old = before_options.get(name, {})
        try:
            sim = Simulation(rig, name)
            sim_before = Simulation(rig, name, compiled=False, backend_options=old)
        except Exception as e:  # an optional backend that is not installed is reported, not fatal
            # no timings (NaN is not JSON): the report and the summary's not_timed say why
            out[name] = dict(realtime_factor=None, realtime_factor_before=None, physics_realtime_factor=None,
                             error=str(e))
            continue
        bare = {"now": make_backend(name, rig)}
        if old:
            bare["before"] = make_backend(name, rig, **old)
        steppers = {}
        for k, be in bare.items():
            be.set_body_state(sim.state)
            steppers[k] = lambda i, be=be: (be.step(), be.body_state())
        physics = interleaved(steppers, n)
        loop = interleaved({"before": lambda i: sim_before.step(hold), "now": lambda i: sim.step(hold)}, n)
        res = dict(physics_us=round(1e6 * physics["now"], 1), loop_us=round(1e6 * loop["now"], 1),
                   loop_before_us=round(1e6 * loop["before"], 1),
                   realtime_factor=round(sim.dt / loop["now"], 1),
                   realtime_factor_before=round(sim.dt / loop["before"], 1),
                   physics_realtime_factor=round(sim.dt / physics["now"], 1),
                   loop_speedup=round(loop["before"] / loop["now"], 2))
        if "before" in physics:
            res.update(physics_before_us=round(1e6 * physics["before"], 1),
                       physics_speedup=round(physics["before"] / physics["now"], 2))
        out[name] = res
    return out
