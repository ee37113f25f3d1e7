"""A policy in the balance planner's action space (engine.control.offset_policy, issue 47):
zero offsets are the tracker alone to the bit, the teacher's label is eq. (5)'s weighted plan
of the planner's own candidates, a DAgger run (action "offset") labels, fits, exports and the
exported file plays a take; what does not fit is refused by name."""
import json
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from engine.errors import InputFileError, ParameterError  # noqa: E402

from .conftest import MASS, REPO  # noqa: E402

WALK = MASS / "motion" / "walk.bvh"
CMU_WALK = MASS.parent / "mocap" / "cmu_07_01_walk.bvh"
TINY = ('base = "%s"\nclips = [%s]\nlatent_dim = 4\nvae_hidden = [16]\npolicy_hidden = [16]\n'
        "[dagger]\nrounds = %d\nepisodes = 2\nepisode_seconds = 0.2\nsnapshot_seconds = 0.2\nsnapshot_every = 0.1\n"
        "after = [0.0, 0.1]\neval_seconds = 0.3\neval_starts = 2\nfit_steps = 20\nworkers = 1\n")


def _tiny(tmp_path, rounds: int = 1, clips=(WALK,)):
    p = tmp_path / "offset.toml"
    p.write_text(TINY % (REPO / "training/configs/walk.toml", ", ".join(f'"{c}"' for c in clips), rounds))
    return p


def _walk_sim(rig):
    from engine.control.plan import MotionPlan, load_clip
    from engine.simulation import Simulation

    ref, name = load_clip(rig, WALK)
    plan = MotionPlan(rig, [(ref, 1.0, name)])
    sim = Simulation(rig)
    q0, v0, _ = plan.sample(0)
    sim.start_at(q0, v0)
    return sim, plan


def _zero_policy(tmp_path):
    """An offset policy file whose decoder's last layers are zero: it always outputs no offsets."""
    from engine.control.policy import PolicyFile
    from training.config import load_config
    from training.dagger import build_model
    from training.trainer import policy_file_arrays

    cfg = load_config(_tiny(tmp_path), WALK.parent)
    model = build_model(cfg)
    arrays, meta = policy_file_arrays(model, cfg)
    last = max(int(k.split(".")[2]) for k in arrays if k.startswith("policy.expert."))
    for k in (f"policy.expert.{last}.W", f"policy.expert.{last}.b"):
        arrays[k] = np.zeros_like(arrays[k])
    return PolicyFile(meta, {k: np.asarray(v, np.float64) for k, v in arrays.items()})


def test_a_policy_of_zero_offsets_is_the_tracker_alone_bit_for_bit(tmp_path, rig):
    import dataclasses

    from engine.control.balance import BalanceParams
    from engine.control.offset_policy import OffsetPolicyController
    from engine.control.tracking import TrackingController, TrackingParams

    rig = rig.with_strength(3.0)
    pf = _zero_policy(tmp_path)
    assert pf.action_kind == "offset" and pf.period == 12 and len(pf.meta["offsets"]["dofs"]) == 12  # with the hips' yaw
    assert pf.meta["offsets"]["hips_yaw"] is True
    # the file records the swing-foot law its teacher's tracker added, and the policy's adds it
    assert pf.meta["offsets"]["feedback"] == BalanceParams().feedback > 0
    sim_c, plan_c = _walk_sim(rig)
    assert OffsetPolicyController(pf, sim_c, plan_c).tracker.placement.gain == BalanceParams().feedback
    pf.meta["offsets"]["feedback"] = 0.0  # without it, zero offsets are the tracker alone
    sim_a, plan_a = _walk_sim(rig)
    ctl = OffsetPolicyController(pf, sim_a, plan_a)
    sim_b, plan_b = _walk_sim(rig)
    params = TrackingParams(residual=0.0)
    smooth = pf.meta["offsets"]["smooth"]
    params = dataclasses.replace(params, weights=dataclasses.replace(params.weights, smooth=smooth))
    tracker = TrackingController(sim_b, plan_b, params)
    sim_a.run(ctl, 0.25)
    sim_b.run(tracker, 0.25)
    qa, qb = sim_a.physics.get_q(), sim_b.physics.get_q()
    assert sim_a.steps == sim_b.steps == 30 and ctl.decisions == 3  # the network every 12 steps
    assert np.array_equal(qa[0], qb[0]) and np.array_equal(qa[1], qb[1])
    assert ctl.report()["offset_policy"]["offset_deg_max"] == 0.0


