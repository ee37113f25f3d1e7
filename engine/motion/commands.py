"""`sinew retarget` and `sinew preview`: parsers and the functions they run.

engine/cli.py wires them in with add_retarget_parser(sub) / add_preview_parser(sub); each
parser sets `func`, which takes the parsed args and returns an exit code.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..argtypes import number
from ..errors import InputFileError, ParameterError

EPILOG_RETARGET = """examples:
  sinew retarget walk.bvh --out walk_ref.npz
  sinew retarget mixamo_run.bvh --preset mixamo --json
  sinew retarget mocap.bvh --map my_rig_map.json --units cm --out mocap_ref.npz
  sinew retarget clip.bvh --preset cmu --map fix_spine.json     # the map overrides the preset
  sinew retarget cmu_walk.bvh --keep-calibration                  # keep its opening T-pose

A calibration pose at the start (T- or A-pose frames joined to the motion by a jump far
above the clip's ordinary frame-to-frame change, or easing into it) is skipped, and the
output says so.

presets: mass (Character1_*), mixamo (mixamorig:*), rigify (DEF-*), unreal (pelvis, thigh_l,
...), cmu (Hips, LeftUpLeg, ...), smpl (pelvis, left_hip, ...). Without --preset every preset
is tried and the best is kept; when none fits, bones are guessed from names and hierarchy.
A map file is a JSON object {"model body": "source bone"}; model bodies: Pelvis, FemurR/L,
TibiaR/L, TalusR/L, FootThumbR/L, FootPinkyR/L, Spine, Torso, Neck, Head, ShoulderR/L, ArmR/L,
ForeArmR/L, HandR/L ("" unmaps a body).
"""
EPILOG_PREVIEW = """examples:
  sinew preview walk_ref.npz --out walk_sheet.png
  sinew preview run_ref.npz --out run.png --frames 10 --no-muscles
  sinew preview tired_walk/ --out tired_walk.png         (a take: its folder or take.npz)
  sinew preview tired_walk/take.npz --out tired_walk.gif  (a video; .mp4 needs ffmpeg)
"""


def _summary_lines(ref, out: Path | None) -> list[str]:
    from .calibration import describe
    from .checks import summary_lines
    from .cleanup import describe as repaired

    s = ref.summary()
    m = ref.meta
    lines = [
        f"source      {m.get('source', '')}",
        f"mapping     {s['mapped_bones']} bodies ({s['preset']})",
        f"frames      {s['frames']} at {s['fps']:g} Hz ({s['seconds']:.2f} s)",
        f"scale       {s['scale']:.4f} (model/source leg length), ground offset {100 * m['ground_offset_m']:+.1f} cm",
        f"root speed  {s['root_speed_mps']:.2f} m/s",
        f"foot skate  {s['foot_skate_cm']:.3f} cm per contact frame ({s['foot_skate_cm_per_s']:.1f} cm/s)",
        f"lowest foot {s['lowest_foot_min_cm']:+.1f} .. {s['lowest_foot_max_cm']:+.1f} cm (mean {s['lowest_foot_mean_cm']:+.1f})",
    ]
    if m.get("calibration"):
        lines.append(f"calibration {describe(m['calibration'])}")
    pose = m.get("source_pose")
    if pose and pose.get("frame") is not None:
        at = pose["frame"] / float(m.get("source_fps") or 1.0)
        lines.append(f"aligned on  the clip at {at:.2f} s (frame {pose['frame']}): the skeleton's rest pose does not "
                     "stand (joint axes along the bones); each foot on its flattest stance frame")
    if m.get("repaired"):
        lines.append(f"repaired    {repaired(m['repaired'])}")
    lines += [f"check       {line}" for line in summary_lines(m.get("checks"))]
    if out is not None:
        lines.append(f"reference   {out}")
    return lines


def cmd_retarget(args) -> int:
    from ..atomic import check_out_file
    from ..errors import InputFileError
    from ..progress import Progress
    from ..rig import load_rig
    from .bvh import read_bvh
    from .retarget import Retargeter

    clip = Path(args.clip)
    if clip.suffix.lower() != ".bvh":
        raise InputFileError(clip, "expected a .bvh file (armatures are retargeted from Blender)")
    out = check_out_file(Path(args.out) if args.out else Path(clip.stem + "_ref.npz"), suffixes=(".npz",), inputs=[clip])
    motion = read_bvh(clip, units=args.units, up=args.up)
    rig = load_rig(args.rig)
    rt = Retargeter.build(rig, motion.skeleton, preset=args.preset, mapping=args.map, motion=motion)
    with Progress("retargeting", 1.0) as bar:
        ref = rt.to_model(motion, fps=args.fps, source=str(clip), progress=bar.update,
                          keep_calibration=args.keep_calibration)
    ref.save(out)
    summary = dict(ref.summary(), ground_offset_m=round(ref.meta["ground_offset_m"], 5),
                   calibration=ref.meta["calibration"], out=str(out))
    lines = _summary_lines(ref, out)
    print("\n".join(lines))
    if args.json:
        print(json.dumps(summary))
    return 0


def cmd_preview(args) -> int:
    from ..atomic import FIGURE_SUFFIXES, check_out_file
    from ..npzfile import file_format
    from ..rig import load_rig
    from .preview import VIDEO_SUFFIXES, contact_sheet
    from .reference import load_reference

    source = Path(args.reference)
    if source.is_dir():  # a take's folder (sinew simulate --out)
        source = source / "take.npz"
    if file_format(source) == "sinew-take":
        return _preview_take(args, source)
    if Path(args.out).suffix.lower() in VIDEO_SUFFIXES:
        raise ParameterError("--out", f"{args.out}: a video is made of a take (sinew simulate's take.npz); "
                             f"{args.reference} is not one: write a contact sheet (.png) of it instead")
    check_out_file(args.out, suffixes=FIGURE_SUFFIXES, inputs=[args.reference])
    ref = load_reference(args.reference)
    rig = load_rig(ref.meta.get("rig", "human284") if args.rig is None else args.rig)
    out = contact_sheet(ref, rig, args.out, frames=args.frames, muscles=not args.no_muscles)
    summary = dict(out=str(out), frames=args.frames, reference=str(args.reference))
    print(f"contact sheet {out}")
    if args.json:
        print(json.dumps(summary))
    return 0


def _preview_take(args, source: Path) -> int:
    """sinew preview of a take: a contact sheet, or a video by --out's suffix."""
    from ..atomic import FIGURE_SUFFIXES, check_out_file
    from ..rig import load_rig
    from ..take import load_take
    from .preview import VIDEO_SUFFIXES, take_sheet, take_video

    out = check_out_file(args.out, suffixes=FIGURE_SUFFIXES + VIDEO_SUFFIXES, inputs=[source])
    take = load_take(source)
    if take.num_frames < 1:
        raise InputFileError(source, "the take has no frames to draw")
    rig = load_rig(take.meta.get("rig", "human284") if args.rig is None else args.rig)
    if out.suffix.lower() in VIDEO_SUFFIXES:
        from ..progress import Progress

        with Progress("drawing the video", 1.0) as bar:  # ~0.1 s a frame: a minute's take takes a while
            out, every = take_video(take, rig, out, progress=bar.update)
        what = f"video {out} ({-(-take.num_frames // every)} frames at {take.fps / every:g} fps"
        what += f": one recorded frame in {every})" if every > 1 else ")"
    else:
        out, every = take_sheet(take, rig, out, frames=args.frames), None
        what = f"contact sheet {out}"
    print(what)
    if args.json:
        print(json.dumps(dict(out=str(out), take=str(source), frames=take.num_frames, every=every)))
    return 0


def add_retarget_parser(subparsers) -> argparse.ArgumentParser:
    from .presets import PRESET_NAMES

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
    p.add_argument("--up", choices=("y", "z"), default="y", help="the file's up axis (default y)")
    p.add_argument("--fps", type=number("--fps", positive=True, hi=10000.0), default=120.0, help="reference frame rate (default 120, the physics rate)")
    p.add_argument("--keep-calibration", action="store_true",
                   help="keep a calibration pose at the start of the clip (T- or A-pose frames that jump to "
                   "the motion; skipped by default, and said so)")
    p.add_argument("--rig", default="human284", help="rig name or path (default: human284)")
    p.add_argument("--out", default=None, metavar="REF.npz", help="reference file to write (default: CLIP_ref.npz here)")
    p.add_argument("--json", action="store_true", help="print one JSON summary as the last line")
    p.set_defaults(func=cmd_retarget)
    return p


def add_preview_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "preview", help="contact sheet of a reference, or a contact sheet or video of a take",
        epilog=EPILOG_PREVIEW, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Draw evenly spaced frames of a reference trajectory from the side and the "
        "front, skeleton as sticks and the 284 muscles as thin lines coloured by body part. Given a "
        "take (sinew simulate's folder or its take.npz), draw the simulated body with its muscles "
        "coloured by activation and the reference as a grey ghost, as a contact sheet or, with "
        "--out ending in .gif or .mp4, a video of the whole take.")
    p.add_argument("reference", metavar="REF.npz|TAKE", help="reference written by `sinew retarget`, or a take")
    p.add_argument("--out", default="sheet.png", help="picture to write (default sheet.png); a take also "
                   "as a video: .gif, or .mp4 where ffmpeg is installed")
    p.add_argument("--frames", type=number("--frames", 1, 40, integer=True), default=8, help="frames to show (default 8)")
    p.add_argument("--no-muscles", action="store_true", help="draw the skeleton only")
    p.add_argument("--rig", default=None, help="rig name or path (default: the one in the reference)")
    p.add_argument("--json", action="store_true", help="print one JSON summary as the last line")
    p.set_defaults(func=cmd_preview)
    return p
