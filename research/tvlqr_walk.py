"""Experiment (issue 16, not part of the product): the walk without the root residual by a
time-varying LQR about the walk the product's tracker makes with it.

1. Record: the product tracker walks SECONDS with its residual; every physics step its state,
   its activations, and - on a copy of MuJoCo's data with the same applied forces and a
   tightly converged constraint solve - the step's linearisation x' = A x + B_tau u_tau + c,
   where c is what removing that step's residual changes (the defect the LQR must make up),
   and the muscles' generalised force per activation G (so B = B_tau G: activations as
   inputs, as engine/control/stand.py).
2. Design: the affine backward Riccati pass (iLQR's) over the recorded steps:
   u = -K x - k, deviation from the recorded activations.
3. Replay without the residual: a = clip(a_t - K_t dx - k_t) in the 3CC-r bounds, from the
   same start. How long does it walk, at what error?
   --t0 T: the tracker keeps its residual until T (the replay is bit for bit the recording
   there) and the LQR, designed about the steps from T on only, takes over without it.
   --lsq: in place of clipping, the activations are the bounded least-squares fit of the
   generalised muscle force the LQR asks for, G_t (a_t - K dx) + g_PE,t, with the muscles'
   present G (rows weighted 1 / sqrt(M_jj)), as engine/control/stand.py does.
   --warp N: when a foot lands, the time index jumps to the nominal's nearest touchdown of
   that foot within N steps (2.3 s after the switch with N = 30: no better).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python research/tvlqr_walk.py --seconds 6 --no-affine
    OPENBLAS_NUM_THREADS=1 .venv/bin/python research/tvlqr_walk.py --seconds 6 --t0 3 --no-affine --lsq

Measured (fresh walk; the product without the residual falls at 1.17 s): without the affine
term the replay walks all of a 2 s recording (8.3 deg) and falls at 2.2 s of a 6 s one
(R 100; R 30: 1.6 s); with it, 0.7-1.4 s (R 10-10000; inertia-weighted Q no better): the
defect is large where the tracker leans on its residual (0.65 body weights in its first
0.1 s, 100-500 N / N m in its first second), the feedforward k then asks the muscles for
activation changes above 1, and clipped it does not hold. A nominal the muscles can make
(a residual-free gait found by trajectory optimisation) is what a time-varying LQR needs.
With the tracker's residual bounded at 0.1 or 0.05 body weights (`--residual`; it walks 4 s
on 0.028) the replays fall sooner (1.1-1.5 s) and the gains blow up.

Ninth session, about the tracker's steady walk (--seconds 6 --t0 3: the nominal from 3 s on,
0.058 body weights of residual, |c| 0.77): clipped, the replay falls 1.8-1.9 s after taking
over (R 100 or 1000; ~100 of the 284 muscles clipped every step); with --lsq 2.6 s (R 100),
1.5-1.9 s with the root's height and tilt weighted 1e6 (q-vel 10 or 100). Deviations grow
from the first 0.2 s (0.1-0.3 rad on some DOF) while the nominal's contact schedule is
left behind: the same failure as from the start.
"""
import argparse
import copy
import sys
from pathlib import Path

import mujoco
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "research"))
MOTION = ROOT.parent / "shared" / "reference" / "mass" / "motion"

from engine import fatigue as fat  # noqa: E402
from engine.control import tracking as tr  # noqa: E402
from engine.physics import mujoco_backend as mb  # noqa: E402
from engine.simulation import MuscleCommand  # noqa: E402
from root_acceleration_tracking import simulate_with  # noqa: E402

REC = {}
DIAG = []
T0 = [0]


