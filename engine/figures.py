"""Writing a figure: matplotlib's pyplot on the Agg backend (imported when a figure is
drawn, never at import), and one save that lays out, writes atomically (engine.atomic) and
closes. The command line's plots (engine/commands), the preview (engine/motion/preview.py)
and training's learning curves draw through it; the Blender extension never imports it."""
from __future__ import annotations

from pathlib import Path

from .atomic import atomic_path


def pyplot():
    """matplotlib.pyplot on the Agg backend (no window, any thread)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, path, layout: bool = True, **kwargs) -> Path:
    """Lay out, write (atomically, engine.atomic) and close a figure; creates the folder."""
    if layout:
        fig.tight_layout()
    path = Path(path)
    try:
        with atomic_path(path) as tmp:  # the temporary name keeps the suffix savefig goes by
            fig.savefig(tmp, **kwargs)
    finally:
        pyplot().close(fig)
    return path
