"""The simulation loop: muscles driving both physics backends, divergence, determinism."""
import numpy as np
import pytest

from engine import fatigue as fat
from engine.errors import ParameterError, SinewError
from engine.simulation import Sampler, Simulation, SimulationDiverged


class Fixed:
    """The same action every decision."""

    def __init__(self, action, period=1):
        self.action, self.period = action, period

    def act(self, sim, state):
        return self.action


def positions(sim, res):
    return dict(pos=sim.state.pos)


def run_both(rig, action, dt=1 / 120, seconds=0.5):
    recs = []
    for backend in ("mujoco", "ode"):
        sim = Simulation(rig, backend, pinned=("Pelvis",), ground=False, dt=dt)
        recs.append(sim.run(Fixed(action), seconds, probe=positions))
    return recs


def test_backends_agree_relaxed(rig):
    """Pelvis pinned and no ground, so contacts play no part: relaxed muscles (passive forces
    only), 0.5 s at 120 Hz, MuJoCo and ODE bodies within 1 cm."""
    pytest.importorskip("ode")
    mj, ode = run_both(rig, np.full(rig.num_muscles, 1.0))
    gap = np.linalg.norm(mj["pos"] - ode["pos"], axis=-1)
    print(f"relaxed: max body gap {100 * gap.max():.2f} cm over 0.5 s")
    assert np.linalg.norm(mj["pos"][-1] - mj["pos"][0], axis=-1).max() > 0.2  # the limbs fell
    assert gap.max() < 0.01


def test_backends_agree_under_a_random_action(rig):
    """A fixed random PD action (+-0.15): the backends agree to 1 cm once the step resolves
    the muscle feedback (480 Hz). At 120 Hz each backend is itself ~10 cm from its own
    converged answer (the stiff PD loop is under-resolved there), so the two differ by the
    same order; the test reports that gap and bounds it loosely."""
    pytest.importorskip("ode")
    action = np.random.default_rng(0).uniform(-0.15, 0.15, rig.num_muscles)
    mj, ode = run_both(rig, action, dt=1 / 480)
    gap = np.linalg.norm(mj["pos"] - ode["pos"], axis=-1)
    assert np.linalg.norm(mj["pos"][-1] - mj["pos"][0], axis=-1).max() > 0.2
    assert gap.max() < 0.01
    mj120, ode120 = run_both(rig, action)
    gap120 = np.linalg.norm(mj120["pos"] - ode120["pos"], axis=-1).max()
    print(f"random action: max body gap {100 * gap.max():.3f} cm at 480 Hz, {100 * gap120:.2f} cm at 120 Hz")
    assert gap120 < 0.2


def test_backend_gap_with_ground_contact_is_reported(rig):
    """Free character standing on the ground under the T-pose hold: the gap is reported, and
    bounded loosely (contacts are modelled differently: soft in MuJoCo, hard in ODE)."""
    pytest.importorskip("ode")
    recs = []
    for backend in ("mujoco", "ode"):
        sim = Simulation(rig, backend)
        recs.append(sim.run(Fixed(np.zeros(rig.num_muscles)), 0.5, probe=positions))
    gap = np.linalg.norm(recs[0]["pos"] - recs[1]["pos"], axis=-1)
    print(f"with ground contact: max body gap {100 * gap.max():.2f} cm over 0.5 s")
    assert gap.max() < 0.25


@pytest.mark.parametrize("backend", ["mujoco", "ode"])
def test_relaxed_character_falls_and_comes_to_rest(rig, backend):
    if backend == "ode":
        pytest.importorskip("ode")
    sim = Simulation(rig, backend, fatigue=fat.FatigueParams(scale=0))
    relaxed = Fixed(np.full(rig.num_muscles, 1.0))
    e0 = sim.physics.kinetic_energy() + sim.physics.potential_energy()

    def probe(sim, res):
        p = sim.physics
        return dict(low=p.lowest_point(), ke=p.kinetic_energy(), e=p.kinetic_energy() + p.potential_energy(),
                    z=sim.state.pos[:, 2])

    rec = sim.run(relaxed, 4.0, probe=probe)
    assert rec["z"][-1].max() < 0.6  # it fell: nothing left at standing height (head was at 1.6 m)
    assert rec["low"].min() > -0.06  # no sinking through the floor (one impact step at most)
    assert rec["low"][-60:].min() > -0.01  # resting on it
    assert rec["ke"][-1] < 0.05  # at rest
    assert rec["e"].max() < e0 + 1.0  # muscles' passive forces and contacts only dissipate


