"""Run a workload with its knobs and probes: warm-up, observed steps, measured window.

The runner is the only place that synchronises the device, and it does so
only at the edges of the measured window; per-step times on a GPU come from
CUDA events recorded on the stream, so the harness never adds a sync the
workload did not have (and the sync probe never counts the harness's own).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from perfsuite.knobs import Knobs, resolve_for_device
from perfsuite.probes.base import Probe, RunContext, WindowTimings
from perfsuite.results import Fingerprint, Metric, Result
from perfsuite.workloads.registry import Workload, get_workload


@dataclass(frozen=True)
class RunSpec:
    """What to run: the workload, its scale, its knobs, and how long."""

    workload: str | Workload
    scale: str = "smoke"
    knobs: Knobs = field(default_factory=Knobs)
    steps: int = 20
    warmup: int = 3
    observe_steps: int = 4
    seed: int = 0
    cache_dir: Path | None = None
    mutate: Callable[[Any], None] | None = None  # changes the built Pipeline in place (perfsuite.faults)

    def __post_init__(self) -> None:
        from perfsuite.errors import KnobError

        for name, minimum in (("steps", 2), ("warmup", 0), ("observe_steps", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise KnobError(f"{name}={value!r} must be an integer >= {minimum}")

    def resolve_workload(self) -> Workload:
        return get_workload(self.workload) if isinstance(self.workload, str) else self.workload


def _synchronize(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


class _StepClock:
    """Per-step durations: CUDA events on a GPU (no sync until the end), host clock on the CPU."""

    def __init__(self, device: Any) -> None:
        import torch

        self.cuda = device.type == "cuda"
        self._events: list[Any] = []
        self._host: list[float] = []
        self._event_cls = torch.cuda.Event if self.cuda else None

    def mark(self) -> None:
        if self.cuda:
            event = self._event_cls(enable_timing=True)
            event.record()
            self._events.append(event)
        else:
            self._host.append(time.perf_counter())

    def durations_ms(self) -> list[float]:
        """Read after the window's closing synchronisation."""
        if self.cuda:
            return [a.elapsed_time(b) for a, b in zip(self._events, self._events[1:])]
        return [(b - a) * 1e3 for a, b in zip(self._host, self._host[1:])]


def default_probes() -> list[Probe]:
    """Every probe perfsuite has; each reports `unavailable` where it cannot measure."""
    from perfsuite.probes import all_probes

    return all_probes()


def run(spec: RunSpec, probes: Sequence[Probe] | None = None) -> Result:
    """Build the pipeline, run it with probes attached, return the Result."""
    import torch

    from perfsuite.pipeline import BatchStream, build_pipeline

    workload = spec.resolve_workload()
    scale = workload.scale(spec.scale)
    knobs, notes = resolve_for_device(spec.knobs, torch.cuda.is_available())
    probes = list(default_probes() if probes is None else probes)
    pipeline = build_pipeline(workload, scale, knobs, seed=spec.seed, cache_dir=spec.cache_dir)
    if spec.mutate is not None:
        spec.mutate(pipeline)
    device = pipeline.device
    ctx = RunContext(workload, scale, knobs, str(device), pipeline, pipeline.batch_size, spec.observe_steps)
    batches = BatchStream(pipeline.loader)
    clock = _StepClock(device)
    fetch_s: list[float] = []
    index = 0
    started: list[Probe] = []
    try:
        for probe in probes:
            probe.setup(ctx)
        for _ in range(spec.warmup):
            pipeline.step(next(batches), index)
            index += 1
        for _ in range(spec.observe_steps):
            batch = next(batches)
            with contextlib.ExitStack() as stack:
                for probe in probes:
                    stack.enter_context(probe.observe())
                pipeline.step(batch, index)
            index += 1
        _synchronize(device)
        epochs_before = batches.epochs
        for probe in probes:
            probe.start()
            started.append(probe)
        start = time.perf_counter()
        clock.mark()
        for _ in range(spec.steps):
            t0 = time.perf_counter()
            batch = next(batches)
            fetch_s.append(time.perf_counter() - t0)
            pipeline.step(batch, index)
            clock.mark()
            index += 1
        _synchronize(device)
        end = time.perf_counter()
    finally:
        for probe in probes:
            probe.stop()
        batches.close()
    timings = WindowTimings(start_s=start, end_s=end, steps=spec.steps, batch_size=pipeline.batch_size,
                            fetch_s=fetch_s, step_ms=clock.durations_ms(),
                            epochs_started=batches.epochs - epochs_before)
    metrics: dict[str, Metric] = {}
    for metric in _core_metrics(timings):
        metrics[metric.name] = metric
    timeline: dict[str, list[float]] = {}
    for probe in probes:
        for metric in probe.metrics(timings):
            metrics[metric.name] = metric
        timeline.update(probe.timeline())
    return Result(
        workload=workload.name, scale=scale.name, knobs=knobs.flat(), metrics=metrics,
        samples={"step_ms": timings.step_ms, "fetch_ms": [s * 1e3 for s in fetch_s]},
        fingerprint=Fingerprint.collect(str(device)), batch_size=pipeline.batch_size, steps=spec.steps,
        warmup=spec.warmup, notes=tuple(notes), timeline=timeline,
    )


def _core_metrics(t: WindowTimings) -> list[Metric]:
    """Throughput and step-time percentiles: the runner's own, so they exist with no probe."""
    import numpy as np

    steps = np.asarray(t.step_ms, dtype=float)
    p10, p50, p90 = np.percentile(steps, [10, 50, 90])
    q25, q75 = np.percentile(steps, [25, 75])
    return [
        Metric("samples_per_s", t.steps * t.batch_size / t.wall_s, "samples/s",
               detail={"wall_s": t.wall_s, "steps": t.steps, "batch_size": t.batch_size}),
        Metric("step_ms", float(p50), "ms", detail={"median": float(p50), "p10": float(p10), "p90": float(p90),
                                                     "iqr": float(q75 - q25), "mean": float(steps.mean())}),
    ]
