"""DAgger from the stand controller (training/dagger.py): the labels are the expert's own
activations as PD actions (checked against the engine's muscle step), the loss is the PD force
error, and `sinew train --config <[dagger] config>` -> export -> a policy take runs."""
import json
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from engine import fatigue as fat  # noqa: E402
from engine.simulation import Simulation  # noqa: E402

from .conftest import MASS, REPO  # noqa: E402

WALK = MASS / "motion" / "walk.bvh"
# the walk recipe taught as it was before its action became "offset" (tests/test_offset_policy.py)
ACTIVATION_WALK = f'action = "activation"\naction_scale = 1.0\nclips = ["{WALK}"]\n'


def _moving_walk_state(rig, k=60):
    from engine.motion import retarget_file

    ref = retarget_file(WALK, rig)[0]
    sim = Simulation(rig)
    sim.physics.set_q(ref.q[k], ref.qvel[k])
    sim.state = sim.physics.body_state()
    rng = np.random.default_rng(5)
    MA = rng.uniform(0.0, 0.5, rig.num_muscles)
    MF = rng.uniform(0.0, 0.3, rig.num_muscles)
    sim.fatigue = fat.FatigueState(MA, 1.0 - MA - MF, MF)
    return sim, rng


def test_packed_moment_arms_give_the_dense_products(rig):
    """A label keeps its moment arms (A^T f0, nv x M) only where a muscle spans a joint
    (ArmPattern); the tracker's A at two walk states is round-off elsewhere and non-zero
    throughout the pattern, the fit's generalised force through the packed arms equals the
    dense product, and a labels file of the earlier packing (the entries non-zero in any
    label) reads back into the same arrays; another rig's arms are refused."""
    from engine.control.plan import MotionPlan, load_clip
    from engine.control.tracking import TrackingController
    from training.dagger import ArmPattern, _packed, _unpacked

    sim, rng = _moving_walk_state(rig)
    ref, name = load_clip(rig, WALK)
    ctl = TrackingController(sim, MotionPlan(rig, [(ref, 1.0, name)]))
    arms = [ctl.muscle_terms(sim, sim.state)[2].T * rig.muscle_f0[None, :]]
    sim.physics.set_q(ref.q[20], ref.qvel[20])  # a second pose, the other foot down
    sim.state = sim.physics.body_state()
    arms.append(ctl.muscle_terms(sim, sim.state)[2].T * rig.muscle_f0[None, :])
    pat = ArmPattern(rig)
    assert 0.03 < pat.mask.mean() < 0.15 and not pat.mask[:6].any()  # no muscle moves the root
    for A in arms:
        assert np.abs(A[~pat.mask]).max() < 1e-12 * np.abs(A).max() and np.all(A[pat.mask] != 0)
    e = torch.as_tensor(rng.standard_normal((2, rig.num_muscles)), dtype=torch.float32)
    packed = torch.as_tensor(np.array([pat.pack(A) for A in arms]))
    dense = torch.einsum("bnm,bm->bn", torch.as_tensor(np.array(arms), dtype=torch.float32), e)
    assert torch.allclose(pat.apply(packed, e), dense, rtol=1e-5, atol=1e-5 * float(dense.abs().max()))
    if ctl._terms is not None:  # the compiled moment arms are exact zeros outside the pattern, found another way
        assert all(np.array_equal(A != 0, pat.mask) for A in arms)
    # the earlier files' packing: the entries non-zero in any label (numpy's round-off ones too), and that mask
    full = np.array(arms, np.float32)
    full[:, ~pat.mask] += (1e-14 * np.abs(full).max() * rng.standard_normal((2, int((~pat.mask).sum())))).astype(np.float32)
    old_mask = (full != 0).any(axis=0)
    assert old_mask.sum() > 2 * pat.mask.sum()
    back = _unpacked(dict(arms=full[:, old_mask], arms_mask=old_mask), pat)["arms"]
    assert np.array_equal(back, packed.numpy())
    now = _packed(dict(arms=list(packed.numpy())), pat)
    assert np.array_equal(now["arms_mask"], pat.mask) and np.array_equal(_unpacked(dict(now), pat)["arms"], packed.numpy())
    every = np.ones_like(pat.mask)  # another rig's arms: large where this rig's muscles span no joint
    with pytest.raises(ValueError, match="span no joint"):
        _unpacked(dict(arms=rng.standard_normal((2, every.size)).astype(np.float32), arms_mask=every), pat)
    with pytest.raises(ValueError, match="this rig's are"):
        _unpacked(dict(arms=np.zeros((2, 3), np.float32), arms_mask=np.ones((3, 1), bool)), pat)


