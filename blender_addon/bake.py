"""Baking a take onto the armature: its simulated pose as keyframes of a new Action (the
armature's own Action is never modified) and the display's take table (per frame and
muscle: activation, M_F, force / f0). bpy is imported only when baking."""
from __future__ import annotations

import json
import time

import numpy as np

from .engine.errors import SinewError
from .model import load_model


class SimulationError(SinewError):
    """The simulation could not give a take worth baking."""


def check_bakeable(take) -> None:
    """A take whose physics diverged is not baked (its last frames are the blow-up): a
    SinewError saying where, so the operator reports it and leaves the scene alone."""
    if take.meta.get("diverged"):
        raise SimulationError(f"{take.meta['stop_reason']}; nothing was baked (a lower fatigue scale, "
                              "another seed or clip may hold)")


def take_pose(take):
    """(root_pos (N, 3), local_rot (N, B, 4)) of a take's simulated model pose."""
    from .engine.kinematics import q_to_pose
    from .engine.transforms import matrix_to_quat

    root, local = q_to_pose(load_model(), np.asarray(take.q, float))
    return root, matrix_to_quat(local)


def take_table(take) -> np.ndarray:
    """(N, M, 3) display values: activation, M_F, force / f0 (the take's f0: its strength)."""
    f0 = load_model().with_strength(float(take.meta.get("strength", 1.0))).muscle_f0
    return np.stack([np.asarray(take.activation, np.float32), np.asarray(take.MF, np.float32),
                     (np.asarray(take.force, float) / f0).astype(np.float32)], -1)


def bake_take(context, arm, take, frame_start: int | None = None, action_name: str | None = None,
              rt=None) -> dict:
    """Bake a take onto the armature as a new Action and write the display's take table.

    The armature's current Action is never modified: the new Action becomes the active one
    and the old one is stashed on a muted NLA track. rt: the armature's Retargeter from the
    take's run (SimulationJob.retargeter; None: built here). Returns a summary."""
    import bpy

    from . import display
    from .armature import assign_action, bake_action, unique_action_name
    from .retarget import retarget_to_model, retargeter

    check_bakeable(take)
    t0 = time.perf_counter()
    scene = context.scene
    if frame_start is None:
        frame_start = scene.frame_start
    if rt is None:
        rt = retargeter(arm)
    root, local = take_pose(take)
    motion = rt.to_source(root, local, 1.0 / take.fps, 0.0)
    ad = arm.animation_data
    base = ad.action.name if ad is not None and ad.action is not None else arm.name
    base = base.split("_fatigued_")[0]
    name = action_name or unique_action_name(base)
    action, slot = bake_action(arm, motion, int(frame_start), name)
    action["sinew_take"] = json.dumps(dict(fps=take.fps, frames=take.num_frames,
                                           summary=take.meta.get("summary", {}), seed=take.meta.get("seed"),
                                           fatigue=take.meta.get("fatigue"), clips=take.meta.get("clips")),
                                      default=str)
    action.use_fake_user = True
    assign_action(arm, action, slot)
    if not arm.sinew.retargeted or display.names_for(arm.name)["muscles"] not in bpy.data.objects:
        retarget_to_model(context, arm, rt=rt)
    table = display.write_take_table(context, arm, take_table(take), int(frame_start))
    end = int(frame_start) + take.num_frames - 1
    return dict(action=action.name, frames=take.num_frames, frame_start=int(frame_start), frame_end=end,
                fps=take.fps, table=table.name, bake_s=round(time.perf_counter() - t0, 3),
                slotted=slot is not None)
