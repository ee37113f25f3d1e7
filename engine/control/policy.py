"""A trained MuscleVAE policy, evaluated in numpy (no torch): the state representation, the
policy file, and the PolicyController the Simulation runs.

    pol = load_policy("walk.npz", rig)                      # refuses other rigs / versions
    ctl = PolicyController(pol, rig, mode="track", reference=ref)
    sim.run(ctl, seconds=10)

Modes (DESIGN.md "Controllers"): "track" follows a reference clip through the posterior
q(z|s, s~'), "generate" samples the state-conditional prior p(z|s) with a noise scale, and
"heading" follows a direction and speed through the high-level policy (MuscleVAE appendix
B.3). The action is the policy mean mu_pi(s, z): the muscle-space PD action of eq. 11, or in a
file whose meta says action "activation", the muscles' activations (clipped to [0, 1]); a file
whose action is "offset" steers the tracker instead (engine.control.offset_policy).

The state representation is written once, with an array-module argument `xp` (numpy here,
torch in training/), so the engine and training compute the same features:

- state s (MuscleVAE sec. 4, ControlVAE): root height; every body's position relative to the
  root, its orientation (first two columns of the rotation matrix, "6D") and its linear and
  angular velocity, all in the root's heading frame (yaw only, Z-up); and the fatigue state:
  the f0-weighted mean M_A, M_R, M_F of each body part (appendix B.4), 5 x 3 values.
- target s~' for the posterior: the next reference frame's bodies relative to the character
  (positions from the character's root, orientations and velocities in its heading frame)
  and the reference root height.

A policy file is a plain .npz (loaded with allow_pickle=False): a JSON `meta` string
(format "sinew-policy", version, the rig's name and fingerprint, sizes, sigmas, training
summary) and float arrays: normalisation statistics and each network's layers.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..npzfile import read_npz
from ..errors import InputFileError, ParameterError
from ..rig import GROUPS, Rig
from .controller import Controller
from .goals import MODES, check_heading_policy

FORMAT = "sinew-policy"
FORMAT_VERSION = 1
POLICY_PERIOD = 6  # physics steps per policy decision: 20 Hz at 120 Hz (MuscleVAE sec. 5.1)
# what a policy's output is (PolicyFile.action_kind): a PD target per muscle (eq. 11), or the
# activations (no PD loop: its explicit 120 Hz step at strength 3 blows the hands up, and a
# network imitating an expert's activations through it co-contracts, docs/research/policy_from_expert.md)
# or an offset plan on the tracker's reference (engine.control.offset_policy: the balance
# planner's action space, the coordination solve below it)
ACTIONS = ("pd_target", "activation", "offset")


# ---- rig identity ----------------------------------------------------------------------
def rig_fingerprint(rig: Rig) -> str:
    """A short hash of what a policy depends on: bodies, muscles, their masses, f0 and rest lengths."""
    h = hashlib.sha256()
    h.update(json.dumps([rig.body_names, rig.muscle_names]).encode())
    for a in (rig.body_mass, rig.body_size, rig.muscle_f0, rig.muscle_rest_length, rig.muscle_group):
        h.update(np.ascontiguousarray(a, dtype="<f8").tobytes())
    return h.hexdigest()[:16]


# ---- state representation (xp: numpy or torch) -----------------------------------------------
def fatigue_weights(rig: Rig) -> np.ndarray:
    """(M, 5) matrix W: M_X @ W is the f0-weighted mean of M_X over each body part (appendix B.4)."""
    W = np.zeros((rig.num_muscles, len(GROUPS)))
    W[np.arange(rig.num_muscles), rig.muscle_group] = rig.muscle_f0
    return W / W.sum(0, keepdims=True)


def fatigue_parts(MA, MR, MF, W, xp=np):
    """(..., 15): the part means of M_A, M_R, M_F (5 parts each, GROUPS order)."""
    return xp.concatenate([MA @ W, MR @ W, MF @ W], -1)


def heading_cs(rot, xp=np):
    """cos and sin of the root's heading (yaw of its x axis in the ground plane), (...,) each.

    Every joint frame of the rig is world-aligned at rest and the root body's rest rotation
    is the identity, so body 0's rotation is the root's joint frame."""
    x0, x1 = rot[..., 0, 0, 0], rot[..., 0, 1, 0]
    n = xp.sqrt(x0 * x0 + x1 * x1) + 1e-9
    return x0 / n, x1 / n


def to_heading(v, c, s, xp=np):
    """Express world vectors v (..., B, 3) in the heading frame given by c, s (...,)."""
    c, s = c[..., None], s[..., None]
    vx, vy, vz = v[..., 0], v[..., 1], v[..., 2]
    return xp.stack([c * vx + s * vy, -s * vx + c * vy, vz], -1)


def rot6_in_heading(rot, c, s, xp=np):
    """First two columns of H^T R for rotations (..., B, 3, 3), flattened to (..., B, 6)."""
    c, s = c[..., None, None], s[..., None, None]
    r0, r1, r2 = rot[..., 0, :2], rot[..., 1, :2], rot[..., 2, :2]
    out = xp.stack([c * r0 + s * r1, -s * r0 + c * r1, r2], -2)
    return out.reshape(out.shape[:-2] + (6,))


def _flat(x):
    return x.reshape(x.shape[:-2] + (x.shape[-2] * x.shape[-1],))


def state_features(pos, rot, linvel, angvel, fat, xp=np):
    """The state s, (..., 1 + 15 B + 15), from world-frame body states and fatigue_parts()."""
    c, s = heading_cs(rot, xp)
    root = pos[..., :1, :]
    return xp.concatenate([
        pos[..., 0, 2:3],
        _flat(to_heading(pos - root, c, s, xp)),
        _flat(rot6_in_heading(rot, c, s, xp)),
        _flat(to_heading(linvel, c, s, xp)),
        _flat(to_heading(angvel, c, s, xp)),
        fat,
    ], -1)


def target_features(pos, rot, ref_pos, ref_rot, ref_linvel, ref_angvel, xp=np):
    """The posterior's view of the next reference frame, relative to the character, (..., 1 + 15 B)."""
    c, s = heading_cs(rot, xp)
    return xp.concatenate([
        ref_pos[..., 0, 2:3],
        _flat(to_heading(ref_pos - pos[..., :1, :], c, s, xp)),
        _flat(rot6_in_heading(ref_rot, c, s, xp)),
        _flat(to_heading(ref_linvel, c, s, xp)),
        _flat(to_heading(ref_angvel, c, s, xp)),
    ], -1)