def test_weighted_plan_is_eq5():
    from engine.control.balance import weighted_plan

    rng = np.random.default_rng(0)
    plans = [rng.standard_normal((8, 10)) for _ in range(4)]
    costs = [20.0, 22.0, 40.0, 21.0]
    w = np.exp(-(np.array(costs) - 20.0) / (0.1 * 20.0))
    want = sum(wi * U for wi, U in zip(w, plans)) / w.sum()
    assert np.allclose(weighted_plan(plans, costs, 0.1), want, rtol=0, atol=1e-12)
    assert np.allclose(weighted_plan(plans, costs, 1e-6), plans[0], atol=1e-12)  # lambda -> 0: the argmin
    assert np.allclose(weighted_plan(plans, costs, 1e6), np.mean(plans, axis=0), atol=1e-5)  # large: the mean


def test_the_teacher_weighs_its_own_candidates_and_leaves_the_take_alone(rig):
    """BalancePlanner.teach at a state: eq. (5) over the very candidates the planner draws,
    each played to its horizon by a shadow; the simulation and the carried plan untouched."""
    import copy

    from engine.control import balance as bal
    from engine.control.tracking import TrackingParams

    rig = rig.with_strength(3.0)
    sim, plan = _walk_sim(rig)
    params = TrackingParams(residual=0.0)
    ctl = bal.BalancePlanner(sim, plan, params, bal.BalanceParams(candidates=4), seed=3)
    for _ in range(12):
        sim.step(ctl.act(sim, sim.state))
    U0, start0, q0 = ctl.U.copy(), ctl.plan_start, sim.physics.get_q()[0].copy()
    rng = copy.deepcopy(ctl.rng)
    got = ctl.teach(sim, 0.1)
    assert np.array_equal(ctl.U, U0) and ctl.plan_start == start0 and np.array_equal(sim.physics.get_q()[0], q0)
    ctl.rng = rng  # the same draws again, each candidate played by a fresh shadow
    plans = ctl.candidates(sim.steps)
    snap = bal.snapshot(sim, ctl)
    shadow = bal.Shadow(sim, plan, params, ctl.balance)
    costs = []
    for U in plans:
        shadow.load(snap)
        costs.append(shadow.play(U, sim.steps))
    assert np.array_equal(got, bal.weighted_plan(plans, costs, 0.1))
    assert not np.array_equal(got, plans[int(np.argmin(costs))])  # a mean, not the argmin


