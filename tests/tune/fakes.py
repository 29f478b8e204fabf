"""A planted target for tune's unit tests: samples/s is a known function of the knobs, with seeded noise.

No process is started and no clock is read, so every search is exact and repeatable: the same
seed gives the same runs, the same decisions and the same choice.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from perfsuite.tools.tune.guard import Free
from perfsuite.tools.tune.records import RunRecord

START = {"num_workers": 0, "prefetch_factor": None, "pin_memory": False, "persistent_workers": False, "batch_size": 8}


def needs_two_workers(knobs: Mapping[str, Any]) -> float:
    """A loader that needs 2 workers to keep up; more add nothing (the step caps samples/s at 200)."""
    return min(200.0, 110.0 * max(1, knobs["num_workers"]))


@dataclass
class FakeTarget:
    """samples/s = ``speed(knobs)`` x (1 + noise); ``fail(knobs)`` returns an error (oom, text) or None."""

    speed: Callable[[Mapping[str, Any]], float] = needs_two_workers
    fail: Callable[[Mapping[str, Any]], tuple[bool, str] | None] = lambda knobs: None
    noise: float = 0.02
    seed: int = 0
    start: dict[str, Any] = field(default_factory=lambda: dict(START))
    ledger: Callable[[Mapping[str, Any]], dict[str, float]] = lambda knobs: {}
    interrupt_after: int | None = None
    demand: float | None = None  # the step's speed of light, given by the reference run
    name: str = "planted"
    kind: str = "job"
    device: str = "cpu"
    test_key: str = "test_planted_tuned"
    runs: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def run(self, setting: Mapping[str, Any] | None, reference: bool = False) -> RunRecord:
        knobs = {**self.start, **(setting or {})}
        self.runs.append(knobs)
        if self.interrupt_after is not None and len(self.runs) > self.interrupt_after:
            raise KeyboardInterrupt
        failure = self.fail(knobs)
        if failure is not None:
            oom, text = failure
            return RunRecord(knobs=knobs, error=text, oom=oom, seconds=1.0)
        value = self.speed(knobs) * (1.0 + self.rng.uniform(-self.noise, self.noise))
        return RunRecord(
            knobs=knobs,
            samples_per_s=value,
            data_wait_frac=0.05 + self.rng.uniform(0, 0.01),
            peak_rss_mb=500.0,
            workers_mb=100.0 * knobs["num_workers"],
            worker_processes=knobs["num_workers"],
            batch_bytes=1024.0 * knobs["batch_size"] if reference else None,
            ledger=self.ledger(knobs),
            demand_samples_per_s=self.demand if reference else None,
            seconds=1.0,
        )


def plenty() -> Free:
    return Free(memory=64 * 2**30, shm=32 * 2**30)
