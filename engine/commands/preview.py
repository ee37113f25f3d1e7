"""`sinew preview`: its parser and the functions it runs (the drawing: engine/motion/preview.py).

engine/commands/main.py wires it in with add_preview_parser(sub); the parser sets `func`,
which takes the parsed args and returns an exit code.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import InputFileError, ParameterError
from ..options import add_force, number

EPILOG_PREVIEW = """examples:
  sinew preview walk_ref.npz --out walk_sheet.png
  sinew preview run_ref.npz --out run.png --frames 10 --no-muscles
  sinew preview tired_walk/ --out tired_walk.png         (a take: its folder or take.npz)
  sinew preview tired_walk/take.npz --out tired_walk.gif  (a video; .mp4 needs ffmpeg)
"""


def cmd_preview(args) -> int:
    from ..atomic import FIGURE_SUFFIXES, check_out_file
    from ..npzfile import file_format
    from ..rig import load_rig
    from ..motion.preview import VIDEO_SUFFIXES, contact_sheet
    from ..motion.reference import load_reference

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
    from ..motion.preview import VIDEO_SUFFIXES, take_sheet, take_video

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
    add_force(p)
    p.add_argument("--frames", type=number("--frames", 1, 40, integer=True), default=8, help="frames to show (default 8)")
    p.add_argument("--no-muscles", action="store_true", help="draw the skeleton only")
    p.add_argument("--rig", default=None, help="rig name or path (default: the one in the reference)")
    p.add_argument("--json", action="store_true", help="print one JSON summary as the last line")
    p.set_defaults(func=cmd_preview)
    return p