def test_an_offset_run_labels_fits_exports_and_plays(tmp_path, rig):
    """`sinew train` with action "offset" on two clips (the bundled walk and a CMU capture),
    one round: each label is the observation (state with the offsets played, target) and the
    teacher's first two knots; the run resumes; export writes a policy the take plays."""
    from engine.control.policy import load_policy, state_size
    from engine.take import simulate

    run, pol = tmp_path / "run", tmp_path / "walk.npz"
    env = dict(__import__("os").environ, OPENBLAS_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "training.commands"]
    out = subprocess.run(cmd + ["train", "--config", str(_tiny(tmp_path, 1, (WALK, CMU_WALK))), "--out", str(run),
                                "--json"], cwd=REPO, capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout.strip().splitlines()[-1])
    assert s["rounds"] == 1 and s["labels"] == 2 * 2 and "RMS offset error" in out.stderr + out.stdout
    import csv

    with open(run / "log.csv", newline="") as f:
        row = list(csv.DictReader(f))[-1]
    # four worlds (two clips, fresh and at fatigue scale 50), in order; two episodes and two
    # evaluations a round took the first two: each world's labels and time stood, "-" untried
    assert row["labels_by_world"] == "2 2 0 0"
    by_world = row["eval_stood_by_world_s"].split()
    assert by_world[2:] == ["-", "-"] and float(row["eval_stood_s"]) == pytest.approx(
        np.mean([float(v) for v in by_world[:2]]), abs=0.01)
    assert f"by world: {row['eval_stood_by_world_s']} s; new labels 2 2 0 0" in out.stderr
    with np.load(run / "labels.npz") as f:
        D = 12  # offsets: the hips' and ankles' pitch and roll, the spine's, the hips' yaw
        assert f["state"].shape == (4, state_size(rig.num_bodies) + D) and f["label"].shape == (4, 2 * D)
        assert 0 < np.abs(f["label"]).max() < 1.0  # rad: the planner's offsets, a few degrees
        # round 0 plays the teacher: a decision later the offsets observed are its plan's second knot
        assert np.array_equal(f["episode"][:, 1], [0, 0, 1, 1])
        assert np.array_equal(f["state"][[1, 3], -D:], f["label"][[0, 2], D:])
    out = subprocess.run(cmd + ["export-policy", str(run), "--out", str(pol), "--json"], cwd=REPO,
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    pf = load_policy(pol, rig)
    assert pf.action_kind == "offset" and pf.meta["action_scale"] == 0.1
    take = simulate(rig, [(WALK, 0.3)], controller="policy", policy=pf)
    assert take.meta["offset_policy"]["decisions"] == 3 and take.meta["summary"]["joint_err_deg_mean"] < 10
    with pytest.raises(ParameterError, match="--mode.*plays mode 'track' only"):  # before any work
        simulate(rig, [(WALK, 0.3)], controller="policy", policy=pf, mode="generate")
    # a run from before the hips' yaw (its networks see and give two offsets fewer) is refused
    # by name, for export and for --resume, before any take is played
    import shutil

    from training.dagger import DaggerTrainer
    from training.export import export_policy

    old = tmp_path / "old_run"
    shutil.copytree(run, old)
    ck = torch.load(old / "checkpoint.pt", weights_only=False)
    for state in (ck["vae"], ck["best"]["vae"]):
        first = next(k for k, v in state.items() if v.ndim == 2)
        state[first] = state[first][:, :-2]
    torch.save(ck, old / "checkpoint.pt")
    for call in (lambda: export_policy(old, tmp_path / "old.npz"), lambda: DaggerTrainer.resume(old)):
        with pytest.raises(InputFileError, match="old_run.*do not fit this engine's.*train it again"):
            call()


def test_offset_policies_and_runs_that_do_not_fit_are_refused(tmp_path, rig):
    from engine.control.offset_policy import OffsetPolicyController
    from engine.control.policy import PolicyFile
    from training.config import load_config

    pf = _zero_policy(tmp_path)
    meta = json.loads(json.dumps(pf.meta))
    meta["offsets"]["dofs"] = meta["offsets"]["dofs"][::-1]
    sim, plan = _walk_sim(rig.with_strength(3.0))
    with pytest.raises(ParameterError, match="offsets at DOFs"):
        OffsetPolicyController(PolicyFile(meta, pf.arrays), sim, plan)
    # a file from before the hips' yaw was sampled (no "hips_yaw", 10 offsets) is read as such
    old = json.loads(json.dumps(pf.meta))
    del old["offsets"]["hips_yaw"]
    old["offsets"]["dofs"] = old["offsets"]["dofs"][:10]
    del old["offsets"]["feedback"]  # and from before the swing-foot law was the default: without it
    old_ctl = OffsetPolicyController(PolicyFile(old, pf.arrays), sim, plan)
    assert len(old_ctl.tracker.dofs) == 10 and old_ctl.tracker.placement is None
    # a file whose meta lacks the offsets is refused naming the file
    from engine.control.policy import load_policy

    path = tmp_path / "bad.npz"
    meta.pop("offsets")
    np.savez(path, meta=json.dumps(meta), **{k: v.astype(np.float32) for k, v in pf.arrays.items()})
    with pytest.raises(InputFileError, match="bad.npz.*sizes"):
        load_policy(path, rig.with_strength(3.0))
    base = _tiny(tmp_path).read_text().replace("after = [0.0, 0.1]\n", "")
    for extra, key in (("planners = 2\n", "action"), ("period = 1\n", "dagger.period"),
                       ("torque_weight = 0.1\n", "dagger.torque_weight"), ("weighting = 0.0\n", "dagger.weighting"),
                       ("after = [-1.0]\n", "dagger.after")):
        p = tmp_path / "c.toml"
        p.write_text(base + extra)
        with pytest.raises(ParameterError, match=key):
            load_config(p, WALK.parent)
    p.write_text('base = "%s"\n[dagger]\nfatigue_scales = [50.0]\n' % (REPO / "training/configs/stand.toml"))
    with pytest.raises(ParameterError, match="dagger.fatigue_scales"):  # the stand expert's run has one world
        load_config(p, WALK.parent)


def test_an_offset_run_plays_each_clip_at_each_fatigue_scale(tmp_path):
    """dagger.fatigue_scales: a world per clip and scale, each with its own start states along
    the planner's take at that scale; episodes take the worlds in turn."""
    from training.config import load_config
    from training.dagger import DaggerTrainer

    p = tmp_path / "scales.toml"
    p.write_text(_tiny(tmp_path).read_text() + "fatigue_scales = [1.0, 50.0]\n")
    tr = DaggerTrainer(load_config(p, WALK.parent), tmp_path / "run")
    assert [w[1].muscles.params.scale for w in tr.worlds] == [1.0, 50.0]
    assert [len(w[4]) for w in tr.worlds] == [3, 3]  # 0.2 s of the planner's take, a state every 0.1 s
    tr.play([dict(seed=[0, k], episode=k, seconds=0.1, learner=False, velocity_noise=0.0, world=k) for k in range(2)])
    assert len(tr.data["label"]) == 2 and tr.sim is tr.worlds[1][1]  # the last episode played the tired world
    mf = [float(w[1].fatigue.MF.max()) for w in tr.worlds]
    assert mf[1] > 10 * mf[0] > 0  # the tired world's muscles tire 50x faster


def test_an_offset_policy_never_steers_a_joint_past_the_limit(tmp_path, rig):
    """A policy whose output is far off (a decoder bias of 100 rad) is held at OFFSET_LIMIT."""
    from engine.control.offset_policy import OFFSET_LIMIT, OffsetPolicyController
    from engine.control.policy import PolicyFile

    pf = _zero_policy(tmp_path)
    arrays = dict(pf.arrays)
    last = max(int(k.split(".")[2]) for k in arrays if k.startswith("policy.expert."))
    b = arrays[f"policy.expert.{last}.b"]
    arrays[f"policy.expert.{last}.b"] = np.where(np.arange(b.shape[-1]) % 2 == 0, 1000.0, -1000.0) * np.ones_like(b)
    sim, plan = _walk_sim(rig.with_strength(3.0))
    ctl = OffsetPolicyController(PolicyFile(pf.meta, arrays), sim, plan)
    ctl.act(sim, sim.state)
    assert np.abs(ctl.tracker.U).max() == OFFSET_LIMIT


def test_start_states_within_a_second_of_the_experts_fall_are_dropped():
    from training.dagger import doomed_starts_dropped

    starts = list(range(6))  # steps 0, 60, ..., 300 (one every 0.5 s)
    assert doomed_starts_dropped(starts, 290, 60) == [0, 1, 2]  # fell at 2.42 s: 1.0 s the last kept
    assert doomed_starts_dropped(starts, 100, 60) == [0]  # the first is always kept
    assert doomed_starts_dropped(starts, 10_000, 60) == starts


def test_bench_times_an_offset_policy(tmp_path):
    """`sinew bench --policy` on an offset policy file: its take runs, the line says what decides when."""
    from engine.commands.bench_controllers import bench_policy

    pf = _zero_policy(tmp_path)
    path = tmp_path / "zero.npz"
    np.savez(path, meta=json.dumps(pf.meta), **{k: v.astype(np.float32) for k, v in pf.arrays.items()})
    summary, lines = bench_policy(path, seconds=0.2)
    assert summary["period"] == 12 and not summary["fell"] and summary["realtime_factor"] > 0
    assert "the network every 12 steps, the tracker's solve every step" in lines[0]
