"""The arm-holding experiment (MuscleVAE Fig. 9-10) with the paper's arm-hold fatigue rates."""
import json

import numpy as np
import pytest

from engine.experiments.arm_hold import ArmHoldSetup, muscle_sets, run_arm_hold
from engine.errors import ParameterError

from .test_cli import last_json, sinew


@pytest.fixture(scope="module", params=["mujoco", "ode"])
def full_run(request, rig):
    if request.param == "ode":
        pytest.importorskip("ode")
    return run_arm_hold(rig, ArmHoldSetup(hold=120, rest=60, rehold=60, backend=request.param))


def test_arms_start_level_tire_and_recover(full_run):
    s = full_run["summary"]
    print({k: round(v, 3) if isinstance(v, float) else v for k, v in s.items()})
    assert abs(s["elevation_start_deg"]) < 10.0
    lost = s["elevation_start_deg"] - s["elevation_end_hold_deg"]
    assert lost >= 15.0
    assert s["shoulder_MF_end_rest"] < s["shoulder_MF_end_hold"]  # fatigue recovers at rest
    regained = s["elevation_rehold_deg"] - s["elevation_end_hold_deg"]
    assert regained >= lost / 3
    # The fatigue the arms sink under is the shoulder's: it rises through the hold.
    MF = np.array(full_run["series"]["shoulder_MF"])
    t = np.array(full_run["series"]["time_s"])
    assert MF[np.searchsorted(t, 60)] < MF[np.searchsorted(t, 119)]


def test_without_fatigue_the_arms_stay_up(rig):
    res = run_arm_hold(rig, ArmHoldSetup(hold=120, rest=60, rehold=60, fatigue_scale=0.0))
    t = np.array(res["series"]["time_s"])
    elev = np.mean([res["series"]["elevation_right_deg"], res["series"]["elevation_left_deg"]], axis=0)
    start = res["summary"]["elevation_start_deg"]
    # Holding phases (after settling): the relaxed rest in between is meant to drop the arms.
    holding = ((t > 2) & (t < 120)) | (t > 185)
    assert np.abs(elev[holding] - start).max() < 5.0
    assert res["summary"]["shoulder_MF_end_hold"] == 0.0


def test_muscle_sets_are_the_joint_spanners(rig):
    sets = muscle_sets(rig)
    names = lambda key: {rig.muscle_names[i] for i in sets[key]}
    assert {"R_Deltoid", "L_Deltoid", "R_Supraspinatus", "R_Infraspinatus1"} <= names("shoulder")
    assert {"R_Brachialis", "R_Triceps_Lateral_Head", "L_Brachioradialis"} <= names("upper_arm")
    assert "R_Brachialis" not in names("shoulder") and "R_Vastus_Lateralis" not in names("upper_arm")


def test_bad_setup_is_refused(rig):
    with pytest.raises(ParameterError, match="hold"):
        ArmHoldSetup(hold=-1).validate()
    with pytest.raises(ParameterError, match="fatigue_scale"):
        ArmHoldSetup(fatigue_scale=float("nan")).validate()


def test_cli_writes_json_and_plot(tmp_path):
    s = last_json(sinew("arm-hold", "--hold", "4", "--rest", "2", "--rehold", "2", "--out", str(tmp_path), "--json"))
    for key in ("elevation_start_deg", "elevation_end_hold_deg", "elevation_rehold_deg",
                "shoulder_MF_end_hold", "shoulder_MF_end_rest"):
        assert key in s
    data = json.loads((tmp_path / "arm_hold.json").read_text())
    assert len(data["series"]["time_s"]) == len(data["series"]["shoulder_MF"]) > 70
    assert (tmp_path / "arm_hold.png").read_bytes()[:4] == b"\x89PNG"
    bad = sinew("arm-hold", "--backend", "bullet", check=False)
    assert bad.returncode == 2 and "bullet" in bad.stderr
