"""Stopping a long run cleanly: Ctrl-C (SIGINT) or SIGTERM ends it at the next step and
keeps what was done.

A signal may arrive anywhere, inside the QP solver's C code too, so the handler only sets
a flag; the loops (Simulation.run, which a take runs through, and training) read it once
per step (one attribute read) and stop there, and the command writes what it has (a
partial take, the checkpoint) and exits with 128 + the signal number (130, 143). A second signal while
the first is being honoured stops at once (KeyboardInterrupt), for a run that hangs.

    with stop_on_signals() as stop:
        take = simulate(..., stop=stop)
    if stop.requested:
        ...write the partial take...; return stop.exit_code

The Blender operator's cancel sets the same flag (StopFlag.request)."""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopFlag:
    """Asked to stop? `requested` is what the loops read; `signum` names the signal, if any."""

    def __init__(self):
        self.requested = False
        self.signum: int | None = None
        self.reason = ""

    def request(self, reason: str = "stopped", signum: int | None = None) -> None:
        self.signum, self.reason = signum, reason
        self.requested = True

    @property
    def exit_code(self) -> int:
        """128 + the signal number (130 for SIGINT, 143 for SIGTERM); 130 without one."""
        return 128 + (self.signum or signal.SIGINT)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else "a stop request"


@contextmanager
def stop_on_signals(flag: StopFlag | None = None):
    """Route SIGINT and SIGTERM to a StopFlag for the block, then restore the previous
    handlers. Outside the main thread (where Python cannot install handlers) the flag is
    yielded unchanged, for a caller that sets it itself."""
    flag = flag or StopFlag()

    def handler(signum, frame):
        if flag.requested:  # asked twice: stop now
            raise KeyboardInterrupt
        flag.request(f"interrupted by {signal.Signals(signum).name}", signum)

    with _handlers(handler):
        yield flag


@contextmanager
def _handlers(handler, signals=SIGNALS):
    """`handler` for `signals` in the block, the previous handlers restored after it; nothing
    outside the main thread, where Python cannot install handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@contextmanager
def children_ignore_sigint():
    """Processes started in the block ignore SIGINT (an ignored signal stays ignored across
    exec, and Python then installs no KeyboardInterrupt handler): a terminal's Ctrl-C, sent to
    the whole process group, reaches the parent alone, which stops its workers itself."""
    with _handlers(signal.SIG_IGN, (signal.SIGINT,)):
        yield


def forked_worker_signals() -> None:
    """For a pool worker forked from a process that handles signals (stop_on_signals):
    Ctrl-C, sent to the whole process group, is the parent's to handle, and SIGTERM ends the
    worker, as end_pool expects (the inherited handler only sets a flag, so a pool closed
    after a signal, or after its work, would wait on its workers for ever)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def process_pool(workers: int, start: str = "fork", initializer=None, initargs=()):
    """A pool of `workers` processes (a concurrent.futures ProcessPoolExecutor; `start`: the
    multiprocessing start method). Not a multiprocessing Pool: when a worker is killed from
    outside (the OOM killer, kill -9) the executor fails the work in hand with
    BrokenProcessPool, where a Pool waits for it for ever. A forked worker should call
    forked_worker_signals first (its initializer does or is it)."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(workers, mp_context=mp.get_context(start), initializer=initializer, initargs=initargs)


def end_pool(pool) -> None:
    """Shut a process_pool down now: every worker ended (work under way too: a DAgger episode
    may run for minutes), work not started cancelled, and the pool's own thread and processes
    joined before this returns (a broken pool reaps its workers on that thread)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    for p in procs:
        if p.is_alive():
            p.terminate()
    pool.shutdown(wait=True, cancel_futures=True)
    for p in procs:
        p.join()


def stopped_line(command: str, flag: StopFlag, where: str, kept: str) -> str:
    """The one line a command prints when a signal stopped it, e.g. 'sinew simulate: stopped
    by SIGINT at t = 12.30 s of 60.00 s; kept the partial take in out/ (take.npz, ...)'."""
    return f"sinew {command}: stopped by {flag.name} {where}; kept {kept}"


def take_stopped_line(command: str, flag: StopFlag, meta: dict, doing: str, frames: int, kept: str) -> str:
    """stopped_line for a command that simulates a take (engine.take meta) and then writes it
    out: where the signal came (during the simulation, or while `doing` the whole take's
    output) and the take of `frames` frames kept, 'kept' saying where."""
    where = (f"at t = {meta['simulated_seconds']:.2f} s of {meta['planned_seconds']:.2f} s" if meta["interrupted"]
             else f"while {doing} (the take is whole)")
    return stopped_line(command, flag, where, f"the {'partial ' if meta['partial'] else ''}take ({frames} frames) {kept}")


@contextmanager
def forward_signals(proc):
    """SIGINT and SIGTERM sent to this process go on to the child `proc` for the block (start
    it with start_new_session=True, so a terminal's Ctrl-C reaches it once, through here)."""
    def handler(signum, frame):
        if proc.poll() is None:
            proc.send_signal(signum)

    with _handlers(handler):
        yield
