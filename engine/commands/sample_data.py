"""Where the commands find the sample motion: the MASS reference clips (walk.bvh, run.bvh,
...) that `sinew bench` times and that training's configs name as ${shared_motion}.

The folder is $SINEW_MOTION_DIR when that is set, else reference/mass/motion of ../shared
beside a source checkout (the project's reference data, never copied into the project:
NOTICE). Only the command line looks here; the engine and training take clip paths as given.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputFileError

ENV = "SINEW_MOTION_DIR"
# beside a source checkout: <checkout>/../shared/reference/mass/motion
CHECKOUT_MOTION = Path(__file__).resolve().parents[3] / "shared" / "reference" / "mass" / "motion"


def motion_dir() -> Path:
    """The reference motion folder: $SINEW_MOTION_DIR, else the one beside the checkout.
    InputFileError, naming both, when neither is a folder."""
    given = os.environ.get(ENV)
    if given:
        path = Path(given).expanduser()
        if not path.is_dir():
            raise InputFileError(path, f"${ENV} names no folder (it should hold the MASS motion clips, walk.bvh "
                                       "and run.bvh)")
        return path
    if CHECKOUT_MOTION.is_dir():
        return CHECKOUT_MOTION
    raise InputFileError(CHECKOUT_MOTION, f"no reference motion folder here, and ${ENV} is not set: set it to a "
                                          "folder holding the MASS motion clips (walk.bvh, run.bvh)")


def motion_clip(name: str) -> Path:
    """A clip of the reference motion folder, e.g. motion_clip("walk.bvh")."""
    return motion_dir() / name
