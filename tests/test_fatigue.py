"""3CC-r fatigue (MuscleVAE eq. 26-28, 32-37): invariants, bounds, endurance, recovery."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from engine import fatigue as fat
from engine.errors import ParameterError

DT = 1.0 / 120.0


def random_simplex(rng, n):
    x = rng.dirichlet(np.ones(3), size=n)
    return fat.FatigueState(x[:, 0].copy(), x[:, 1].copy(), x[:, 2].copy())


@settings(max_examples=6, deadline=None)
@given(F=st.floats(0.0, 2.0), R=st.floats(0.0, 0.5), r=st.floats(1.0, 10.0),
       LD=st.floats(0.0, 100.0), LR=st.floats(0.0, 100.0), seed=st.integers(0, 2**31 - 1))
def test_invariants_over_10000_random_steps(F, R, r, LD, LR, seed):
    p = fat.FatigueParams(F=F, R=R, r=r, LD=LD, LR=LR)
    p.validate(DT)
    rng = np.random.default_rng(seed)
    s = random_simplex(rng, 32)
    for _ in range(10_000):
        alpha_pd = rng.uniform(-0.5, 1.5, 32)
        lb, ub = fat.activation_bounds(s.MA, s.MR, DT, F, LD, LR)
        assert np.all(lb <= ub + 1e-15)
        alpha, s = fat.step_with_activation(s, alpha_pd, DT, p)
        assert np.all((lb - 1e-15 <= alpha) & (alpha <= ub + 1e-15))
        total = s.MA + s.MR + s.MF
        assert np.abs(total - 1).max() < 1e-9
        for x in (s.MA, s.MR, s.MF):
            assert x.min() >= -1e-12 and x.max() <= 1 + 1e-12


def test_bounds_move_the_right_way():
    rng = np.random.default_rng(0)
    s = random_simplex(rng, 5000)
    F, LD, LR = 0.01, 50.0, 50.0
    lb, ub = fat.activation_bounds(s.MA, s.MR, DT, F, LD, LR)
    # More resting capacity raises the upper bound; it never lowers either bound.
    lb2, ub2 = fat.activation_bounds(s.MA, s.MR + 0.05, DT, F, LD, LR)
    assert np.all(ub2 >= ub) and np.any(ub2 > ub) and np.all(lb2 == lb)
    # A higher current activation raises both bounds (activation cannot jump).
    lb3, ub3 = fat.activation_bounds(s.MA + 0.05, s.MR, DT, F, LD, LR)
    assert np.all(lb3 >= lb) and np.all(ub3 >= ub) and np.any(lb3 > lb)
    # eq. 34-35 literally.
    K = 1 - DT * F
    assert np.allclose(lb, np.maximum(0, K * s.MA - DT * LR * s.MA))
    assert np.allclose(ub, np.minimum(1, K * s.MA + DT * LD * s.MR))


def test_eq37_reproduces_the_target_load_path():
    """Clipping alpha_pd = alpha~(u) (eq. 33) and inverting eq. 32 gives the same step as
    driving the compartments with u directly (eq. 28)."""
    rng = np.random.default_rng(4)
    p = fat.FatigueParams(F=0.3, R=0.05)
    s = random_simplex(rng, 2000)
    u = rng.uniform(0, 1, 2000)
    C = fat.target_load_rate(u, s.MA, s.MR, p.LD, p.LR)
    alpha_u = (1 - DT * p.F) * s.MA + DT * C  # eq. 32
    alpha, s1 = fat.step_with_activation(s, alpha_u, DT, p)
    s2 = fat.step_with_load(s, u, DT, p)
    assert np.allclose(alpha, alpha_u, atol=1e-12)
    for a, b in ((s1.MA, s2.MA), (s1.MR, s2.MR), (s1.MF, s2.MF)):
        assert np.allclose(a, b, atol=1e-12)


def hold(u, seconds, p=fat.FatigueParams()):
    n = int(round(seconds / DT))
    MA, MR, MF = (x[:, 0] for x in fat.simulate_load(np.full(n, u), DT, p))
    t = np.arange(n + 1) * DT
    return t, MA, MR, MF


def test_load_below_the_sustainable_level_is_held_for_ten_minutes():
    p = fat.FatigueParams()
    assert fat.endurance_limit(p) == pytest.approx(1 / 6)
    for u in (0.1, 0.16):
        t, MA, MR, MF = hold(u, 600)
        assert fat.endurance_time(t, MA, np.full_like(t, u)) is None
        assert MA[-1] >= u - 0.01 and MR.min() > 0


def test_endurance_above_the_sustainable_level():
    """Derivation: while the load is held, M_A = u (to 0.02 %) and M_F' = F u - R M_F, so
    M_F(t) = (F u / R)(1 - exp(-R t)); M_R = 1 - u - M_F runs out at
    t* = -ln(1 - R (1 - u) / (F u)) / R (111.6 s at u = 0.5, 314.3 s at u = 0.3). Then
    M_A follows C = L_D M_R ~ R_r M_F and sags at about (R (1 - u) - F u) per second, so it
    is 0.01 below u some 2.5 s (u = 0.5) to 6.6 s (u = 0.3) later: about 114 s and 321 s."""
    p = fat.FatigueParams()
    assert fat.exhaustion_time(0.5, p) == pytest.approx(-math.log(0.8) / 0.002)
    times = {}
    for u in (0.3, 0.5, 0.7):
        t, MA, MR, MF = hold(u, 400)
        times[u] = fat.endurance_time(t, MA, np.full_like(t, u))
        t_star = fat.exhaustion_time(u, p)
        # M_R is exhausted where the closed form says, to the Euler step's accuracy.
        assert t[np.argmax(MR < 1e-3)] == pytest.approx(t_star, abs=1.0)
        assert times[u] > t_star
    assert times[0.5] == pytest.approx(114.1, abs=1.0)
    assert times[0.3] == pytest.approx(321.0, abs=1.5)
    assert times[0.7] < times[0.5] < times[0.3]


def test_exhausted_muscle_settles_at_R_over_F_plus_R():
    p = fat.FatigueParams()
    for u in (0.3, 0.5, 0.9):
        t, MA, MR, MF = hold(u, 1500)
        assert MA[-1] == pytest.approx(fat.endurance_limit(p), rel=0.01)


def test_fatigue_decays_after_the_load_is_removed():
    p = fat.FatigueParams()
    load = np.concatenate([np.full(int(200 / DT), 0.5), np.zeros(int(300 / DT))])
    MA, MR, MF = (x[:, 0] for x in fat.simulate_load(load, DT, p))
    rest = MF[int(200 / DT) + 2:]
    assert np.all(np.diff(rest) < 0)
    # At rest M_A = 0 <= u, so M_F decays at r R (eq. 27): exp(-r R t).
    assert rest[-1] / rest[0] == pytest.approx(math.exp(-p.r * p.R * (len(rest) - 1) * DT), rel=1e-3)
    assert MA[-1] < 1e-9


def test_endurance_limit_does_not_move_with_the_fatigue_scale():
    """Scale 50 exhausts a load above R / (F + R) 50x sooner and still holds one below it:
    the closed form against the Euler-stepped compartments at that scale."""
    p1, p50 = fat.FatigueParams(), fat.FatigueParams(scale=50)
    assert fat.endurance_limit(p50) == fat.endurance_limit(p1)
    assert fat.exhaustion_time(0.5, p50) == pytest.approx(fat.exhaustion_time(0.5, p1) / 50)
    assert fat.exhaustion_time(0.16, p50) is None and fat.exhaustion_time(0.5, fat.FatigueParams(scale=0)) is None
    t, MA, MR, MF = hold(0.5, 10, p50)
    t_star = fat.exhaustion_time(0.5, p50)  # 2.23 s
    # the held load is lost just after M_R runs out (the 50x recovery keeps M_R ~1e-3, not 0)
    assert t_star < fat.endurance_time(t, MA, np.full_like(t, 0.5)) < t_star + 0.2
    t, MA, MR, MF = hold(0.15, 60, p50)
    assert fat.endurance_time(t, MA, np.full_like(t, 0.15)) is None
    # no recovery at all: M_F = F u t reaches 1 - u at (1 - u) / (F u)
    assert fat.exhaustion_time(0.5, fat.FatigueParams(R=0.0)) == pytest.approx(0.5 / (0.01 * 0.5))


def test_fatigue_scale_multiplies_F_and_R():
    p = fat.FatigueParams(scale=50)
    assert (p.F_eff, p.R_eff) == (0.5, 0.1)
    assert fat.FatigueParams(scale=0).F_eff == 0.0
    t, MA, MR, MF = hold(0.9, 30, fat.FatigueParams(scale=0))
    assert MF.max() == 0.0 and MA[-1] == pytest.approx(0.9, abs=1e-3)


@pytest.mark.parametrize("kw, name", [
    (dict(F=float("nan")), "F"), (dict(R=-1.0), "R"), (dict(r=float("inf")), "r"),
    (dict(LD=500.0), "LD"), (dict(scale=-2.0), "scale"),
])
def test_bad_parameters_are_refused_by_name(kw, name):
    with pytest.raises(ParameterError) as err:
        fat.FatigueParams(**kw).validate(DT)
    assert f"'{name}'" in str(err.value)


def test_same_functions_run_in_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    s = random_simplex(rng, 1000)
    u, alpha_pd = rng.uniform(0, 1, 1000), rng.uniform(-0.5, 1.5, 1000)
    T = lambda a: torch.tensor(a, dtype=torch.float64)
    lb, ub = fat.activation_bounds(s.MA, s.MR, DT, 0.1, 50.0, 50.0)
    tlb, tub = fat.activation_bounds(T(s.MA), T(s.MR), DT, 0.1, 50.0, 50.0, xp=torch)
    assert np.allclose(tlb.numpy(), lb, atol=1e-15) and np.allclose(tub.numpy(), ub, atol=1e-15)
    a = fat.clip_activation(alpha_pd, lb, ub)
    ta = fat.clip_activation(T(alpha_pd), tlb, tub, xp=torch)
    assert np.allclose(ta.numpy(), a, atol=1e-15)
    C = fat.target_load_rate(u, s.MA, s.MR, 50.0, 50.0)
    assert np.allclose(fat.target_load_rate(T(u), T(s.MA), T(s.MR), 50.0, 50.0, xp=torch).numpy(), C)
    demanding = s.MA < u
    ref = fat.compartment_step(s.MA, s.MR, s.MF, C, demanding, DT, 0.1, 0.005, 2.0)
    out = fat.compartment_step(T(s.MA), T(s.MR), T(s.MF), T(C), torch.tensor(demanding), DT, 0.1, 0.005, 2.0,
                               xp=torch)
    for x, y in zip(out, ref):
        assert np.allclose(x.numpy(), y, atol=1e-15)
