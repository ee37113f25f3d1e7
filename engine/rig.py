"""The musculoskeletal model as the engine loads it (rigs/<name>/<name>.npz).

The file is written by rigs/human284/convert.py: plain arrays plus a JSON string `meta`,
loaded without pickle. See that script for how MASS data becomes this file.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from .errors import InputFileError
from .npzfile import read_npz

FORMAT = "sinew-rig"
FORMAT_VERSION = 1
JOINT_TYPES = ("free", "ball", "hinge")
GROUPS = ("trunk", "right_leg", "left_leg", "right_arm", "left_arm")
RIGS_DIR = Path(__file__).resolve().parents[1] / "rigs"
DEFAULT_STRENGTH = 3.0  # x the file's f0 for tracked takes: why, in engine.take.check_strength

# name -> (dtype kind, shape with -1 for "any"); sizes are cross-checked after loading.
_ARRAYS = {
    "body_parent": ("i", (-1,)), "body_rest_pos": ("f", (-1, 3)),
    "body_rest_rot": ("f", (-1, 3, 3)), "body_mass": ("f", (-1,)), "body_size": ("f", (-1, 3)),
    "body_inertia": ("f", (-1, 3)), "body_contact": ("b", (-1,)), "joint_type": ("i", (-1,)),
    "joint_pos": ("f", (-1, 3)), "joint_axis": ("f", (-1, 3)), "joint_lower": ("f", (-1, 3)),
    "joint_upper": ("f", (-1, 3)), "wp_muscle": ("i", (-1,)), "wp_body": ("i", (-1, 2)),
    "wp_weight": ("f", (-1, 2)), "wp_local": ("f", (-1, 2, 3)), "wp_rest": ("f", (-1, 3)),
    "muscle_wp_start": ("i", (-1,)), "muscle_f0": ("f", (-1,)), "muscle_lm": ("f", (-1,)),
    "muscle_lt": ("f", (-1,)), "muscle_lmax": ("f", (-1,)), "muscle_rest_length": ("f", (-1,)),
    "muscle_group": ("i", (-1,)), "muscle_twin": ("i", (-1,)),
}


@dataclass(frozen=True, eq=False)
class Rig:
    """Bodies (index b), joints (joint b moves body b; body 0's joint is the free root),
    muscles (index m) and waypoints (index k, contiguous per muscle).

    Rest pose = T-pose; every joint frame is aligned with the world axes at rest, so a
    joint's local rotation is the identity in the rest pose.
    """

    name: str
    meta: dict
    body_names: list[str]
    muscle_names: list[str]
    body_parent: np.ndarray
    body_rest_pos: np.ndarray
    body_rest_rot: np.ndarray
    body_mass: np.ndarray
    body_size: np.ndarray
    body_inertia: np.ndarray
    body_contact: np.ndarray
    joint_type: np.ndarray
    joint_pos: np.ndarray
    joint_axis: np.ndarray
    joint_lower: np.ndarray
    joint_upper: np.ndarray
    wp_muscle: np.ndarray
    wp_body: np.ndarray
    wp_weight: np.ndarray
    wp_local: np.ndarray
    wp_rest: np.ndarray
    muscle_wp_start: np.ndarray
    muscle_f0: np.ndarray
    muscle_lm: np.ndarray
    muscle_lt: np.ndarray
    muscle_lmax: np.ndarray
    muscle_rest_length: np.ndarray
    muscle_group: np.ndarray
    muscle_twin: np.ndarray
    path: Path | None = field(default=None)
    strength: float = 1.0  # muscle_f0 is the file's f0 times this (with_strength)

    # ---- sizes -------------------------------------------------------------------------
    @property
    def num_bodies(self) -> int:
        return len(self.body_names)

    @property
    def num_muscles(self) -> int:
        return len(self.muscle_names)

    @property
    def num_waypoints(self) -> int:
        return len(self.wp_muscle)

    @property
    def num_joints(self) -> int:
        """Joints between bodies (the free root joint is not counted)."""
        return int(np.sum(self.joint_type != JOINT_TYPES.index("free")))

    @cached_property
    def joint_dofs(self) -> np.ndarray:
        """Velocity degrees of freedom of each body's joint: free 6, ball 3, hinge 1."""
        return np.array([6, 3, 1])[self.joint_type]

    @cached_property
    def dof_start(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.joint_dofs)])

    @cached_property
    def q_start(self) -> np.ndarray:
        """Where each body's joint starts in q (B + 1,): free 7, ball 4 (a quaternion),
        hinge 1 coordinates (engine.kinematics.rest_q layout)."""
        return np.concatenate([[0], np.cumsum(np.array([7, 4, 1])[self.joint_type])])

    @property
    def num_dofs(self) -> int:
        return int(self.dof_start[-1])

    # ---- segments: consecutive waypoints of one muscle ------------------------------------
    @cached_property
    def seg_a(self) -> np.ndarray:
        k = np.arange(self.num_waypoints - 1)
        return k[self.wp_muscle[:-1] == self.wp_muscle[1:]]

    @property
    def seg_b(self) -> np.ndarray:
        return self.seg_a + 1

    @cached_property
    def seg_muscle(self) -> np.ndarray:
        return self.wp_muscle[self.seg_a]

    @cached_property
    def muscle_seg_start(self) -> np.ndarray:
        """Start index of each muscle's segments (for np.add.reduceat)."""
        return np.searchsorted(self.seg_muscle, np.arange(self.num_muscles))

    @cached_property
    def subtree(self) -> np.ndarray:
        """subtree[j, b] is True when joint j moves body b (b is j's body or a descendant)."""
        n = self.num_bodies
        S = np.eye(n, dtype=bool)
        for b in range(n):  # parents precede children in the file
            p = self.body_parent[b]
            while p >= 0:
                S[p, b] = True
                p = self.body_parent[p]
        return S

    def with_strength(self, strength: float) -> "Rig":
        """This rig with every muscle `strength` times as strong as the file's f0 (its maximum
        isometric force; muscle_f0 then holds the scaled forces, which every force, bound and
        solve uses). The file keeps MASS's literature forces; the MuscleVAE release runs its
        Hill forces at ~5x those in the legs, ~1.9x in the arms and ~1.6x in the trunk.
        `model_f0` stays the file's, for what is a property of the control and not of the
        strength (the muscle-space PD gains, engine.muscle_step.PDGains)."""
        from dataclasses import replace

        strength = valid_strength(strength)
        if strength == self.strength:
            return self
        return replace(self, muscle_f0=self.model_f0 * strength, strength=strength)

    @property
    def model_f0(self) -> np.ndarray:
        """The file's maximum isometric forces (N), whatever with_strength made of muscle_f0."""
        return self.muscle_f0 / self.strength

    @property
    def mass_kg(self) -> float:
        return float(self.body_mass.sum())

    @property
    def height_m(self) -> float:
        return float(self.meta["height_m"])

    def body_index(self, name: str) -> int:
        try:
            return self.body_names.index(name)
        except ValueError:
            raise KeyError(f"rig '{self.name}' has no body '{name}'") from None

    def muscle_index(self, name: str) -> int:
        try:
            return self.muscle_names.index(name)
        except ValueError:
            raise KeyError(f"rig '{self.name}' has no muscle '{name}'") from None

    def summary(self) -> dict:
        types = [JOINT_TYPES[t] for t in self.joint_type]
        return dict(
            rig=self.name,
            bodies=self.num_bodies,
            joints=self.num_joints,
            joint_types={t: types.count(t) for t in JOINT_TYPES},
            dofs=self.num_dofs,
            muscles=self.num_muscles,
            waypoints=self.num_waypoints,
            mass_kg=round(self.mass_kg, 3),
            height_m=round(self.height_m, 3),
            muscles_by_group={g: int(np.sum(self.muscle_group == i)) for i, g in enumerate(GROUPS)},
        )


