"""The compiled library (engine.compiled) against the numpy definitions: the muscle step
(MuscleSystem.step_numpy) and the coordination solve (coordination.dual_newton)."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine import compiled
from engine import fatigue as fat
from engine import kinematics as kin
from engine.muscle_step import MuscleSystem
from engine.transforms import axis_angle_to_matrix

REPO = Path(__file__).resolve().parents[1]
switched_off = os.environ.get(compiled.ENV, "1") == "0"
needs_compiled = pytest.mark.skipif(switched_off, reason=f"{compiled.ENV}=0: the compiled step is switched off")


@pytest.fixture(scope="module")
def system(rig):
    if switched_off:
        pytest.skip(f"{compiled.ENV}=0")
    return MuscleSystem(rig, fat.FatigueParams(scale=30.0), compiled=True)


def random_case(rig, seed, moving=True):
    """A random pose, body velocities (zero when not moving: every length rate is 0), a
    random 3CC-r state with muscles at its corners (M_A = 0, M_R = 0, M_A = 1), and wide
    commands, so the clip meets both bounds (eq. 34-36)."""
    rng = np.random.default_rng(seed)
    _, _, br, bp = kin.forward_kinematics(rig, rng.normal(size=3),
                                          axis_angle_to_matrix(rng.normal(scale=0.4, size=(23, 3))))
    scale = 1.0 if moving else 0.0
    lv, av = scale * rng.normal(size=(23, 3)), scale * rng.normal(scale=2.0, size=(23, 3))
    M = rig.num_muscles
    MA = rng.uniform(0, 1, M)
    MF = rng.uniform(0, 1, M) * (1 - MA)
    MA[:20], MF[20:40], MA[40:50], MF[40:50] = 0.0, 1.0 - MA[20:40], 1.0, 0.0
    state = fat.FatigueState(MA, 1.0 - MA - MF, MF)
    return (br, bp, lv, av), rng.uniform(-0.4, 0.4, M), rng.uniform(-0.5, 1.5, M), state


def assert_same(a, b, rel=1e-9):
    """Agreement to `rel` of the array's largest magnitude (single elements of a sum can be
    tiny where terms cancel, so each array is compared against its own scale)."""
    scale = max(np.abs(b).max(), 1e-300)
    assert np.abs(a - b).max() <= rel * scale, f"max diff {np.abs(a - b).max():.3g} vs scale {scale:.3g}"


def compare(res, ref):
    for k in ("length", "length_rate", "activation", "force", "body_force", "body_torque"):
        assert_same(getattr(res, k), getattr(ref, k))
    for k in ("MA", "MR", "MF"):
        assert_same(getattr(res.fatigue, k), getattr(ref.fatigue, k))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("moving", [True, False])
def test_compiled_step_equals_numpy(rig, system, seed, moving):
    body, action, wanted, state = random_case(rig, seed, moving)
    lb, ub = fat.activation_bounds(state.MA, state.MR, system.dt, system.params.F_eff,
                                   system.params.LD, system.params.LR)
    counts = np.zeros(3, dtype=int)  # at alpha_lb, at alpha_ub, inside
    for command, activation in ((action, False), (wanted, True)):
        run = system.step_activation if activation else system.step
        res = run(*body, command, state)
        ref = system.step_numpy(*body, command, state, activation=activation)
        compare(res, ref)
        at_lb, at_ub = res.activation == lb, res.activation == ub
        counts += at_lb.sum(), at_ub.sum(), (~at_lb & ~at_ub).sum()
        assert np.allclose(res.fatigue.MA + res.fatigue.MR + res.fatigue.MF, 1.0, atol=1e-12)
        if not moving:
            assert not res.length_rate.any() and not ref.length_rate.any()
    assert (counts > 20).all(), counts  # both clips and the inside are exercised


def test_compiled_step_keeps_nothing_between_calls(rig, system):
    """Results are fresh arrays: the next step does not overwrite the last one's."""
    body, action, _, state = random_case(rig, 7)
    first = system.step(*body, action, state)
    kept = first.force.copy(), first.body_torque.copy(), first.fatigue.MR.copy()
    system.step(*random_case(rig, 8)[0], action, first.fatigue)
    assert np.array_equal(first.force, kept[0]) and np.array_equal(first.body_torque, kept[1])
    assert np.array_equal(first.fatigue.MR, kept[2])


def test_power_identity_on_the_compiled_path(rig, system):
    """Virtual work: sum_b F_b . v_b + tau_b . omega_b = -sum_m f_m dl_m/dt."""
    for seed in range(3):
        body, action, _, state = random_case(rig, 20 + seed)
        res = system.step(*body, action, state)
        _, _, lv, av = body
        power = np.sum(res.body_force * lv) + np.sum(res.body_torque * av)
        assert power == pytest.approx(-np.sum(res.force * res.length_rate), rel=1e-9)
        assert np.abs(res.body_force.sum(0)).max() < 1e-8  # internal forces