def test_action_labels_reproduce_the_experts_activations(rig):
    """The PD action labelled for an activation makes the engine's PD muscle step (eq. 4, 5, 11)
    produce exactly that activation's step: the same activations after the 3CC-r clip, forces
    and fatigue; an off muscle's label is the longest target that still pulls nothing."""
    from engine.muscle_step import PDGains
    from training.dagger import action_labels

    sim, rng = _moving_walk_state(rig)
    gains = PDGains.for_rig(rig, 20.0, 2.0)
    sim.muscles.gains = gains
    wanted = rng.uniform(0.0, 0.9, rig.num_muscles)
    wanted[rng.random(rig.num_muscles) < 0.3] = 0.0
    label, on = action_labels(sim, wanted, gains)
    assert np.array_equal(on, wanted > 1e-6)
    s = sim.state
    by_activation = sim.muscles.step_numpy(s.rot, s.pos, s.linvel, s.angvel, wanted, sim.fatigue, activation=True)
    by_action = sim.muscles.step_numpy(s.rot, s.pos, s.linvel, s.angvel, label, sim.fatigue)
    for name in ("activation", "force", "body_force", "body_torque"):
        a, b = getattr(by_activation, name), getattr(by_action, name)
        assert np.allclose(a, b, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(a).max())), name
    assert np.allclose(by_activation.fatigue.MA, by_action.fatigue.MA, atol=1e-12)
    # an off muscle: a longer target stays off, a shorter one pulls
    off = np.flatnonzero(~on)
    longer = label.copy()
    longer[off] += 0.01
    shorter = label.copy()
    shorter[off] -= 0.01
    r_long = sim.muscles.step_numpy(s.rot, s.pos, s.linvel, s.angvel, longer, sim.fatigue)
    r_short = sim.muscles.step_numpy(s.rot, s.pos, s.linvel, s.angvel, shorter, sim.fatigue)
    assert np.all(r_long.activation[off] <= by_activation.activation[off] + 1e-12)
    assert np.all(r_short.activation[off] >= r_long.activation[off]) and np.any(r_short.activation[off] > r_long.activation[off])


def test_force_error_is_the_pd_force_difference(rig):
    """stiffness x (action - label) is the PD force difference in units of f0 (kp l_tpose = stiffness f0);
    one-sided (pulls only) where the expert leaves the muscle off."""
    from engine import muscle as hill
    from engine.muscle_step import PDGains
    from training.dagger import force_error

    gains = PDGains.for_rig(rig, 20.0, 2.0)
    rng = np.random.default_rng(0)
    l0, f0 = rig.muscle_rest_length, rig.muscle_f0
    length, rate = l0 * rng.uniform(0.9, 1.1, len(l0)), rng.normal(0, 0.05, len(l0))
    a, label = rng.normal(0, 0.05, len(l0)), rng.normal(0, 0.05, len(l0))
    unclipped = lambda act: gains.kp * (length - hill.target_length(act, l0)) + gains.kd * rate  # eq. 4 before max(0, .)
    expected = (unclipped(label) - unclipped(a)) / f0
    on = rng.random(len(l0)) < 0.5
    e = force_error(torch.as_tensor(a), torch.as_tensor(label), torch.as_tensor(on), 20.0).numpy()
    assert np.allclose(e[on], expected[on], atol=1e-9)
    assert np.allclose(e[~on], np.minimum(expected[~on], 0.0), atol=1e-9)


