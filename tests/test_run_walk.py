"""The run-walk fatigue experiment (MuscleVAE Fig. 11), fatigue scale 50.

Must hold: the legs' mean M_F rises while running and falls while walking; the late run
differs from the early run and the difference shrinks after the walk (checked on 5 s of
running again), all with the character on its own muscles (no root residual).

Measured (2026-11-24), with the pace governor (engine.control.pace) on by default: the take
now runs its whole 85 s without falling (before the governor it fell at 33 s, before the
walk). The tiring legs slow the sprint to half pace (early run 3.9 m/s, late run 2.7 m/s,
knee flexion range 70 -> 53 deg); the legs' M_F is 0.64 at the end of the run and 0.59 after
the walk; the last 5 s of running get most of the knee range back (66 deg) but not the speed
(2.7 m/s: the legs' M_F is still far above the governor's threshold). So the shape of Fig. 11
is there, but the take leans on 0.84 body weights of root residual at 25 deg mean joint
error. Two reasons, both measured (issue 5's notes):
- the reference is beyond the body even fresh: along the looped sprint, with activations
  free in [0, 1], ~90 N m of joint torque stays unmet and the root needs ~0.4 body weights
  (engine.control.demands), mostly around landing, where the low-passed clip decelerates
  before its foot reaches the floor;
- 3CC-r holds a load of R / (F + R) = 1/6 of a muscle's strength indefinitely, at any
  fatigue scale. Tracking the sprint fresh takes the legs' muscles to 0.49 mean activation
  (the walk 0.23), so at scale 50 a quarter of the legs' strength is spent within ~3 s
  (engine.take.effort).
So the experiment test, which asks for all of it on the muscles alone, is an expected
failure; what the take does show (the legs tire, the run slows) is still checked.

Those figures are at the model's own forces. Since 2026-11-26 takes run at strength 3
(engine.take.check_strength): the fresh sprint asks the legs for ~0.25 instead of 0.49 and
runs on the muscles alone under the balance planner for 2.5-8+ s (by the seed) before it
falls, the reference's landings still asking ~0.4 body weights of root help; at scale 50
without the residual it falls within 3-6 s whatever the pace governor does
(docs/research/balance.md, fourteenth and sixteenth sessions). The checks below hold at either.
"""
import numpy as np
import pytest

from engine.errors import ParameterError

from .conftest import MOTION_DIR

CLIPS = dict(run_clip=str(MOTION_DIR / "run.bvh"), walk_clip=str(MOTION_DIR / "walk.bvh"))


def test_setup_is_checked(rig):
    from engine.experiments.run_walk import RunWalkSetup

    with pytest.raises(ParameterError, match="run"):
        RunWalkSetup(**CLIPS, run=0).validate()
    with pytest.raises(ParameterError, match="fatigue_scale"):
        RunWalkSetup(**CLIPS, fatigue_scale=float("nan")).validate()


@pytest.fixture(scope="module")
def run_walk(rig):
    from engine.experiments.run_walk import RunWalkSetup, run_run_walk

    return run_run_walk(rig, RunWalkSetup(**CLIPS, run=60.0, walk=20.0, rerun=5.0))


def test_running_tires_the_legs(run_walk):
    """Fatigue scale 50 makes the leg muscles tire while running."""
    take, res = run_walk
    s = res["summary"]
    assert s["legs_MF_end_run"] > s["legs_MF_start"] + 0.01


def test_tired_run_slows_down(run_walk):
    """The pace governor slows the tiring sprint: the late run is slower than the early one."""
    take, res = run_walk
    s = res["summary"]
    assert s["late_run"]["speed_mps"] < 0.85 * s["early_run"]["speed_mps"]
    assert take.meta["pace"]["min_rate"] < 0.8


@pytest.mark.xfail(reason="the tracker cannot carry the sprint on the muscles alone: ~0.8 body weights of root "
                   "residual at 25 deg, and the walk hardly recovers the legs; see the module docstring", strict=True)
def test_run_walk_fig11(run_walk):
    take, res = run_walk
    s = res["summary"]
    assert s["take"]["residual_mean_body_weights"] < 0.05  # the character carries itself
    assert not s["fell"]
    assert s["legs_MF_end_run"] > s["legs_MF_start"] + 0.05  # rises while running
    assert s["legs_MF_end_walk"] < s["legs_MF_end_run"] - 0.02  # falls while walking
    early, late = s["early_run"], s["late_run"]
    change = abs(late["knee_range_deg"] - early["knee_range_deg"])
    assert change > 3.0  # the tired run differs measurably (knee flexion range, deg)
    assert abs(s["rerun"]["knee_range_deg"] - early["knee_range_deg"]) < change  # and recovers


def test_the_walk_carries_on_from_where_the_slowed_run_got_to(run_walk):
    """The run reaches the switch many seconds behind its planned clock; the walk is matched
    again to where it got to (MotionPlan.rebase), so the reference's root does not jump: it
    moves no more from frame to frame across the switches than it does in the runs."""
    take, _ = run_walk
    step = np.linalg.norm(np.diff(take.q_ref[:, :2], axis=0), axis=1)  # per recorded frame
    t = take.times[1:]
    switches = [s["start_s"] for s in take.meta["segments"][1:]]
    near = np.any([np.abs(t - s) < 0.5 for s in switches], axis=0)
    assert take.meta["pace"]["min_rate"] < 0.8  # the run was slowed before the switch
    assert step[near].max() < 1.5 * step[~near].max()
