"""Experiments from the papers, reproduced with this engine: arm_hold (MuscleVAE Fig. 9-10,
behind `sinew arm-hold`) and run_walk (Fig. 11, which tests/test_run_walk.py runs; the
command line's way to it is `sinew simulate` with a run and a walk clip)."""
