"""Writing files so that a crash or a kill never leaves half a file where a good one was.

Every file Sinew writes goes to a temporary name beside its target (same folder, so the
same file system) and is renamed into place once complete (`os.replace` is atomic on POSIX
and Windows). A failure midway removes the temporary file and leaves the old target as it
was. Output paths are checked before any work (`check_out_dir`, `check_out_file`).

    with atomic_path("out/take.npz") as tmp:   # any writer that takes a path
        np.savez(tmp, ...)
    write_text("out/report.md", text)
"""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from .errors import OutputPathError

_UMASK = os.umask(0o022)
os.umask(_UMASK)


@contextmanager
def atomic_path(path):
    """Yield a temporary path beside `path` (same suffix, so writers that go by it still
    work); rename it onto `path` when the block ends normally, remove it otherwise."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".part{path.suffix}", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        # mkstemp makes the file private (0600); give it the old file's mode or the usual one
        mode = path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_UMASK
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@contextmanager
def atomic_open(path, mode: str = "w", **kwargs):
    """`open()` on a temporary name beside `path`, renamed into place when the block ends
    normally (the file is flushed and synced to disk first)."""
    with atomic_path(path) as tmp:
        with open(tmp, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())


def write_text(path, text: str, encoding: str = "utf-8") -> Path:
    with atomic_open(path, "w", encoding=encoding) as f:
        f.write(text)
    return Path(path)


def check_out_dir(path, option: str = "--out") -> Path:
    """The output folder `path` exists or is created now, and a file can be written in it;
    otherwise OutputPathError with one line naming the path."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise OutputPathError(p, f"is a file, not a folder (give {option} a folder)")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next((a for a in p.parents if a.exists() and not a.is_dir()), p)
        raise OutputPathError(p, f"cannot create this folder: {blocker} is a file") from None
    except OSError as e:
        raise OutputPathError(p, f"cannot create this folder ({e.strerror or e})") from None
    try:
        with tempfile.TemporaryFile(dir=p):
            pass
    except OSError as e:
        raise OutputPathError(p, f"cannot write in this folder ({e.strerror or e})") from None
    return p


FIGURE_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg", ".webp", ".tif", ".tiff", ".eps")


def check_out_file(path, option: str = "--out", suffixes: tuple[str, ...] = (), inputs=(), held=None,
                   force: bool = False) -> Path:
    """The output file `path` can be written: not a folder, and its folder exists or is
    created now and is writable; with `suffixes`, its name ends in one of them (what the
    command writes: a figure's format goes by it, and a reference written as `walk.bvh`
    would pass for a clip); not one of the command's `inputs` (a command never writes over
    what it reads, not even with --force). With `held`, a function that says what a file
    already at `path` holds when it is of another kind than the command writes (None: the
    same kind, replaced as re-running the command does), such a file is refused unless
    `force` (the command's --force). Otherwise OutputPathError naming the path."""
    p = Path(path)
    if p.is_dir():
        raise OutputPathError(p, f"is a folder; give {option} a file name")
    if suffixes and p.suffix.lower() not in suffixes:
        ends = ", ".join(suffixes[:-1]) + f" or {suffixes[-1]}" if len(suffixes) > 1 else suffixes[0]
        raise OutputPathError(p, f"give {option} a name ending in {ends} (what this command writes)")
    for given in inputs:
        if given is not None and p.exists() and Path(given).exists() and os.path.samefile(p, given):
            raise OutputPathError(p, f"is this command's input, never written over, not even with --force; "
                                     f"give {option} another name (nothing was written)")
    if p.parent.exists() and not p.parent.is_dir():
        raise OutputPathError(p, f"cannot write here: {p.parent} is a file, not a folder")
    check_out_dir(p.parent, option)
    if held is not None and not force and p.is_file():
        other = held(p)
        if other:
            raise OutputPathError(p, f"{other}; give {option} another name (nothing was written), or --force to "
                                     "replace it")
    return p


BLEND_HEADS = (b"BLENDER", b"\x28\xb5\x2f\xfd", b"\x1f\x8b")  # a .blend: plain, zstd- or gzip-compressed


def held_not_blend(path) -> str | None:
    """check_out_file's `held` for a Blender scene: None for a .blend, else what the file is."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(BLEND_HEADS[0]))
    except OSError as e:
        return f"cannot be read ({e.strerror or e}), so it is not known to be a Blender scene"
    return None if head.startswith(BLEND_HEADS) else "is not a Blender file, and this command writes a scene"
