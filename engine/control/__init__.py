"""Controllers that drive the muscles (DESIGN.md "Controllers").

Every controller shares one interface (`Controller`, engine.control.controller: act, start,
close, snapshot / restore, report), and one factory decides which plays a take
(engine.control.factory.make_controller, which engine.take, the add-on and training call).

- `TrackingController` (engine.control.tracking): training-free tracking of reference
  clips by inverse dynamics and a muscle-coordination solve inside the 3CC-r bounds.
- `StandController` (engine.control.stand): a still reference without the root residual,
  stood on the muscles alone by an LQR about its nearest balanced pose (the factory picks it
  for a held pose standing on its feet).
- `BalancePlanner` (engine.control.balance): the tracker without the residual, steered by
  predictive sampling over small hip, ankle and spine offsets of its reference (`--balance`;
  the factory picks it when TrackingParams.balance is set).
- `MotionPlan` (engine.control.plan): clips made cyclic, looped and chained.
- engine.control.pace: the pace governor, which plays the clips slower as the legs tire.
- `PolicyController` (engine.control.policy): exported MuscleVAE policies in numpy; their
  modes (track, generate, heading) and heading goals in engine.control.goals.

Measured (issue 5, 2-core machine, one thread, MuJoCo):
- The controller decides every physics step (120 Hz). Holding the activations for 2 steps
  loses the walk (~20 deg); so does mapping the torque change between solves through the
  solve's exact sensitivity, and re-solving with 1-step-old moment arms costs ~3 deg.
- Gains kp 400 / kd 40 beat 225 / 30 and 900 / 60 on the walk.
- Solving muscles, contact forces and the residual together (not contacts first) took the
  fresh 60 s walk from 6.1 to 4.5 deg (activation weight 0.01; 4.7 deg with the default
  weights, which lean less on the residual): a contact split chosen for the root alone asked the
  ankles for torques about the vertical axis, which only 2 muscles span by more than 1 cm.
- Low-passing the reference velocities at 5 Hz (plan.REF_CUTOFF_HZ; the bundled clips are
  30 Hz captures interpolated to 120 fps) took the fresh 60 s walk from 4.72 deg / 0.085
  body weights of residual to 4.51 deg / 0.033, and halved the active-set changes per solve.
- The ankles (14-17 deg) and toes (9-12 deg) are still the weakest joints.
- The bundled sprint (5.4 m/s) is not tracked: ~20 deg, and the residual saturates. The
  reference itself asks for more than the model has: solved along the looped sprint with
  activations free in [0, 1], inverse dynamics leaves 90 N m of joint torque unmet (knees,
  hips, arms; 75 with f_v = 1, 43 with 3x f0) and needs 0.39 body weights of root residual
  (the walk: 26 N m, mostly toes, and 0.03). Much of the residual is in the right foot's
  stance, which the loop closure (an 8 deg seam spread over the 66 frames) lifts 2-4 cm
  off the floor; spreading each leg's share over its last swing instead cut the root help to
  0.22 but not the unmet torque, and tracked worse (reverted). One reason for the torque: the
  waypoint paths have no patella, so the vastus lateralis' knee moment arm falls from 5.6 cm
  at 24 deg of flexion to 1.1 cm at 110 deg and 0.2 cm at 119 deg (the sprint's swing).
- Joint damping (physics joint_damping, 10 N m s/rad on every DOF) costs the muscles: it
  is ~20 of the walk's 26 N m unmet (toes), and the legs' mean activation is 0.24 at
  damping 10 against 0.18 at 3 (sprint 0.49 against 0.38). Measured on 8 s fresh takes,
  uniform damping 10 / 5 / 4 / 3 / 2: walk 4.5 / - / - / 4.8 / 5.2 deg, sprint 17.5 / 12.4 / 22.5 / 10.5 / 18.2 deg
  (erratic); 60 s walk 4.5 (10), 4.76 (5), 4.85 (3) deg. Below ~2 the arm, shoulder and
  head chains diverge (damping 1: hand at 0.9 s). Not changed: the sprint's gain is not
  robust, the walk's must-hold margin shrinks, and the trained policies assume 10.
- Fatigue scale 50 (the run-walk setting) and the tracker: 3CC-r holds 1/6 of a muscle's
  strength indefinitely (R / (F + R), any scale); the fresh walk works half of the legs'
  strength above that and the sprint nearly all of it, so at scale 50 a quarter of the legs'
  strength is spent after ~5 s walking (the gait gives way at 6 s) and ~3 s sprinting
  (engine.take.effort, in every report). The run-walk take falls at 33 s.
- Speed ~1.1-1.4x real time (`sinew bench --tracking 4`: 5.9 ms a step; it was 10.7 ms):
  the QP (~320 unknowns, 56 equalities) takes ~3.6 ms, warm-started from the last step's
  active set (~45 DAQP iterations instead of ~150); preparation ~1.3 ms (moment arms
  0.5 ms); muscles + physics ~0.7 ms. OSQP, tried on the same problems: 20-40 ms.
- Issue 16's speed (fourth session): the solve is now a semismooth Newton method on the
  problem's dual (coordination.dual_newton: 56 multipliers, one 56 x 56 solve a step,
  warm-started from the last decision's multipliers, an exact line search on the dual).
  `sinew bench --tracking 2`, same machine, in turn: DAQP 2.44-2.50 ms of 3.76-4.03 ms a
  step (2.07-2.22x real time) -> 1.12-1.16 ms of 2.29-2.46 ms (3.38-3.64x).
  benchmarks/coordination_solvers.py replays one take's problems with both solvers, each
  warm-started as the controller does: fresh walk (5 s) DAQP 2.79 ms a solve (p90 4.6) ->
  Newton 1.13 (p90 1.6), 5.5 Newton steps; tired walk (scale 50, 20 s) 6.40 (p90 14.0) ->
  2.29 (p90 4.1), 13.3 steps; activations within 7e-7 of DAQP's, no fallbacks. Takes
  differ from DAQP's only by that round-off, which the tired, chaotic walk amplifies
  (14.0 -> 14.5 deg, residual 0.32 -> 0.32 body weights).
"""
from .coordination import CoordinationWeights, MomentArms, coordinate
from .plan import CyclicClip, MotionPlan, QSpace, load_clip, parse_clip_arg
from .tracking import TrackingController, TrackingParams

__all__ = ["CoordinationWeights", "CyclicClip", "MomentArms", "MotionPlan", "QSpace", "TrackingController",
           "TrackingParams", "coordinate", "load_clip", "parse_clip_arg"]
