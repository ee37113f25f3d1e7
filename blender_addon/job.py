"""The background job: one engine.take.simulate call in a worker thread that the modal
operator polls and cancels (the batch script runs it in its own thread). No bpy here: the
worker never touches Blender's data."""
from __future__ import annotations

import threading
import time

from .engine.errors import SinewError
from .engine.interrupt import StopFlag
from .model import load_model


class Cancelled(SinewError):
    """The user cancelled the simulation."""


def fatigue_params(scale=1.0, F=0.01, R=0.002, r=2.0):
    from .engine.fatigue import FatigueParams

    return FatigueParams(F=float(F), R=float(R), r=float(r), scale=float(scale))


class SimulationJob:
    """One engine.take.simulate call, run in a worker thread so a modal operator can poll it
    and cancel it. The worker never touches bpy; nothing is written to the scene until
    `bake_take` is called with the finished take, so a cancelled job leaves nothing behind.
    `retargeter`: the armature's Retargeter the run was checked and its action clips made
    with, handed on to the bake (None: the bake builds one).

    Cancelling sets the job's engine.interrupt.StopFlag, which the simulation reads once per
    step (the path Ctrl-C takes on the command line): the take stops there, and `run` raises
    Cancelled, or returns the partial take with keep_partial (the batch script on Ctrl-C).
    """

    def __init__(self, clips, fps: int, controller="tracking", fatigue=None, residual=0.0, seed=0,
                 backend="mujoco", policy=None, pushes=(), pace=1.0, mode="track", noise_scale=None, goals=(),
                 balance=None, strength=None, retargeter=None, wait=True):
        self.clips, self.fps, self.controller, self.balance = clips, int(fps), controller, balance
        self.strength = strength
        self.mode, self.noise_scale = mode, noise_scale
        self.fatigue, self.residual, self.seed, self.pace, self.wait = fatigue, residual, seed, pace, wait
        # prepare's engine.push.CheckedPushes and engine.control.goals.CheckedGoals kept as they
        # are: the take does not check them again
        self.backend, self.policy = backend, policy
        self.pushes = pushes if isinstance(pushes, list) else list(pushes)
        self.goals = goals if isinstance(goals, list) else list(goals)
        self.retargeter = retargeter
        self.fraction = 0.0
        self.take = None
        self.error: BaseException | None = None
        self.stop = StopFlag()
        self._thread: threading.Thread | None = None
        self.started = self.finished = None

    # the work
    def _progress(self, fraction: float) -> None:
        self.fraction = float(min(max(fraction, 0.0), 1.0))

    def run(self, keep_partial: bool = False):
        """Run to the end (or a cancel) in the calling thread; returns the take (or raises)."""
        from .engine import take as take_mod
        from .engine.control.tracking import TrackingParams

        self.started = time.perf_counter()
        params = TrackingParams(residual=float(self.residual), pace=float(self.pace), sync=bool(self.wait),
                                balance=self.balance)
        kwargs = dict(controller=self.controller, fatigue=self.fatigue, backend=self.backend,
                      seed=int(self.seed), fps=self.fps, params=params, pushes=self.pushes, mode=self.mode,
                      noise_scale=self.noise_scale, goals=self.goals, strength=self.strength)
        if self.policy:
            kwargs["policy"] = self.policy
        # the engine's simulate holds BLAS to one thread (threadpoolctl): Blender starts numpy
        # before any add-on, so OPENBLAS_NUM_THREADS set now would be too late
        take = take_mod.simulate(load_model(), self.clips, progress=self._progress, stop=self.stop, **kwargs)
        if self.stop.requested and not keep_partial:
            raise Cancelled(f"simulation cancelled at t = {take.meta['simulated_seconds']:.2f} s")
        self.take = take
        self.fraction = 1.0
        self.finished = time.perf_counter()
        return self.take

    def _worker(self):
        try:
            self.run()
        except BaseException as e:  # read by the modal operator once the thread is done
            self.error = e

    # the modal side
    def start(self) -> None:
        self._thread = threading.Thread(target=self._worker, name="sinew-simulate", daemon=True)
        self._thread.start()

    def cancel(self, wait: bool = True) -> None:
        self.stop.request("cancelled")
        if wait and self._thread is not None:
            self._thread.join()

    @property
    def done(self) -> bool:
        return self._thread is not None and not self._thread.is_alive()