def goal_features(rot, target_heading, target_speed, xp=np):
    """Heading task goal g (appendix B.3): the target direction in the character's heading
    frame (cos, sin) and the target speed in m/s, (..., 3)."""
    c, s = heading_cs(rot, xp)
    tc, ts = xp.cos(target_heading), xp.sin(target_heading)
    # facing direction is -y of the root frame: heading angle of facing = yaw - pi/2
    fc, fs = s, -c  # cos/sin of (yaw - pi/2)
    return xp.stack([tc * fc + ts * fs, ts * fc - tc * fs, target_speed + 0.0 * tc], -1)


def facing_angle(rot, xp=np):
    """The direction the character faces in the ground plane (radians, atan2 of world -y axis of root)."""
    c, s = heading_cs(rot, xp)
    return xp.arctan2(-c, s)


def state_size(num_bodies: int) -> int:
    return 1 + 15 * num_bodies + 3 * len(GROUPS)


def target_size(num_bodies: int) -> int:
    return 1 + 15 * num_bodies


GOAL_SIZE = 3


# ---- networks in numpy -------------------------------------------------------------------
def elu(x):
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0.0)))


def mlp(layers, x):
    """ELU MLP: hidden layers ELU, last layer linear. layers: [(W (in, out), b (out,)), ...]."""
    for i, (W, b) in enumerate(layers):
        x = x @ W + b
        if i < len(layers) - 1:
            x = elu(x)
    return x