def valid_strength(strength, name: str = "strength") -> float:
    """A muscle strength (Rig.with_strength) as a float; ParameterError naming `name` otherwise."""
    from .errors import ParameterError

    if isinstance(strength, bool) or not isinstance(strength, (int, float, np.integer, np.floating)) \
            or not np.isfinite(strength) or not 0.1 <= strength <= 10:
        raise ParameterError(name, f"{strength!r}: expected a number from 0.1 to 10 (times the model's f0)")
    return float(strength)


def rig_path(name_or_path: str | Path) -> Path:
    """A rig name ('human284') resolves to rigs/<name>/<name>.npz; anything else is a path."""
    p = Path(name_or_path)
    if p.suffix == ".npz" or p.exists():
        return p
    return RIGS_DIR / str(name_or_path) / f"{name_or_path}.npz"


def load_rig(name_or_path: str | Path = "human284") -> Rig:
    """Load and validate a rig file; every failure names the file and what is wrong."""
    path = rig_path(name_or_path)
    meta, data = read_npz(path, FORMAT, FORMAT_VERSION, "rig",
                          hint="run rigs/human284/convert.py to make a current one")
    arrays = {}
    for key, (kind, shape) in _ARRAYS.items():
        if key not in data:
            raise InputFileError(path, f"missing array '{key}'")
        a = data[key]
        if a.ndim != len(shape) or any(s not in (-1, t) for s, t in zip(shape, a.shape)):
            raise InputFileError(path, f"array '{key}' has shape {a.shape}, expected {shape}")
        if kind == "f":
            if not np.issubdtype(a.dtype, np.floating) or not np.all(np.isfinite(a)):
                raise InputFileError(path, f"array '{key}' must hold finite floats")
            a = a.astype(np.float64)
        elif kind == "i":
            if not np.issubdtype(a.dtype, np.integer):
                raise InputFileError(path, f"array '{key}' must hold integers")
            a = a.astype(np.int64)
        arrays[key] = a
    nb, nm, nk = len(meta["body_names"]), len(meta["muscle_names"]), len(arrays["wp_muscle"])
    sizes = {"body": nb, "joint": nb, "muscle": nm, "wp": nk}
    for key, a in arrays.items():
        prefix = key.split("_")[0]
        expect = nm + 1 if key == "muscle_wp_start" else sizes[prefix]
        if len(a) != expect:
            raise InputFileError(path, f"array '{key}' has {len(a)} rows, expected {expect}")
    checks = [
        (np.all(arrays["body_parent"] < np.arange(nb)), "body_parent: a parent must precede its child"),
        (np.all((arrays["wp_body"] >= 0) & (arrays["wp_body"] < nb)), "wp_body: index out of range"),
        (np.all((arrays["wp_muscle"] >= 0) & (arrays["wp_muscle"] < nm)), "wp_muscle: index out of range"),
        (np.all(np.diff(arrays["wp_muscle"]) >= 0), "wp_muscle: waypoints must be grouped by muscle"),
        (np.allclose(arrays["wp_weight"].sum(1), 1.0), "wp_weight: rows must sum to 1"),
        (np.all(arrays["muscle_f0"] > 0), "muscle_f0: must be positive"),
        (np.all(arrays["muscle_lm"] > 0), "muscle_lm: must be positive"),
        (np.all(arrays["muscle_rest_length"] > 0), "muscle_rest_length: must be positive"),
        (np.all(arrays["body_mass"] > 0), "body_mass: must be positive"),
        (np.all((arrays["joint_type"] >= 0) & (arrays["joint_type"] < len(JOINT_TYPES))), "joint_type: unknown code"),
        (np.all((arrays["muscle_group"] >= 0) & (arrays["muscle_group"] < len(GROUPS))), "muscle_group: unknown code"),
    ]
    for ok, problem in checks:
        if not ok:
            raise InputFileError(path, problem)
    return Rig(
        name=meta.get("name", path.stem), meta=meta, body_names=list(meta["body_names"]),
        muscle_names=list(meta["muscle_names"]), path=path, **arrays,
    )
