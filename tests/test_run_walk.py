"""The run-walk fatigue experiment (MuscleVAE Fig. 11), fatigue scale 50.

Must hold: the legs' mean M_F rises while running and falls while walking; the late run
differs from the early run and the difference shrinks after the walk (checked on 5 s of
running again). The tracking controller cannot do this with the bundled sprint (5.3 m/s).
Measured (2026-11-23): the run opens at 26 deg mean joint error on ~1.3 body weights of
root residual, the legs' M_F is 0.57 after 5 s and 0.65 after 20 s, and the character falls
at 33 s, before the walk. Two reasons, both measured (issue 5's notes):
- the reference is beyond the body even fresh: along the looped sprint, with activations
  free in [0, 1], ~90 N m of joint torque stays unmet and the root needs ~0.4 body weights
  (engine.control.demands), mostly around landing, where the low-passed clip decelerates
  before its foot reaches the floor;
- 3CC-r holds a load of R / (F + R) = 1/6 of a muscle's strength indefinitely, at any
  fatigue scale. Tracking the sprint fresh takes the legs' muscles to 0.49 mean activation
  (the walk 0.23), so at scale 50 a quarter of the legs' strength is spent within ~3 s
  (engine.take.effort). MuscleVAE's policy answers by running less powerfully; a tracker
  that insists on the clip can only sag and fall.
So the experiment test is an expected failure; what the take does show (the legs tire) is
still checked.
"""
import numpy as np
import pytest

from engine.errors import ParameterError


def test_setup_is_checked(rig):
    from engine.experiments.run_walk import RunWalkSetup

    with pytest.raises(ParameterError, match="run"):
        RunWalkSetup(run=0).validate()
    with pytest.raises(ParameterError, match="fatigue_scale"):
        RunWalkSetup(fatigue_scale=float("nan")).validate()


@pytest.fixture(scope="module")
def run_walk(rig):
    from engine.experiments.run_walk import RunWalkSetup, run_run_walk

    return run_run_walk(rig, RunWalkSetup(run=60.0, walk=20.0, rerun=5.0))


def test_running_tires_the_legs(run_walk):
    """Fatigue scale 50 makes the leg muscles tire while running."""
    take, res = run_walk
    s = res["summary"]
    assert s["legs_MF_end_run"] > s["legs_MF_start"] + 0.01


@pytest.mark.xfail(reason="the tracker cannot keep up the sprint at fatigue scale 50: 26 deg fresh on a ~1.3 BW "
                   "residual, and it falls at 33 s, before the walk; see the module docstring", strict=True)
def test_run_walk_fig11(run_walk):
    take, res = run_walk
    s = res["summary"]
    assert not s["fell"]
    assert s["legs_MF_end_run"] > s["legs_MF_start"] + 0.05  # rises while running
    assert s["legs_MF_end_walk"] < s["legs_MF_end_run"] - 0.02  # falls while walking
    early, late = s["early_run"], s["late_run"]
    change = abs(late["knee_range_deg"] - early["knee_range_deg"])
    assert change > 3.0  # the tired run differs measurably (knee flexion range, deg)
    assert abs(s["rerun"]["knee_range_deg"] - early["knee_range_deg"]) < change  # and recovers