def moe(gate_layers, expert_layers, x):
    """Mixture of experts with blended parameters (MuscleVAE B.1): the gate's softmax weights
    g blend every expert layer, sum_e g_e (W_e h + b_e), which is the layer with the blended
    weights. expert_layers: [(W (E, in, out), b (E, out)), ...]."""
    logits = mlp(gate_layers, x)
    g = np.exp(logits - logits.max(-1, keepdims=True))
    g = g / g.sum(-1, keepdims=True)
    h = x
    for i, (W, b) in enumerate(expert_layers):  # matmul, not einsum: BLAS, ~2.4x faster here
        y = np.matmul(h[..., None, None, :], W)[..., 0, :] + b  # every expert's layer, (..., E, out)
        h = np.matmul(g[..., None, :], y)[..., 0, :]  # blended by the gate
        if i < len(expert_layers) - 1:
            h = elu(h)
    return h


def _f32(net, *args):
    """A network (mlp or moe) on float32 layers: the input (last argument) in float32, the
    output back in float64."""
    return net(*args[:-1], np.asarray(args[-1], np.float32)).astype(np.float64)


# ---- the policy file ---------------------------------------------------------------------
_NETS = ("prior", "posterior", "policy.gate", "policy.expert", "task")


@dataclass
class PolicyFile:
    """A loaded policy: meta and the numpy layers of each network."""

    meta: dict
    arrays: dict
    path: Path | None = None

    def layers(self, net: str) -> list:
        out, i = [], 0
        while f"{net}.{i}.W" in self.arrays:
            out.append((self.arrays[f"{net}.{i}.W"], self.arrays[f"{net}.{i}.b"]))
            i += 1
        return out

    def __post_init__(self):
        # in float32 once (as trained and stored); each network's input is cast to float32 and
        # its output back to float64 (_f32): float32 products take about half the time (the
        # stand policy's three networks 0.25 -> 0.13 ms a decision) and still agree with the
        # torch policy within 1e-5
        self._cache = {n: [(np.asarray(W, np.float32), np.asarray(b, np.float32)) for W, b in self.layers(n)]
                       for n in _NETS}

    @property
    def latent_dim(self) -> int:
        return int(self.meta["latent_dim"])

    @property
    def period(self) -> int:
        """Physics steps per decision (POLICY_PERIOD, 20 Hz, in files that do not say)."""
        return int(self.meta.get("period", POLICY_PERIOD))

    @property
    def action_scale(self) -> float:
        """The network's output times this is the action (1 in files written before it existed)."""
        return float(self.meta.get("action_scale", 1.0))

    @property
    def action_kind(self) -> str:
        """What the network's output is (ACTIONS): "pd_target", MuscleVAE's muscle-space PD
        target (eq. 11; files that do not say), or "activation", the muscles' activations
        themselves (a policy taught by an expert that sets activations, training/dagger.py)."""
        return str(self.meta.get("action", "pd_target"))

    @property
    def has_task(self) -> bool:
        return bool(self._cache["task"])

    @property
    def speed_range(self) -> tuple[float, float] | None:
        """(min, max) m/s the heading task was trained for; None in files that do not say."""
        task = self.meta.get("task") or {}
        return (float(task["speed_min"]), float(task["speed_max"])) if "speed_min" in task else None

    @property
    def parameters(self) -> int:
        return int(sum(a.size for k, a in self.arrays.items() if not k.startswith("norm.")))

    def norm_state(self, s):
        return (s - self.arrays["norm.state_mean"]) / self.arrays["norm.state_std"]

    def norm_target(self, t):
        return (t - self.arrays["norm.target_mean"]) / self.arrays["norm.target_std"]

    def prior_mean(self, sn):
        return _f32(mlp, self._cache["prior"], sn)

    def posterior_offset(self, sn, tn):
        return _f32(mlp, self._cache["posterior"], np.concatenate([sn, tn], -1))

    def task_offset(self, sn, g):
        return _f32(mlp, self._cache["task"], np.concatenate([sn, g], -1))

    def action(self, sn, z):
        return self.action_scale * _f32(moe, self._cache["policy.gate"], self._cache["policy.expert"],
                                        np.concatenate([sn, z], -1))


def trained_strength(meta: dict) -> float:
    """The muscle strength a policy was trained at (Rig.with_strength; load_policy checks it;
    files from before it was recorded: 1)."""
    return float(meta.get("strength", 1.0))


