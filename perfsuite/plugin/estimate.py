"""A perf session's cost a user can plan with: its estimated time before it starts, and the time left as it runs.

Every Result keeps its phases' times (:class:`perfsuite.core.results.PhaseTimes`), so a session on this machine
leaves what its tests took: each test's runs' wall time, by device and scale, in ``phase-times.json`` beside the
dataset cache (:func:`perfsuite.jobs.workloads.data.default_cache_dir`, one per machine). The next session of the
same tests adds those up before it starts; a test not recorded yet counts the scale's default
(:data:`DEFAULT_RUN_S`). While it runs, the time left is the unfinished tests' estimates less the time the
current one has taken so far.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# A test's wall time when none of its runs was recorded on this machine: one run of a reference workload.
# smoke: face_parsing smoke on the 2-core CPU machine took 14 s (docs/phases.md); full: the H200's
# face_parsing runs at full scale took 67-82 s (docs/phases.md, the H200 Results). Any other scale: as full.
DEFAULT_RUN_S = {"smoke": 15.0, "full": 75.0}
RECORD = "phase-times.json"
# Progress lines are printed for a session estimated to take at least this long (a full-scale one), on a terminal.
LONG_SESSION_S = 300.0


def record_path() -> Path:
    from perfsuite.jobs.workloads.data import default_cache_dir

    return default_cache_dir() / RECORD


def test_of(result_id: str) -> str:
    """A Result's test: its id without the ``#label`` a test's second run adds."""
    return result_id.split("#", 1)[0]


def load(path: Path, device: str, scale: str) -> dict[str, float]:
    """Each recorded test's wall seconds on ``device`` at ``scale``; empty when nothing was recorded (or the
    file cannot be read: an estimate is advice, never a reason to stop a session)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        tests = data.get(device, {}).get(scale, {})
        return {str(k): float(v) for k, v in tests.items() if isinstance(v, (int, float)) and v >= 0}
    except (OSError, ValueError, AttributeError):
        return {}


def save(path: Path, device: str, scale: str, results: Mapping[str, Any], ran: Iterable[str] = ()) -> None:
    """Add this session's tests' wall times (from their Results' phases) to the record, atomically; a test in
    ``ran`` that made no Result (skipped inside: a GPU-only test on a CPU) is recorded as taking none."""
    spent: dict[str, float] = dict.fromkeys(ran, 0.0)
    for result_id, result in results.items():
        if result.phases is not None:
            spent[test_of(result_id)] = spent.get(test_of(result_id), 0.0) + result.phases.wall_s
    if not spent:
        return
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        data = data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        data = {}
    by_scale = data.setdefault(device, {}).setdefault(scale, {})
    by_scale.update({k: round(v, 3) for k, v in spent.items()})
    from perfsuite.core.tmpfiles import write_json_atomic

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, data)
    except OSError:  # a read-only cache: the next session estimates from the defaults
        pass


@dataclass
class Estimate:
    """The session's tests, each with its estimated seconds, and which of them were recorded on this machine."""

    scale: str
    seconds: dict[str, float]
    recorded: int
    started: float = field(default_factory=time.perf_counter)
    finished: set[str] = field(default_factory=set)
    current: tuple[str, float] | None = None  # the test running now, and when it started

    @property
    def total_s(self) -> float:
        return sum(self.seconds.values())

    def line(self) -> str:
        """Said before the session starts."""
        n, default = len(self.seconds), len(self.seconds) - self.recorded
        parts = []
        if self.recorded:
            parts.append(f"{self.recorded} from their runs recorded on this machine")
        if default:
            parts.append(f"{default} at the {self.scale} scale's default of {default_run_s(self.scale):g} s each")
        return (
            f"perfsuite: this session's {n} perf test(s) at scale {self.scale} should take about "
            f"{clock(self.total_s)} ({'; '.join(parts)})"
        )

    def start(self, test: str) -> None:
        self.current = (test, time.perf_counter())

    def finish(self, test: str) -> None:
        self.finished.add(test)
        self.current = None

    def left_s(self, now: float | None = None) -> float:
        """The unfinished tests' estimates, less what the running one has taken so far."""
        now = time.perf_counter() if now is None else now
        left = sum(s for t, s in self.seconds.items() if t not in self.finished)
        if self.current is not None and self.current[0] in self.seconds:
            left -= min(self.seconds[self.current[0]], now - self.current[1])
        return max(0.0, left)

    def progress(self, phase: str, done: int, total: int) -> str:
        """The progress line: the test, its phase, the time left."""
        test = self.current[0] if self.current is not None else "?"
        index = len(self.finished) + 1
        steps = f" {done}/{total}" if total > 1 else ""
        return (
            f"perfsuite: test {index}/{len(self.seconds)} {test.rsplit('::', 1)[-1]}: {phase}{steps} · "
            f"about {clock(self.left_s())} left"
        )


def default_run_s(scale: str) -> float:
    return DEFAULT_RUN_S.get(scale, DEFAULT_RUN_S["full"])


def estimate(tests: Iterable[str], recorded: Mapping[str, float], scale: str) -> Estimate:
    """Each test's recorded seconds, else the scale's default."""
    seconds = {t: recorded.get(t, default_run_s(scale)) for t in dict.fromkeys(tests)}
    return Estimate(scale, seconds, sum(1 for t in seconds if t in recorded))


def clock(seconds: float) -> str:
    """``45 s``, ``12 min 30 s``, ``1 h 05 min``."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
