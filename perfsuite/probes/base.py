"""The one protocol every probe follows, and what the runner tells probes.

A run has three phases, in this order: warm-up (excluded from everything);
the *measured window*, timed with nothing in the way, between ``start()``
and ``stop()``; then a few *observed* steps in which instrumenting probes
(sync counting, AMP dtypes, op/byte/FLOP counters) watch each step through
``observe()``. Measuring first is what keeps the window honest for every
probe, present and future: a TorchDispatchMode makes torch.compile run the
model eagerly for the rest of the process, so nothing that instruments may
run before the window. ``start()``/``stop()`` may only start passive
samplers (threads reading NVML or /proc); the runner refuses a window in
which a probe left a torch function or dispatch mode active. Deterministic
signals are counted exactly on steps that do the same work as the window's.

Before the observed steps, a *period scan* may run (perfsuite.harness.observation):
only probes that declare ``scans`` watch those steps, through ``scan()``,
cheaply, and report work that recurs every N steps through ``periodic()``;
the observed steps then skip the steps predicted to carry it. A probe never
registers a global hook (``torch.nn.modules.module.register_module_forward_hook``
and the like): under one, ``torch.compile(module)`` warns at the user's call
and fires hooks twice. Hooks go on the run's own modules, in observed steps only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfsuite.core.knobs import Knobs
    from perfsuite.core.results import Metric
    from perfsuite.jobs.contract import BoundJob
    from perfsuite.jobs.workload import Scale, Workload


@dataclass
class RunContext:
    """What a probe may know about the run it watches (set before warm-up).

    For a user's job, ``workload`` is a :class:`perfsuite.jobs.contract.JobInfo` (name,
    target_kind, num_classes, ignore_index), ``knobs`` holds only the device,
    and ``pipeline`` is the bound job (``.model``, ``.optimizer``, ``.job``).
    """

    workload: Workload
    scale: Scale
    knobs: Knobs
    device: str
    pipeline: Any  # what runs: a reference workload's Pipeline, or the user's job (perfsuite.jobs.contract.BoundJob)
    batch_size: int
    observe_steps: int
    job: BoundJob | None = None  # the job being run (every run is one; perfsuite.jobs.contract)
    batches: Any = None  # the runner's BatchStream: the loader iterator it holds now (its worker processes)
    shared: dict[str, Any] = field(default_factory=dict)  # what probes of one run share (probes.residency)


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
    samples: int = 0  # samples the loader delivered in the window (a short last batch counts what it holds)
    host_step_s: list[float] = field(default_factory=list)  # host time per step, fetch included
    epoch_fetch_ms: list[float] = field(default_factory=list)  # the fetches that started an epoch
    fetch_cpu_s: list[float] = field(default_factory=list)  # this thread's CPU time inside next(loader), per step
    epoch_fetch_cpu_ms: list[float] = field(default_factory=list)  # that CPU time, for the fetches that began an epoch
    epoch_steps: list[int] = field(default_factory=list)  # the window steps (0-based) whose fetch began an epoch
    step_start_s: list[float] = field(default_factory=list)  # perf_counter() at each step's start (before next())
    step_cpu_s: list[float] = field(default_factory=list)  # this thread's CPU time in job.step, per step
    # The device's idle time before each step, in ms, on the step clock: from the device's mark at the request for
    # the batch (when its queue had run out of the previous step's work, or the request, whichever came later) to
    # its mark once the batch was in hand (perfsuite.harness.idle). CUDA events on a GPU; on a CPU the host clock,
    # where the device is the host and its idle time is the host's wait.
    idle_ms: list[float] = field(default_factory=list)
    device_clock: str = "host"  # "cuda-events" on a GPU, "host" on a CPU

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

    def start(self) -> None:
        """Measured window begins (the device is synchronised). Start passive samplers only."""

    def stop(self) -> None:
        """Measured window ends, or the run failed. Read end-of-window counters here."""

    def begin_after_window(self) -> None:
        """Before any probe's after-window work: start what runs beside it in a forked child, on a host with cores
        to spare (:mod:`perfsuite.core.forked`); :meth:`after_window` collects it. The loader count starts here."""

    def after_window(self) -> None:
        """After the window and the speed-of-light steps, before anything instruments: a probe's own timed work.

        The loader ledger replays the loader's stages here. Runs under the
        watchdog; nothing a probe does here may leave a mode active.
        """

    def observe(self) -> AbstractContextManager[Any]:
        """A context around each observed step, after the window: the only place to instrument."""
        return contextlib.nullcontext()

    #: Watches the period scan: steps after the window, before the observed ones, in which only cheap
    #: instrumentation looks for work done every N steps (see perfsuite.harness.observation).
    scans: bool = False

    def scan(self) -> AbstractContextManager[Any]:
        """A context around each period-scan step (only called when ``scans`` is True)."""
        return contextlib.nullcontext()

    def periodic(self) -> list[tuple[int, int]]:
        """Periodic work seen in the scan, as (period, offset): scan step k carries it when k % period == offset."""
        return []

    def notes(self) -> list[str]:
        """Where a figure of this run can mislead, for Result.notes (e.g. non_blocking copies on a CPU run)."""
        return []

    def finish(self) -> None:
        """After the observed steps, or when the run failed: release what observe() set up."""

    def metrics(self, timings: WindowTimings) -> list[Metric]:
        """The metrics this probe contributes, each by its one name."""
        return []

    def timeline(self) -> dict[str, list[float]]:
        """Time series for Result.timeline (e.g. NVML samples), keyed by series name."""
        return {}

    def samples(self) -> dict[str, list[float]]:
        """Raw samples for Result.samples, which timing verdicts judge (read after metrics())."""
        return {}

    def environment(self) -> dict[str, Any]:
        """What the machine was doing during the run, for Result.environment (read after metrics())."""
        return {}


PROBE_MARK = "perfsuite.probe_work"  # the profiler's range around a probe's own work (perfsuite.probes.syncs)


@contextlib.contextmanager
def unobserved() -> Iterator[None]:
    """Run a probe's own tensor work (or the loader's fetch) unseen by every probe: their function and dispatch
    modes off, CUDA's sync debug mode off, and, while a profiler records, inside a ``perfsuite.probe_work`` range,
    so the sync probe leaves the CUDA runtime calls made there out of the step's count.

    A probe that checks the step's tensors (labels) must not have its checks
    counted as the step's syncs, ops or FLOPs.
    """
    import torch
    from torch.utils._python_dispatch import _disable_current_modes

    with contextlib.ExitStack() as stack:
        stack.enter_context(_disable_current_modes())
        stack.enter_context(torch._C.DisableTorchFunction())
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            debug = torch.cuda.get_sync_debug_mode()
            if debug:
                torch.cuda.set_sync_debug_mode(0)
                stack.callback(torch.cuda.set_sync_debug_mode, debug)
            if torch.autograd.profiler._is_profiler_enabled:
                stack.enter_context(torch.profiler.record_function(PROBE_MARK))
        yield
