"""Controllers that drive the muscles (DESIGN.md "Controllers").

- `TrackingController` (engine.control.tracking): training-free tracking of reference
  clips by inverse dynamics and a muscle-coordination solve inside the 3CC-r bounds.
- `MotionPlan` (engine.control.plan): clips made cyclic, looped and chained.
- engine.control.policy (MuscleVAE policies) arrives with the training work.

Measured (issue 5, 2-core machine, one thread, MuJoCo): the controller must decide every
physics step (120 Hz): holding the solve for 2 or 4 steps (60 / 30 Hz) lost the walk
within 2 s (11.6 / 12.3 deg mean joint error against 2.7 deg at 120 Hz over 3 s). Gains
kp 400 / kd 40 beat 225 / 30 (fell) and 900 / 60, 1600 / 80 (6.9-13 deg). Fresh walk:
5.2-6.0 deg and 1 cm for the first 10 s, then a stumble it does not recover from (60 s
mean 17.6 deg, 18 cm, residual 0.4 body weights). The bundled sprint falls at ~1 s even
fresh. Speed ~0.2-0.3x real time: the 284-muscle QP (DAQP) takes 15-35 ms a step and the
preparation ~5 ms; muscles + physics ~1 ms.
"""
from .coordination import CoordinationWeights, MomentArms, coordinate
from .plan import CyclicClip, MotionPlan, QSpace, load_clip, parse_clip_arg
from .tracking import TrackingController, TrackingParams

__all__ = ["CoordinationWeights", "CyclicClip", "MomentArms", "MotionPlan", "QSpace", "TrackingController",
           "TrackingParams", "coordinate", "load_clip", "parse_clip_arg"]
