"""An ankle's twist turned into the hip (engine.motion.swivel), on the retarget's output."""
from __future__ import annotations

import numpy as np
import pytest

from engine.motion import read_bvh
from engine.motion import swivel
from engine.motion.retarget import retarget
from engine.transforms import matrix_to_quat

from .conftest import MOTION_DIR

needs_mass = pytest.mark.skipif(not (MOTION_DIR / "kick.bvh").is_file(), reason=f"no MASS motions at {MOTION_DIR}")


def _joint(rig, ref, b: int) -> np.ndarray:
    """(F, 3) world position of body b's joint."""
    c = rig.body_rest_rot[b].T @ (rig.joint_pos[b] - rig.body_rest_pos[b])
    return ref.body_pos[:, b] + np.einsum("fij,j->fi", ref.body_rot[:, b], c)


def _twist_deg(rig, ref, side: str) -> np.ndarray:
    G = matrix_to_quat(np.einsum("fbij,bkj->fbik", ref.body_rot, rig.body_rest_rot))  # joint frames' world rotations
    return np.degrees(np.abs(swivel.ankle_twist(rig, G, side)))


@needs_mass
def test_a_kicks_ankle_twist_goes_to_the_hip_and_nothing_else_moves(rig, monkeypatch):
    """The kick turns its feet about the shank up to 32 deg (its knees 10-12 deg off the model's
    hinge on average), which the ankle's few rotators cannot hold. Swivelled, no ankle turns
    more than KEEP_DEG; the hip joints, the ankle joints, the feet and the knees' bend are
    where they were to the micron and the microradian; only the knees point elsewhere."""
    kick = read_bvh(MOTION_DIR / "kick.bvh")
    ref, _ = retarget(kick, rig)
    monkeypatch.setattr(swivel, "KEEP_DEG", 180.0)
    raw, _ = retarget(kick, rig)
    monkeypatch.undo()
    assert not raw.meta["swivelled"] and {m["leg"] for m in ref.meta["swivelled"]} == {"FemurR", "FemurL"}
    bi = rig.body_index
    for side in "RL":
        assert _twist_deg(rig, raw, side).max() > 30.0 and _twist_deg(rig, ref, side).max() < swivel.KEEP_DEG + 0.5
        for body in ("Femur", "Talus"):
            assert np.abs(_joint(rig, ref, bi(body + side)) - _joint(rig, raw, bi(body + side))).max() < 1e-6
        foot = [bi(f"{b}{side}") for b in ("Talus", "FootThumb", "FootPinky")]
        assert np.abs(ref.body_rot[:, foot] - raw.body_rot[:, foot]).max() < 1e-6
        knee = rig.q_start[bi(f"Tibia{side}")]
        assert np.abs(ref.q[:, knee] - raw.q[:, knee]).max() < 1e-6
        moved = np.linalg.norm(_joint(rig, ref, bi(f"Tibia{side}")) - _joint(rig, raw, bi(f"Tibia{side}")), axis=1)
        assert moved.max() > 0.02  # the knee swung about the hip -> ankle line
    assert np.abs(ref.root_pos - raw.root_pos).max() < 1e-9


@needs_mass
@pytest.mark.parametrize("clip", ["walk", "run"])
def test_the_bundled_clips_keep_their_ankles(rig, clip):
    """MASS's walk and run turn their ankles 5 and 16 deg at most: untouched."""
    ref, _ = retarget(read_bvh(MOTION_DIR / f"{clip}.bvh"), rig)
    assert not ref.meta["swivelled"]
