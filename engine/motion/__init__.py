"""Source motion: skeletons and clips from outside Sinew (BVH files, armatures), numpy only.

Everything here is Z-up, metres, seconds, (w, x, y, z) quaternions.
"""
from .bvh import (
    detect_units,
    euler_to_quat,
    matrix_to_euler,
    read_bvh,
    snap_frame_time,
    write_bvh,
)
from .presets import PRESET_NAMES, PRESETS, guess_mapping, load_map, match_preset, resolve_mapping
from .reference import Reference, load_reference
from .retarget import Retargeter, retarget, retarget_back, retarget_file
from .skeleton import SourceMotion, SourceSkeleton, validate_motion, validate_skeleton

__all__ = [
    "PRESETS",
    "PRESET_NAMES",
    "Reference",
    "Retargeter",
    "guess_mapping",
    "load_map",
    "load_reference",
    "match_preset",
    "resolve_mapping",
    "retarget",
    "retarget_back",
    "retarget_file",
    "SourceMotion",
    "SourceSkeleton",
    "detect_units",
    "euler_to_quat",
    "matrix_to_euler",
    "read_bvh",
    "snap_frame_time",
    "validate_motion",
    "validate_skeleton",
    "write_bvh",
]
