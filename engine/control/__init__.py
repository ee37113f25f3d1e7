"""Controllers that drive the muscles (DESIGN.md "Controllers").

- `TrackingController` (engine.control.tracking): training-free tracking of reference
  clips by inverse dynamics and a muscle-coordination solve inside the 3CC-r bounds.
- `MotionPlan` (engine.control.plan): clips made cyclic, looped and chained.
- engine.control.policy (MuscleVAE policies) arrives with the training work.

Measured (issue 5, 2-core machine, one thread, MuJoCo):
- The controller decides every physics step (120 Hz). Holding the activations for 2 steps
  loses the walk (~20 deg); so does mapping the torque change between solves through the
  solve's exact sensitivity, and re-solving with 1-step-old moment arms costs ~3 deg.
- Gains kp 400 / kd 40 beat 225 / 30 and 900 / 60 on the walk.
- Solving muscles, contact forces and the residual together (not contacts first) took the
  fresh 60 s walk from 6.1 to 4.5 deg (activation weight 0.01; 4.7 deg with the default
  weights, which lean less on the residual): a contact split chosen for the root alone asked the
  ankles for torques about the vertical axis, which only 2 muscles span by more than 1 cm.
- The ankles (14-17 deg) and toes (9-12 deg) are still the weakest joints.
- The bundled sprint (5.4 m/s) is not tracked: ~20 deg, and the residual saturates.
- Speed ~0.3x real time: the QP (~320 unknowns, 56 equalities, ~150 DAQP iterations) takes
  ~10-20 ms a step; preparation ~2-4 ms; muscles + physics ~0.5-1 ms.
"""
from .coordination import CoordinationWeights, MomentArms, coordinate
from .plan import CyclicClip, MotionPlan, QSpace, load_clip, parse_clip_arg
from .tracking import TrackingController, TrackingParams

__all__ = ["CoordinationWeights", "CyclicClip", "MomentArms", "MotionPlan", "QSpace", "TrackingController",
           "TrackingParams", "coordinate", "load_clip", "parse_clip_arg"]
