"""One driver for every run: the phases, run over step boundaries from a Job's loop or a script's training loader.

A run's phases are the same whoever owns the loop: set-up, warm-up, the
measured window, the speed of light (a Job's only), the probes' after-window
work (the loader ledger's replay), the period scan and the observed steps
(:mod:`perfsuite.harness.observation`). They run at *step boundaries*: each
time the loop asks for its next batch, it calls :meth:`Driver.next_batch`, which
does the phase's work at that boundary, fetches the batch from the
:class:`StepSource` and hands it back (after the last observed step it raises
:class:`Stop`). Two loops call it:

* a Job's (:func:`perfsuite.harness.runner.run`): ``while True:
  job.step(driver.next_batch())`` over a :class:`perfsuite.harness.pipeline.BatchStream`;
* a script's (:mod:`perfsuite.harness.script.drive`): the training DataLoader's
  iterator, as the script sees it, calls it from the script's own ``for``.

So every probe sees one stream: the window's fetch times and the training
process's own loading CPU, the loader iterator (its worker processes) in
``RunContext.batches``, ``after_window`` before any instrumentation. The one
difference is where a boundary is known: a Job's stream never ends an epoch
(it starts the next itself), so a boundary is known before its fetch; a
script's request may end an epoch instead of giving a batch, and then the step
goes on through what the script does between epochs (an evaluation), so its
clock mark is taken back and its observed step's instrumentation stays on
through the fetch, with every probe's modes suspended while the loader runs.

The driver is the only place that synchronises the device, and only at the
edges of the window and of the speed of light.

perfsuite's work at a boundary leaves the global random generators as it found
them, and the speed of light's extra steps leave the job's model, optimizer,
the state its step holds and the generators as they were
(:mod:`perfsuite.harness.state`): the user's training computes what it would
have computed without perfsuite. A script gets no speed of light: its extra
steps could only run through its own loop body, whose effects (a progress bar,
an evaluation, a file) nothing can undo.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from perfsuite.core import phases
from perfsuite.errors import PerfsuiteError
from perfsuite.harness.batches import batch_samples
from perfsuite.harness.clock import StepClock, clone_batch, mode_depth, on_device, paired_ms, synchronize
from perfsuite.harness.observation import SCAN, ObservationPlan, period_steps_for
from perfsuite.harness.state import kept_rng, undone
from perfsuite.harness.watchdog import Watchdog
from perfsuite.probes.base import Probe, RunContext, WindowTimings, unobserved
from perfsuite.probes.loader import wait_idle

# Phases, in order.
SETUP, WARMUP, WINDOW, SOL, AFTER, DONE = "set-up", "warm-up", "window", "speed of light", "observe", "done"


class Stop(BaseException):
    """Raised at the boundary after the last observed step: the loop ends there (a script's ``except Exception``
    does not swallow it, its ``finally`` blocks run)."""


class StepSource(Protocol):
    """Where the batches and the step come from: a Job's BatchStream, or a script's training DataLoader."""

    #: True when a boundary is known before the fetch (the stream never ends an epoch without a batch).
    boundary_before_fetch: bool

    @property
    def epochs(self) -> int:
        """How many loader iterators (epochs) were started so far."""

    def setup(self) -> tuple[Any, RunContext]:
        """At the first boundary: the bound job and the probes' RunContext (``batches``: the iterator holder)."""

    def fetch(self) -> Any:
        """The next batch (StopIteration: the epoch ended without one, which only a script's loader does)."""

    def epoch_start(self) -> tuple[float, float] | None:
        """Wall and CPU seconds of making this epoch's iterator outside ``fetch``, once, for its first fetch."""

    def direct_step(self) -> Callable[[Any, int], Any] | None:
        """The step alone, for the speed of light (``step(batch, k)``); None: no speed of light (a script's)."""

    def state_objects(self) -> list[Any]:
        """What the speed-of-light steps move and :func:`perfsuite.harness.state.undone` puts back."""


@dataclass
class Recorded:
    """What a run's phases recorded, for :func:`perfsuite.harness.runner.assemble_result`."""

    job: Any
    timings: WindowTimings
    sol_ms: list[float]
    last_batch: Any
    plan: ObservationPlan


