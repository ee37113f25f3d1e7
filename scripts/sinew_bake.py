"""Batch bake of a fatigued take (Sinew).

    blender -b scene.blend -P scripts/sinew_bake.py -- --armature NAME --clip CLIP[:SECONDS] --out OUT.blend
    python scripts/sinew_bake.py --scene scene.blend --armature NAME --clip CLIP --out OUT.blend   (bpy module)

Uses the installed Sinew extension when Blender has it enabled, else the source tree this
script lives in. Prints a JSON summary (action, frames, out) as the last stdout line and
exits non-zero with a one-line reason on any failure.
"""
import importlib
import importlib.util
import sys
from pathlib import Path


def _argv():
    return sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:]


def _sinew():
    """The Sinew package: the enabled extension, or the source tree (registered here)."""
    for name, mod in list(sys.modules.items()):
        if name.startswith("bl_ext.") and name.endswith(".sinew") and hasattr(mod, "register"):
            return mod
    import bpy

    for name in bpy.context.preferences.addons.keys():
        if name.startswith("bl_ext.") and name.endswith(".sinew"):
            return importlib.import_module(name)
    import addon_utils

    for repo in bpy.context.preferences.extensions.repos:  # installed but not enabled
        if repo.enabled and (Path(repo.directory) / "sinew" / "__init__.py").is_file():
            mod = addon_utils.enable(f"bl_ext.{repo.module}.sinew", default_set=True, handle_error=None)
            if mod is not None:
                return mod
    repo = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location(
        "sinew_src", repo / "blender_addon" / "__init__.py",
        submodule_search_locations=[str(repo / "blender_addon"), str(repo)])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sinew_src"] = mod
    spec.loader.exec_module(mod)
    mod.register()
    return mod


def main() -> int:
    try:
        pkg = _sinew()
        batch = importlib.import_module(pkg.__name__ + ".batch")
    except Exception as e:  # no bpy, a broken install: say so in one line
        print(f"sinew bake: error: cannot load Sinew ({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    return batch.run(_argv())


if __name__ == "__main__":
    # Every way out goes through the exit below: an exception left to propagate would hang the
    # bpy module's teardown, silent. A bug: its traceback, then one line.
    try:
        code = main()
    except Exception:
        import traceback

        traceback.print_exc()
        print("sinew bake: error: the batch script failed (the traceback above)", file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    import bpy

    if not bpy.app.binary_path:
        # Under plain Python the bpy module's teardown can hang after a MuJoCo run (seen with
        # a BVH-imported armature); everything is written by now, so leave at once.
        import os

        os._exit(code)
    sys.exit(code)
