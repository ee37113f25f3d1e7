"""Same bits (DESIGN.md, Takes): numpy 1.26 on an AVX-512 CPU computes exp, log, arccos,
arctan2, power and their kin with its SIMD code or with libm, which differ in the last bit,
and takes libm when the span of a strided input reaches the output. Where the allocator put
the output then decides the last bit, and the same take run twice drifts apart (CI saw it:
the bundled walk retargeted twice in one process differed by 4e-16 rad in 1 of ~150 runs).

These functions are wrapped here while clips are retargeted and a short take runs, and any
call given an array whose innermost stride is not its item size is reported by its caller."""
import traceback

import numpy as np
import pytest

from engine import fatigue as fat

from .clips import MOCAP_DIR as MOCAP
from .conftest import MASS

# numpy 1.26's functions with two implementations that differ in the last bit (measured on
# this machine: SIMD and libm results of each compared over 4000 values)
TWO_WAYS = ("exp", "log", "log2", "log10", "exp2", "expm1", "log1p", "cbrt", "power", "tan",
            "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "arcsinh", "arccosh", "arctanh")


def _strided(a) -> bool:
    """An array numpy walks with a stride other than its item size in the inner loop."""
    if not isinstance(a, np.ndarray) or a.size < 2 or a.flags.c_contiguous or a.flags.f_contiguous:
        return False
    return min(abs(s) for s, n in zip(a.strides, a.shape) if n > 1) != a.itemsize


@pytest.fixture
def strided_calls(monkeypatch):
    """The calls of TWO_WAYS functions (through np.NAME) given a strided array, as
    'name at file:line' of the engine's caller."""
    calls = []
    for name in TWO_WAYS:
        def wrapped(*args, _f=getattr(np, name), _name=name, **kw):
            if any(_strided(a) for a in args):
                ours = [f for f in traceback.extract_stack()[:-1] if "/engine/" in f.filename]
                where = f"{ours[-1].filename.split('/engine/')[-1]}:{ours[-1].lineno}" if ours else "outside the engine"
                calls.append(f"np.{_name} at {where}")
            return _f(*args, **kw)
        monkeypatch.setattr(np, name, wrapped)
    return calls


def test_the_check_sees_a_strided_column(strided_calls):
    x = np.ones((5, 3))
    np.arctan2(x[:, 1], 2.0)  # a column: stride 24 bytes
    np.arctan2(np.ascontiguousarray(x[:, 1]), 2.0)  # contiguous
    np.arctan2(x[:, :2], 2.0)  # rows of contiguous pairs
    assert len(strided_calls) == 1 and strided_calls[0].startswith("np.arctan2")


def test_retargets_and_takes_give_those_functions_contiguous_arrays(rig, strided_calls):
    """Three clips retargeted, a short tracked take and a short planned one (its rollouts in
    this process, eq. (4)'s extra plans among them: the worker tests hold planned takes equal
    to the bit)."""
    from engine.control.balance import BalanceParams
    from engine.control.plan import load_clip
    from engine.control.tracking import TrackingParams
    from engine.take import simulate

    for clip in (MOCAP / "cmu_07_01_walk.bvh", MOCAP / "mixamo_test_freebvh.bvh", MASS / "motion" / "kick.bvh"):
        load_clip(rig, clip)
    walk = MASS / "motion" / "walk.bvh"
    simulate(rig, [(walk, 0.2)], fatigue=fat.FatigueParams(scale=50), fps=30)
    planned = simulate(rig, [(walk, 1.2)], fps=30, progress=lambda f: None, params=TrackingParams(
        residual=0.0, balance=BalanceParams(candidates=3, horizon=24, extra=2, extra_above=1.0)))
    assert planned.meta["balance"]["searched_more"] > 0  # eq. (4)'s plans too
    assert not strided_calls, sorted(set(strided_calls))