def test_activation_error_is_one_sided_where_the_expert_is_off():
    """An activation policy's error: the difference where the expert pulls; where it leaves a
    muscle off, only a positive output is wrong (the engine clips the output to [0, 1])."""
    from training.dagger import activation_error

    a = torch.tensor([0.3, -0.2, 0.1, 0.5])
    label = torch.tensor([0.2, 0.4, 0.0, 0.0])
    on = label > 0
    assert torch.allclose(activation_error(a, label, on), torch.tensor([0.1, -0.6, 0.1, 0.5]))
    assert activation_error(torch.tensor([-0.3]), torch.tensor([0.0]), torch.tensor([False])).item() == 0.0


def test_dagger_config_is_checked(tmp_path):
    from engine.errors import ParameterError
    from training.config import load_config

    p = tmp_path / "c.toml"
    p.write_text('base = "%s"\nclips = ["%s"]\n' % (REPO / "training/configs/stand.toml", WALK))
    with pytest.raises(ParameterError, match="CLIP@SECONDS"):
        load_config(p, WALK.parent)
    p.write_text('base = "%s"\n[dagger]\nrounds = 0\n' % (REPO / "training/configs/stand.toml"))
    with pytest.raises(ParameterError, match="dagger.rounds"):
        load_config(p, WALK.parent)
    p.write_text('base = "%s"\n[dagger]\nsmooth = -1.0\n' % (REPO / "training/configs/walk.toml"))
    with pytest.raises(ParameterError, match="dagger.smooth"):
        load_config(p, WALK.parent)
    p.write_text('base = "%s"\n[dagger]\ndropout = 1.0\n' % (REPO / "training/configs/walk.toml"))
    with pytest.raises(ParameterError, match="dagger.dropout"):
        load_config(p, WALK.parent)
    p.write_text('base = "%s"\n[dagger]\nexpert = "oracle"\n' % (REPO / "training/configs/stand.toml"))
    with pytest.raises(ParameterError, match="dagger.expert"):
        load_config(p, WALK.parent)
    p.write_text('base = "%s"\naction = "activation"\n' % (REPO / "training/configs/tiny.toml"))
    with pytest.raises(ParameterError, match="action.*dagger"):
        load_config(p, WALK.parent)


def test_dropout_acts_in_the_fit_only_and_the_export_is_the_evaluated_network():
    """A VAE built with dropout: in training mode two passes differ (units are dropped); in
    evaluation mode it is the deterministic network the numpy evaluator reads from its export
    (engine.control.policy.mlp / moe), to float32 round-off."""
    import torch

    from engine.control.policy import moe, mlp
    from training.networks import VAE

    torch.manual_seed(0)
    net = VAE(12, 5, 4, 3, [16, 16], [16, 16], 2, [8], dropout=0.5)
    x = torch.randn(7, 15)
    net.train()
    assert not torch.allclose(net.policy(x), net.policy(x))
    net.eval()
    with torch.no_grad():
        want_policy, want_prior = net.policy(x).numpy(), net.prior(x[:, :12]).numpy()
    e = net.export()
    layers = lambda prefix, n: [(e[f"{prefix}.{i}.W"], e[f"{prefix}.{i}.b"]) for i in range(n)]
    got = moe(layers("policy.gate", 2), layers("policy.expert", 3), x.numpy().astype(np.float64))
    np.testing.assert_allclose(got, want_policy, atol=1e-5)
    np.testing.assert_allclose(mlp(layers("prior", 3), x[:, :12].numpy().astype(np.float64)), want_prior, atol=1e-5)