def check_policy_rig(meta: dict, rig: Rig, path) -> None:
    """InputFileError naming the file when the policy was trained for another rig, or for
    this one at another strength (Rig.with_strength: its muscles would answer otherwise)."""
    rmeta = meta.get("rig") or {}
    if rmeta.get("name") == rig.name and rmeta.get("fingerprint") == rig_fingerprint(rig):
        return
    trained = trained_strength(meta)
    if rmeta.get("name") == rig.name and trained != rig.strength \
            and rmeta.get("fingerprint") == rig_fingerprint(rig.with_strength(trained)):
        raise InputFileError(path, f"policy was trained at muscle strength {trained:g}, not {rig.strength:g}; "
                             "run it at its own strength or train one at this strength")
    raise InputFileError(
        path, f"policy was trained for rig {rmeta.get('name')!r} (fingerprint "
        f"{rmeta.get('fingerprint')}), not for rig {rig.name!r} ({rig_fingerprint(rig)}); "
        "train a policy for this rig")


def load_policy(path, rig: Rig | None = None) -> PolicyFile:
    """Read and validate a policy file; InputFileError naming the file on anything wrong:
    not a zip / truncated, another format or version, another rig (`rig`, at the muscle
    strength the policy was trained at), missing or bad arrays."""
    path = Path(path)
    meta, data = read_npz(path, FORMAT, FORMAT_VERSION, "policy",
                          hint="re-export it with `sinew export-policy`")
    rmeta = meta.get("rig") or {}
    from ..rig import valid_strength

    try:
        valid_strength(meta.get("strength", 1.0))
    except ParameterError:
        raise InputFileError(path, f"meta strength {meta.get('strength')!r} is not a muscle strength") from None
    if rig is not None:  # this rig, at the strength the policy was trained at (engine.take.check_strength)
        check_policy_rig(meta, rig.with_strength(trained_strength(meta)), path)
    for k, a in data.items():
        if a.dtype.kind != "f" or not np.all(np.isfinite(a)):
            raise InputFileError(path, f"array {k!r} must hold finite floats")
        data[k] = a.astype(np.float64)
    nb, nm = int(rmeta.get("bodies", -1)), int(rmeta.get("muscles", -1))
    try:
        latent = int(meta["latent_dim"])
        offsets = len(meta["offsets"]["dofs"]) if meta.get("action") == "offset" else 0
        S, T = state_size(nb) + offsets, target_size(nb)
        need = {"norm.state_mean": (S,), "norm.state_std": (S,), "norm.target_mean": (T,),
                "norm.target_std": (T,)}
    except (KeyError, TypeError, ValueError) as e:
        raise InputFileError(path, f"meta lacks sizes ({e})") from None
    for k, shape in need.items():
        if k not in data:
            raise InputFileError(path, f"missing array {k!r}")
        if data[k].shape != shape:
            raise InputFileError(path, f"array {k!r} has shape {data[k].shape}, expected {shape}")
    if np.any(data["norm.state_std"] <= 0) or np.any(data["norm.target_std"] <= 0):
        raise InputFileError(path, "normalisation std must be positive")
    scale = meta.get("action_scale", 1.0)
    if not isinstance(scale, (int, float)) or not (np.isfinite(scale) and scale > 0):
        raise InputFileError(path, f"action_scale must be a positive number, got {scale!r}")
    pf = PolicyFile(meta, data, path)
    if pf.action_kind not in ACTIONS:
        raise InputFileError(path, f"action {meta.get('action')!r} is not one of {', '.join(ACTIONS)}")
    # check each network chains: input and output sizes
    chains = {"prior": (S, latent), "posterior": (S + T, latent), "policy.gate": (S + latent, None),
              "policy.expert": (S + latent, 2 * offsets if offsets else nm)}
    if pf.has_task:
        chains["task"] = (S + GOAL_SIZE, latent)
    for net, (n_in, n_out) in chains.items():
        layers = pf._cache[net]
        if not layers:
            raise InputFileError(path, f"missing network {net!r}")
        d = n_in
        for i, (W, b) in enumerate(layers):
            if W.shape[-2] != d or b.shape[-1] != W.shape[-1] or W.ndim != b.ndim + 1:
                raise InputFileError(path, f"layer {net}.{i} has shape {W.shape} / {b.shape}, expected input {d}")
            d = W.shape[-1]
        if n_out is not None and d != n_out:
            raise InputFileError(path, f"network {net!r} outputs {d} values, expected {n_out}")
    E = pf._cache["policy.expert"][0][0].shape[0]
    if pf._cache["policy.gate"][-1][0].shape[-1] != E:
        raise InputFileError(path, "gate outputs do not match the number of experts")
    return pf