def _box_problem(seed):
    """A random problem of the coordination solve's form and size (m rows, n unknowns):
    activations in narrow boxes, some pinned (lo = hi, as a fully fatigued muscle), unbounded-
    above contact forces and free root unknowns (+-1e9), weights from 1e-4 to 1, a cold or a
    warm start."""
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(3, 60)), int(rng.integers(5, 400))
    G = rng.standard_normal((m, n)) * rng.uniform(0.1, 100)
    rhs = rng.standard_normal(m) * rng.uniform(1, 1000)
    reg = rng.uniform(1e-4, 1, n)
    lo = np.where(rng.random(n) < 0.3, -1e9, rng.uniform(-1, 0.5, n))
    hi = np.maximum(lo, rng.uniform(0, 1, n))
    hi[rng.random(n) < 0.2] = 1e9
    pinned = rng.random(n) < 0.05
    lo[pinned] = hi[pinned]
    pull = 0.1 * rng.standard_normal(n)
    lam = None if seed % 2 else rng.standard_normal(m)
    return G, rhs, reg, lo, hi, pull, lam


@needs_compiled
@pytest.mark.parametrize("seed", range(40))
def test_compiled_solve_equals_numpy(seed):
    """engine/native/dual_newton.c takes the numpy method's Newton steps and lands on its
    minimiser and multipliers (the problem is strictly convex: one minimiser, so the two differ
    only by rounding, ~1e-11 of the largest activation), and both satisfy its optimality
    conditions: x = clip((pull + G^T lam) / reg) with lam = rhs - G x."""
    from engine.control.coordination import dual_newton

    G, rhs, reg, lo, hi, pull, lam = _box_problem(seed)
    i_np, i_c = {}, {}
    x, l, ok = dual_newton(G, rhs, reg, lo, hi, pull, lam, info=i_np)
    xc, lc, okc = compiled.dual_newton(compiled.library(), G, rhs, reg, lo, hi, pull, lam, info=i_c)
    assert ok and okc and i_np["steps"] == i_c["steps"]
    assert np.abs(xc - x).max() <= 1e-9 * (1 + np.abs(x).max())
    assert np.abs(lc - l).max() <= 1e-9 * (1 + np.abs(l).max())
    size = 1 + np.abs(rhs).max() + (np.abs(G) @ np.abs(xc)).max()  # of the terms in G x - rhs
    assert np.abs(lc - (rhs - G @ xc)).max() <= 1e-9 * size
    y = (pull + G.T @ lc) / reg
    assert np.abs(xc - np.clip(y, lo, hi)).max() <= 1e-9 * (1 + np.abs(y).max())
    if lam is not None:
        assert np.array_equal(lam, _box_problem(seed)[-1])  # the caller's warm start is not written


@needs_compiled
def test_the_decisions_terms_in_c_equal_numpys(rig):
    """engine/native/decision_terms.c gives the tracker's muscle_terms (Hill factors, moment
    arms, contact edge Jacobians) of the numpy definition to rounding, on walk poses with
    random joint offsets and velocities, from feet in the air (no contact rows) to feet sunk
    below the floor (all 16 rows of each foot body, and of the shanks' and hands' that sink
    too: every body may push), and with the stand controller's margin
    -inf (no rows)."""
    import mujoco

    from engine.control.plan import MotionPlan, QSpace, load_clip
    from engine.control.tracking import TrackingController
    from engine.simulation import Simulation

    from .conftest import MOTION_DIR

    sim = Simulation(rig)
    ref, _ = load_clip(rig, MOTION_DIR / "walk.bvh")
    ctrl = TrackingController(sim, MotionPlan(rig, [(ref, 1.0, "walk")]))
    c_terms = ctrl._terms
    assert c_terms is not None
    rng, rows = np.random.default_rng(3), set()
    for i in range(12):
        q = QSpace(rig).add(ref.q[7 * i], rng.normal(scale=0.05, size=rig.num_dofs))
        q[2] -= 0.012 * i  # from the air into the floor
        sim.physics.set_q(q)
        sim.physics.data.qvel[:] = rng.normal(scale=0.5, size=rig.num_dofs)
        mujoco.mj_forward(sim.physics.model, sim.physics.data)
        state = sim.physics.body_state()
        for margin in (None, -np.inf, 0.05):
            ctrl._terms = c_terms
            got = ctrl.muscle_terms(sim, state, margin)
            ctrl._terms = None
            want = ctrl.muscle_terms(sim, state, margin)
            for a, b in zip(got, want):
                assert a.shape == b.shape
                if b.size:
                    assert_same(a, b)
            # the root's DOFs move every body rigidly: numpy leaves round-off, C exact zeros
            # (which the compiled solve skips)
            assert not got[2][:, :6].any() and np.abs(want[2][:, :6]).max() < 1e-12
            rows.add(len(got[3]))
    ctrl._terms = c_terms
    assert 0 in rows and max(rows) >= 16 * int(rig.body_contact.sum()) and len(rows) > 3  # every foot body sunk