def test_tiny_dagger_train_export_policy_take(tmp_path, rig):
    """`sinew train` with a [dagger] config (2 short rounds) -> `sinew export-policy` -> a policy
    take of the held pose, which starts in the stand controller's balanced pose."""
    from engine.control.policy import load_policy
    from engine.control.tracking import TrackingParams
    from engine.take import simulate

    cfg = tmp_path / "tiny_dagger.toml"
    cfg.write_text('base = "%s"\nname = "tiny_dagger"\nlatent_dim = 4\nvae_hidden = [32]\npolicy_hidden = [32]\n'
                   "[dagger]\nrounds = 2\nepisodes = 2\nepisode_seconds = 0.5\nfit_steps = 20\neval_seconds = 0.5\n"
                   "snapshot_seconds = 2.0\neval_starts = 2\n"
                   % (REPO / "training/configs/stand.toml"))
    run, pol = tmp_path / "run", tmp_path / "stand.npz"
    env = dict(__import__("os").environ, OPENBLAS_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "training.commands"]
    out = subprocess.run(cmd + ["train", "--config", str(cfg), "--out", str(run), "--json"], cwd=REPO,
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout.strip().splitlines()[-1])
    assert s["rounds"] == 2 and s["labels"] == 2 * 2 * 60 and np.isfinite(s["force_err_f0"])
    assert "DAgger round 1/2: 120 labels" in out.stderr and "DAgger round 2/2: 240 labels" in out.stderr  # a log's lines
    assert 0 < s["eval_stood_s"] <= 0.5 and (run / "learning_curve.png").stat().st_size > 1000
    out = subprocess.run(cmd + ["train", "--out", str(run), "--resume", "--json"], cwd=REPO,  # its rounds are done
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["labels"] == s["labels"]
    out = subprocess.run(cmd + ["export-policy", str(run), "--out", str(pol), "--json"], cwd=REPO,
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    pf = load_policy(pol, rig)
    assert pf.meta["period"] == 1 and pf.meta["training"]["iterations"] == 2 and pf.latent_dim == 4
    assert pf.meta["training"]["dagger_round"] in (1, 2) and pf.meta["training"]["stood_alone_s"] == 0.5
    held = f"{WALK}@0.5"
    take = simulate(rig, [(held, 0.2)], controller="policy", policy=pf)
    stood = simulate(rig, [(held, 0.2)], params=TrackingParams(residual=0.0))  # the stand controller's take
    # both start balanced, in the pose the stand controller solves for (stand.balanced_pose:
    # Levenberg-Marquardt to 1e-10 of its cost, so inputs a last bit apart agree to ~1e-6),
    # moved degrees away from the clip's held pose
    assert np.allclose(take.q[0], stood.q[0], atol=1e-5)
    assert stood.meta["stand"]["joints_moved_deg_max"] > 0.5


def test_a_resumed_run_goes_on_as_if_it_had_not_stopped(tmp_path):
    """Two rounds, or one round, a new process's resume from its checkpoint and labels, and
    the second: the same labels (each tagged with its round and episode) and the same networks."""
    from training.config import load_config
    from training.dagger import LABELS, DaggerTrainer

    cfg_path = tmp_path / "c.toml"
    cfg_path.write_text('base = "%s"\nlatent_dim = 4\nvae_hidden = [16]\npolicy_hidden = [16]\n'
                        "[dagger]\nrounds = 2\nepisodes = 2\nepisode_seconds = 0.3\nfit_steps = 30\ntorque_weight = 0.1\n"
                        "eval_seconds = 0.3\neval_starts = 1\nsnapshot_seconds = 1.0\nworkers = 1\n"
                        % (REPO / "training/configs/stand.toml"))
    whole = DaggerTrainer(load_config(cfg_path, WALK.parent), tmp_path / "whole")
    whole.train()
    first = DaggerTrainer(load_config(cfg_path, WALK.parent), tmp_path / "parts")
    first.train(1)
    del first
    import csv

    # a log written before the timing columns: the resumed run appends in the log's own columns
    log_path = tmp_path / "parts" / "log.csv"
    with open(log_path, newline="") as f:
        rows = list(csv.DictReader(f))
    with open(log_path, "w", newline="") as f:
        old_columns = [c for c in rows[0] if c not in ("label_seconds", "fit_seconds")]
        w = csv.DictWriter(f, old_columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    resumed = DaggerTrainer.resume(tmp_path / "parts")
    assert resumed.round == 1 and len(resumed.data["label"]) == 2 * 36
    with np.load(tmp_path / "parts" / LABELS) as f:  # the moment arms kept where they can be non-zero
        assert 0 < f["arms"].shape[1] == f["arms_mask"].sum() < 0.5 * f["arms_mask"].size
        assert np.array_equal(f["arms_mask"], resumed.arms.mask)
    resumed.train()
    assert resumed.round == 2 and resumed.summary()["labels"] == whole.summary()["labels"] == 4 * 36
    for k, v in whole.data.items():
        assert np.array_equal(np.array(v), np.array(resumed.data[k])), k
    tags = np.array(whole.data["episode"])
    assert sorted({tuple(t) for t in tags}) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for a, b in zip(whole.model.vae.state_dict().values(), resumed.model.vae.state_dict().values()):
        assert torch.equal(a, b)
    with open(log_path, newline="") as f:
        log = list(csv.DictReader(f))
    assert [r["round"] for r in log] == ["1", "2"] and log[0]["new_label_err"] == "nan"
    assert list(log[1]) == old_columns and None not in log[1]
    # a round's wall time: its labelling and its fit, within the round's own seconds
    with open(tmp_path / "whole" / "log.csv", newline="") as f:
        timed = list(csv.DictReader(f))
    round_s = np.diff([0.0] + [float(r["seconds"]) for r in timed])
    for r, s in zip(timed, round_s):
        assert 0 < float(r["label_seconds"]) and 0 < float(r["fit_seconds"])
        assert float(r["label_seconds"]) + float(r["fit_seconds"]) <= s + 0.2
    # round 2's log scores its new labels by round 1's networks, before they join the fit
    one = DaggerTrainer(load_config(cfg_path, WALK.parent), tmp_path / "one")
    one.train(1)
    one.data = whole.data
    new = np.flatnonzero(tags[:, 0] == 1)
    assert float(log[1]["new_label_err"]) == pytest.approx(one.label_error(new), rel=1e-4)
    assert one.label_error(new) != pytest.approx(whole.label_error(new), rel=1e-3)  # round 2's fit moved it
    # labels saved past the checkpoint (stopped between the two files) are dropped on resume
    import shutil

    shutil.copy(tmp_path / "whole" / LABELS, tmp_path / "parts" / LABELS)
    shutil.copy(tmp_path / "one" / "checkpoint.pt", tmp_path / "parts" / "checkpoint.pt")
    again = DaggerTrainer.resume(tmp_path / "parts")
    assert again.round == 1 and len(again.data["label"]) == 2 * 36
    assert np.array_equal(np.array(again.data["label"]), np.array(whole.data["label"])[:72])
    # labels that do not belong to the checkpoint are refused by name
    from engine.errors import InputFileError

    (tmp_path / "parts" / LABELS).write_bytes(b"not an npz")
    with pytest.raises(InputFileError, match="labels.npz.*cannot be read"):
        DaggerTrainer.resume(tmp_path / "parts")


def test_an_episode_that_falls_keeps_no_labels_of_its_last_second(tmp_path):
    """The untrained policy falls; the labels of the second before the fall are dropped, every
    earlier decision keeps one."""
    from engine.control.policy import PolicyController
    from training.config import load_config
    from training.dagger import DaggerTrainer

    cfg_path = tmp_path / "c.toml"
    cfg_path.write_text('base = "%s"\nlatent_dim = 4\nvae_hidden = [16]\npolicy_hidden = [16]\n'
                        "[dagger]\nsnapshot_seconds = 0.0\n" % (REPO / "training/configs/stand.toml"))
    tr = DaggerTrainer(load_config(cfg_path, WALK.parent), tmp_path / "run")
    untrained = PolicyController(tr.policy_file(), tr.rig, "track", tr.track)
    stood = tr.episode(np.random.default_rng(0), 6.0, untrained)
    assert 1.0 < stood < 6.0  # it fell
    assert len(tr.data["label"]) == round(stood * 120) - 120
    assert all(len(v) == len(tr.data["label"]) for v in tr.data.values())


def test_a_round_whose_episodes_all_fall_at_once_stops_with_a_clear_error(tmp_path):
    """Shoved with thousands of newtons the expert falls; with a fall margin as long as the
    episode every label is dropped, and the round says so instead of fitting nothing."""
    from engine.errors import SinewError
    from training.config import load_config
    from training.dagger import DaggerTrainer

    cfg_path = tmp_path / "c.toml"
    cfg_path.write_text('base = "%s"\nlatent_dim = 4\nvae_hidden = [16]\npolicy_hidden = [16]\n'
                        "[dagger]\nsnapshot_seconds = 0.0\nepisodes = 1\nepisode_seconds = 3.0\nfall_margin_seconds = 3.0\n"
                        "push_force = 100000.0\nworkers = 1\n" % (REPO / "training/configs/stand.toml"))
    tr = DaggerTrainer(load_config(cfg_path, WALK.parent), tmp_path / "run")
    with pytest.raises(SinewError, match="round 1: no labels.*fall_margin_seconds = 3.0"):
        tr.step()
    assert tr.round == 0 and not (tmp_path / "run" / "checkpoint.pt").exists()


def test_pushed_episodes_shove_the_character_and_let_go(tmp_path):
    """push_force: each episode is shoved at the pelvis once; the force is gone when it ends."""
    from training.config import load_config
    from training.dagger import DaggerTrainer

    cfg_path = tmp_path / "c.toml"
    cfg_path.write_text('base = "%s"\nlatent_dim = 4\nvae_hidden = [16]\npolicy_hidden = [16]\n'
                        "[dagger]\nsnapshot_seconds = 0.0\npush_force = 150.0\n" % (REPO / "training/configs/stand.toml"))
    tr = DaggerTrainer(load_config(cfg_path, WALK.parent), tmp_path / "run")
    ends = []
    for push in (False, True):
        tr.episode(np.random.default_rng(3), 2.0, None, push=push, label=False)
        ends.append(tr.sim.state.pos[0].copy())
        assert not np.any(tr.sim.physics.external_force)
    push = tr._random_push(np.random.default_rng(3), 0.0)
    assert 0.5 <= push.time <= 1.5 and push.seconds == 0.2 and push.force[2] == 0.0
    assert np.hypot(*push.force[:2]) <= 150.0
    assert np.linalg.norm(ends[1][:2] - ends[0][:2]) > 0.005  # the shove moved the pelvis


def test_a_dagger_run_needs_a_stance_its_expert_can_hold(tmp_path):
    """On ODE (the stand controller's LQR is designed on MuJoCo's contacts) the run is refused
    with the clip and the reason named, before any episode."""
    from engine.errors import ParameterError
    from training.config import load_config
    from training.dagger import DaggerTrainer

    cfg_path = tmp_path / "c.toml"
    cfg_path.write_text('base = "%s"\nbackend = "ode"\n' % (REPO / "training/configs/stand.toml"))
    with pytest.raises(ParameterError, match=r"walk\.bvh@0\.5.*mujoco backend"):
        DaggerTrainer(load_config(cfg_path, WALK.parent), tmp_path / "run")


def test_balance_expert_episodes_are_the_same_in_forked_workers(tmp_path):
    """A [dagger] run taught by the balance planner (expert "balance", the walk config's): its
    start states come from the expert's own take, and a round's episodes played in two forked
    processes label the same states with the same actions as played here, in the same order."""
    from training.config import load_config
    from training.dagger import DaggerTrainer

    cfg_path = tmp_path / "c.toml"
    cfg_path.write_text('base = "%s"\nlatent_dim = 4\nvae_hidden = [16]\npolicy_hidden = [16]\n%s'
                        "[dagger]\nsnapshot_seconds = 0.2\nsnapshot_every = 0.1\nworkers = 2\nsmooth = 0.0\nperiod = 1\nfatigue_scales = []\n"
                        "torque_weight = 0.1\n"
                        % (REPO / "training/configs/walk.toml", ACTIVATION_WALK))
    tr = DaggerTrainer(load_config(cfg_path, WALK.parent), tmp_path / "run")
    assert tr.expert.params.weights.smooth == 0.0 and tr.expert.params.weights.activation == 1.0  # [dagger] smooth
    assert len(tr.starts) == 3 and [s["sim"]["steps"] for s in tr.starts] == [0, 12, 24]
    jobs = [dict(seed=[0, k], seconds=0.1, learner=False, velocity_noise=0.03) for k in range(2)]
    forked = tr.play(jobs)
    data = {k: np.array(v) for k, v in tr.data.items()}
    for v in tr.data.values():
        v.clear()
    tr.d.workers = 1
    here = tr.play(jobs)
    assert forked == here and [t for t, _ in here] == pytest.approx([0.1, 0.1])
    assert len(data["label"]) == 24 and data["on"].any()
    # the walk config's policy outputs activations: the labels are the expert's, in [0, 1]
    assert tr.cfg.action == "activation" and data["label"].min() >= 0 and data["label"].max() <= 1
    assert np.array_equal(data["on"], data["label"] > 1e-6) and data["arms"].shape == (24, tr.arms.mask.sum())
    for k, v in tr.data.items():
        assert np.array_equal(np.array(v), data[k]), k
    # an episode's worker killed from outside ends the round with an error naming it, not a hang
    import multiprocessing as mp

    import training.dagger as dagger
    from engine.errors import SinewError

    tr.d.workers = 2
    real, dagger._episode_job = dagger._episode_job, _killed_episode
    try:
        with pytest.raises(SinewError, match="DAgger round 1: an episode's worker process ended"):
            tr.play(jobs)
    finally:
        dagger._episode_job = real
    assert not mp.active_children(), [(p.name, p.pid, p.exitcode) for p in mp.active_children()]


def _killed_episode(job):
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


def test_balance_expert_of_several_planners_answers_their_mean(tmp_path):
    """dagger.planners = 2: the expert's answer at a state is the mean of two balance planners'
    (each its own seed and plan), and resumed at a start state it answers the same again; the
    option is refused beside the stand expert."""
    from engine.errors import ParameterError
    from training.config import load_config
    from training.dagger import DaggerTrainer, PlannerEnsemble

    cfg_path = tmp_path / "c.toml"
    cfg_path.write_text('base = "%s"\nlatent_dim = 4\nvae_hidden = [16]\npolicy_hidden = [16]\n%s'
                        "[dagger]\nsnapshot_seconds = 0.1\nsnapshot_every = 0.1\nplanners = 2\nperiod = 1\nfatigue_scales = []\n"
                        % (REPO / "training/configs/walk.toml", ACTIVATION_WALK))
    tr = DaggerTrainer(load_config(cfg_path, WALK.parent), tmp_path / "run")
    ens, sim = tr.expert, tr.sim
    assert isinstance(ens, PlannerEnsemble) and len(ens.planners) == 2 and len(tr.starts) == 2
    ens.resume(sim, tr.starts[1], 5)
    mean = ens.act(sim, sim.state).activation
    ens.resume(sim, tr.starts[1], 5)
    each = [p.act(sim, sim.state).activation for p in ens.planners]  # the same draws, one by one
    assert np.array_equal(mean, np.mean(each, axis=0))
    ens.resume(sim, tr.starts[1], 5)
    draws = [p.rng.standard_normal(4) for p in ens.planners]
    assert not np.array_equal(*draws)  # two planners' noise, not one twice
    bad = tmp_path / "bad.toml"
    bad.write_text('base = "%s"\n[dagger]\nplanners = 2\n' % (REPO / "training/configs/stand.toml"))
    with pytest.raises(ParameterError, match="dagger.planners"):
        load_config(bad, WALK.parent)


def test_train_refuses_a_resume_without_a_run_and_a_new_run_over_one(tmp_path):
    """`sinew train`: --resume into a folder with no checkpoint, or a new run into one that
    holds a run, is refused by name before anything trains (DAgger or not)."""
    cmd = [sys.executable, "-m", "training.commands", "train"]
    out = subprocess.run(cmd + ["--out", str(tmp_path / "none"), "--resume"], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode != 0 and "'resume'" in out.stderr and "no run in" in out.stderr
    assert not (tmp_path / "none").exists()  # once created, empty
    (tmp_path / "empty").mkdir()
    out = subprocess.run(cmd + ["--out", str(tmp_path / "empty"), "--resume"], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode != 0 and "'resume'" in out.stderr and "no checkpoint in" in out.stderr
    (tmp_path / "held").mkdir()
    (tmp_path / "held" / "checkpoint.pt").write_bytes(b"")
    for config in ("walk", "tiny"):
        out = subprocess.run(cmd + ["--config", config, "--out", str(tmp_path / "held")], cwd=REPO,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode != 0 and "already holds a run (checkpoint.pt); use --resume" in out.stderr, config
        assert out.stderr.strip().endswith("or --force to replace it"), out.stderr
