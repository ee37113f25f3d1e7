"""Sinew's compiled library (engine/native/*.c), loaded with ctypes: the muscle step and the
coordination solve's Newton method.

One C call does stages 1-6 of the step (DESIGN.md "One physics step") in ~27 us of CPU time
on the 2-core reference machine, where numpy needs ~170 us. A second solves the tracker's
coordination problem (engine.control.coordination.dual_newton) where numpy spent ~2.7 ms,
most of it in Python's overhead between small array operations. The numpy functions stay
the definition: the C files repeat them and tests/test_compiled.py holds the two equal
(the step to 1e-9, the solve to its tolerance).

The libraries are prebuilt for linux-x64, windows-x64, macos-arm64 and macos-x64
(tools/build_native.py, Zig from PyPI) and shipped in the repository and the extension zip:
nothing is compiled on a user's machine. `library()` returns None, and the engine runs the
numpy step, when SINEW_COMPILED=0 is set, when no library exists for this platform, or when
the library was built from another version of the C source; the reason is printed once.

Why C and ctypes rather than numba (measured on the same kernel): the four libraries weigh
6-75 kB and load in a millisecond, and the call costs ~27 us. Numba ran the same loops in
~35 us but adds ~64 MB of wheels to every zip (llvmlite 60 MB + numba 4 MB for linux-x64),
compiles for ~1.5 s on the first call of every Blender session, and caching that compile
needs a writable folder beside the installed extension.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import sys
from pathlib import Path

import numpy as np

ENV = "SINEW_COMPILED"  # "0" switches the compiled path off
NATIVE = Path(__file__).resolve().parent / "native"
SOURCES = ("decision_terms.c", "dual_newton.c", "muscle_step.c", "sinew_muscles.h")  # name order, as tools/build_native.py hashes them
ABI_VERSION = 4
SUFFIX = {"linux": "so", "windows": "dll", "macos": "dylib"}

_c_p = ctypes.c_void_p


class _Muscles(ctypes.Structure):
    """SinewMuscles of muscle_step.c, field for field."""

    _fields_ = ([(n, ctypes.c_int32) for n in ("B", "K", "S", "M")]
                + [(n, _c_p) for n in ("wp_body", "wp_weight", "wp_local", "seg_a", "seg_b", "seg_start",
                                       "body_start", "body_slot",
                                       "f0", "l_rest", "lt", "lm", "kp", "kd")]
                + [(n, ctypes.c_double) for n in ("dt", "F", "R", "r", "LD", "LR")]
                + [(n, _c_p) for n in ("wp_pos", "wp_vel", "seg_u", "wp_force", "anchor")])


class _Decision(ctypes.Structure):
    """SinewDecision of decision_terms.c, field for field."""

    _fields_ = ([("nv", ctypes.c_int32), ("NC", ctypes.c_int32)]
                + [(n, _c_p) for n in ("chain_start", "chain", "contact_body", "corner")]
                + [("mu", ctypes.c_double)]
                + [(n, _c_p) for n in ("jw", "jv", "wrench", "touched", "moves")])


def platform_name() -> str | None:
    """This machine as a Blender platform name (linux-x64, windows-x64, macos-arm64, ...)."""
    osname = {"linux": "linux", "win32": "windows", "darwin": "macos"}.get(sys.platform)
    arch = {"x86_64": "x64", "amd64": "x64", "arm64": "arm64", "aarch64": "arm64"}.get(platform.machine().lower())
    return f"{osname}-{arch}" if osname and arch else None


def library_path(plat: str | None = None) -> Path | None:
    plat = plat or platform_name()
    if plat is None:
        return None
    return NATIVE / f"sinew_muscle-{plat}.{SUFFIX[plat.split('-')[0]]}"


def source_hash() -> str | None:
    """SHA-256 prefix of the C sources next to the libraries (tools/build_native.py's), or
    None where only the libraries travel."""
    paths = [NATIVE / name for name in SOURCES]
    if not all(p.is_file() for p in paths):
        return None
    h = hashlib.sha256()
    for path in paths:
        h.update(path.name.encode() + b"\0" + path.read_bytes().replace(b"\r\n", b"\n"))
    return h.hexdigest()[:16]


_LIB: list = []  # [library or None, reason]; filled on first use


def _load():
    if os.environ.get(ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return None, f"{ENV}={os.environ[ENV]}"
    path = library_path()
    if path is None or not path.is_file():
        return None, f"no compiled library for this platform ({platform_name() or platform.machine()})"
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        return None, f"{path.name} does not load: {e}"
    lib.sinew_source_hash.restype = ctypes.c_char_p
    lib.sinew_abi_version.restype = lib.sinew_struct_size.restype = ctypes.c_int
    if not hasattr(lib, "sinew_decision_size"):
        return None, f"{path.name} has another interface than engine/compiled.py"
    lib.sinew_decision_size.restype = ctypes.c_int
    want = source_hash()
    got = lib.sinew_source_hash().decode()
    if want is not None and got != want:
        return None, f"{path.name} was built from other C sources than engine/native's (run `make compiled`)"
    if (lib.sinew_abi_version() != ABI_VERSION or lib.sinew_struct_size() != ctypes.sizeof(_Muscles)
            or lib.sinew_decision_size() != ctypes.sizeof(_Decision)):
        return None, f"{path.name} has another interface than engine/compiled.py"
    lib.sinew_muscle_step.argtypes = [_c_p, _c_p, ctypes.c_int, _c_p]
    lib.sinew_muscle_step.restype = None
    lib.sinew_dual_newton.argtypes = [ctypes.c_int, ctypes.c_int] + [_c_p] * 6 + [ctypes.c_double, ctypes.c_int,
                                                                                _c_p, _c_p, _c_p]
    lib.sinew_dual_newton.restype = ctypes.c_int
    lib.sinew_dual_newton_columns.argtypes = lib.sinew_dual_newton.argtypes
    lib.sinew_dual_newton_columns.restype = ctypes.c_int
    lib.sinew_decision_terms.argtypes = [_c_p] * 6 + [ctypes.c_double] + [_c_p] * 3
    lib.sinew_decision_terms.restype = ctypes.c_int
    return lib, "compiled"


def library():
    """The loaded library, or None (the reason is printed once, on stderr)."""
    if not _LIB:
        lib, reason = _load()
        _LIB[:] = [lib, reason]
        if lib is None:
            print(f"sinew: compiled muscle step not used ({reason}); running the numpy step", file=sys.stderr)
    return _LIB[0]


def status() -> str:
    """'compiled', or why the numpy step runs."""
    library()
    return _LIB[1]


class CompiledMuscles:
    """The rig, gains and 3CC-r rates in the C layout, and the call's input and output
    buffers. `step` copies the body state, command and fatigue state in, calls C once and
    returns fresh arrays. One instance must not be stepped from two threads at once."""

    def __init__(self, lib, rig, params, dt: float, gains):
        B, K, S, M = rig.num_bodies, rig.num_waypoints, len(rig.seg_a), rig.num_muscles
        i32 = lambda a: np.ascontiguousarray(a, dtype=np.int32)
        f64 = lambda a: np.ascontiguousarray(a, dtype=np.float64)
        slots = np.flatnonzero(rig.wp_weight.ravel() > 0)  # anchors, grouped by body for stage 6
        slots = slots[np.argsort(rig.wp_body.ravel()[slots], kind="stable")]
        body_start = np.searchsorted(rig.wp_body.ravel()[slots], np.arange(B + 1))
        keep = dict(wp_body=i32(rig.wp_body), wp_weight=f64(rig.wp_weight), wp_local=f64(rig.wp_local),
                    seg_a=i32(rig.seg_a), seg_b=i32(rig.seg_b), seg_start=i32(np.r_[rig.muscle_seg_start, S]),
                    body_start=i32(body_start), body_slot=i32(slots),
                    f0=f64(rig.muscle_f0), l_rest=f64(rig.muscle_rest_length), lt=f64(rig.muscle_lt),
                    lm=f64(rig.muscle_lm), kp=f64(gains.kp), kd=f64(gains.kd),
                    wp_pos=np.zeros(3 * K), wp_vel=np.zeros(3 * K), seg_u=np.zeros(3 * S),
                    wp_force=np.zeros(3 * K), anchor=np.zeros(6 * K))
        self._keep = keep  # the struct points into these arrays
        self._struct = _Muscles(B=B, K=K, S=S, M=M, dt=dt, F=params.F_eff, R=params.R_eff, r=params.r,
                                LD=params.LD, LR=params.LR,
                                **{k: v.ctypes.data for k, v in keep.items()})
        self.B, self.M = B, M
        self._in = np.zeros(18 * B + 4 * M)
        self._out = np.zeros(7 * M + 6 * B)
        v = self._in
        self._rot, self._pos = v[:9 * B].reshape(B, 3, 3), v[9 * B:12 * B].reshape(B, 3)
        self._lin, self._ang = v[12 * B:15 * B].reshape(B, 3), v[15 * B:18 * B].reshape(B, 3)
        self._cmd, self._fat = v[18 * B:18 * B + M], v[18 * B + M:].reshape(3, M)
        call = lib.sinew_muscle_step
        ptrs = ctypes.byref(self._struct), self._in.ctypes.data, self._out.ctypes.data
        self._call = lambda is_activation: call(ptrs[0], ptrs[1], is_activation, ptrs[2])

    def put_bodies(self, rot, pos, linvel, angvel) -> None:
        """The body state into the call's input buffer (the step's and DecisionTerms')."""
        self._rot[...] = rot
        self._pos[...] = pos
        self._lin[...] = linvel
        self._ang[...] = angvel

    def step(self, rot, pos, linvel, angvel, command, MA, MR, MF, is_activation: bool):
        """Returns (per-muscle rows (7, M): length, rate, activation, force, M_A, M_R, M_F;
        per-body (2, B, 3): force, torque), fresh arrays the caller may keep."""
        self.put_bodies(rot, pos, linvel, angvel)
        self._cmd[...] = command
        f = self._fat
        f[0], f[1], f[2] = MA, MR, MF
        self._call(1 if is_activation else 0)
        out = self._out.copy()
        M = self.M
        return out[:7 * M].reshape(7, M), out[7 * M:].reshape(2, self.B, 3)


class DecisionTerms:
    """engine.control.tracking.TrackingController.muscle_terms in C (engine/native/
    decision_terms.c): the Hill factors, moment arms and contact edge Jacobians a decision
    needs, from the body state and MuJoCo's data at it, in one call. Shares `muscles`' (a
    CompiledMuscles of the same rig) buffers: not to be called from two threads at once."""

    def __init__(self, lib, rig, model, muscles: CompiledMuscles, contact_bodies, corners, mu: float):
        B, nv, M = rig.num_bodies, model.nv, rig.num_muscles
        i32 = lambda a: np.ascontiguousarray(a, dtype=np.int32)
        chains = []  # the DOFs that move each body: its own and its ancestors' (MuJoCo body b + 1)
        for b in range(B):
            dofs, body = [], b + 1
            while body > 0:
                dofs += np.flatnonzero(model.dof_bodyid == body).tolist()
                body = int(model.body_parentid[body])
            chains.append(sorted(dofs))
        if len(set(model.body_rootid[1:].tolist())) != 1:
            raise ValueError("DecisionTerms: the rig must be one kinematic tree")
        self._root = int(model.body_rootid[1])
        keep = dict(chain_start=i32(np.r_[0, np.cumsum([len(c) for c in chains])]),
                    chain=i32(np.concatenate(chains)), contact_body=i32(contact_bodies),
                    corner=np.ascontiguousarray(corners, dtype=np.float64).reshape(B, 8, 3),
                    jw=np.zeros(3 * nv * B), jv=np.zeros(3 * nv * B), wrench=np.zeros(6 * B),
                    touched=np.zeros(B, np.int32), moves=np.zeros(nv, np.int32))
        self._keep = keep
        self._struct = _Decision(nv=nv, NC=len(keep["contact_body"]), mu=float(mu),
                                 **{k: v.ctypes.data for k, v in keep.items()})
        self._muscles = muscles
        self.M, self.nv, self.B = M, nv, B
        self._out = np.zeros(4 * M)
        self._Jc = np.zeros((16 * len(keep["contact_body"]), nv))
        self._call = lib.sinew_decision_terms
        # the call's fixed arguments, their addresses taken once
        self._fixed = (ctypes.byref(muscles._struct), ctypes.byref(self._struct), muscles._in.ctypes.data)
        self._outs = (self._out.ctypes.data, self._Jc.ctypes.data)
        self._data = self._data_ptrs = None  # the MjData last read, and its arrays' addresses

    def _inputs(self, data):
        """The addresses of MuJoCo's cdof, xipos (bodies 1..) and the tree's centre of mass:
        MjData's own arrays, kept for that data (they stay where they are), or copies
        where they are not float64 and contiguous."""
        if data is self._data:
            return self._data_ptrs
        arrays = (data.cdof, data.xipos[1:], data.subtree_com[self._root])
        if all(a.dtype == np.float64 and a.flags.c_contiguous for a in arrays):
            self._data, self._data_ptrs = data, tuple(a.ctypes.data for a in arrays)
            return self._data_ptrs
        self._keep_inputs = [np.ascontiguousarray(a, dtype=np.float64) for a in arrays]  # alive through the call
        return tuple(a.ctypes.data for a in self._keep_inputs)

    def __call__(self, state, data, margin: float):
        """(f_l f_v, f_PE (M,), A (M, nv), Jc (rows, nv)) at the body state, `data` MuJoCo's
        at it (cdof, xipos and the tree's centre of mass are read); fresh arrays."""
        self._muscles.put_bodies(state.rot, state.pos, state.linvel, state.angvel)
        cdof, xipos, com = self._inputs(data)
        A = np.empty((self.M, self.nv))
        out, Jc = self._outs
        rows = self._call(*self._fixed, cdof, xipos, com, float(margin), out, A.ctypes.data, Jc)
        M = self.M
        return self._out[2 * M:3 * M].copy(), self._out[3 * M:].copy(), A, self._Jc[:rows].copy()


class DualNewtonInPlace:
    """dual_newton in C on arrays that stay where they are (engine.control.coordination.
    Coordinator's buffers): their addresses are taken once, so a call copies nothing. A call
    for (m, n) reads G by its columns from Gt's first n m entries (G^T, n x m row-major:
    sinew_dual_newton_columns, the same solve as sinew_dual_newton on G), rhs, and the
    first n entries of reg, lo, hi and pull, starts from lam (m) and leaves the multipliers
    there and the minimiser in x's first n entries."""

    def __init__(self, lib, Gt, rhs, reg, lo, hi, pull, lam, x):
        arrays = (Gt, rhs, reg, lo, hi, pull, lam, x)
        if not all(a.dtype == np.float64 and a.flags.c_contiguous and a.flags.writeable for a in arrays):
            raise ValueError("DualNewtonInPlace: float64, C-contiguous, writeable arrays expected")
        self._arrays = arrays  # kept alive: the library reads and writes them by address
        self._ptrs = [a.ctypes.data for a in arrays]
        self._cap = min(len(reg), len(lo), len(hi), len(pull), len(x))
        self._m = min(len(rhs), len(lam))
        self._steps = ctypes.c_int(0)
        self._steps_ref = ctypes.byref(self._steps)
        self._call = lib.sinew_dual_newton_columns

    def __call__(self, m: int, n: int, tol: float = 1e-9, max_iter: int = 200) -> tuple[bool, int]:
        """Solve; returns (converged, Newton steps)."""
        if not (0 <= m <= self._m and 0 <= n <= self._cap and m * n <= len(self._arrays[0])):
            raise ValueError(f"DualNewtonInPlace: ({m}, {n}) does not fit the buffers")
        Gt, rhs, reg, lo, hi, pull, lam, x = self._ptrs
        ok = self._call(m, n, Gt, rhs, reg, lo, hi, pull, tol, max_iter, lam, x, self._steps_ref)
        if ok < 0:
            raise MemoryError("sinew_dual_newton: out of memory")
        return bool(ok), self._steps.value


def dual_newton(lib, G, rhs, reg, lo, hi, pull, lam=None, tol=1e-9, max_iter=200, info=None):
    """engine.control.coordination.dual_newton in C (engine/native/dual_newton.c): the same
    arguments and result (x, lam, converged)."""
    f64 = lambda a: np.ascontiguousarray(a, dtype=np.float64)
    G, rhs, reg, lo, hi, pull = map(f64, (G, rhs, reg, lo, hi, pull))
    m, n = G.shape
    lam = np.zeros(m) if lam is None else np.array(lam, dtype=np.float64)  # a copy: written in place
    x = np.empty(n)
    steps = ctypes.c_int(0)
    ok = lib.sinew_dual_newton(m, n, G.ctypes.data, rhs.ctypes.data, reg.ctypes.data, lo.ctypes.data,
                               hi.ctypes.data, pull.ctypes.data, float(tol), int(max_iter), lam.ctypes.data,
                               x.ctypes.data, ctypes.byref(steps))
    if ok < 0:
        raise MemoryError("sinew_dual_newton: out of memory")
    if info is not None:
        info["steps"] = steps.value
    return x, lam, bool(ok)
