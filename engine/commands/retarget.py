"""`sinew retarget`: its parser and the function it runs.

engine/commands/main.py wires it in with add_retarget_parser(sub); the parser sets `func`,
which takes the parsed args and returns an exit code.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..options import add_force, number

EPILOG_RETARGET = """examples:
  sinew retarget walk.bvh --out walk_ref.npz
  sinew retarget mixamo_run.bvh --preset mixamo --json
  sinew retarget mocap.bvh --map my_rig_map.json --units cm --out mocap_ref.npz
  sinew retarget clip.bvh --preset cmu --map fix_spine.json     # the map overrides the preset
  sinew retarget cmu_walk.bvh --keep-calibration                  # keep its opening T-pose

A calibration pose at the start (T- or A-pose frames joined to the motion by a jump far
above the clip's ordinary frame-to-frame change, or easing into it) or at the end (the
motion cut or eased back into one, as many capture sessions end) is skipped, and the
output says so; one held inside the clip (jumped into and out of: a capture restarted) is
named first among the checks, to cut the clip there. A clip exported "in place" (its root's travel taken out, so the feet slide
back under a body stepping on the spot) gets the root path its feet give, and the output
says so too.

presets: mass (Character1_*), mixamo (mixamorig:*), rigify (DEF-*), unreal (pelvis, thigh_l,
...), cmu (Hips, LeftUpLeg, ...), smpl (pelvis, left_hip, ...). Without --preset every preset
is tried and the best is kept; when none fits, bones are guessed from names and hierarchy
(Xsens, OptiTrack, 3ds Max Biped, Poser, Daz, Rokoko, LAFAN1, VRM names and more), and a
preset that fits all but a few bones gets those from the guess ("mixamo + guess"). Twist
bones inside a limb's chain (Daz's lThighBend -> lThighTwist -> lShin) turn the limb.
A map file is a JSON object {"model body": "source bone"}; model bodies: Pelvis, FemurR/L,
TibiaR/L, TalusR/L, FootThumbR/L, FootPinkyR/L, Spine, Torso, Neck, Head, ShoulderR/L, ArmR/L,
ForeArmR/L, HandR/L ("" unmaps a body).
"""


def _summary_lines(ref, out: Path | None) -> list[str]:
    from ..motion.calibration import describe, found_in
    from ..motion.checks import summary_lines
    from ..motion import limits, soles
    from ..motion.cleanup import describe as repaired
    from ..motion.rootpath import describe as root_path

    s = ref.summary()
    m = ref.meta
    lines = [
        f"source      {m.get('source', '')}",
        f"mapping     {s['mapped_bones']} bodies ({s['preset']})",
        f"frames      {s['frames']} at {s['fps']:g} Hz ({s['seconds']:.2f} s)",
        f"scale       {s['scale']:.4f} (model/source leg length), ground offset {100 * m['ground_offset_m']:+.1f} cm",
        f"root speed  {s['root_speed_mps']:.2f} m/s",
        f"foot skate  {s['foot_skate_cm_per_s']:.1f} cm/s while planted ({100 * s['contact_fraction']:.0f} % of foot-frames), "
        f"{s.get('stance_sink_cm', 0.0):.1f} cm into the floor at most (a take puts them on the floor)",
        f"lowest foot {s['lowest_foot_min_cm']:+.1f} .. {s['lowest_foot_max_cm']:+.1f} cm (mean {s['lowest_foot_mean_cm']:+.1f})",
    ]
    if str(m.get("up_axis", "")).startswith("z"):
        lines.append(f"up axis     Z: {'read so (--up z)' if m['up_axis'] == 'z' else 'its body lies down with Y up and stands with Z up (--up y reads it as Y up)'}")
    for cal in found_in(m):
        lines.append(f"calibration {describe(cal)}")
    pose = m.get("source_pose")
    if pose and pose.get("frame") is not None:
        at = pose["frame"] / float(m.get("source_fps") or 1.0)
        lines.append(f"aligned on  the clip at {at:.2f} s (frame {pose['frame']}): the skeleton's rest pose does not "
                     "stand (joint axes along the bones); each foot on its flattest stance frame")
    if m.get("levelled_feet"):
        lines.append(f"feet        {soles.describe(m['levelled_feet'])}")
    if m.get("limited"):
        lines.append(f"limited     {limits.describe(m['limited'])}")
    if m.get("repaired"):
        lines.append(f"repaired    {repaired(m['repaired'])}")
    if root_path(m.get("root_path")):
        lines.append(f"root path   {root_path(m['root_path'])}")
    lines += [f"check       {line}" for line in summary_lines(m.get("checks"))]
    if out is not None:
        lines.append(f"reference   {out}")
    return lines


def cmd_retarget(args) -> int:
    from ..errors import InputFileError
    from ..motion.reference import FORMAT
    from ..npzfile import check_out_npz
    from ..progress import Progress
    from ..rig import load_rig
    from ..motion.retarget import Retargeter, read_clip

    clip = Path(args.clip)
    if clip.suffix.lower() != ".bvh":
        raise InputFileError(clip, "expected a .bvh file (armatures are retargeted from Blender)")
    out = check_out_npz(Path(args.out) if args.out else Path(clip.stem + "_ref.npz"), FORMAT, "reference",
                        inputs=[clip, args.map, args.rig], force=args.force)
    motion, axis = read_clip(clip, units=args.units, up=args.up, preset=args.preset, mapping=args.map)
    rig = load_rig(args.rig)
    rt = Retargeter.build(rig, motion.skeleton, preset=args.preset, mapping=args.map, motion=motion)
    with Progress("retargeting", 1.0) as bar:
        ref = rt.to_model(motion, fps=args.fps, source=str(clip), progress=bar.update,
                          keep_calibration=args.keep_calibration)
    ref.meta["up_axis"] = axis
    ref.save(out)
    summary = dict(ref.summary(), ground_offset_m=round(ref.meta["ground_offset_m"], 5),
                   calibration=ref.meta["calibration"], calibration_end=ref.meta["calibration_end"],
                   root_path=ref.meta.get("root_path"), out=str(out))
    lines = _summary_lines(ref, out)
    print("\n".join(lines))
    if args.json:
        print(json.dumps(summary))
    return 0


def add_retarget_parser(subparsers) -> argparse.ArgumentParser:
    from ..motion.presets import PRESET_NAMES

    p = subparsers.add_parser(
        "retarget", help="retarget a BVH clip onto the model (reference trajectory .npz)",
        epilog=EPILOG_RETARGET, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Map a BVH clip onto the 284-muscle model: bone mapping (preset, guess or map "
        "file), rest-pose alignment (T- or A-pose), scaling by leg length, feet put on the floor, "
        "resampled to 120 Hz. Writes body transforms, joint angles, root velocity and muscle "
        "lengths to a reference .npz.")
    p.add_argument("clip", help="BVH file")
    g = p.add_argument_group("mapping")
    g.add_argument("--preset", choices=PRESET_NAMES, default=None,
                   help="bone-name preset (default: the best-fitting one)")
    g.add_argument("--map", default=None, metavar="MAP.json",
                   help='JSON {"model body": "source bone"} laid over the preset; its entries win')
    p.add_argument("--units", choices=("auto", "m", "cm", "mm", "in"), default="auto",
                   help="length unit of the file (default auto: cm when the skeleton spans > 3 units)")
    p.add_argument("--up", choices=("auto", "y", "z"), default="auto",
                   help="the file's up axis (default auto: Y, the BVH norm, unless the body lies down so and "
                   "stands with Z up)")
    p.add_argument("--fps", type=number("--fps", positive=True, hi=10000.0), default=120.0, help="reference frame rate (default 120, the physics rate)")
    p.add_argument("--keep-calibration", action="store_true",
                   help="keep a calibration pose at the start of the clip (T- or A-pose frames that jump to "
                   "the motion; skipped by default, and said so)")
    p.add_argument("--rig", default="human284", help="rig name or path (default: human284)")
    p.add_argument("--out", default=None, metavar="REF.npz", help="reference file to write (default: CLIP_ref.npz here)")
    add_force(p)
    p.add_argument("--json", action="store_true", help="print one JSON summary as the last line")
    p.set_defaults(func=cmd_retarget)
    return p