class Recorder(tr.TrackingController):
    """The product tracker, recording each decision's state, activations, root residual
    and G."""

    def act(self, sim, state):
        cmd = super().act(sim, state)
        q, qd = sim.physics.get_q()
        f0 = self.rig.muscle_f0
        flfv, fpe, A, _ = self.muscle_terms(sim, state, margin=0.0)
        REC.setdefault("q", []).append(q)
        REC.setdefault("feet", []).append(foot_contacts(sim))
        REC.setdefault("qd", []).append(qd)
        REC.setdefault("a", []).append(cmd.activation.copy())
        REC.setdefault("G", []).append((-A.T * (f0 * flfv)[None, :])[6:])
        REC.setdefault("pe", []).append((-A.T @ (f0 * fpe))[6:])
        zero = np.zeros(3)
        REC.setdefault("res", []).append(np.concatenate([zero if cmd.residual_force is None else cmd.residual_force,
                                                         zero if cmd.residual_torque is None else cmd.residual_torque]))
        return cmd


def foot_contacts(sim):
    """(right, left): does any box of that foot touch the floor now."""
    m, d = sim.physics.model, sim.physics.data
    out = []
    for side in "RL":
        ids = {m.geom(n).id for n in (f"Talus{side}", f"FootThumb{side}", f"FootPinky{side}")}
        out.append(any(d.contact[i].geom1 in ids or d.contact[i].geom2 in ids for i in range(d.ncon)))
    return tuple(out)