# ---- reference clips, placed in the world and looped -----------------------------------------
def _yaw(rot) -> float:
    c, s = heading_cs(rot[None])
    return float(np.arctan2(s[0], c[0]))


def _rz(theta: float) -> np.ndarray:
    c, s = np.cos(theta), np.sin(theta)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


class ReferenceTrack:
    """A Reference's body states as a function of time, looped (cycle clips continue from their
    last frame's placement) and placed in the world by a planar transform (yaw, xy offset)."""

    def __init__(self, rig: Rig, ref, loop: bool = True):
        from ..physics.base import q_to_state

        self.rig, self.ref, self.loop = rig, ref, loop
        self.fps = ref.fps
        F = ref.num_frames
        self.pos, self.rot = np.asarray(ref.body_pos, float), np.asarray(ref.body_rot, float)
        st = q_to_state(rig, ref.q, ref.qvel)  # batched over the frames
        self.linvel, self.angvel = st.linvel, st.angvel
        self.muscle_length = np.asarray(ref.muscle_length, float)
        self.frames = F
        # planar transform taking frame 0's root placement to the last frame's
        y0, y1 = _yaw(self.rot[0]), _yaw(self.rot[-1])
        th = y1 - y0
        d = self.pos[-1, 0] - _rz(th) @ self.pos[0, 0]
        d[2] = 0.0
        self._loop_tf = (th, d)
        self.align = (0.0, np.zeros(3))

    @property
    def seconds(self) -> float:
        return (self.frames - 1) / self.fps

    def align_to(self, t: float, root_pos, yaw: float) -> None:
        """Place the clip so that at clip time t its root is at root_pos (xy) facing `yaw`."""
        self.align = (0.0, np.zeros(3))
        p, r = self._raw(t)[:2]
        th = yaw - _yaw(r)
        d = np.asarray(root_pos, float) - _rz(th) @ p[0]
        d[2] = 0.0
        self.align = (th, d)

    def _raw(self, t: float):
        k = int(round(t * self.fps))
        n = 0
        if self.loop and self.frames > 1:
            n, k = divmod(k, self.frames - 1)
        else:
            k = min(max(k, 0), self.frames - 1)
        th, d = self.align
        lt, ld = self._loop_tf
        for _ in range(n):  # compose align o loop^n
            d = d + _rz(th) @ ld
            th = th + lt
        R = _rz(th)
        pos = self.pos[k] @ R.T + d
        rot = R @ self.rot[k]
        return pos, rot, self.linvel[k] @ R.T, self.angvel[k] @ R.T, self.muscle_length[k]

    def state_at(self, t: float):
        """(pos, rot, linvel, angvel, muscle_length) of the placed clip at time t seconds."""
        return self._raw(t)


class PlanTrack:
    """A MotionPlan's reference (clips looped, chained and cross-faded, already placed in the
    world) as body states over time: the posterior then follows exactly the reference a
    take is measured against. Same interface as ReferenceTrack, without muscle lengths.
    States are computed CHUNK policy steps at a time (one batched forward kinematics) and
    kept: a controller asks for t, t + period dt, ...; the kinematics cost ~1.3 ms a call
    whatever the batch, so a larger chunk is cheaper per state (measured: 51 us at 40, 19
    at 160)."""

    CHUNK = 160

    def __init__(self, rig: Rig, plan, period: int = POLICY_PERIOD):
        self.rig, self.plan, self.period = rig, plan, int(period)
        self._cache: dict[int, tuple] = {}

    def state_at(self, t: float):
        from ..physics.base import q_to_state

        clamp = lambda k: min(max(k, 0), self.plan.total_steps)  # the plan's steps are 120 Hz
        step = clamp(int(round(t * 120)))
        if step not in self._cache:
            if len(self._cache) > 4 * self.CHUNK:
                self._cache.clear()
            steps = sorted({clamp(step + self.period * k) for k in range(self.CHUNK)})
            q, v, _ = zip(*(self.plan.sample(k) for k in steps))
            st = q_to_state(self.rig, np.array(q), np.array(v))
            for j, k in enumerate(steps):
                self._cache[k] = (st.pos[j], st.rot[j], st.linvel[j], st.angvel[j], None)
        return self._cache[step]


