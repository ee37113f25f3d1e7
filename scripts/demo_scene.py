"""Make the demo's input scene: the bundled MASS walk imported as an armature (bpy module).

    python scripts/demo_scene.py CLIP.bvh OUT.blend

The armature is named after the clip ("walk"); it keeps the clip as its action, so the
bake can be checked against the original motion.
"""
import sys
from pathlib import Path

import bpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from engine.atomic import atomic_path  # noqa: E402


def main(clip: str, out: str) -> int:
    import addon_utils  # importable once bpy is

    bpy.ops.wm.read_homefile(use_empty=True)
    addon_utils.enable("io_anim_bvh", default_set=True)
    bpy.ops.import_anim.bvh(filepath=str(Path(clip).resolve()), global_scale=0.01, update_scene_fps=True,
                            update_scene_duration=True, axis_forward="-Z", axis_up="Y")
    arm = bpy.context.active_object
    arm.name = Path(clip).stem
    with atomic_path(Path(out).resolve()) as tmp:  # renamed into place once whole
        tmp.unlink()  # Blender would keep the empty placeholder as a .blend1 backup
        bpy.ops.wm.save_as_mainfile(filepath=str(tmp), copy=True)
    print(f"demo scene {out}: armature '{arm.name}' with {len(arm.data.bones)} bones")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:3]))
