import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SHARED = REPO.parent / "shared"
MASS = SHARED / "reference" / "mass"
MOTION_DIR = MASS / "motion"


@pytest.fixture(scope="session")
def rig():
    from engine.rig import load_rig

    return load_rig("human284")


@pytest.fixture(scope="session")
def addon():
    """The Blender extension's package from the source tree, loaded as scripts/sinew_bake.py
    loads it (its engine is this repository's; bpy is the venv's PyPI module; nothing is
    registered): the module name to import its submodules from."""
    import importlib.util

    name = "_sinew_addon_under_test"
    spec = importlib.util.spec_from_file_location(
        name, REPO / "blender_addon" / "__init__.py",
        submodule_search_locations=[str(REPO / "blender_addon"), str(REPO)])
    sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules[name])
    yield name
    for m in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[m]
