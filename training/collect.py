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
        self.rig = load_rig(cfg["rig"])
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
        self.sim = Simulation(self.rig, cfg["backend"], fat.FatigueParams(scale=cfg["fatigue_scale"]), self.gains)

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
                sn = pol.norm_state(state_features(s.pos, s.rot, s.linvel, s.angvel,
                                                   fatigue_parts(f.MA, f.MR, f.MF, self.W)))
                t_next = t + POLICY_PERIOD * sim.dt
                z, (rp, rr, rv, rw, rl) = self.latent(pol, sn, s, tr, t_next, rng, True)
                a = pol.action(sn, z) + sig_pi * rng.standard_normal(M)
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

    def evaluate(self, arrays: dict, meta: dict, seconds: float, clip: int = 0) -> dict:
        """Deterministic tracking of a clip from its first frame with fresh muscles (posterior
        mean latent, mean action), no early stop. Mean world-frame body position error (m)
        against the clip placed where it starts, and the time the root first fell."""
        self.new_simulation()
        sim, tr = self.sim, self.tracks[clip]
        pol = PolicyFile(meta, arrays)
        self.reset(None, clip, 0.0, False)
        t, errs, fell_at = 0.0, [], None
        n = int(round(seconds * 120 / POLICY_PERIOD))
        for _ in range(n):
            s, f = sim.state, sim.fatigue
            sn = pol.norm_state(state_features(s.pos, s.rot, s.linvel, s.angvel,
                                               fatigue_parts(f.MA, f.MR, f.MF, self.W)))
            t_next = t + POLICY_PERIOD * sim.dt
            z, (rp, *_rest) = self.latent(pol, sn, s, tr, t_next, None, False)
            a = pol.action(sn, z)
            for _ in range(POLICY_PERIOD):
                sim.step(a)
            st = sim.state
            if not np.all(np.isfinite(st.pos)) or np.abs(st.linvel).max() > 50:
                errs += [np.nan] * (n - len(errs))
                fell_at = fell_at if fell_at is not None else t_next
                break
            errs.append(float(np.linalg.norm(st.pos - rp, axis=-1).mean()))
            if fell_at is None and st.pos[0, 2] < self.cfg["fall_height"]:
                fell_at = t_next
            t = t_next
        e = np.asarray(errs)
        return dict(track_err_m=float(np.nanmean(e)) if np.isfinite(e).any() else float("nan"),
                    fell_at_s=fell_at, errors=e.tolist())


_COLLECTOR: Collector | None = None


def _init_worker(cfg: dict) -> None:
    global _COLLECTOR
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    _COLLECTOR = Collector(cfg)


def _job(args):
    kind, arrays, meta, a, b = args
    if kind == "collect":
        return _COLLECTOR.run_job(arrays, meta, a, b)
    return _COLLECTOR.evaluate(arrays, meta, a, b)


class CollectorPool:
    """Collection jobs in `workers` processes (spawned: no torch state is inherited), or in
    this process when workers is 0. Results do not depend on the number of workers."""

    def __init__(self, cfg: dict, workers: int):
        self.workers = workers
        if workers > 0:
            import multiprocessing as mp

            ctx = mp.get_context("spawn")
            self.pool = ctx.Pool(workers, initializer=_init_worker, initargs=(cfg,))
        else:
            self.pool = None
            self.local = Collector(cfg)

    def collect(self, arrays, meta, seeds, sizes) -> list:
        jobs = [("collect", arrays, meta, s, n) for s, n in zip(seeds, sizes)]
        if self.pool is None:
            return [self.local.run_job(arrays, meta, s, n) for _, _, _, s, n in jobs]
        return self.pool.map(_job, jobs, chunksize=1)

    def evaluate(self, arrays, meta, seconds, clip=0) -> dict:
        if self.pool is None:
            return self.local.evaluate(arrays, meta, seconds, clip)
        return self.pool.apply(_job, (("eval", arrays, meta, seconds, clip),))

    def close(self):
        if self.pool is not None:
            self.pool.close()
            self.pool.join()
            self.pool = None