@needs_compiled
def test_the_tracker_decides_in_c_and_its_take_is_numpys(rig, monkeypatch):
    """A tracked take steps the same with the compiled solve and decision terms as with
    numpy's (the solve was 55 % of a planner rollout step, benchmarks/coordination_solvers.py;
    then the terms were most of the rest)."""
    from engine.control import coordination
    from engine.control.tracking import TrackingController, TrackingParams
    from engine.take import simulate

    from .conftest import MOTION_DIR

    def take():
        return simulate(rig, [(MOTION_DIR / "walk.bvh", 0.1)], params=TrackingParams(residual=0.0),
                        fps=120, progress=lambda f: None)

    assert coordination._newton() is not coordination.dual_newton
    c = take()
    monkeypatch.setattr(coordination, "_newton", lambda: coordination.dual_newton)
    monkeypatch.setattr(TrackingController, "_compiled_terms", lambda self, sim: None)
    n = take()
    assert np.abs(c.q - n.q).max() < 1e-6 and np.abs(c.activation - n.activation).max() < 1e-6


def test_every_platform_library_is_built_from_this_source():
    """The committed libraries carry the hash of engine/native's C sources (run
    `make compiled` after editing them) and are the right binary format for their platform."""
    magic = {"linux-x64": b"\x7fELF", "windows-x64": b"MZ", "macos-arm64": b"\xcf\xfa\xed\xfe",
             "macos-x64": b"\xcf\xfa\xed\xfe"}
    want = compiled.source_hash().encode()
    for plat, head in magic.items():
        data = compiled.library_path(plat).read_bytes()
        assert data.startswith(head), plat
        assert want in data, f"{plat}: built from other C sources"
    cpu = {"macos-arm64": 0x0100000C, "macos-x64": 0x01000007}  # Mach-O cputype
    for plat, t in cpu.items():
        assert int.from_bytes(compiled.library_path(plat).read_bytes()[4:8], "little") == t, plat
    # Apple silicon runs no unsigned code: the arm64 library needs its ad-hoc signature
    assert 0x1D in _macho_load_commands(compiled.library_path("macos-arm64").read_bytes())


def _macho_load_commands(data: bytes) -> list[int]:
    import struct

    ncmds, off, cmds = struct.unpack_from("<I", data, 16)[0], 32, []
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, off)
        cmds.append(cmd)
        off += size
    return cmds


def _python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


def test_switch_off_falls_back_to_numpy_and_says_so_once():
    code = ("from engine.rig import load_rig; from engine.muscle_step import MuscleSystem;"
            "r = load_rig('human284'); print(MuscleSystem(r).path, MuscleSystem(r).path)")
    r = _python(code, SINEW_COMPILED="0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["numpy", "numpy"]
    notes = [ln for ln in r.stderr.splitlines() if "compiled muscle step" in ln]
    assert len(notes) == 1 and "SINEW_COMPILED=0" in notes[0]
    r = _python(code.replace("MuscleSystem(r).path)", "MuscleSystem(r, compiled=True).path)"), SINEW_COMPILED="0")
    assert r.returncode != 0 and "compiled muscle step unavailable: SINEW_COMPILED=0" in r.stderr


@needs_compiled
def test_default_path_is_compiled_here(rig):
    assert compiled.platform_name() == "linux-x64" or sys.platform != "linux"
    assert MuscleSystem(rig).path == "compiled"


def _build_extension():
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_extension", REPO / "tools" / "build_extension.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_each_platform_payload_carries_its_own_library():
    """tools/build_extension.py gives each platform's zip exactly its own library, under the
    name engine.compiled looks for on that platform (tests/test_extension_zips.py checks the
    built zips)."""
    be = _build_extension()
    for plat in be.PLATFORMS:
        native = {rel: src for rel, src in be.platform_payload([], plat).items() if rel.startswith("engine/native/")}
        assert list(native) == [be.native_library(plat)]
        assert native[be.native_library(plat)] == compiled.library_path(plat)


@needs_compiled
@pytest.mark.parametrize("seed", range(6))
def test_in_place_solve_equals_the_copying_call(seed):
    """DualNewtonInPlace (the tracker's Coordinator's solve: G by its columns, on buffers
    with room to spare) gives compiled.dual_newton's minimiser, multipliers and steps to the bit."""
    G, rhs, reg, lo, hi, pull, lam = _box_problem(seed)
    m, n = G.shape
    lam = np.zeros(m) if lam is None else lam
    cap = n + 9
    bG, bV, bx, brhs, blam = np.zeros(m * cap), np.zeros((4, cap)), np.zeros(cap), np.zeros(m + 2), np.zeros(m + 2)
    solve = compiled.DualNewtonInPlace(compiled.library(), bG, brhs, *bV, blam, bx)
    bG[:m * n] = G.T.ravel()  # G^T, row-major
    for row, v in zip(bV, (reg, lo, hi, pull)):
        row[:n] = v
    brhs[:m], blam[:m] = rhs, lam
    info = {}
    x, l, ok = compiled.dual_newton(compiled.library(), G, rhs, reg, lo, hi, pull, lam, info=info)
    ok2, steps = solve(m, n)
    assert ok and ok2 and steps == info["steps"]
    assert np.array_equal(bx[:n], x) and np.array_equal(blam[:m], l)
    with pytest.raises(ValueError):
        solve(m, cap + 1)
