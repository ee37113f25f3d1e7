"""Render one frame of a baked take to PNG (bpy module, Cycles on the CPU).

    python scripts/render_preview.py TAKE.blend OUT.png [--frame N] [--size 640x360] [--samples 16]

Frames the armature's muscles from the side with a camera and a sun it adds to the
scene in memory (the .blend is not changed).
"""
import argparse
import math
import sys
from pathlib import Path

import bpy
from mathutils import Vector

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from engine.atomic import atomic_path  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("blend")
    ap.add_argument("out")
    ap.add_argument("--frame", type=int, default=None, help="frame to render (default: the middle of the scene)")
    ap.add_argument("--size", default="640x360")
    ap.add_argument("--samples", type=int, default=16)
    args = ap.parse_args()
    bpy.ops.wm.open_mainfile(filepath=str(Path(args.blend).resolve()))
    scene = bpy.context.scene
    scene.frame_set(args.frame if args.frame is not None else (scene.frame_start + scene.frame_end) // 2)
    meshes = [o for o in scene.objects if o.type == "MESH" and o.visible_get()]
    if not meshes:
        raise SystemExit(f"{args.blend}: nothing visible to render")
    deps = bpy.context.evaluated_depsgraph_get()
    pts = [o.evaluated_get(deps).matrix_world @ Vector(c) for o in meshes for c in o.bound_box]
    lo = Vector([min(p[i] for p in pts) for i in range(3)])
    hi = Vector([max(p[i] for p in pts) for i in range(3)])
    centre, size = (lo + hi) / 2, max((hi - lo).length, 1.0)
    cam = bpy.data.objects.new("PreviewCamera", bpy.data.cameras.new("PreviewCamera"))
    scene.collection.objects.link(cam)
    cam.location = centre + Vector((2.0 * size, -1.5 * size, 0.45 * size))  # the whole figure in a 16:9 frame
    cam.rotation_euler = (centre - cam.location).to_track_quat("-Z", "Y").to_euler()
    sun = bpy.data.objects.new("PreviewSun", bpy.data.lights.new("PreviewSun", "SUN"))
    sun.data.energy = 3.0
    sun.rotation_euler = (math.radians(40), 0.0, math.radians(30))
    scene.collection.objects.link(sun)
    if scene.world is None:
        scene.world = bpy.data.worlds.new("PreviewWorld")
    scene.camera = cam
    scene.render.engine = "CYCLES"
    scene.cycles.device = "CPU"
    scene.cycles.samples = args.samples
    w, h = (int(v) for v in args.size.lower().split("x"))
    scene.render.resolution_x, scene.render.resolution_y, scene.render.resolution_percentage = w, h, 100
    with atomic_path(Path(args.out).resolve()) as tmp:  # renamed into place once whole
        scene.render.filepath = str(tmp)
        bpy.ops.render.render(write_still=True)
    print(f"rendered frame {scene.frame_current} of {args.blend} to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
