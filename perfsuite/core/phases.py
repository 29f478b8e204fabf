"""Where a run's time goes: each phase's wall and CPU time, recorded as the run moves from one to the next.

A GPU runner's minutes are paid for whether the device measures or waits, so a Result keeps how long each phase
took (:class:`perfsuite.core.results.PhaseTimes`): set-up (the dataset, the model), the first batch, the warm-up,
the window, the speed of light, each probe's after-window work, the period scan, the observed steps, teardown
and the Result's assembly. The phases *tile* the run: :func:`recording` starts the clock when
:func:`perfsuite.harness.runner.run` is called and each :func:`enter` ends the phase before, so their wall times
sum to the run's wall time by construction, and nothing the run did is left out of them.

The clock is found through a context variable, so code deep in the set-up (the dataset cache, the model's
construction) marks its own phase with :func:`within` without a clock passed down to it; with no run recording,
both are no-ops. A phase entered twice (the observed steps after skipped ones) accumulates under one name, in
the order each name first began.

CPU time is :func:`time.process_time`: every thread of this process (the samplers' included), not the DataLoader
workers', which run in processes of their own.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator

from perfsuite.core.results import Phase, PhaseTimes

# The phases' names, one source of truth for the driver, the CLI's line, the plugin's summary and the estimate.
SETUP, DATASET, MODEL = "set-up", "dataset", "model build"
FIRST_BATCH, WARMUP, WINDOW, SOL = "first batch", "warm-up", "window", "speed of light"
WINDOW_CLOSE = "window close"  # the probes' samplers stopped, the loader's workers left to go idle
AFTER_WINDOW = "after window"  # + ": <probe name>" for each probe whose after_window() ran
PERIOD_SCAN, OBSERVED, TEARDOWN, ASSEMBLY = "period scan", "observed steps", "teardown", "result"
# The run's own training steps before and in the window (the first batch is the first warm-up step): what a
# runner pays for whatever perfsuite does; the rest of a run's time is perfsuite's overhead.
STEP_PHASES = (FIRST_BATCH, WARMUP, WINDOW)
# A full-scale face_parsing run on one H200 may spend this long beyond its STEP_PHASES, its dataset already cached
# (issue 54: the 32-test reference suite at full scale in 10 minutes); scripts/phase_budget.py checks it.
OVERHEAD_BUDGET_S = 15.0


def after_window(probe: str) -> str:
    """The phase name of one probe's after-window work (``after window: loader``)."""
    return f"{AFTER_WINDOW}: {probe}"


class PhaseClock:
    """The running record: the current phase, and each phase's accumulated wall and CPU seconds."""

    def __init__(self, first: str = SETUP) -> None:
        self._totals: dict[str, list[float]] = {}
        self._name = first
        self._wall = time.perf_counter()
        self._cpu = time.process_time()

    @property
    def current(self) -> str:
        return self._name

    def enter(self, name: str) -> None:
        """End the current phase (its time is added to its name's total) and begin ``name``."""
        wall, cpu = time.perf_counter(), time.process_time()
        total = self._totals.setdefault(self._name, [0.0, 0.0])
        total[0] += wall - self._wall
        total[1] += max(0.0, cpu - self._cpu)
        self._name, self._wall, self._cpu = name, wall, cpu

    def times(self) -> PhaseTimes:
        """The phases so far, the current one included up to now."""
        self.enter(self._name)
        return PhaseTimes(tuple(Phase(name, wall, cpu) for name, (wall, cpu) in self._totals.items()))


_CLOCK: contextvars.ContextVar[PhaseClock | None] = contextvars.ContextVar("perfsuite_phase_clock", default=None)


@contextlib.contextmanager
def recording(first: str = SETUP) -> Iterator[PhaseClock]:
    """Record the phases of the run inside (a run inside a run, as doctor's arms, records its own)."""
    clock = PhaseClock(first)
    token = _CLOCK.set(clock)
    try:
        yield clock
    finally:
        _CLOCK.reset(token)


def enter(name: str) -> None:
    """The run moves on to phase ``name`` (nothing when no run is recording)."""
    clock = _CLOCK.get()
    if clock is not None:
        clock.enter(name)


@contextlib.contextmanager
def within(name: str) -> Iterator[None]:
    """Phase ``name`` for the body, then back to the phase it interrupted (the dataset inside set-up)."""
    clock = _CLOCK.get()
    if clock is None:
        yield
        return
    before = clock.current
    clock.enter(name)
    try:
        yield
    finally:
        clock.enter(before)


def overhead_s(times: PhaseTimes) -> float:
    """The run's wall time beyond its warm-up and window steps (:data:`STEP_PHASES`)."""
    return max(0.0, times.wall_s - sum(p.wall_s for p in times.phases if p.name in STEP_PHASES))
