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
from .skeleton import SourceMotion, SourceSkeleton, validate_motion, validate_skeleton

__all__ = [
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