# ---- the controller ------------------------------------------------------------------------
class PolicyController(Controller):
    """Runs a MuscleVAE policy at 20 Hz in the engine's Simulation (engine.control.controller).

    mode "track": reference required: an engine.motion.Reference (placed at the character
    when it first acts, and looped) or a PlanTrack (a MotionPlan's chained clips as they
    are, timed from the simulation's start). "generate": z ~ p(z|s) with the prior's sigma
    times noise_scale. "heading": heading (radians, world, 0 = +x) and speed (m/s) set the
    goal of the high-level policy; set_goal() changes them during a run. noise_scale also
    scales the latent noise in the other modes (default 0 there: the mean latent).
    """

    def __init__(self, policy, rig: Rig, mode: str = "track", reference=None,
                 noise_scale: float | None = None, seed: int = 0, heading: float = 0.0,
                 speed: float = 1.0):
        if mode not in MODES:
            raise ParameterError("mode", f"{mode!r}: choose one of {', '.join(MODES)}")
        self.policy = policy if isinstance(policy, PolicyFile) else load_policy(policy, rig)
        if isinstance(policy, PolicyFile) and policy.meta["rig"].get("fingerprint") != rig_fingerprint(rig):
            raise ParameterError("policy", f"trained for rig {policy.meta['rig'].get('name')!r}, not {rig.name!r}")
        if mode == "track" and reference is None:
            raise ParameterError("reference", "mode 'track' needs a reference clip")
        if mode == "heading":
            check_heading_policy(self.policy)
        if noise_scale is None:
            noise_scale = 1.0 if mode == "generate" else 0.0
        if not (np.isfinite(noise_scale) and noise_scale >= 0):
            raise ParameterError("noise_scale", f"{noise_scale!r}: expected a finite value >= 0")
        self.rig, self.mode, self.noise_scale = rig, mode, float(noise_scale)
        self.period = self.policy.period
        self.rng = np.random.default_rng(seed)
        self.track = reference if isinstance(reference, PlanTrack) or reference is None else ReferenceTrack(rig, reference)
        self.plan = self.track.plan if isinstance(self.track, PlanTrack) else None
        self.W = fatigue_weights(rig)
        self.heading, self.speed = float(heading), float(speed)
        self._t0 = None
        self.last_z = None

    def set_goal(self, heading: float, speed: float) -> None:
        self.heading, self.speed = float(heading), float(speed)

    def features(self, sim, state) -> np.ndarray:
        f = sim.fatigue
        fp = fatigue_parts(f.MA, f.MR, f.MF, self.W)
        return state_features(state.pos, state.rot, state.linvel, state.angvel, fp)

    def act(self, sim, state):
        """The PD action (eq. 11) or, for an activation policy, a MuscleCommand."""
        pol = self.policy
        sn = pol.norm_state(self.features(sim, state))
        sigma = float(pol.meta["sigma_prior"])
        if self.mode == "track":
            if self._t0 is None:
                placed = isinstance(self.track, PlanTrack)
                self._t0 = 0.0 if placed else sim.time
                if not placed:
                    self.track.align_to(0.0, state.pos[0], _yaw(state.rot))
            t = sim.time - self._t0 + self.period * sim.dt
            rp, rr, rv, rw, _ = self.track.state_at(t)
            tn = pol.norm_target(target_features(state.pos, state.rot, rp, rr, rv, rw))
            mu = pol.prior_mean(sn) + pol.posterior_offset(sn, tn)
        elif self.mode == "generate":
            mu = pol.prior_mean(sn)
        else:
            g = goal_features(state.rot, self.heading, self.speed)
            mu = pol.prior_mean(sn) + pol.task_offset(sn, g)
        z = mu + self.noise_scale * sigma * self.rng.standard_normal(mu.shape) if self.noise_scale else mu
        self.last_z = z
        if pol.action_kind == "activation":
            from ..simulation import MuscleCommand

            return MuscleCommand(np.clip(pol.action(sn, z), 0.0, 1.0), None, None)
        return pol.action(sn, z)