def linearise_step(backend, tight, residual):
    """(A, B_tau, c) of the coming step of `backend` (half-stepped data with its applied
    wrench) on a tightly converged copy; c: the next state without `residual` (force,
    torque on the pelvis) less the next state with it."""
    m, src = tight, backend.data
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = src.qpos, src.qvel
    d.xfrc_applied[:] = src.xfrc_applied
    d.qfrc_applied[:] = src.qfrc_applied
    mujoco.mj_forward(m, d)
    nv = m.nv
    A = np.zeros((2 * nv, 2 * nv))
    mujoco.mjd_transitionFD(m, d, 1e-6, True, A, None, None, None)
    q0 = d.qpos.copy()
    work = mujoco.MjData(m)
    dq = np.zeros(nv)

    def step(qfrc_extra, xfrc):
        work.qpos[:], work.qvel[:] = d.qpos, d.qvel
        work.qacc_warmstart[:] = 0.0
        work.xfrc_applied[:] = xfrc
        work.qfrc_applied[:] = d.qfrc_applied + qfrc_extra
        mujoco.mj_step(m, work)
        mujoco.mj_differentiatePos(m, dq, 1.0, q0, work.qpos)
        return np.concatenate([dq, work.qvel])

    eps = 1e-2
    B = np.zeros((2 * nv, nv - 6))
    z = np.zeros(nv)
    for i in range(6, nv):
        e = z.copy()
        e[i] = eps
        B[:, i - 6] = (step(e, d.xfrc_applied) - step(-e, d.xfrc_applied)) / (2 * eps)
    free = d.xfrc_applied.copy()
    free[1] -= residual  # the pelvis is body 1 in MuJoCo (0 is the world)
    c = step(z, free) - step(z, d.xfrc_applied)
    if DIAG:
        DIAG.append((np.abs(step(z, d.xfrc_applied) - step(z, d.xfrc_applied)).max(), np.abs(c).max(),
                     np.abs(free - d.xfrc_applied).max()))
    return A, B, c


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--replay", type=float, default=None, help="seconds to replay (default: as recorded)")
    ap.add_argument("--q-pos", type=float, default=1e4)
    ap.add_argument("--q-vel", type=float, default=10.0)
    ap.add_argument("--r-act", type=float, default=100.0)
    ap.add_argument("--no-affine", action="store_true", help="leave out the residual's defect (k = 0)")
    ap.add_argument("--mass-metric", action="store_true", help="weigh each DOF's errors by its inertia")
    ap.add_argument("--diag", action="store_true")
    ap.add_argument("--lsq", action="store_true")
    ap.add_argument("--warp", type=int, default=0, help="re-index the nominal at touchdowns within this many steps")
    ap.add_argument("--reg", type=float, default=1.0)
    ap.add_argument("--t0", type=float, default=0.0, help="switch from the residual tracker to the LQR at this time")
    ap.add_argument("--q-root", type=float, default=None, help="weight on root height/tilt (default q-pos)")
    ap.add_argument("--residual", type=float, default=1.0, help="the recording tracker's residual strength")
    a = ap.parse_args()

    T0[0] = int(round(a.t0 * 120))
    # 1. record, linearising every step just before MuJoCo takes it
    lin = []
    orig_step = mb.MujocoBackend.step
    tight = [None]

    def step(self):
        if tight[0] is None:
            tight[0] = copy.deepcopy(self.model)
            tight[0].opt.tolerance, tight[0].opt.iterations = 1e-12, 1000
        if len(REC["q"]) - 1 >= T0[0]:
            lin.append(linearise_step(self, tight[0], REC["res"][-1]))
        orig_step(self)

    if a.diag:
        DIAG.append((0, 0, 0))
    mb.MujocoBackend.step = step
    try:
        take = simulate_with(Recorder, [(MOTION / "walk.bvh", a.seconds)], tr.TrackingParams(residual=a.residual), 1.0)
    finally:
        mb.MujocoBackend.step = orig_step
    n = len(lin)
    if a.diag:
        print("  determinism / |c| / |residual wrench|:", [tuple(round(float(v), 5) for v in x) for x in DIAG[1::40]])
        nv_ = lin[0][0].shape[0] // 2
        for t in (10, 60, 120, 200):
            c = lin[t][2]
            top = np.argsort(-np.abs(c[nv_:]))[:4]
            print(f"  c at {t}: |pos| {np.abs(c[:nv_]).max():.4f} |vel| {np.abs(c[nv_:]).max():.3f} top vel DOFs "
                  f"{[(int(i), round(float(c[nv_ + i]), 3)) for i in top]}, root vel {c[nv_:nv_ + 6].round(4)}, residual {REC['res'][t].round(1)}")
    print(f"recorded {len(REC['q'])} decisions, {n} steps ({'fell at %.2f s' % take.meta['summary']['stopped_at_s'] if take.meta['summary']['fell'] else 'no fall'}); residual {take.meta['summary']['residual_mean_body_weights']} BW, "
          f"|c| mean {np.mean([np.linalg.norm(c) for _, _, c in lin]):.4f}")

    # 2. the affine backward Riccati pass, activations as inputs
    nv = lin[0][0].shape[0] // 2
    if a.mass_metric:  # each DOF weighted by its inertia (toes and hands count little)
        tmp = mujoco.MjData(tight[0])
        tmp.qpos[:] = REC["q"][0]
        mujoco.mj_forward(tight[0], tmp)
        Mm = np.zeros((nv, nv))
        mujoco.mj_fullM(tight[0], tmp, Mm)
        w = np.diag(Mm) / np.diag(Mm)[6:].mean()
    else:
        w = np.ones(nv)
    Q = np.diag(np.concatenate([a.q_pos * w, a.q_vel * w]))
    if a.q_root is not None:
        Q[[2, 3, 4], [2, 3, 4]] = a.q_root
    Q[[0, 1, 5], [0, 1, 5]] = 1.0  # horizontal position and heading: a little
    n_m = REC["G"][0].shape[1]
    R = a.r_act * np.eye(n_m)
    P, p = Q.copy(), np.zeros(2 * nv)
    K, k = [None] * n, [None] * n
    for t in range(n - 1, -1, -1):
        A, Bt, c = lin[t]
        B = Bt @ REC["G"][t]
        if a.no_affine:
            c = np.zeros_like(c)
        Quu = R + B.T @ P @ B
        K[t] = np.linalg.solve(Quu, B.T @ P @ A)
        k[t] = np.linalg.solve(Quu, B.T @ (P @ c + p))
        p = A.T @ (P @ c + p - P @ B @ k[t])
        P = Q + A.T @ P @ (A - B @ K[t])
        P = 0.5 * (P + P.T)
    print(f"gains: |K| max {max(np.abs(x).max() for x in K):.2f}, |k| max {max(np.abs(x).max() for x in k):.3f}")

    # 3. replay without the residual
    class Replay(tr.TrackingController):
        def act(self, sim, state):
            if sim.steps < T0[0]:
                return super().act(sim, state)
            feet = foot_contacts(sim)
            if not hasattr(self, "_off"):
                self._off, self._feet = 0, feet
                F = np.array(REC["feet"][T0[0]:T0[0] + n])
                self._td = [np.flatnonzero(F[1:, j] & ~F[:-1, j]) + 1 for j in range(2)]
            t = min(max(sim.steps - T0[0] + self._off, 0), n - 1)
            if a.warp:
                for j in range(2):
                    if feet[j] and not self._feet[j] and len(self._td[j]):
                        kk = self._td[j][np.argmin(np.abs(self._td[j] - t))]
                        if abs(kk - t) <= a.warp:
                            print(f"  touchdown {'RL'[j]} at {sim.time:.3f}: nominal index {t} -> {kk}")
                            self._off += int(kk - t)
                            t = int(kk)
            self._feet = feet
            t_rec = t + T0[0]
            q, qd = sim.physics.get_q()
            if t == 0:
                print("  state at T0 vs recorded:", np.abs(q - REC["q"][t_rec]).max(), np.abs(qd - REC["qd"][t_rec]).max())
            dx = np.concatenate([self.plan.space.diff(REC["q"][t_rec], q), qd - REC["qd"][t_rec]])
            p_ = sim.muscles.params
            lb, ub = fat.activation_bounds(sim.fatigue.MA, sim.fatigue.MR, sim.muscles.dt, p_.F_eff, p_.LD, p_.LR)
            act = np.clip(REC["a"][t_rec] - K[t] @ dx - k[t], lb, np.maximum(ub, lb))
            if a.lsq:
                from engine.control.coordination import bounded_lsq
                from engine.physics.mujoco_backend import full_mass_matrix
                f0 = self.rig.muscle_f0
                flfv, fpe, Am, _ = self.muscle_terms(sim, state, margin=-np.inf)
                Gn, pen = (-Am.T * (f0 * flfv)[None, :])[6:], (-Am.T @ (f0 * fpe))[6:]
                if not hasattr(self, "_rw"):
                    be = sim.physics
                    M = np.zeros((be.model.nv, be.model.nv))
                    full_mass_matrix(be.model, be.data, M)
                    self._rw = 1.0 / np.sqrt(np.diag(M)[6:])
                    self._warm, self._act = REC["a"][t_rec].copy(), None
                wanted = REC["G"][t_rec] @ (REC["a"][t_rec] - K[t] @ dx) + REC["pe"][t_rec]
                n_m = len(lb)
                x, status, self._act = bounded_lsq(self._rw[:, None] * Gn, self._rw * (wanted - pen), a.reg * np.ones(n_m), lb,
                                      np.maximum(ub, lb), "newton", self._warm, np.zeros(n_m), self._act, n_m, {})
                self._warm = x
                act = x
            self.stats["decisions"] += 1
            self.last = dict(q_ref=REC["q"][t_rec], contact_rows=0, residual=np.zeros(6), activation=act, status=0)
            if sim.steps % 24 == 0:
                print(f"  t={sim.time:5.2f} |dx| pos {np.abs(dx[:nv]).max():.3f} vel {np.abs(dx[nv:]).max():.2f} "
                      f"clipped {(act != REC['a'][t_rec] - K[t] @ dx - k[t]).sum()}")
            return MuscleCommand(act, None, None)

    replay = a.replay or a.seconds
    take = simulate_with(Replay, [(MOTION / "walk.bvh", replay)], tr.TrackingParams(residual=a.residual), 1.0)
    s = take.meta["summary"]
    r = take.residual_force[T0[0]:]
    print("residual after T0 (should be 0):", np.abs(r).max() if len(r) else None)
    print(f"replay without residual: {'fell at %.2f s' % s['stopped_at_s'] if s['fell'] else 'walked'} of {replay} s, "
          f"joint error {s['joint_err_deg_mean']:.2f} deg")


if __name__ == "__main__":
    main()
