"""A training run's log (one CSV row per iteration, world-model and task rows alike) and its
learning-curve figure."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from engine.atomic import atomic_open
from engine.figures import save

LOG = "log.csv"
PLOT = "learning_curve.png"
EVAL_HORIZON = 8  # the world model's n-step prediction error reported in the log (wm_err8_cm)
LOG_COLUMNS = ["iteration", "samples_total", "seconds", "collect_s", "wm_s", "vae_s", "samples_per_s",
               "wm_updates_per_s", "vae_updates_per_s", "wm_loss", "wm_err8_cm", "vae_loss", "rec", "kl",
               "act", "train_track_err_cm", "episodes", "falls", "eval_track_err_cm", "eval_fell_at_s",
               "task_loss", "eval_joint_err_deg", "eval_root_err_cm", "eval_falls",
               "eval_joint_err_early_deg", "eval_track_err_early_cm", "wm_action_cos", "target", "imitation_target"]


def append_row(path: Path, row: dict) -> None:
    """One row at the end of the log (its header first in a new file); columns a row lacks
    are NaN."""
    new = not path.exists()
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, LOG_COLUMNS)
        if new:
            w.writeheader()
        w.writerow({k: row.get(k, float("nan")) for k in LOG_COLUMNS})


def drop_rows_after(path: Path, iteration: int, task_iteration: int) -> None:
    """Drop log rows written after the checkpoint (a resumed run writes them again)."""
    if not path.exists():
        return
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    keep = []
    for r in rows:
        it = float(r["iteration"])
        is_task = r.get("task_loss") not in ("", "nan", None)
        if (not is_task and it <= iteration) or (is_task and it <= task_iteration):
            keep.append(r)
    with atomic_open(path, "w", newline="") as f:
        w = csv.DictWriter(f, LOG_COLUMNS)
        w.writeheader()
        w.writerows(keep)


def read_log(path) -> list[dict]:
    with open(path, newline="") as f:
        return [{k: float(v) if v not in ("", None) else float("nan") for k, v in r.items()}
                for r in csv.DictReader(f)]


def _legend(a) -> None:
    if a.get_legend_handles_labels()[0]:  # a panel with nothing to plot yet gets no legend
        a.legend(fontsize=8)


def _interp_extrapolate(v, x, y):
    """np.interp, continued past both ends along the line through the end points (an axis
    mapping must stay monotonic beyond the data, or its tick labels pile up at the ends)."""
    v = np.asarray(v, float)
    slope = (y[-1] - y[0]) / (x[-1] - x[0])
    return np.where(v < x[0], y[0] + (v - x[0]) * slope,
                    np.where(v > x[-1], y[-1] + (v - x[-1]) * slope, np.interp(v, x, y)))


def plot_log(log_path, out_path) -> Path:
    """Learning curves against iterations (wall-clock minutes on the top axis): the world
    model's loss and 8-step error, the VAE loss terms, throughput, and the tracking metric in
    the real simulator (Collector.evaluate: joint-angle, root and body errors, time to fall),
    with the untrained policy's values (iteration 0) as dashed horizontal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows_all = read_log(log_path)
    rows = [r for r in rows_all if not np.isfinite(r.get("task_loss", np.nan))]
    task = [r for r in rows_all if np.isfinite(r.get("task_loss", np.nan))]
    get = lambda k, rs=rows: np.array([r.get(k, np.nan) for r in rs], float)
    it = get("iteration")
    minutes = get("seconds") / 60.0
    base = rows[0] if rows and rows[0]["iteration"] == 0 else {}
    fig, ax = plt.subplots(2, 3 + bool(task), figsize=(17 + 4 * bool(task), 8))

    def top_axis(a):
        ok = np.isfinite(minutes) & np.isfinite(it)
        x, y = it[ok], minutes[ok]
        if len(x) >= 2 and np.all(np.diff(x) > 0) and np.all(np.diff(y) >= 0) and y[-1] > y[0]:
            sec = a.secondary_xaxis("top", functions=(lambda v: _interp_extrapolate(v, x, y),
                                                      lambda v: _interp_extrapolate(v, y, x)))
            sec.set_xlabel("wall-clock minutes")

    def ev_panel(a, k, label, unit, scale=1.0):
        v = get(k) * scale
        ok = np.isfinite(v) & (it > 0)
        a.plot(it[ok], v[ok], "o-", ms=3, label="trained (at that iteration)")
        b = base.get(k, np.nan) * scale
        if np.isfinite(b):
            a.axhline(b, color="k", ls="--", label=f"untrained policy ({b:.3g} {unit})")
        a.set_ylabel(f"{label} ({unit})")
        a.set_xlabel("iteration")
        _legend(a)
        top_axis(a)

    a = ax[0, 0]
    a.plot(it, get("wm_err8_cm"), "r.-", label=f"{EVAL_HORIZON}-step body position error (cm), fresh samples")
    a.set_ylabel("cm")
    a.set_xlabel("iteration")
    a2 = a.twinx()
    a2.plot(it, get("wm_loss"), color="gray", alpha=0.6, label="world-model loss L_w")
    a2.set_yscale("log")
    a.set_title("world model")
    a.legend(loc="upper right", fontsize=8)
    a2.legend(loc="center right", fontsize=8)
    v = get("wm_action_cos")
    ok = np.isfinite(v)
    if ok.any():  # the model's answer to a change of action against the simulator's
        a3 = a.twinx()
        a3.spines["right"].set_position(("axes", 1.15))
        a3.plot(it[ok], v[ok], "g^-", ms=3, label="action response: cosine with the simulator's")
        a3.set_ylim(-0.2, 1.0)
        a3.legend(loc="lower left", fontsize=8)
    top_axis(a)
    a = ax[0, 1]
    for k, lab in (("vae_loss", "vae_loss"), ("rec", "rec"), ("kl", "kl"), ("act", "act"), ("target", "target"),
                   ("imitation_target", "target at real states (model-free updates)")):
        v = get(k)
        if np.isfinite(v).any():
            a.plot(it, v, label=lab)
    a.set_yscale("log")
    parts = [t for k, t in (("vae_loss", "MuscleVAE losses (through the world model)"),
                            ("imitation_target", "L_target at real states")) if np.isfinite(get(k)).any()]
    a.set_title(" and ".join(parts) or "MuscleVAE losses")
    a.set_xlabel("iteration")
    _legend(a)
    a = ax[0, 2]
    for k, lab in (("samples_per_s", "simulation samples / s (collection)"),
                   ("wm_updates_per_s", "world-model updates / s"), ("vae_updates_per_s", "VAE updates / s")):
        a.plot(it, get(k), label=lab)
    a.set_yscale("log")
    a.set_title("throughput")
    a.set_xlabel("iteration")
    _legend(a)
    def second_series(a, k, label, base_label):
        """A second eval metric on a panel, with the untrained policy's value dotted."""
        v = get(k)
        ok = np.isfinite(v) & (it > 0)
        if not ok.any():
            return
        a.plot(it[ok], v[ok], "s-", ms=3, color="C2", label=label)
        if np.isfinite(base.get(k, np.nan)):
            a.axhline(base[k], color="C2", ls=":", label=base_label)
        _legend(a)

    a = ax[1, 0]
    ev_panel(a, "eval_joint_err_deg", "mean joint-angle error", "deg")
    second_series(a, "eval_joint_err_early_deg", "first second of each start", "untrained: first second")
    a.set_title("real-simulator tracking: joint angles (falls charged)")
    a = ax[1, 1]
    ev_panel(a, "eval_root_err_cm", "root position error", "cm")
    second_series(a, "eval_track_err_cm", "mean body position error (cm)", "untrained: body position error")
    a.set_title("real-simulator tracking: positions (falls charged)")
    a = ax[1, 2]
    ev_panel(a, "eval_fell_at_s", "mean time to fall", "s")
    a.set_title("real-simulator tracking: time to fall")
    if task:
        a = ax[0, 3]
        a.plot(get("iteration", task), get("task_loss", task))
        a.set_title("heading task loss (eq. 44)")
        ax[1, 3].axis("off")
    return save(fig, out_path, dpi=90)