def _keeps_rng(method: Callable[..., Any]) -> Callable[..., Any]:
    """perfsuite's work at a boundary leaves the global generators to the user's next step (state.kept_rng)."""

    @functools.wraps(method)
    def kept(self: Any, *args: Any, **kwargs: Any) -> Any:
        with kept_rng():
            return method(self, *args, **kwargs)

    return kept


def suspended() -> contextlib.AbstractContextManager[None]:
    """The loader's own fetch inside an observed step: every probe's modes off, CUDA's sync debug mode (the sync
    probe's) too, and the CUDA runtime's calls marked as not the step's, so loading is never counted as the step's
    work (:func:`perfsuite.probes.base.unobserved`)."""
    return unobserved()


class Driver:
    """The run's phases at each step boundary (see the module docstring)."""

    def __init__(
        self,
        spec: Any,
        probes: Sequence[Probe],
        source: StepSource,
        *,
        dog: Watchdog | None = None,
        check: Callable[[], None] | None = None,
    ) -> None:
        self.spec, self.probes, self.source = spec, list(probes), source
        self.dog = dog if dog is not None else Watchdog(spec.watchdog)
        self.check = check or (lambda: None)  # a Ctrl-C swallowed somewhere lands here (interrupts.guarded)
        self.show = spec.progress or (lambda phase, done, total: None)
        self.phase, self.k, self.n = SETUP, 0, 0  # where the run is, for a RunInterrupted
        self.batches = 0  # real batches handed to the loop
        self.job: Any = None
        self.ctx: RunContext | None = None
        self._dog_phase = contextlib.ExitStack()
        self._depth = mode_depth()
        self._after_fetch_s = 0.0  # when the previous boundary handed its batch over
        self._pending: str | None = None  # a boundary's clock mark made before its fetch: "begin" or "mark"
        self._started = False  # the probes' start() ran
        self._t0 = 0.0  # the current window step's first request
        # the window
        self.clock: StepClock | None = None
        self.ready: StepClock | None = None  # a device mark once each window step's batch is in hand (harness.idle)
        self.fetch_s: list[float] = []
        self.fetch_cpu_s: list[float] = []
        self.host_s: list[float] = []
        self.step_cpu_s: list[float] = []  # the training thread's CPU per step: the load-robust companion of step_ms
        self._c_req = self._after_fetch_cpu = 0.0  # thread CPU at this request, and after the previous fetch
        self.step_start_s: list[float] = []
        self.epoch_fetch_ms: list[float] = []
        self.epoch_fetch_cpu_ms: list[float] = []
        self.epoch_steps: list[int] = []  # the window steps whose fetch began an epoch
        self.delivered = 0
        self.last_batch: Any = None
        self.start = self.end = 0.0
        self.epochs_before = self.epochs_started = 0
        # the speed of light
        self.sol_ms: list[float] = []
        # after the window
        self.plan: ObservationPlan | None = None
        self._kind: str | None = None
        self._observing = contextlib.ExitStack()

    # -- one boundary ------------------------------------------------------------------------------------------

    def next_batch(self) -> Any:
        """The loop asks for its next batch: the phase's work at this boundary, then the batch (or Stop)."""
        if self.phase == DONE:
            raise Stop
        t_req = time.perf_counter()
        self._c_req = time.thread_time()
        self._before_fetch(t_req)
        epochs = self.source.epochs
        inside = self._kind is not None  # a script's observed step goes on through its fetch, modes suspended
        c0 = time.thread_time()
        try:
            with suspended() if inside else contextlib.nullcontext():
                batch = self.source.fetch()
        except StopIteration:
            self._undo()
            raise
        fetched = time.perf_counter() - t_req
        cpu = time.thread_time() - c0
        made = self.source.epoch_start()
        if made is not None:
            fetched, cpu = fetched + made[0], cpu + made[1]
        return self._after_fetch(batch, t_req, fetched, cpu, made is not None or self.source.epochs != epochs)

    def _before_fetch(self, t_req: float) -> None:
        """The boundary's work before the fetch. A clock mark made here is taken back if the request ends an epoch
        instead (:meth:`_undo`)."""
        if self.phase == SETUP:
            self._setup()
        if self.phase == WARMUP:
            if self.batches > 0:
                self.dog.record_step(t_req - self._after_fetch_s)
            if self.batches < self.spec.warmup:
                self.k, self.n = self.batches, self.spec.warmup
                if self.batches == 0:  # the first batch alone, under the loader timeout (workers start here)
                    self.phase = "first batch"
                    phases.enter(phases.FIRST_BATCH)
                    self.show(self.phase, 0, 1)
                    self._dog_phase.enter_context(
                        self.dog.phase("first batch", deadline_s=self.spec.watchdog.first_batch_deadline())
                    )
                else:
                    self.show(self.phase, self.k, self.n)
                    self.check()
                return
            self._begin_window()
        if self.phase == WINDOW:
            assert self.clock is not None
            k = self.batches - self.spec.warmup
            if k == self.spec.steps:
                self._end_window(t_req)
            else:
                self.k = k
                if k == 0:  # (again, where the first request ended an epoch instead)
                    self.start = time.perf_counter()
                    self.clock.mark()
                    self._pending = "begin"
                else:
                    self.clock.mark()
                    self._pending = "mark"
                self._t0 = t_req
                return
        if self.phase == AFTER:
            self._next_observed()

    def _undo(self) -> None:
        """The request ended an epoch instead of giving a batch (a script's loader): no boundary, the step goes on."""
        if self._pending == "mark" and self.clock is not None:
            self.clock.discard_last()
            self._pending = None
        elif self._pending == "begin" and self.clock is not None:
            self.clock.discard_last()  # the window starts at the next request, as if this one had not happened
            self._pending = None

    def _after_fetch(self, batch: Any, t_req: float, fetched: float, cpu: float, new_epoch: bool) -> Any:
        """A boundary: ``batch`` starts the next step."""
        pending, self._pending = self._pending, None
        if self.phase == "first batch":
            self._dog_phase.close()
            self.phase = WARMUP
            phases.enter(phases.WARMUP)
            self._dog_phase.enter_context(self.dog.phase("warm-up"))
            self.show(self.phase, 0, self.n)
            self.check()
        elif self.phase == WINDOW:
            if pending == "mark":
                self.host_s.append(t_req - self.step_start_s[-1])
                self.step_cpu_s.append(self._c_req - self._after_fetch_cpu)
            assert self.ready is not None
            self.ready.mark()  # one event on the stream, no sync: the device's clock of when the batch was in hand
            self.step_start_s.append(self._t0)
            self.fetch_s.append(fetched)
            self.fetch_cpu_s.append(cpu)
            if new_epoch:
                self.epoch_fetch_ms.append(fetched * 1e3)
                self.epoch_fetch_cpu_ms.append(cpu * 1e3)
                self.epoch_steps.append(len(self.fetch_s) - 1)
            self.delivered += batch_samples(batch)
            self.last_batch = batch
        elif self.phase == AFTER:
            self._pinned_as_on_gpu(batch)
            self._open_observed()
        self.batches += 1
        self._after_fetch_s = time.perf_counter()
        self._after_fetch_cpu = time.thread_time()
        return batch

    def _pinned_as_on_gpu(self, batch: Any) -> None:
        """A CPU run of a loader with ``pin_memory=True`` (as the job's loader knobs record it: read from the user's
        DataLoader, or asked of perfsuite's): its batch is pinned memory on a GPU run, which the sync probe's copy
        rules ask (torch pins nothing without an accelerator)."""
        residency = self.ctx.shared.get("residency") if self.ctx is not None else None
        if residency is not None and (getattr(self.job, "knobs", None) or {}).get("pin_memory"):
            residency.mark_pinned(batch)

    # -- phases ------------------------------------------------------------------------------------------------

    @_keeps_rng
    def _setup(self) -> None:
        """The first boundary: the job and context from the source, the probes set up, the warm-up begun."""
        self.job, self.ctx = self.source.setup()
        self.clock = StepClock(self.job.device)
        self.ready = StepClock(self.job.device)
        for probe in self.probes:
            probe.setup(self.ctx)
        self.phase = WARMUP
        if not self.spec.warmup:
            self._dog_phase.enter_context(self.dog.phase("warm-up"))

    @_keeps_rng
    def _begin_window(self) -> None:
        """Before the window's first fetch: the device synchronised, the probes' passive samplers started."""
        phases.enter(phases.WINDOW)
        self._dog_phase.close()
        synchronize(self.job.device)
        self.check()
        self.epochs_before = self.source.epochs
        self.phase = WINDOW
        self.k, self.n = 0, self.spec.steps
        begins = getattr(self.source, "window_begins", None)  # a script's last choice before the window (its loss)
        if begins is not None:
            begins()
        for probe in self.probes:
            probe.start()
        self._started = True
        if mode_depth() != self._depth:
            raise PerfsuiteError(
                "a probe left a torch function or dispatch mode active in the measured window "
                f"(depth {mode_depth()} vs {self._depth} before setup); instrument only inside observe()"
            )
        self.show(self.phase, 0, self.n)  # once before and once after: nothing of perfsuite's runs between the steps
        self._dog_phase.enter_context(self.dog.phase("window", steps=self.spec.steps))  # armed once: nothing per step

    @_keeps_rng
    def _end_window(self, t_req: float) -> None:
        """The last window step ended: close the window, then the speed of light."""
        assert self.clock is not None
        self.clock.mark()
        self.host_s.append(t_req - self.step_start_s[-1])
        self.step_cpu_s.append(self._c_req - self._after_fetch_cpu)
        synchronize(self.job.device)
        self.end = time.perf_counter()
        phases.enter(phases.WINDOW_CLOSE)
        self._dog_phase.close()
        self.show(self.phase, self.n, self.n)
        self._stop_probes()
        self.check()  # a Ctrl-C swallowed during the window (in a __del__, an at-fork hook) stops here
        self.epochs_started = self.source.epochs - self.epochs_before
        if self.spec.sol_steps > 0:
            wait_idle(self.ctx.batches if self.ctx else None)  # workers refilling prefetch slots would take cores
        direct = self.source.direct_step()  # None for a script: its steps are its own loop body (harness.state)
        if direct is not None:
            self.phase, self.k, self.n = SOL, 0, self.spec.sol_steps
            phases.enter(phases.SOL)
            self.show(self.phase, 0, self.n)
            self._dog_phase.enter_context(self.dog.phase("speed of light", steps=self.spec.sol_steps + 1))
            with undone(self.source.state_objects()):  # the extra steps leave the job's state as they found it
                self.sol_ms = speed_of_light(direct, self.last_batch, self.job.device, self.spec.sol_steps)
        self._after_window()

    def _stop_probes(self) -> None:
        if self._started:
            self._started = False
            for probe in self.probes:
                probe.stop()

    @_keeps_rng
    def _after_window(self) -> None:
        """The probes' own timed work (the loader ledger's replay), before anything instruments; then the plan."""
        self._dog_phase.close()
        self.check()
        self.phase, self.k, self.n = "loader ledger", 0, 0
        with self.dog.phase("loader ledger"):
            for probe in self.probes:  # work beside the others' first, in a child where the host has cores to spare
                phases.enter(phases.after_window(probe.name))
                probe.begin_after_window()
            for probe in self.probes:
                phases.enter(phases.after_window(probe.name))
                probe.after_window()
        self.check()
        period = period_steps_for(self.spec.period_steps, self.job)
        self.plan = ObservationPlan(self.spec.observe_steps, period, self.probes)
        self._enter_observed_phase()
        self.phase, self.k, self.n = AFTER, 0, self.plan.most_steps
        self._dog_phase.enter_context(self.dog.phase("observe", steps=self.plan.most_steps))

    @_keeps_rng
    def _next_observed(self) -> None:
        """A boundary after the window: the previous step's instrumentation closed (before the fetch where the
        boundary is known there), the next step's kind decided; after the last, the run is done."""
        if self.source.boundary_before_fetch:
            self._close_observed()
        if self._kind is not None:  # a script's step: closed once its fetch gives a batch
            return
        assert self.plan is not None
        if self.plan.done or self.plan.next_kind() is None:
            self._finish()
            raise Stop
        self.show(self.phase, self.k, self.n)
        self.check()

    @_keeps_rng
    def _open_observed(self) -> None:
        self._close_observed()
        assert self.plan is not None
        kind = self.plan.next_kind()
        if kind is None:
            self._finish()
            raise Stop
        self._kind = kind
        for watcher in self.plan.watchers(kind):
            self._observing.enter_context(watcher)

    @_keeps_rng
    def _close_observed(self) -> None:
        if self._kind is not None:
            kind, self._kind = self._kind, None
            self._observing.close()
            assert self.plan is not None
            self.plan.record(kind)
            self.k += 1
            self._enter_observed_phase()

    def _enter_observed_phase(self) -> None:
        """The steps after the window are timed as the period scan's, then the observed steps'."""
        assert self.plan is not None
        phases.enter(phases.PERIOD_SCAN if self.plan.next_kind() == SCAN else phases.OBSERVED)

    @_keeps_rng
    def _finish(self) -> None:
        synchronize(self.job.device)
        phases.enter(phases.TEARDOWN)
        self._dog_phase.close()
        self.show(self.phase, self.n, self.n)
        self.phase = DONE

    def close(self) -> None:
        """However the run ended: leave no mode, hook, deadline or running sampler behind."""
        phases.enter(phases.TEARDOWN)
        self._kind = None
        try:
            self._observing.close()
        finally:
            try:
                self._dog_phase.close()
            finally:
                self.dog.release()  # a phase entered as an exception landed is outside _dog_phase: disarmed here
            with contextlib.suppress(Exception):
                self._stop_probes()

    # -- what came of it ---------------------------------------------------------------------------------------

    def recorded(self) -> Recorded:
        assert self.clock is not None and self.plan is not None
        timings = WindowTimings(
            start_s=self.start,
            end_s=self.end,
            steps=self.spec.steps,
            batch_size=self.job.batch_size,
            fetch_s=self.fetch_s,
            step_ms=self.clock.durations_ms(),
            epochs_started=self.epochs_started,
            samples=self.delivered,
            host_step_s=self.host_s,
            epoch_fetch_ms=self.epoch_fetch_ms,
            fetch_cpu_s=self.fetch_cpu_s,
            epoch_fetch_cpu_ms=self.epoch_fetch_cpu_ms,
            epoch_steps=self.epoch_steps,
            step_start_s=self.step_start_s,
            step_cpu_s=self.step_cpu_s,
            idle_ms=paired_ms(self.clock, self.ready) if self.ready is not None else [],
            device_clock="cuda-events" if self.clock.cuda else "host",
        )
        return Recorded(self.job, timings, self.sol_ms, self.last_batch, self.plan)


def speed_of_light(step: Callable[[Any, int], Any], batch: Any, device: Any, steps: int) -> list[float]:
    """Per-step times (ms) of the step fed one batch kept on the device, with no loader: DALI's fixed-batch test.

    ``step(batch, k)`` is the step the window times (the job's step; for a
    reference pipeline its ``step(batch, index)`` at the observed steps'
    indices), called on a copy of the window's last batch moved to the
    device once (on a CPU run the copy stays in host memory: there is no
    device to keep it on). One untimed step first; each timed step gets a
    fresh device-side copy made before its clock starts. Timed like the
    window: CUDA events on a GPU, the host clock on a CPU.
    """
    if steps <= 0 or batch is None:
        return []
    resident = on_device(batch, device)
    step(clone_batch(resident), 0)
    synchronize(device)
    starts, ends = StepClock(device), StepClock(device)
    for k in range(steps):
        fresh = clone_batch(resident)
        starts.mark()
        step(fresh, k)
        ends.mark()
    synchronize(device)
    return paired_ms(starts, ends)
