"""`sinew train` and `sinew export-policy` (CLI.md). The only commands that import torch,
and only inside the command functions, so `sinew --help` and the other commands stay light.

`sinew` (engine/commands/main.py) finds them through the entry points "sinew.commands"
(pyproject.toml): add_train_parser(sub); add_export_parser(sub)
"""
from __future__ import annotations

import argparse
import json
import sys

EPILOG_TRAIN = """examples:
  sinew train --config tiny --out runs/tiny                  # CI-sized: under a minute on 2 cores
  sinew train --config training/configs/walk_cpu.toml --out runs/walk --iterations 200
  sinew train --config paper --out runs/paper                # the paper's sizes (GPU)
  sinew train --out runs/walk --resume --iterations 400      # continue exactly where it stopped
  sinew train --config heading --out runs/walk --resume      # add the heading/speed task policy
  sinew train --config tiny --out runs/tiny --json           # summary as JSON on the last line
  sinew train --config stand --out runs/stand                # DAgger from the stand controller (~12 min)
  sinew train --config walk --out runs/walk_dagger           # DAgger from the balanced tracker (~1 h)

--config takes a TOML path or a name from training/configs (tiny, walk_cpu, paper, heading,
stand, walk); in its clip paths ${shared_motion} is the reference motion folder:
$SINEW_MOTION_DIR, or else ../shared/reference/mass/motion beside a source checkout.
A config with a [dagger] table teaches the policy from an expert controller instead
(training/dagger.py: the stand controller holding the clip's CLIP@SECONDS pose, or with
expert = "balance" the tracking controller steered by the balance planner, walking the clip
with no residual); --iterations then counts DAgger rounds (in all, also on --resume).
The run folder gets checkpoint.pt, log.csv, learning_curve.png and config.json (a DAgger run
also labels.npz: every expert label, kept for --resume).
Ctrl-C (or SIGTERM) stops after the iteration under way and saves the checkpoint, which
--resume continues; the exit status is then 130 (143 for SIGTERM). A resumed run keeps its
own settings: of a --config it takes the schedule (iterations, checkpoint_every,
eval_every, workers, max_seconds; a DAgger run's rounds and workers) and, for a run without
[dagger], a [task] table; any other setting the config changes is named on stderr, the
run's value and the config's, and not applied.
"""

EPILOG_EXPORT = """examples:
  sinew export-policy runs/walk --out walk_policy.npz
  sinew export-policy runs/walk/checkpoint.pt --out walk_policy.npz --json
  sinew simulate --clip walk.bvh:10 --controller policy --policy walk_policy.npz

The .npz holds a JSON meta (format sinew-policy, version, the rig and its fingerprint),
normalisation statistics and the networks' weights; the engine loads it without torch.
"""


