"""`sinew export-policy`: a training checkpoint -> the versioned .npz the engine's numpy
PolicyController loads (engine.control.policy; no pickle, no torch needed to read it)."""
from __future__ import annotations

from pathlib import Path

from engine.control import policy as P
from engine.npzfile import write_npz


def export_policy(run_or_ckpt, out) -> dict:
    """Write the policy file; returns its summary (parameters, latent_dim, path)."""
    from .config import config_from_dict
    from .trainer import Trainer, load_checkpoint

    ck = load_checkpoint(run_or_ckpt)
    cfg = config_from_dict(ck["config"])
    cfg.workers = 0
    run_dir = Path(run_or_ckpt) if Path(run_or_ckpt).is_dir() else Path(run_or_ckpt).parent
    if cfg.dagger is not None:  # taught by an expert (training/dagger.py): networks only
        from .dagger import model_from_checkpoint

        model = model_from_checkpoint(ck, cfg, run_or_ckpt)
    else:
        tr = Trainer.resume(run_dir, truncate_log=False)
        model, cfg = tr.model, tr.cfg
    from .trainer import policy_file_arrays

    training = dict(iterations=int(ck["iteration"]), task_iterations=int(ck["task_iteration"]),
                    seconds=round(float(ck["seconds"]), 1), config=cfg.name, clips=[Path(c).name for c in cfg.clips])
    if ck.get("best"):  # a DAgger run exports its best round
        training.update(dagger_round=int(ck["best"]["round"]), stood_alone_s=float(ck["best"]["eval_stood_s"]))
    arrays, meta = policy_file_arrays(model, cfg, dict(training=training))
    out = write_npz(out, P.FORMAT, P.FORMAT_VERSION, meta, arrays)
    pf = P.load_policy(out, model.rig)  # read back: what we wrote must load
    return dict(parameters=pf.parameters, latent_dim=pf.latent_dim, has_task=pf.has_task,
                rig=meta["rig"]["name"], out=str(out), bytes=out.stat().st_size)
