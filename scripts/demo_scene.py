"""Make the demo's input scene: the bundled MASS walk imported as an armature (bpy module).

    python scripts/demo_scene.py CLIP.bvh OUT.blend

The armature is named after the clip ("walk"); it keeps the clip as its action, so the
bake can be checked against the original motion.
"""
import sys
from pathlib import Path

import bpy


def main(clip: str, out: str) -> int:
    import addon_utils  # importable once bpy is

    bpy.ops.wm.read_homefile(use_empty=True)
    addon_utils.enable("io_anim_bvh", default_set=True)
    bpy.ops.import_anim.bvh(filepath=str(Path(clip).resolve()), global_scale=0.01, update_scene_fps=True,
                            update_scene_duration=True, axis_forward="-Z", axis_up="Y")
    arm = bpy.context.active_object
    arm.name = Path(clip).stem
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    bpy.ops.wm.save_as_mainfile(filepath=str(Path(out).resolve()))
    print(f"demo scene {out}: armature '{arm.name}' with {len(arm.data.bones)} bones")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:3]))
