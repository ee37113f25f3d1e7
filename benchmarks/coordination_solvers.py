"""Benchmark: the tracking controller's coordination solve, by solver, on the problems a real
take poses.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/coordination_solvers.py [--seconds 5] [--fatigue-scale 50]

A tracking take of the bundled walk is simulated once and every coordination problem it
solves is recorded (torques, moment arms, Hill factors, 3CC-r bounds, contact Jacobians, the
last activations). The sequence is then replayed with each solver, each warm-started from
its own previous result as the controller does: 'newton-c' (the default: the Newton method
compiled, engine/native/dual_newton.c), 'newton' (coordination.dual_newton, the numpy
definition: its row multipliers) and 'daqp' (its active set, the solver before). Same problems,
same objective, so the activations must agree; reported per solver: time per solve (mean,
median, 90th percentile, max; CPU time), Newton steps per solve, DAQP fallbacks, and the
largest activation difference from DAQP. Prints a table and one JSON line.

Measured on the shared 2-core machine (5 s walk): see engine/control/__init__.py.
"""
from __future__ import annotations

import argparse
import inspect
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine import fatigue as fat  # noqa: E402
from engine.control import coordination as co  # noqa: E402

WALK = ROOT.parent / "shared" / "reference" / "mass" / "motion" / "walk.bvh"


def record(seconds: float, scale: float) -> list[tuple[tuple, dict]]:
    """Every coordination problem of a tracking take of the walk, in order."""
    from engine.rig import load_rig
    from engine.take import simulate

    problems = []
    solve = co.Coordinator.__call__  # the tracker's solve (one Coordinator per tracker)

    names = list(inspect.signature(solve).parameters)[1:]

    def recording(self, *args, **kw):
        kw = dict(zip(names, args), **kw)  # every argument by name (coordinate() passes them by position)
        problems.append(((), dict({k: v for k, v in kw.items() if k not in ("active", "achieved")},
                                  weights=self.weights)))
        return solve(self, **kw)

    co.Coordinator.__call__ = recording
    try:
        simulate(load_rig(), [(WALK, seconds)], fatigue=fat.FatigueParams(scale=scale), progress=lambda f: None)
    finally:
        co.Coordinator.__call__ = solve
    return problems


def replay(problems, solver: str):
    """(times s, activations, Newton steps, fallbacks) over the recorded sequence. solver:
    'daqp', 'newton' (numpy) or 'newton-c' (compiled)."""
    from engine import compiled

    steps, fallbacks = [], [0]
    lib = compiled.library()
    if solver == "newton-c" and lib is None:
        raise SystemExit(f"no compiled library: {compiled.status()}")
    library = compiled.library
    if solver == "newton":  # numpy's method: the solve finds no library
        compiled.library = lambda: None
    times, acts, active = [], [], None
    try:
        for args, kw in problems:
            info = {}
            t = time.process_time()
            sol = co.coordinate(*args, solver="newton" if solver.startswith("newton") else solver, active=active,
                                info=info, **{k: v for k, v in kw.items() if k != "info"})
            times.append(time.process_time() - t)
            acts.append(sol.activation)
            active = sol.active
            steps.append(info.get("steps", 0))
            fallbacks[0] += bool(info.get("fallback"))
    finally:
        compiled.library = library
    return np.array(times), np.array(acts), np.array(steps), fallbacks[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="simulated seconds of the walk (default 5)")
    ap.add_argument("--fatigue-scale", type=float, default=1.0, help="3CC-r rate scale of the take (default 1)")
    a = ap.parse_args()
    problems = record(a.seconds, a.fatigue_scale)
    out = {"problems": len(problems), "seconds": a.seconds, "fatigue_scale": a.fatigue_scale}
    ref = None
    for solver in ("daqp", "newton", "newton-c"):
        t, acts, steps, fallbacks = replay(problems, solver)
        ref = acts if ref is None else ref
        row = dict(mean_ms=1e3 * t.mean(), p50_ms=1e3 * np.median(t), p90_ms=1e3 * np.percentile(t, 90), max_ms=1e3 * t.max(),
                   max_activation_diff_vs_daqp=float(np.abs(acts - ref).max()))
        if solver.startswith("newton"):
            row.update(newton_steps_mean=float(steps.mean()), newton_steps_max=int(steps.max()), daqp_fallbacks=fallbacks)
        out[solver] = {k: float(f"{v:.4g}") if isinstance(v, float) else v for k, v in row.items()}
        print(f"{solver:8s} {row['mean_ms']:6.2f} ms mean, {row['p50_ms']:6.2f} median, {row['p90_ms']:6.2f} p90, "
              f"{row['max_ms']:6.2f} max; activations within {row['max_activation_diff_vs_daqp']:.1e} of DAQP"
              + (f"; {row['newton_steps_mean']:.1f} Newton steps a solve (max {row['newton_steps_max']}), "
                 f"{fallbacks} fallbacks" if solver.startswith("newton") else ""))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
