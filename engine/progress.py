"""A small progress bar on stderr for work longer than a couple of seconds."""
from __future__ import annotations

import sys
import time


class Progress:
    """`with Progress("simulating", total) as bar: bar.update(n)`; silent when stderr is not a
    terminal, and for work that ends within `delay` seconds."""

    def __init__(self, label: str, total: float, delay: float = 2.0, stream=None):
        self.label, self.total, self.delay = label, max(float(total), 1e-12), delay
        self.stream = stream or sys.stderr
        self.start = time.perf_counter()
        self.done = 0.0
        self._last = 0.0
        self._shown = False
        self.enabled = hasattr(self.stream, "isatty") and self.stream.isatty()

    def __enter__(self) -> "Progress":
        return self

    def update(self, done: float) -> None:
        self.done = done
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self.start < self.delay or now - self._last < 0.2:
            return
        self._last = now
        frac = min(self.done / self.total, 1.0)
        bar = "#" * int(30 * frac)
        self.stream.write(f"\r{self.label} [{bar:<30}] {100 * frac:5.1f}%")
        self.stream.flush()
        self._shown = True

    def __exit__(self, *exc) -> None:
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()
