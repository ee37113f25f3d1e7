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
