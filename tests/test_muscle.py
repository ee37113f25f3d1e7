"""Hill-type curves (MuscleVAE eq. 25), force (eq. 22), PD control (eq. 4, 5, 11)."""
import math

import numpy as np
import pytest

from engine import muscle as hill


def test_force_length_at_chosen_points():
    assert hill.force_length(np.array(1.0)) == 1.0
    assert hill.force_length(np.array(0.5)) == pytest.approx(math.exp(-0.5))
    assert hill.force_length(np.array(1.5)) == pytest.approx(math.exp(-0.5))


def test_force_velocity_at_chosen_points_and_continuity():
    fv = lambda v: float(hill.force_velocity(np.array(float(v))))
    assert fv(0.0) == 1.0
    assert fv(-5.0) == pytest.approx((-10 + 5) / (-10 - 25))  # shortening piece
    assert fv(-10.0) == 0.0  # maximum shortening speed
    assert fv(-25.0) == 0.0  # held at zero beyond it
    assert fv(1.0) == pytest.approx(1.5 + 0.5 * (1 - 10) / (37.8 + 10))  # lengthening piece
    assert fv(1e6) == pytest.approx(1.5 + 0.5 / 37.8, rel=1e-4)
    # Both pieces meet at v = 0 and the curve rises monotonically.
    for eps in (1e-6, 1e-9):
        assert fv(eps) == pytest.approx(1.0, abs=1e-5) and fv(-eps) == pytest.approx(1.0, abs=1e-5)
    v = np.linspace(-12, 12, 2001)
    assert np.all(np.diff(hill.force_velocity(v)) >= 0)


def test_passive_force_at_chosen_points_and_continuity():
    fpe = lambda l: float(hill.force_passive(np.array(float(l))))
    assert fpe(0.8) == 0.0 and fpe(1.0) == 0.0
    assert fpe(1.3) == pytest.approx((math.exp(2) - 1) / (math.exp(4) - 1))
    assert fpe(1.6) == pytest.approx(1.0)
    assert fpe(1.0 + 1e-9) < 1e-7
    assert np.isfinite(fpe(1e6))


def test_normalisation_eq23():
    # l = l_ori: l_bar = (1 - l_t) / l_m; with MASS's l_t = 0.2, l_m = 1 that is 0.8.
    assert hill.normalized_length(0.3, 0.3, 0.2, 1.0) == pytest.approx(0.8)
    assert hill.normalized_velocity(0.6, 0.3, 1.0) == pytest.approx(2.0)  # per second


def test_pd_activation_inverts_the_force():
    rng = np.random.default_rng(0)
    lbar = rng.uniform(0.5, 1.5, 1000)
    vbar = rng.uniform(-8, 8, 1000)
    alpha = rng.uniform(0, 1, 1000)
    f0 = rng.uniform(100, 5000, 1000)
    f = hill.muscle_force(alpha, lbar, vbar, f0)
    assert np.allclose(hill.pd_activation(f, f0, lbar, vbar), alpha, atol=1e-9)
    assert np.allclose(f, f0 * (alpha * np.exp(-(lbar - 1) ** 2 / 0.5) * hill.force_velocity(vbar)
                                + hill.force_passive(lbar)))


def test_pd_force_pulls_when_too_long_or_lengthening():
    l_t = hill.target_length(np.array([0.0, 0.1, -0.1]), np.array(0.2))
    assert np.allclose(l_t, [0.2, 0.22, 0.18])  # eq. 11
    kp, kd = 1000.0, 100.0
    assert hill.pd_force(0.21, 0.0, 0.2, kp, kd) == pytest.approx(10.0)
    assert hill.pd_force(0.19, 0.0, 0.2, kp, kd) == 0.0  # a muscle can only pull
    assert hill.pd_force(0.2, 0.05, 0.2, kp, kd) == pytest.approx(5.0)
    assert hill.pd_force(0.21, -0.2, 0.2, kp, kd) == 0.0


def test_same_functions_run_in_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    lbar, vbar = rng.uniform(0.3, 2.0, 500), rng.uniform(-15, 15, 500)
    alpha, f0 = rng.uniform(0, 1, 500), rng.uniform(100, 3000, 500)
    T = lambda a: torch.tensor(a, dtype=torch.float64)
    np_out = hill.muscle_force(alpha, lbar, vbar, f0)
    t_out = hill.muscle_force(T(alpha), T(lbar), T(vbar), T(f0), xp=torch)
    assert np.allclose(t_out.numpy(), np_out, rtol=1e-12, atol=1e-9)
    f_pd = rng.uniform(0, 3000, 500)
    assert np.allclose(hill.pd_activation(T(f_pd), T(f0), T(lbar), T(vbar), xp=torch).numpy(),
                       hill.pd_activation(f_pd, f0, lbar, vbar), rtol=1e-12)
    l, ld, lt = rng.uniform(0.1, 0.3, 500), rng.normal(size=500), rng.uniform(0.1, 0.3, 500)
    assert np.allclose(hill.pd_force(T(l), T(ld), T(lt), T(f0), T(0.1 * f0), xp=torch).numpy(),
                       hill.pd_force(l, ld, lt, f0, 0.1 * f0))
