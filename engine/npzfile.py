"""Sinew's data files (rigs, references, takes, policies): plain .npz arrays plus one JSON
string `meta` carrying `format` and `version`. Written and read without pickle; reading
refuses a missing, unreadable, foreign or other-version file with a message naming it."""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from .atomic import atomic_open, check_out_file
from .errors import InputFileError


def write_npz(path, fmt: str, version: int, meta: dict, arrays: dict, compress: bool = False) -> Path:
    """Write `arrays` and `meta` (with format and version) to exactly `path`, atomically
    (engine.atomic: a failure midway leaves the previous file intact)."""
    path = Path(path)
    meta = dict(meta, format=fmt, version=version)
    save = np.savez_compressed if compress else np.savez
    with atomic_open(path, "wb") as f:  # a file object: np.savez would append .npz to other suffixes
        save(f, meta=np.array(json.dumps(meta)), **arrays)
    return path


def file_format(path) -> str | None:
    """The format named in a Sinew .npz's meta ("sinew-take", ...), or None when the file is
    not one (missing, unreadable, no meta): read_npz then says what is wrong."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError, RuntimeError, json.JSONDecodeError):
        return None
    return meta.get("format") if isinstance(meta, dict) else None


def check_out_npz(path, fmt: str, what: str, option: str = "--out", inputs=(), force: bool = False) -> Path:
    """check_out_file for a Sinew .npz of format `fmt` (`what` names it: "reference", ...):
    a file already there of another kind (a policy where a reference would go, anyone's own
    arrays) is refused unless `force`, not written over; one of the same kind is replaced."""

    def held(p):
        got = file_format(p)
        if got == fmt:
            return None
        return (f"holds a Sinew {got.removeprefix('sinew-')}" if got else "is not a Sinew file") + \
            f", and this command writes a {what}"

    return check_out_file(path, option, suffixes=(".npz",), inputs=inputs, held=held, force=force)


def read_npz(path, fmt: str, version: int, what: str, hint: str = "") -> tuple[dict, dict]:
    """(meta, arrays) of a Sinew file of format `fmt` and version `version`.

    `what` names the kind of file in messages ("rig", "reference", ...); `hint` is added
    to the not-found and wrong-version messages (how to make a current one)."""
    path = Path(path)
    tail = f" ({hint})" if hint else ""
    if not path.is_file():
        raise InputFileError(path, f"{what} file not found{tail}")
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError, RuntimeError) as e:
        raise InputFileError(path, f"not a readable {what} file, truncated or corrupt "
                             f"({type(e).__name__}: {e})") from None
    if "meta" not in data:
        raise InputFileError(path, f"missing 'meta' entry: not a Sinew {what} file")
    try:
        meta = json.loads(str(data.pop("meta")))
    except (json.JSONDecodeError, TypeError) as e:
        raise InputFileError(path, f"'meta' is not valid JSON ({e})") from None
    if not isinstance(meta, dict) or meta.get("format") != fmt:
        got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise InputFileError(path, f"not a Sinew {what} file (format {got!r}, expected {fmt!r})")
    if meta.get("version") != version:
        raise InputFileError(path, f"{what} format version {meta.get('version')!r}; this Sinew reads "
                             f"version {version}{tail}")
    return meta, data