def test_same_inputs_same_result_bit_for_bit(rig):
    action = np.random.default_rng(5).uniform(-0.1, 0.1, rig.num_muscles)
    runs = []
    for _ in range(2):
        sim = Simulation(rig, "mujoco", fatigue=fat.FatigueParams(scale=50))
        rec = sim.run(Fixed(action, period=6), 1.0,
                      probe=lambda sim, res: dict(pos=sim.state.pos, MF=res.fatigue.MF))
        runs.append(rec)
    assert np.array_equal(runs[0]["pos"], runs[1]["pos"])
    assert np.array_equal(runs[0]["MF"], runs[1]["MF"])


@pytest.mark.parametrize("backend", ["mujoco", "ode"])
def test_a_restored_snapshot_continues_as_if_nothing_happened(rig, backend):
    """Simulation.snapshot / restore: steps played from a snapshot, undone by restoring it,
    then played again give the same take as playing them once, under a push from outside that
    the snapshot keeps: bit for bit on MuJoCo, whose whole state is kept (contact warm start
    and clock too); within 2 cm after 20 steps on ODE, whose constraint solver keeps a warm
    start PyODE cannot reach (restoring alone moves its take ~7 mm by then)."""
    if backend == "ode":
        pytest.importorskip("ode")
    action = np.random.default_rng(6).uniform(-0.1, 0.1, rig.num_muscles)
    sim = Simulation(rig, backend, fatigue=fat.FatigueParams(scale=50))
    push = np.zeros((rig.num_bodies, 3))
    push[0] = [80.0, 0.0, 0.0]
    for _ in range(30):
        sim.step(action)
    sim.physics.set_external_force(push)
    snap = sim.snapshot()
    first = [sim.step(action).fatigue.MF for _ in range(20)]
    pos, steps = sim.state.pos.copy(), sim.steps
    sim.physics.set_external_force(np.zeros_like(push))
    sim.step(-action)  # elsewhere, then back
    sim.restore(snap)
    assert sim.steps == steps - 20 and np.array_equal(sim.physics.external_force, push)
    again = [sim.step(action).fatigue.MF for _ in range(20)]
    tol = 0.0 if backend == "mujoco" else 0.02
    assert np.abs(sim.state.pos - pos).max() <= tol and sim.steps == steps
    assert max(np.abs(a - b).max() for a, b in zip(first, again)) <= (0.0 if backend == "mujoco" else 0.02)


def test_divergence_stops_with_time_step_and_body(rig):
    """A 30 Hz step without joint damping cannot integrate the muscles: the toes are flung
    off at once. The run stops naming time, step and body, and keeps what it recorded before
    that step: nothing, here (test_loop_hooks has a run that keeps some)."""
    sim = Simulation(rig, "mujoco", dt=1 / 30, joint_damping=0.0, pinned=("Pelvis", "Spine", "Torso"),
                     ground=False, fatigue=fat.FatigueParams(LD=25.0, LR=25.0))
    action = np.random.default_rng(1).uniform(-0.3, 0.3, rig.num_muscles)
    with pytest.raises(SimulationDiverged) as err:
        sim.run(Fixed(action), 5.0, probe=positions)
    msg = str(err.value)
    assert "t = " in msg and "step " in msg and any(f"'{b}'" in msg for b in rig.body_names)
    rec = err.value.recording
    assert "(step 1)" in msg and msg.endswith("; kept 0 samples") and len(rec.times) == 0


class Logged(Fixed):
    """Fixed, logging the loop's calls with the step they came at."""

    def __init__(self, action, period, log):
        super().__init__(action, period)
        self.log = log

    def advance_pace(self, sim):
        self.log.append(("pace", sim.steps))

    def act(self, sim, state):
        self.log.append(("act", sim.steps))
        return self.action


