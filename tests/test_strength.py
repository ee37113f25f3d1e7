"""Muscle strength (Rig.with_strength, `--strength`): every muscle's f0 times S.

What must hold: the forces a muscle state gives scale by S exactly while the PD gains stay
the model's (so a PD target asks for the same force at 1/S of the activation); a tracked take
records its strength and works its legs less when stronger; a policy runs at the strength it
was trained at, and another is refused naming the flag or the file.
"""
import numpy as np
import pytest

from engine.errors import InputFileError, ParameterError
from engine.rig import DEFAULT_STRENGTH, GROUPS

from .test_policy import WALK, make_policy


def test_forces_scale_and_gains_do_not(rig):
    from engine.muscle_step import MuscleSystem, PDGains
    from engine.simulation import Simulation

    strong = rig.with_strength(3.0)
    assert strong.strength == 3.0 and rig.strength == 1.0  # the loaded rig is untouched
    np.testing.assert_allclose(strong.muscle_f0, 3.0 * rig.muscle_f0, rtol=1e-15)
    np.testing.assert_allclose(strong.model_f0, rig.muscle_f0, rtol=1e-15)
    g1, g3 = PDGains.for_rig(rig), PDGains.for_rig(strong)
    np.testing.assert_allclose(g3.kp, g1.kp, rtol=1e-12)
    np.testing.assert_allclose(g3.kd, g1.kd, rtol=1e-12)
    assert rig.with_strength(1) is rig

    from engine.fatigue import FatigueState

    b = Simulation(rig).state  # the rest pose on the ground: the same body state for both
    body = (b.rot, b.pos, b.linvel + 0.05, b.angvel)  # moving a little: f_v is not 1
    a = np.linspace(0.02, 0.3, rig.num_muscles)
    held = FatigueState(a.copy(), 1.0 - a, np.zeros_like(a))  # the activation inside its 3CC-r bounds
    act, pd = {}, {}
    for s, r in ((1, rig), (3, strong)):
        ms = MuscleSystem(r, None, 1 / 120)
        act[s] = ms.step_activation(*body, a, held)
        pd[s] = ms.step(*body, np.full(rig.num_muscles, -0.005), FatigueState(a.copy(), 1.0 - a, np.zeros_like(a)))
    # f = f0 (a f_l f_v + f_PE) (eq. 21) at the same activation: 3x the force and the body forces
    np.testing.assert_allclose(act[3].force, 3.0 * act[1].force, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(act[3].body_force, 3.0 * act[1].body_force, rtol=1e-9, atol=1e-7)
    # the same PD law (eq. 4, 11) asks for the same force, which the stronger muscle gives at
    # 1/3 of the activation (eq. 5), where that activation was inside the bounds both times
    free = (pd[1].activation > 0.05) & (pd[1].activation < 0.5) & (pd[3].activation > a - 0.4 * a)
    assert free.sum() > 20
    np.testing.assert_allclose(pd[3].activation[free], pd[1].activation[free] / 3.0, rtol=1e-6)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), 11.0, "3", True])
def test_bad_strength_is_refused(rig, bad):
    with pytest.raises(ParameterError, match="strength"):
        rig.with_strength(bad)


def _legs_effort(take, rig):
    legs = np.isin(rig.muscle_group, [GROUPS.index("right_leg"), GROUPS.index("left_leg")])
    w = rig.muscle_f0[legs]
    a = take.activation[take.times >= 0.5][:, legs]
    return float((a * w).sum(1).mean() / w.sum())


def test_a_stronger_take_works_its_legs_less(rig):
    """The tracker, residual on, 1.5 s of the walk: at 3x the legs' mean activation falls well
    below the 1x one (0.23 -> 0.14 over 6 s, docs/research/balance.md); both track."""
    from engine.take import simulate

    takes = {s: simulate(rig, [(WALK, 1.5)], strength=s, progress=lambda f: None) for s in (1.0, None)}
    assert takes[1.0].meta["strength"] == 1.0
    assert takes[None].meta["strength"] == DEFAULT_STRENGTH == takes[None].meta["summary"]["strength"]
    e1, e3 = _legs_effort(takes[1.0], rig), _legs_effort(takes[None], rig)
    assert e3 < 0.8 * e1, (e1, e3)
    for t in takes.values():
        assert not t.meta["fell"] and t.meta["summary"]["joint_err_deg_mean"] < 8.0


def test_a_policy_runs_at_its_own_strength(rig, tmp_path):
    from engine.control.policy import check_policy_rig, load_policy
    from engine.take import check_strength, simulate

    old = load_policy(make_policy(rig, tmp_path / "old.npz"))  # no "strength": trained before it, at 1
    assert check_strength("policy", old) == 1.0
    with pytest.raises(ParameterError, match="--strength.*trained at strength 1"):
        check_strength("policy", old, 3.0)
    strong = rig.with_strength(2.0)
    path = make_policy(strong, tmp_path / "strong.npz", meta_changes=dict(strength=2.0))
    take = simulate(rig, [(WALK, 0.2)], controller="policy", policy=str(path), progress=lambda f: None)
    assert take.meta["strength"] == 2.0
    pf = load_policy(path, rig)  # the model's rig, at the strength the file was trained at
    # the same file against the rig at another strength: refused, and the message says why
    with pytest.raises(InputFileError, match="strength 2, not 1"):
        check_policy_rig(pf.meta, rig, path)
    with pytest.raises(InputFileError, match="trained for rig"):
        load_policy(make_policy(rig.with_strength(2.0), tmp_path / "odd.npz"), rig)  # says 1, fits neither
    for r in (rig, None):  # checked whether or not a rig is given
        with pytest.raises(InputFileError, match="not a muscle strength"):
            load_policy(make_policy(rig, tmp_path / "bad.npz", meta_changes=dict(strength="strong")), r)


def test_cli_reports_and_checks_strength(tmp_path):
    import json
    import subprocess
    import sys

    run = lambda *a: subprocess.run([sys.executable, "-m", "engine", "simulate", "--clip", f"{WALK}:0.3", *a],
                                    capture_output=True, text=True)
    ok = run("--strength", "1.5", "--no-plots", "--json", "--out", str(tmp_path / "t"))
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout.strip().splitlines()[-1])["strength"] == 1.5
    assert "strength 1.5 (x MASS's f0)" in ok.stdout + ok.stderr
    bad = run("--strength", "0", "--out", str(tmp_path / "u"))
    assert bad.returncode == 2 and "--strength" in bad.stderr and len(bad.stderr.strip().splitlines()) <= 2
