"""Rollouts in the real simulator (Algorithm 1, "collect simulation trajectories"). numpy only:
worker processes import this module, never torch, and run the exported numpy policy.

A collection job is fully determined by (policy arrays, config, seed): episodes start at a
random frame of a random clip with a random fatigue state (appendix B.4), jump to a random
clip and frame with probability switch_prob per policy step (sec. 4.1.1), and end when the
root falls below fall_height or after episode_seconds.
"""
from __future__ import annotations

import os

import numpy as np

from engine import fatigue as fat
from engine.control.policy import (
    POLICY_PERIOD, PolicyFile, ReferenceTrack, _yaw, fatigue_parts, fatigue_weights, state_features,
    target_features,
)
from engine.muscle_step import PDGains
from engine.errors import SinewError
from engine.rig import load_rig

# Per-sample fields and their shapes (B bodies, M muscles) in the buffer.
FIELDS = ("pos", "rot", "linvel", "angvel", "MA", "MR", "MF", "action",
          "ref_pos", "ref_rot", "ref_linvel", "ref_angvel", "ref_len", "has_next")


def field_shapes(B: int, M: int) -> dict:
    b3 = (B, 3)
    return dict(pos=b3, rot=(B, 3, 3), linvel=b3, angvel=b3, MA=(M,), MR=(M,), MF=(M,), action=(M,),
                ref_pos=b3, ref_rot=(B, 3, 3), ref_linvel=b3, ref_angvel=b3, ref_len=(M,), has_next=())


def load_clip(path, rig):
    """A Reference from a BVH (retargeted) or a reference .npz."""
    from engine.motion import load_reference, retarget_file

    if str(path).lower().endswith(".npz"):
        return load_reference(path)
    return retarget_file(path, rig)[0]


def fatigue_curve(seconds: float = 240.0, dt: float = 0.01) -> np.ndarray:
    """(T, 3) points (M_A, M_R, M_F) of a 3CC-r response to a square-wave target load
    (appendix B.4, Fig. 15): load 0.5 on 60 s / off 30 s, F = 0.1, R = 0.01, every 0.1 s."""
    t = np.arange(int(seconds / dt)) * dt
    u = np.where((t % 90.0) < 60.0, 0.5, 0.0)
    MA, MR, MF = fat.simulate_load(u, dt, fat.FatigueParams(F=0.1, R=0.01), 1)
    return np.stack([MA[::10, 0], MR[::10, 0], MF[::10, 0]], -1)


def random_fatigue(rng, rig, curve) -> fat.FatigueState:
    """A random point of the curve per body part; every muscle of a part shares it."""
    idx = rng.integers(0, len(curve), size=5)
    pts = curve[idx][rig.muscle_group]  # (M, 3)
    return fat.FatigueState(pts[:, 0].copy(), pts[:, 1].copy(), pts[:, 2].copy())