def test_loop_hooks(rig):
    """Simulation.run's hooks as a take uses them: pace every step, before_decision only at a
    decision, before_step after it; samples at exactly the chosen steps and a stop test after
    one; a stop request ends the run before the next step, keeping its last; the divergence
    check keeps what came before the diverged step and says how much."""
    from engine.interrupt import StopFlag

    def new():
        return Simulation(rig, "mujoco", pinned=("Pelvis",), ground=False)

    zero = np.zeros(rig.num_muscles)
    log, calls = [], []
    rec = new().run(Logged(zero, 4, log), 0.1, recorder=Sampler(positions, at=[3, 5, 11]),
                    before_decision=lambda sim: log.append(("decide", sim.steps)),
                    before_step=lambda sim: log.append(("push", sim.steps)), progress=calls.append)
    step = [("pace", 0), ("decide", 0), ("act", 0), ("push", 0)] + [e for k in (1, 2, 3) for e in [("pace", k), ("push", k)]]
    assert log[:10] == step and log[10:13] == [("pace", 4), ("decide", 4), ("act", 4)]
    assert [k for e, k in log if e == "act"] == [0, 4, 8] and sum(e == "pace" for e, _ in log) == 12
    assert np.allclose(rec.times, np.array([3, 5, 11]) / 120) and rec["pos"].shape == (3, rig.num_bodies, 3)
    assert rec.stop_reason == "" and not rec.interrupted and rec.controller_s > 0 and rec.step_s > 0
    assert calls == [i / 12 for i in range(12)]

    sim = new()
    rec = sim.run(Fixed(zero), 1.0, recorder=Sampler(positions, at=range(3, 120, 4),
                                                     ends=lambda sim, s: "down" if sim.steps >= 10 else None))
    assert sim.steps == 11 and rec.stop_reason == "down" and not rec.interrupted and len(rec.times) == 3

    sim, asked = new(), []  # a run whose `until` grows (a take that runs on) goes on to it, a rule for samples
    rec = sim.run(Fixed(zero), 0.1, recorder=Sampler(positions, at=lambda k: k % 5 == 0),
                  until=lambda sim: asked.append(sim.steps) or (12 if sim.steps < 6 else 17))
    assert sim.steps == 17 and asked == list(range(1, 18)) and np.allclose(rec.times, np.array([5, 10, 15]) / 120)

    sim, flag = new(), StopFlag()
    rec = sim.run(Fixed(zero), 1.0, record_every=10, stop=flag,
                  progress=lambda f: f >= 0.1 and flag.request("cancelled"))
    assert sim.steps == 13 and rec.interrupted and rec.stop_reason == "cancelled at t = 0.11 s"
    assert np.allclose(rec.times, np.array([1, 11, 13]) / 120)  # every 10th step and the last

    sim = new()
    shove = np.zeros((rig.num_bodies, 3))
    shove[rig.body_index("Head"), 0] = 1e12
    with pytest.raises(SimulationDiverged) as err:
        sim.run(Fixed(zero), 1.0, before_step=lambda sim: sim.steps == 7 and sim.physics.set_external_force(shove))
    e = err.value
    kept = e.recording.times
    assert sim.steps >= 8 and np.allclose(kept, np.arange(1, sim.steps) / 120)  # each step before it
    assert str(e) == f"{e.reason}; kept {len(kept)} samples" and e.reason.startswith(f"simulation diverged at t = {sim.time:.3f} s")


def test_bad_input_is_refused(rig):
    with pytest.raises(SinewError, match="unknown"):
        Simulation(rig, "bullet")
    sim = Simulation(rig, "mujoco")
    with pytest.raises(ParameterError, match="seconds"):
        sim.run(Fixed(np.zeros(rig.num_muscles)), float("nan"))
    with pytest.raises(ParameterError, match="max_speed"):
        Simulation(rig, "mujoco", max_speed=-1)


@pytest.mark.parametrize("backend", ["mujoco", "ode"])
def test_start_at_lifts_a_pose_that_dips_below_the_floor(rig, backend):
    """Simulation.start_at: a pose whose lowest box corner is 2 cm under the floor starts 1 mm
    above it (only the root's height changes); one 5 cm above starts where it is."""
    if backend == "ode":
        pytest.importorskip("ode")
    sim = Simulation(rig, backend)
    q, qd = sim.physics.get_q()
    low = sim.physics.lowest_point()
    sunk = q.copy()
    sunk[2] -= low + 0.02
    put = sim.start_at(sunk, qd)
    assert sim.physics.lowest_point() == pytest.approx(0.001, abs=1e-9)
    assert put[2] == pytest.approx(sunk[2] + 0.021, abs=1e-9) and np.array_equal(put[3:], sunk[3:])
    assert np.allclose(sim.state.pos, sim.physics.body_state().pos)
    high = q.copy()
    high[2] += 0.05 - low
    assert sim.start_at(high, qd) is high and sim.physics.lowest_point() == pytest.approx(0.05, abs=1e-9)
