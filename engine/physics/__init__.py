"""Physics backends: one small interface (base.Backend), MuJoCo (default) and ODE (optional).

    backend = make_backend("mujoco", rig, dt=1/120, joint_damping=10.0, pinned=("Pelvis",))

Backend modules are imported lazily, so a missing optional engine costs nothing until used.
"""
from __future__ import annotations

from ..errors import SinewError
from .base import Backend, BodyState, q_to_state, state_to_q

BACKENDS = ("mujoco", "ode")
DEFAULT = "mujoco"


def make_backend(name: str, rig, **options) -> Backend:
    """Build the named backend for `rig`; options go to its constructor (see base.Backend)."""
    key = str(name).strip().lower()
    if key == "mujoco":
        try:
            from .mujoco_backend import MujocoBackend
        except ImportError as e:
            raise SinewError(f"MuJoCo backend needs the 'mujoco' package (pip install mujoco): {e}") from None
        return MujocoBackend(rig, **options)
    if key == "ode":
        try:
            from .ode_backend import OdeBackend
        except ImportError as e:
            if e.name != "ode":
                raise
            raise SinewError("ODE backend needs Debian's python3-pyode (apt-get install python3-pyode); "
                             "the PyPI 'pyode' is Python-2 only") from None
        return OdeBackend(rig, **options)
    raise SinewError(f"physics backend {name!r} unknown; choose mujoco or ode")


__all__ = ["BACKENDS", "DEFAULT", "Backend", "BodyState", "make_backend", "q_to_state", "state_to_q"]
