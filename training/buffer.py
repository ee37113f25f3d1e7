"""The training buffer (MuscleVAE Algorithm 1's N_B) and the state dicts read from its windows."""
from __future__ import annotations

import numpy as np
import torch

from .collect import FIELDS, field_shapes


class Buffer:
    """FIFO ring buffer of simulation tuples (N_B): the oldest samples are overwritten first."""

    def __init__(self, capacity: int, B: int, M: int):
        self.capacity = capacity
        self.data = {k: np.zeros((capacity,) + s, np.float32) for k, s in field_shapes(B, M).items()}
        self.seq = np.full(capacity, -1, np.int64)
        self.count = 0

    def __len__(self):
        return int(min(self.count, self.capacity))

    def add(self, data: dict) -> np.ndarray:
        n = len(data["has_next"])
        slots = (self.count + np.arange(n)) % self.capacity
        for k in FIELDS:
            self.data[k][slots] = data[k]
        self.seq[slots] = self.count + np.arange(n)
        self.count += n
        return slots

    def valid_starts(self, length: int, among: np.ndarray | None = None) -> np.ndarray:
        """Slots starting `length` consecutive samples of one episode (has_next on all but the last)."""
        cap = self.capacity
        starts = np.arange(cap) if among is None else among
        s0 = self.seq[starts]
        ok = s0 >= 0
        for k in range(length):
            j = (starts + k) % cap
            ok &= self.seq[j] == s0 + k
            if k < length - 1:
                ok &= self.data["has_next"][j] > 0.5
        return starts[ok]

    def windows(self, starts: np.ndarray, length: int) -> dict:
        idx = (starts[:, None] + np.arange(length)) % self.capacity
        return {k: torch.from_numpy(v[idx]) for k, v in self.data.items()}

    def state_dict(self) -> dict:
        return {"count": self.count, "seq": torch.from_numpy(self.seq.copy()),
                **{f"data.{k}": torch.from_numpy(v.copy()) for k, v in self.data.items()}}

    def load_state_dict(self, d: dict) -> None:
        self.count = int(d["count"])
        self.seq = d["seq"].numpy().copy()
        for k in self.data:
            self.data[k] = d[f"data.{k}"].numpy().copy()


def window_state(w: dict, t: int | None = None) -> dict:
    """A state dict from buffer windows (batch, L, ...) at step t (or all steps)."""
    sel = (lambda v: v[:, t]) if t is not None else (lambda v: v)
    return {k: sel(w[k]) for k in ("pos", "rot", "linvel", "angvel", "MA", "MR", "MF")}


def window_reference(w: dict, t: int) -> dict:
    """The reference's state dict from buffer windows at step t."""
    return {"pos": w["ref_pos"][:, t], "rot": w["ref_rot"][:, t], "linvel": w["ref_linvel"][:, t],
            "angvel": w["ref_angvel"][:, t]}
