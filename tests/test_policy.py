"""The numpy PolicyController: file validation, modes, no torch; numpy == torch policy."""
import json
import subprocess
import sys

import numpy as np
import pytest

from engine.control import policy as P
from engine.errors import InputFileError, ParameterError

from .conftest import MASS, REPO

WALK = MASS / "motion" / "walk.bvh"


def _mlp_arrays(rng, prefix, sizes, experts=None):
    out = {}
    for i in range(len(sizes) - 1):
        shape = (sizes[i], sizes[i + 1]) if experts is None else (experts, sizes[i], sizes[i + 1])
        out[f"{prefix}.{i}.W"] = rng.normal(0, 1 / np.sqrt(sizes[i]), shape).astype(np.float32)
        out[f"{prefix}.{i}.b"] = rng.normal(0, 0.1, shape[:-2] + (sizes[i + 1],)).astype(np.float32)
    return out


def make_policy(rig, path, task=False, meta_changes=None, seed=0, latent=4, hidden=16):
    """A random policy file written with numpy only (same layout as `sinew export-policy`)."""
    rng = np.random.default_rng(seed)
    S, T, M = P.state_size(rig.num_bodies), P.target_size(rig.num_bodies), rig.num_muscles
    arrays = {**_mlp_arrays(rng, "prior", [S, hidden, latent]),
              **_mlp_arrays(rng, "posterior", [S + T, hidden, latent]),
              **_mlp_arrays(rng, "policy.gate", [S + latent, 8, 3]),
              **_mlp_arrays(rng, "policy.expert", [S + latent, hidden, M], experts=3)}
    arrays["policy.expert.1.W"] *= 0.05
    if task:
        arrays.update(_mlp_arrays(rng, "task", [S + P.GOAL_SIZE, hidden, latent]))
    arrays["norm.state_mean"] = rng.normal(0, 0.1, S)
    arrays["norm.state_std"] = rng.uniform(0.5, 2.0, S)
    arrays["norm.target_mean"] = rng.normal(0, 0.1, T)
    arrays["norm.target_std"] = rng.uniform(0.5, 2.0, T)
    meta = dict(format=P.FORMAT, version=P.FORMAT_VERSION,
                rig=dict(name=rig.name, fingerprint=P.rig_fingerprint(rig), bodies=rig.num_bodies,
                         muscles=M), latent_dim=latent, sigma_prior=0.3, sigma_policy=0.05, period=6,
                stiffness=20.0, damping=2.0)
    meta.update(meta_changes or {})
    with open(path, "wb") as f:
        np.savez(f, meta=np.array(json.dumps(meta)), **arrays)
    return path


@pytest.fixture(scope="module")
def walk(rig):
    from engine.motion import retarget_file

    return retarget_file(WALK, rig)[0]


def test_policy_module_does_not_import_torch():
    code = "import sys, engine.control.policy as p; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


def test_load_roundtrip_and_sizes(rig, tmp_path):
    pf = P.load_policy(make_policy(rig, tmp_path / "p.npz"), rig)
    assert pf.latent_dim == 4 and not pf.has_task
    assert pf.parameters > 0


@pytest.mark.parametrize("case", ["truncated", "version", "rig", "format", "not_zip", "pickle", "shape", "nan",
                                  "action"])