class Collector:
    """Simulator, clips and fatigue curve of one process (built once, reused for every job)."""

    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.rig = load_rig(cfg["rig"]).with_strength(cfg.get("strength", 1.0))
        self.gains = PDGains.for_rig(self.rig, cfg["stiffness"], cfg["damping"])
        self.new_simulation()
        self.tracks = [ReferenceTrack(self.rig, load_clip(c, self.rig)) for c in cfg["clips"]]
        self.curve = fatigue_curve()
        self.W = fatigue_weights(self.rig)

    def new_simulation(self) -> None:
        """A fresh simulator (~50 ms): every job starts from the same solver state (MuJoCo
        warm-starts from the previous step), so a job's result depends only on its inputs."""
        from engine.simulation import Simulation

        cfg = self.cfg
        # the fast step (compiled muscles, lean MuJoCo model) unless the config asks otherwise
        # (benchmarks/collection.py times the step before it with compiled=False, lean=False)
        self.sim = Simulation(self.rig, cfg["backend"], fat.FatigueParams(scale=cfg["fatigue_scale"]), self.gains,
                              compiled=cfg.get("compiled"), backend_options=cfg.get("backend_options"))

    def reset(self, rng, track_i: int, t: float, fatigue: bool):
        tr = self.tracks[track_i]
        tr.align = (0.0, np.zeros(3))
        k = int(round(t * tr.fps)) % tr.frames
        ref = tr.ref
        self.sim.physics.set_q(ref.q[k], ref.qvel[k])
        self.sim.state = self.sim.physics.body_state()
        n = self.rig.num_muscles
        self.sim.fatigue = random_fatigue(rng, self.rig, self.curve) if fatigue else fat.FatigueState.fresh(n)
        return k / tr.fps

    def norm_state(self, pol: PolicyFile, s, f) -> np.ndarray:
        """The policy's normalised state features of body state s and fatigue state f."""
        return pol.norm_state(state_features(s.pos, s.rot, s.linvel, s.angvel, fatigue_parts(f.MA, f.MR, f.MF, self.W)))

    def latent(self, pol: PolicyFile, sn, state, tr, t, rng, noise: bool):
        rp, rr, rv, rw, rl = tr.state_at(t)
        tn = pol.norm_target(target_features(state.pos, state.rot, rp, rr, rv, rw))
        z = pol.prior_mean(sn) + pol.posterior_offset(sn, tn)
        if noise:
            z = z + float(pol.meta["sigma_prior"]) * rng.standard_normal(z.shape)
        return z, (rp, rr, rv, rw, rl)

    def run_job(self, arrays: dict, meta: dict, seed, n_samples: int) -> dict:
        """Collect n_samples policy steps; returns per-field arrays and episode statistics."""
        self.new_simulation()
        cfg, rig, sim = self.cfg, self.rig, self.sim
        pol = PolicyFile(meta, arrays)
        rng = np.random.default_rng(seed)
        B, M = rig.num_bodies, rig.num_muscles
        out = {k: np.zeros((n_samples,) + s) for k, s in field_shapes(B, M).items()}
        sig_pi = float(meta["sigma_policy"])
        max_steps = int(round(cfg["episode_seconds"] * 120 / POLICY_PERIOD))
        i, episodes, falls, err_sum = 0, 0, 0, 0.0
        while i < n_samples:
            ti = int(rng.integers(len(self.tracks)))
            tr = self.tracks[ti]
            t = self.reset(rng, ti, rng.uniform(0, tr.seconds), cfg["init_fatigue"])
            episodes += 1
            for step in range(max_steps):
                if i >= n_samples:
                    break
                if step > 0 and rng.random() < cfg["switch_prob"]:
                    ti = int(rng.integers(len(self.tracks)))
                    tr = self.tracks[ti]
                    t = rng.uniform(0, tr.seconds)
                    tr.align_to(t, sim.state.pos[0], _yaw(sim.state.rot))
                s = sim.state
                f = sim.fatigue
                sn = self.norm_state(pol, s, f)
                t_next = t + POLICY_PERIOD * sim.dt
                z, (rp, rr, rv, rw, rl) = self.latent(pol, sn, s, tr, t_next, rng, True)
                a = pol.action(sn, z) + pol.action_scale * sig_pi * rng.standard_normal(M)
                for k, v in (("pos", s.pos), ("rot", s.rot), ("linvel", s.linvel), ("angvel", s.angvel),
                             ("MA", f.MA), ("MR", f.MR), ("MF", f.MF), ("action", a), ("ref_pos", rp),
                             ("ref_rot", rr), ("ref_linvel", rv), ("ref_angvel", rw), ("ref_len", rl)):
                    out[k][i] = v
                ok = True
                for _ in range(POLICY_PERIOD):
                    sim.step(a)
                st = sim.state
                if not (np.all(np.isfinite(st.pos)) and np.all(np.isfinite(st.linvel))
                        and np.abs(st.linvel).max() < 50.0):
                    ok = False
                err_sum += float(np.linalg.norm(st.pos - rp, axis=-1).mean()) if ok else 0.0
                t = t_next
                fell = ok and st.pos[0, 2] < cfg["fall_height"]
                last = (i == n_samples - 1) or (step == max_steps - 1) or not ok or fell
                out["has_next"][i] = 0.0 if last else 1.0
                i += 1
                if not ok or fell:
                    falls += 1
                    break
        stats = dict(episodes=episodes, falls=falls, track_err_m=err_sum / max(n_samples, 1))
        return {"data": out, "stats": stats}

    def joint_angle_error(self, rot, ref_rot) -> float:
        """Mean over the non-root joints of the angle (rad) between the simulated and the
        reference joint rotation (child body relative to its parent body): the take's "joint
        error" (engine.kinematics.joint_errors_deg) in radians, from body rotations instead of
        generalised coordinates (tests/test_training.py holds them equal)."""
        par = self.rig.body_parent
        idx = np.nonzero(par >= 0)[0]
        ls = np.einsum("bji,bjk->bik", rot[par[idx]], rot[idx])
        lr = np.einsum("bji,bjk->bik", ref_rot[par[idx]], ref_rot[idx])
        d = np.einsum("bji,bjk->bik", ls, lr)
        c = (np.trace(d, axis1=1, axis2=2) - 1.0) / 2.0
        return float(np.arccos(np.clip(c, -1.0, 1.0)).mean())

    def evaluate(self, arrays: dict, meta: dict, seconds: float, clip: int = 0,
                 starts: tuple = (0.0,), early_s: float = 1.0) -> dict:
        """Tracking in the real simulator, the metric of the learning curves (trainer.evaluate).
        For each start phase (fraction of the clip): the character is set to the clip's
        frame there with fresh muscles and runs the policy deterministically (posterior mean
        latent, mean action) for `seconds`, tracking the looped clip placed where it starts.
        Per 20 Hz policy step, measured after the step:
          joint error  mean over the 22 joints of the angle between simulated and reference
                       joint rotations (child relative to parent), degrees;
          root error   distance of the root body from the reference root (m, world);
          body error   mean distance of every body from its reference position (m, world).
        A fall (root below fall_height, or the simulation diverging) ends the rollout; every
        remaining step is charged at the errors of the step where it fell. The result averages
        every step of every start; fell_at_s is the mean time to fall (the horizon when the
        character did not fall) and falls the number of starts that fell. The *_early figures
        average only the first `early_s` seconds of each start: tracking before a fall (or
        its charge) dominates the mean."""
        n = int(round(seconds * 120 / POLICY_PERIOD))
        per = []
        for phase in starts:
            self.new_simulation()
            sim, tr = self.sim, self.tracks[clip]
            pol = PolicyFile(meta, arrays)
            t = self.reset(None, clip, float(phase) * tr.seconds, False)
            body, root, joint, fell_at = [], [], [], None
            for _ in range(n):
                s, f = sim.state, sim.fatigue
                sn = self.norm_state(pol, s, f)
                t_next = t + POLICY_PERIOD * sim.dt
                z, (rp, rr, *_rest) = self.latent(pol, sn, s, tr, t_next, None, False)
                a = pol.action(sn, z)
                for _ in range(POLICY_PERIOD):
                    sim.step(a)
                st = sim.state
                t = t_next
                if not np.all(np.isfinite(st.pos)) or np.abs(st.linvel).max() > 50:
                    fell_at = t  # diverged: charged at the last finite errors (or nan)
                    break
                body.append(float(np.linalg.norm(st.pos - rp, axis=-1).mean()))
                root.append(float(np.linalg.norm(st.pos[0] - rp[0])))
                joint.append(self.joint_angle_error(st.rot, rr))
                if st.pos[0, 2] < self.cfg["fall_height"]:
                    fell_at = t
                    break
            charge = lambda v: np.r_[v, [v[-1]] * (n - len(v))] if v else np.full(n, np.nan)
            per.append(dict(body=charge(body), root=charge(root), joint=charge(joint),
                            fell_at=fell_at, steps=len(body)))
        body = np.concatenate([p["body"] for p in per])
        fell = [p["fell_at"] for p in per]
        k = max(1, min(n, int(round(early_s * 120 / POLICY_PERIOD))))
        early = lambda key: float(np.mean(np.concatenate([p[key][:k] for p in per])))
        return dict(track_err_m=float(np.mean(body)),
                    root_err_m=float(np.mean(np.concatenate([p["root"] for p in per]))),
                    joint_err_deg=float(np.degrees(np.mean(np.concatenate([p["joint"] for p in per])))),
                    fell_at_s=float(np.mean([f if f is not None else n * POLICY_PERIOD / 120 for f in fell])),
                    joint_err_deg_early=float(np.degrees(early("joint"))), track_err_early_m=early("body"),
                    falls=int(sum(f is not None for f in fell)), starts=[float(x) for x in starts],
                    fell_at_each=fell, errors=per[0]["body"].tolist())

    def action_response(self, arrays: dict, meta: dict, n: int, scale: float, seed) -> dict:
        """How the real simulator answers a change of action, to check the world model's
        answer against (trainer.wm_action_fidelity). Along deterministic tracking rollouts
        of the first clip (fresh muscles, random start phases), at n states the policy step
        is simulated twice from the same state: with the policy's action a and with a + d,
        d ~ N(0, scale^2) per muscle. Returns the states (buffer fields), a, d and the
        differences of the resulting body velocities (n, B, 3) each: the response to d."""
        rng = np.random.default_rng(seed)
        pol = PolicyFile(meta, arrays)
        M = self.rig.num_muscles
        keys = ("pos", "rot", "linvel", "angvel", "MA", "MR", "MF")
        out = {k: [] for k in keys + ("action", "delta", "dlinvel", "dangvel")}
        tr = self.tracks[0]
        while len(out["action"]) < n:
            self.new_simulation()
            sim = self.sim
            t = self.reset(rng, 0, rng.uniform(0, tr.seconds), False)
            for step in range(8):
                s, f = sim.state, sim.fatigue
                sn = self.norm_state(pol, s, f)
                t_next = t + POLICY_PERIOD * sim.dt
                z, _ = self.latent(pol, sn, s, tr, t_next, None, False)
                a = pol.action(sn, z)
                if step >= 2 and len(out["action"]) < n:  # past the start's transient
                    d = scale * rng.standard_normal(M)
                    here = sim.snapshot()

                    def restore():
                        sim.restore(here)

                    ends = []
                    for act in (a, a + d):
                        restore()
                        for _ in range(POLICY_PERIOD):
                            sim.step(act)
                        ends.append(sim.state)
                    for k, v in zip(keys, (s.pos, s.rot, s.linvel, s.angvel, f.MA, f.MR, f.MF)):
                        out[k].append(v)
                    out["action"].append(a)
                    out["delta"].append(d)
                    out["dlinvel"].append(ends[1].linvel - ends[0].linvel)
                    out["dangvel"].append(ends[1].angvel - ends[0].angvel)
                    restore()  # go on from the unperturbed state
                for _ in range(POLICY_PERIOD):
                    sim.step(a)
                t = t_next
                if sim.state.pos[0, 2] < self.cfg["fall_height"] or not np.all(np.isfinite(sim.state.pos)):
                    break
        return {k: np.asarray(v) for k, v in out.items()}