def add_train_parser(subparsers) -> argparse.ArgumentParser:
    from engine.options import add_force

    p = subparsers.add_parser("train", help="train a MuscleVAE policy (torch)",
                              description="Train a MuscleVAE policy (MuscleVAE Algorithm 1): rollouts in "
                              "the simulator, a learned world model, prior/posterior/policy trained "
                              "through it; with a [task] table, the heading/speed policy (appendix B.3); "
                              "with a [dagger] table, taught by an expert controller (DAgger).",
                              epilog=EPILOG_TRAIN, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", help="TOML config path or name in training/configs (required unless --resume)")
    p.add_argument("--out", default=None, help="run folder (default runs/<config name>)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its checkpoint")
    add_force(p, "a run already in --out is continued with --resume, and replaced only with --force, which "
                 "removes its checkpoint, log, curves, config and labels first")
    p.add_argument("--iterations", type=int, default=None, help="total iterations to reach (overrides the config)")
    p.add_argument("--workers", type=int, default=None, help="rollout worker processes (0 = in this process)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on the last line")
    p.set_defaults(func=cmd_train)
    return p


def add_export_parser(subparsers) -> argparse.ArgumentParser:
    from engine.options import add_force

    p = subparsers.add_parser("export-policy", help="write a trained policy as a .npz the engine runs",
                              description="Export a training run (or checkpoint) to a versioned policy "
                              ".npz for the numpy PolicyController.", epilog=EPILOG_EXPORT,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="run folder or checkpoint.pt")
    p.add_argument("--out", required=True, help="policy file to write (.npz)")
    add_force(p)
    p.add_argument("--json", action="store_true", help="print the summary as JSON on the last line")
    p.set_defaults(func=cmd_export)
    return p


def _emit(summary: dict, as_json: bool, lines: list[str]) -> None:
    for line in lines:
        print(line)
    if as_json:
        print(json.dumps(summary))


def cmd_train(args) -> int:
    from engine.interrupt import stop_on_signals

    with stop_on_signals() as stop:  # Ctrl-C / SIGTERM: stop after this iteration, keep the checkpoint
        return _train(args, stop)


def _train(args, stop) -> int:
    from pathlib import Path

    from engine.atomic import check_out_dir
    from engine.commands.sample_data import motion_dir
    from engine.errors import ParameterError

    from .config import load_config

    if args.iterations is not None and args.iterations < 0:
        raise ParameterError("iterations", f"must be >= 0, got {args.iterations}")
    if args.workers is not None and args.workers < 0:
        raise ParameterError("workers", f"must be >= 0, got {args.workers}")
    # ${shared_motion}: found on use; on --resume the run keeps its own clips (heading.toml lists none)
    cfg = load_config(args.config, motion_dir, resume=args.resume) if args.config else None
    if not args.resume and cfg is None:
        raise ParameterError("config", "give --config (or --resume with --out)")
    if args.resume and args.force:
        raise ParameterError("force", "replaces the run in --out, which --resume continues: give one of them")
    if args.resume and not (args.out and Path(args.out).is_dir()):  # before check_out_dir creates it
        raise ParameterError("resume", f"no run in {args.out or '(no --out given)'}: give --out the folder of the run to continue")
    out = check_out_dir(Path(args.out) if args.out else Path("runs") / (cfg.name if cfg else "run"))
    import torch  # noqa: F401  (only this command and export-policy import torch)

    from .trainer import CHECKPOINT, Trainer, load_checkpoint

    if args.resume and not (out / CHECKPOINT).is_file():
        raise ParameterError("resume", f"no checkpoint in {out}; train it first")
    older = [] if args.resume else _run_files(out)
    if older and not args.force:
        raise ParameterError("out", f"{out} already holds a run ({', '.join(f.name for f in older)}); use --resume, "
                                    "another --out, or --force to replace it")
    ck = load_checkpoint(out) if args.resume else None  # read once (a model-based run's holds its replay buffer)
    for f in older:  # --force: the run there goes (the folder's other files stay)
        f.unlink()
    if ck is not None and cfg is not None:
        from .config import config_from_dict, resume_ignores

        ignored = resume_ignores(config_from_dict(ck["config"]), cfg)
        if ignored:
            print(f"sinew train --resume: the run in {out} keeps its own settings; of {cfg.path} it takes the "
                  f"schedule{'' if ck['config'].get('dagger') else ' and a [task] table'} only, so these are not "
                  f"changed: {'; '.join(ignored)}", file=sys.stderr)
    if (cfg is not None and cfg.dagger is not None) or (ck is not None and ck["config"].get("dagger")):
        return _train_dagger(args, cfg, out, stop, ck)
    if args.resume:
        if cfg is not None and args.iterations is not None:
            cfg.iterations = args.iterations
        tr = Trainer.resume(out, cfg, checkpoint=ck)
    else:
        tr = Trainer(cfg, out)
    if args.workers is not None:
        tr.cfg.workers = args.workers
    total = args.iterations if args.iterations is not None else tr.cfg.iterations
    s = tr.train(total, stop=stop)
    lines = [f"trained {s['iterations']} iterations in {s['seconds']:.1f} s -> {s['out']}",
             f"world-model loss {s['world_model_loss']}, VAE loss {s['vae_loss']}, "
             f"8-step error {s['wm_err8_cm']} cm",
             f"log {out / 'log.csv'}, curves {out / 'learning_curve.png'}"]
    if s.get("task_iterations"):
        lines.append(f"heading task policy: {s['task_iterations']} iterations")
    _emit(s, args.json, lines)
    if stop.requested:
        from engine.interrupt import stopped_line

        print(stopped_line("train", stop, f"after iteration {tr.iteration} of {total}",
                           f"the checkpoint {out / CHECKPOINT} (continue with: sinew train --out {out} --resume)"),
              file=sys.stderr)
        return stop.exit_code
    return 0


def _run_files(out) -> list:
    """The files of a run already in the folder `out`: what `sinew train` writes there."""
    from .dagger import LABELS
    from .log import LOG, PLOT
    from .trainer import CHECKPOINT

    return [out / name for name in (CHECKPOINT, LOG, PLOT, "config.json", LABELS) if (out / name).is_file()]


def _train_dagger(args, cfg, out, stop, checkpoint=None) -> int:
    """A config with a [dagger] table: the policy taught by an expert controller (training/dagger.py);
    `checkpoint`, the run's checkpoint when resuming (already read)."""
    from .dagger import CHECKPOINT, DaggerTrainer

    tr = DaggerTrainer.resume(out, cfg, checkpoint) if args.resume else DaggerTrainer(cfg, out)
    s = tr.train(args.iterations, stop=stop)
    error = {"offset": f"RMS offset error {s['force_err_f0']} x {tr.cfg.action_scale:g} rad",
             "activation": f"RMS activation error {s['force_err_f0']}"}.get(tr.cfg.action,
                                                                           f"RMS force error {s['force_err_f0']} f0")
    _emit(s, args.json, [f"trained {s['rounds']} DAgger rounds in {s['seconds']:.1f} s -> {s['out']}",
                         f"{s['labels']} expert labels, {error}; the policy alone "
                         f"stood {s['eval_stood_s']} s of {s['eval_seconds']:g} (mean of its starts); best: "
                         f"round {s['best_round']}, {s['best_eval_stood_s']} s (what export-policy writes)",
                         f"log {out / 'log.csv'}, curves {out / 'learning_curve.png'}"])
    if stop.requested:
        from engine.interrupt import stopped_line

        print(stopped_line("train", stop, f"after round {tr.round}",
                           f"the checkpoint {out / CHECKPOINT} (continue with: sinew train --out {out} --resume)"),
              file=sys.stderr)
        return stop.exit_code
    return 0


def cmd_export(args) -> int:
    import torch  # noqa: F401

    from engine.control.policy import FORMAT
    from engine.npzfile import check_out_npz

    from .export import export_policy

    # not over the run's checkpoint, config or log, nor (without --force) a reference
    check_out_npz(args.out, FORMAT, "policy", inputs=[args.run], force=args.force)
    s = export_policy(args.run, args.out)
    _emit(s, args.json, [f"wrote {s['out']}: {s['parameters']} parameters, latent {s['latent_dim']}, "
                         f"rig {s['rig']}" + (", with heading policy" if s["has_task"] else "")])
    return 0


def main(argv=None) -> int:  # for `python -m training.commands` while the CLI is being wired
    from engine.errors import SinewError

    ap = argparse.ArgumentParser(prog="sinew")
    sub = ap.add_subparsers(dest="command", required=True)
    add_train_parser(sub)
    add_export_parser(sub)
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except SinewError as e:
        print(f"sinew {args.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
