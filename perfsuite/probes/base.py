"""The one protocol every probe follows, and what the runner tells probes.

A run has three phases: warm-up (excluded from everything), a few *observed*
steps in which instrumenting probes (sync counting, AMP dtype hooks) watch
each step through ``observe()``, and the *measured window*, timed with as
little in the way as possible, between ``start()`` and ``stop()``. So the
cost of instrumentation never lands in the timings, and deterministic signals
(syncs, dtypes) are counted exactly on steps that do the same work.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ContextManager

if TYPE_CHECKING:
    from perfsuite.knobs import Knobs
    from perfsuite.pipeline import Pipeline
    from perfsuite.results import Metric
    from perfsuite.workloads.registry import Scale, Workload


@dataclass
class RunContext:
    """What a probe may know about the run it watches (set before warm-up)."""

    workload: Workload
    scale: Scale
    knobs: Knobs
    device: str
    pipeline: Pipeline
    batch_size: int
    observe_steps: int


@dataclass
class WindowTimings:
    """What the runner itself recorded in the measured window.

    Host times are time.perf_counter() seconds. ``step_ms`` holds one sample
    per measured step: CUDA event deltas on a GPU (the device's timeline, which
    includes its idle time waiting for data), host deltas on the CPU.
    """

    start_s: float
    end_s: float
    steps: int
    batch_size: int
    fetch_s: list[float] = field(default_factory=list)  # host time blocked in next(loader), per step
    step_ms: list[float] = field(default_factory=list)
    epochs_started: int = 0

    @property
    def wall_s(self) -> float:
        return self.end_s - self.start_s


class Probe:
    """Base class with no-op hooks: a probe overrides the ones it needs.

    Probes know nothing of pytest. ``stop()`` is always called, also when the
    run raises, and must be safe to call twice.
    """

    name: str = "probe"

    def setup(self, ctx: RunContext) -> None:
        """Before warm-up: reset counters, wrap nothing the user did not ask for."""

    def observe(self) -> ContextManager[Any]:
        """A context around each observed step (not around measured steps)."""
        return contextlib.nullcontext()

    def start(self) -> None:
        """Measured window begins (the device is synchronised)."""

    def stop(self) -> None:
        """Measured window ends, or the run failed."""

    def metrics(self, timings: WindowTimings) -> list[Metric]:
        """The metrics this probe contributes, each by its one name."""
        return []

    def timeline(self) -> dict[str, list[float]]:
        """Time series for Result.timeline (e.g. NVML samples), keyed by series name."""
        return {}
