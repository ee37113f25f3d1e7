"""A clip replaced by what the body did when it played it with a small hand: a dynamics filter.

    python research/sprint_levers.py --name held --flight-help 0.03 --fps 120 --seconds 4 --out /tmp
    python research/dynamics_filter.py /tmp/held.npz 2.0          # the demands, before and after
    python research/sprint_levers.py --name filtered --cycle-from /tmp/held.npz:2.0 --seed 0

The nineteenth session found that a root hand of at most 22 N and 22 N m, only in flight,
carries the sprint: the simulated take is then physically consistent but for that hand. One
loop of it (the clip's frame count, starting at the first frame of clip phase 0 after START
seconds) becomes the clip: its joints, root path and turns are what this body can do with
its muscles and the ground, so a take of it should ask the root for little. `install(file,
start)` makes every CyclicClip of this process that loop (sprint_levers.py --cycle-from).
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import engine.control.plan as plan_mod
from amplitude import frame_velocities, install_edit


def held_cycle(space, path, start_s: float, frames: int) -> tuple[np.ndarray, np.ndarray]:
    """(q, qvel) of one loop of `frames` frames of the take saved by sprint_levers.py at 120
    fps, from the first frame of clip phase 0 at or after start_s."""
    f = np.load(path)
    t, q = f["t"], f["q"]
    if abs((t[1] - t[0]) * plan_mod.PHYSICS_HZ - 1) > 1e-6:
        raise SystemExit(f"{path}: recorded at {1 / (t[1] - t[0]):g} fps; record at --fps 120")
    k0 = int(np.ceil(start_s * plan_mod.PHYSICS_HZ / frames)) * frames
    if k0 + frames + 1 > len(q):
        raise SystemExit(f"{path}: {len(q)} frames; a loop from {k0} needs {k0 + frames + 1}")
    cyc = q[k0:k0 + frames + 1]  # one frame past the loop: its last velocity is central too
    return cyc[:frames].copy(), frame_velocities(space, cyc)[:frames]


def install(path, start_s: float) -> None:
    """Every CyclicClip made from here on plays the held take's loop instead of its clip."""
    install_edit(lambda space, q, v: held_cycle(space, path, start_s, len(q)),
                 f"one loop of {path} from {start_s:g} s")


if __name__ == "__main__":
    from engine import fatigue as fat
    from engine.control import TrackingController
    from engine.control.demands import reference_demands
    from engine.control.plan import MotionPlan, load_clip
    from engine.rig import load_rig
    from engine.simulation import Simulation

    rig = load_rig().with_strength(3.0)
    motion = Path(__file__).resolve().parents[2] / "shared" / "reference" / "mass" / "motion"
    ref = load_clip(rig, motion / "run.bvh")[0]
    for label in ("as captured", "filtered"):
        if label == "filtered":
            install(sys.argv[1], float(sys.argv[2]))
        plan = MotionPlan(rig, [(ref, 1.0, "run")])
        sim = Simulation(rig, "mujoco", fatigue=fat.FatigueParams(scale=0.0))
        d = reference_demands(TrackingController(sim, plan), sim, plan.segments[0].clip)
        print(label, {k: v for k, v in d.items() if k.startswith(("root", "unmet"))}, flush=True)
