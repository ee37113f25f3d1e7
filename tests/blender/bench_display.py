"""Benchmark (not a test): muscle display cost per frame and bake time, on the installed zip.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python tests/blender/bench_display.py [--frames 10000]

A synthetic take (the bundled walk looped at 30 fps, random activations) is baked onto a
Mixamo-named armature; then `frame_set` runs over the take with the muscle display shown
and hidden, and the difference per frame (CPU time) is the display's cost. Prints JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="sinew-bench-"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

from tests.blender.conftest import WALK, _zip, bpy, make_mixamo_armature, sub  # noqa: E402


class FakeTake:
    def __init__(self, q, M, fps=30, seed=0):
        rng = np.random.default_rng(seed)
        N = len(q)
        self.q = q
        self.activation = rng.random((N, M)).astype(np.float32)
        self.MF = rng.random((N, M)).astype(np.float32) * 0.5
        self.force = rng.random((N, M)).astype(np.float32) * 500
        self.fps = fps
        self.num_frames = N
        self.meta = dict(summary={}, fps=fps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=10000)
    ap.add_argument("--measure", type=int, default=600, help="frames stepped through per timing")
    args = ap.parse_args()
    import importlib

    bpy.ops.extensions.package_install_files(filepath=str(_zip()), repo="user_default", enable_on_install=True)
    sinew = importlib.import_module("bl_ext.user_default.sinew")
    core = sub(sinew, "core")
    rig = core.load_model()
    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    scene.render.fps = 30
    arm = make_mixamo_armature(rig, with_action=False)
    core.retarget_to_model(bpy.context, arm)
    ref = core.check_clip_file(str(WALK))
    idx = np.arange(args.frames) * 4 % ref.num_frames  # 120 Hz -> 30 fps, looped in place
    out = {}
    for n, label in ((1800, "bake_60s_take_s"), (args.frames, f"bake_{args.frames}_frames_s")):
        take = FakeTake(ref.q[idx[:n]], rig.num_muscles)
        t0 = time.perf_counter()
        core.bake_take(bpy.context, arm, take, 1)
        out[label] = round(time.perf_counter() - t0, 3)
    scene.frame_start, scene.frame_end = 1, args.frames
    mus = bpy.data.objects[f"{arm.name}.sinew_muscles"]
    bones = bpy.data.objects[f"{arm.name}.sinew_bones"]
    bones.hide_viewport = True
    frames = np.linspace(1, args.frames, args.measure).astype(int)

    def run():
        scene.frame_set(1)
        c0, w0 = time.process_time(), time.perf_counter()
        for f in frames:
            scene.frame_set(int(f))
        return (time.process_time() - c0) / len(frames), (time.perf_counter() - w0) / len(frames)

    run()
    shown = min(run() for _ in range(3))
    mus.hide_viewport = True
    hidden = min(run() for _ in range(3))
    mus.hide_viewport = False
    out.update(frames=args.frames, frame_set_ms_with_muscles=round(1e3 * shown[0], 4),
               frame_set_ms_without=round(1e3 * hidden[0], 4),
               muscle_display_cpu_ms_per_frame=round(1e3 * (shown[0] - hidden[0]), 4),
               muscle_display_wall_ms_per_frame=round(1e3 * (shown[1] - hidden[1]), 4))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