_COLLECTOR: Collector | None = None


def _init_worker(cfg: dict) -> None:
    global _COLLECTOR
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the trainer, which stops its workers
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    _COLLECTOR = Collector(cfg)


def _job(args):
    kind, arrays, meta, a, b, *more = args
    if kind == "collect":
        return _COLLECTOR.run_job(arrays, meta, a, b)
    if kind == "response":
        return _COLLECTOR.action_response(arrays, meta, a, b, *more)
    return _COLLECTOR.evaluate(arrays, meta, a, b, *more)


class CollectorPool:
    """Collection jobs in `workers` processes (spawned: no torch state is inherited), or in
    this process when workers is 0. Results do not depend on the number of workers. A
    worker killed from outside ends the run with an error naming it (not a hang)."""

    def __init__(self, cfg: dict, workers: int):
        self.workers = workers
        if workers > 0:
            from engine.interrupt import process_pool

            self.pool = process_pool(workers, "spawn", _init_worker, (cfg,))
        else:
            self.pool = None
            self.local = Collector(cfg)

    def _run(self, jobs: list) -> list:
        from concurrent.futures.process import BrokenProcessPool

        try:
            return list(self.pool.map(_job, jobs))
        except BrokenProcessPool as e:
            raise SinewError(f"training: a collection worker process ended ({e}); training stops here") from None

    def collect(self, arrays, meta, seeds, sizes) -> list:
        jobs = [("collect", arrays, meta, s, n) for s, n in zip(seeds, sizes)]
        if self.pool is None:
            return [self.local.run_job(arrays, meta, s, n) for _, _, _, s, n in jobs]
        return self._run(jobs)

    def evaluate(self, arrays, meta, seconds, clip=0, starts=(0.0,), early_s=1.0) -> dict:
        if self.pool is None:
            return self.local.evaluate(arrays, meta, seconds, clip, tuple(starts), early_s)
        return self._run([("eval", arrays, meta, seconds, clip, tuple(starts), early_s)])[0]

    def action_response(self, arrays, meta, n, scale, seed) -> dict:
        if self.pool is None:
            return self.local.action_response(arrays, meta, n, scale, seed)
        return self._run([("response", arrays, meta, n, scale, seed)])[0]

    def close(self):
        if self.pool is not None:
            self.pool.shutdown(wait=True)
            self.pool = None