def test_bad_policy_files_refused(rig, tmp_path, case):
    good = make_policy(rig, tmp_path / "good.npz")
    bad = tmp_path / "bad.npz"
    if case == "truncated":
        data = good.read_bytes()
        bad.write_bytes(data[: len(data) // 2])
        msg = "truncated"
    elif case == "version":
        make_policy(rig, bad, meta_changes=dict(version=99))
        msg = "version 99"
    elif case == "rig":
        make_policy(rig, bad, meta_changes=dict(rig=dict(name="other", fingerprint="0" * 16, bodies=23, muscles=284)))
        msg = "trained for rig 'other'"
    elif case == "format":
        make_policy(rig, bad, meta_changes=dict(format="something-else"))
        msg = "not a Sinew policy file"
    elif case == "not_zip":
        bad.write_text("hello")
        msg = "not a readable policy"
    elif case == "pickle":
        with open(bad, "wb") as f:
            np.savez(f, meta=np.array(json.dumps({})), evil=np.array([{"a": 1}], dtype=object))
        msg = "not a readable policy"
    elif case == "action":
        make_policy(rig, bad, meta_changes=dict(action="torque"))
        msg = "action 'torque' is not one of pd_target, activation"
    elif case == "shape":
        with np.load(good) as z:
            d = {k: z[k] for k in z.files}
        d["prior.0.W"] = d["prior.0.W"][:-1]
        with open(bad, "wb") as f:
            np.savez(f, **d)
        msg = "prior.0"
    else:
        with np.load(good) as z:
            d = {k: z[k] for k in z.files}
        d["norm.state_std"][3] = np.nan
        with open(bad, "wb") as f:
            np.savez(f, **d)
        msg = "finite"
    with pytest.raises(InputFileError, match=msg):
        P.load_policy(bad, rig)


def test_controller_modes_run_in_simulation(rig, walk, tmp_path):
    from engine.simulation import Simulation

    path = make_policy(rig, tmp_path / "p.npz", task=True)
    for mode, kw in (("track", dict(reference=walk)), ("generate", dict(noise_scale=0.5)),
                     ("heading", dict(heading=1.0, speed=1.2))):
        sim = Simulation(rig)
        sim.physics.set_q(walk.q[0], walk.qvel[0])
        sim.state = sim.physics.body_state()
        ctl = P.PolicyController(path, rig, mode=mode, seed=1, **kw)
        rec = sim.run(ctl, 0.25)
        assert ctl.period == 6
        assert np.all(np.isfinite(rec["body_pos"])), mode
        assert ctl.last_z.shape == (4,)


def test_an_activation_policy_sets_the_activations_it_outputs(rig, walk, tmp_path):
    """A policy whose meta says action "activation" (taught by an expert that sets activations)
    drives the muscles with its network's output clipped to [0, 1], no PD loop: the step's
    activations are those, up to the 3CC-r bounds; a PD-target file's output is a PD action."""
    from engine.simulation import MuscleCommand, Simulation

    pd = P.PolicyController(make_policy(rig, tmp_path / "pd.npz"), rig, reference=walk)
    act = P.PolicyController(make_policy(rig, tmp_path / "act.npz", meta_changes=dict(action="activation")),
                             rig, reference=walk)
    sim = Simulation(rig)
    sim.physics.set_q(walk.q[0], walk.qvel[0])
    sim.state = sim.physics.body_state()
    out = pd.act(sim, sim.state)
    assert isinstance(out, np.ndarray) and out.shape == (rig.num_muscles,)  # the same network, a PD action
    cmd = act.act(sim, sim.state)
    assert isinstance(cmd, MuscleCommand) and cmd.residual_force is None
    assert np.array_equal(cmd.activation, np.clip(out, 0.0, 1.0))  # the same weights (seed), clipped
    assert 0 < np.count_nonzero(cmd.activation) < rig.num_muscles
    res = sim.step(cmd)
    assert np.allclose(res.activation, cmd.activation, atol=0.05)  # the fresh muscles' bounds barely bite


def test_controller_refuses_bad_requests(rig, tmp_path, walk):
    path = make_policy(rig, tmp_path / "p.npz")
    with pytest.raises(ParameterError, match="heading"):
        P.PolicyController(path, rig, mode="heading")
    with pytest.raises(ParameterError, match="reference"):
        P.PolicyController(path, rig, mode="track")
    with pytest.raises(ParameterError, match="mode"):
        P.PolicyController(path, rig, mode="dance", reference=walk)


def test_generate_is_seeded_and_noise_scales(rig, walk, tmp_path):
    from engine.physics.base import q_to_state

    class FakeSim:
        time, dt = 0.0, 1 / 120

        def __init__(self):
            from engine.fatigue import FatigueState

            self.fatigue = FatigueState.fresh(rig.num_muscles)

    st = q_to_state(rig, walk.q[3], walk.qvel[3])
    path = make_policy(rig, tmp_path / "p.npz")
    a = P.PolicyController(path, rig, mode="generate", seed=5).act(FakeSim(), st)
    b = P.PolicyController(path, rig, mode="generate", seed=5).act(FakeSim(), st)
    c = P.PolicyController(path, rig, mode="generate", noise_scale=0.0).act(FakeSim(), st)
    d = P.PolicyController(path, rig, mode="generate", noise_scale=0.0, seed=9).act(FakeSim(), st)
    assert np.array_equal(a, b) and np.array_equal(c, d) and not np.allclose(a, c)


def test_reference_track_loops_forward(rig, walk):
    tr = P.ReferenceTrack(rig, walk)
    p0 = tr.state_at(0.0)[0][0]
    p1 = tr.state_at(tr.seconds)[0][0]
    p2 = tr.state_at(2 * tr.seconds)[0][0]
    step = p1 - p0
    assert np.linalg.norm(step[:2]) > 0.5  # a walk cycle moves forward
    assert np.allclose(p2 - p1, step, atol=0.05)
    tr.align_to(0.0, np.array([5.0, 1.0, 0.0]), 0.3)
    pa, ra = tr.state_at(0.0)[:2]
    assert np.allclose(pa[0, :2], [5.0, 1.0]) and np.isclose(P._yaw(ra), 0.3)


def test_policy_take_follows_the_chain(rig, walk, tmp_path):
    """A policy take's posterior follows the MotionPlan, chained clips included: its target at
    every time is the plan's reference (the one the take is measured against), so in a
    walk -> sprint chain the target's root speed is the walk's and then the sprint's. A policy
    applies no residual, and the take says so."""
    from engine.control.plan import MotionPlan, load_clip
    from engine.physics.base import q_to_state
    from engine.take import simulate

    run = load_clip(rig, MASS / "motion" / "run.bvh")[0]
    plan = MotionPlan(rig, [(walk, 1.0, "walk"), (run, 1.0, "run")])
    track = P.PlanTrack(rig, plan)
    speed = lambda t: float(np.linalg.norm(track.state_at(t)[2][0, :2]))
    for t in (0.3, 1.7):
        q, v, _ = plan.sample(int(round(t * 120)))
        st = q_to_state(rig, q, v)
        pos, rot, linvel, angvel, _ = track.state_at(t)
        assert np.allclose(pos, st.pos) and np.allclose(rot, st.rot) and np.allclose(angvel, st.angvel)
    assert 0.8 < speed(0.3) < 2.0 and speed(1.7) > 3.5  # walk (~1.3 m/s), then the sprint (~5.4)
    take = simulate(rig, [(walk, 0.2), (walk, 0.2)], controller="policy", policy=make_policy(rig, tmp_path / "p.npz"))
    assert take.meta["tracking"] is None and take.meta["summary"]["residual_strength"] == 0.0
    assert not np.any(take.residual_force) and not np.any(take.residual_torque)
    assert len(take.meta["segments"]) == 2


def test_numpy_policy_matches_torch(rig, walk, tmp_path):
    torch = pytest.importorskip("torch")
    from engine.physics.base import q_to_state
    from training.config import load_config
    from training.model import Model
    from training.torch_muscle import TorchMuscleSystem
    from training.trainer import policy_file_arrays

    cfg = load_config("tiny", WALK.parent)
    cfg.vae_hidden, cfg.policy_hidden, cfg.experts, cfg.latent_dim = [64, 64], [64, 64, 64], 3, 8
    cfg.action_scale = 1.5  # the file's action_scale reaches the numpy action as it does the torch one
    torch.manual_seed(0)
    m = Model(rig, cfg, TorchMuscleSystem(rig))
    with torch.no_grad():  # make every network matter: larger last layers, non-trivial statistics
        for W in list(m.vae.policy.W) + list(m.vae.posterior.W):
            W.mul_(5.0)
        m.state_mean.normal_(0, 0.2)
        m.state_std.uniform_(0.5, 2)
        m.target_mean.normal_(0, 0.2)
        m.target_std.uniform_(0.5, 2)
    arrays, meta = policy_file_arrays(m, cfg)
    pf = P.PolicyFile(meta, {k: v.astype(np.float64) for k, v in arrays.items()})
    rng = np.random.default_rng(0)
    Wf = P.fatigue_weights(rig)
    for k in (0, 30, 77, 120):
        st = q_to_state(rig, walk.q[k], walk.qvel[k] + 0.3 * rng.standard_normal(walk.qvel.shape[1]))
        ref = q_to_state(rig, walk.q[k + 6 if k + 6 < walk.num_frames else 0], walk.qvel[k])
        MA, MF = rng.uniform(0, 0.5, rig.num_muscles), rng.uniform(0, 0.3, rig.num_muscles)
        MR = 1 - MA - MF
        # numpy (the engine's path)
        sn = pf.norm_state(P.state_features(st.pos, st.rot, st.linvel, st.angvel, P.fatigue_parts(MA, MR, MF, Wf)))
        tn = pf.norm_target(P.target_features(st.pos, st.rot, ref.pos, ref.rot, ref.linvel, ref.angvel))
        z = pf.prior_mean(sn) + pf.posterior_offset(sn, tn)
        a_np = pf.action(sn, z)
        # torch (training's path, float32)
        T = lambda x: torch.as_tensor(x, dtype=torch.float32)[None]
        s_t = dict(pos=T(st.pos), rot=T(st.rot), linvel=T(st.linvel), angvel=T(st.angvel), MA=T(MA), MR=T(MR), MF=T(MF))
        r_t = dict(pos=T(ref.pos), rot=T(ref.rot), linvel=T(ref.linvel), angvel=T(ref.angvel))
        with torch.no_grad():
            sn_t = m.state_norm(s_t)
            tn_t = m.target_norm(s_t, r_t)
            z_t = m.vae.prior(sn_t) + m.vae.posterior(torch.cat([sn_t, tn_t], -1))
            a_t = m.act(sn_t, z_t)[0].double().numpy()
        assert np.abs(a_np).max() > 0.05  # the comparison is not trivially of zeros
        assert np.abs(a_np - a_t).max() < 1e-5


TAUGHT_STAND = REPO / "docs" / "results" / "dagger_stand_2026-11-24" / "stand.npz"


def test_the_taught_stand_policy_carries_the_character(rig):
    """The committed policy taught by the stand controller (`sinew train --config stand`,
    exported): a product take of the held walk pose, 60 s at fatigue scale 1, on the muscles
    alone: no fall, the pelvis within 2 cm of the height it starts at (the balanced pose), the
    posture within a few degrees of the pose held; a policy that stood on a hidden force would
    have none here to stand on."""
    from engine.take import simulate

    pf = P.load_policy(TAUGHT_STAND, rig)
    assert pf.meta["period"] == 1 and pf.meta["training"]["config"] == "stand"
    take = simulate(rig, [(f"{WALK}@0.5", 60.0)], controller="policy", policy=pf)
    s = take.meta["summary"]
    assert not s["fell"] and take.times[-1] >= 59.9
    assert np.abs(take.residual_force).max() == 0.0 and np.abs(take.residual_torque).max() == 0.0
    z = take.q[:, 2]
    assert np.abs(z - z[0]).max() < 0.02
    assert np.mean(take.joint_err_deg[-600:]) < 10.0  # the pose held (the balanced pose moves it ~5-7 deg)
