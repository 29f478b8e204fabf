"""The doctor's typed figures: what each part of the diagnosis holds, and *unavailable* with its reason.

Every figure passes between the doctor's modules as one of these frozen dataclasses. A figure that
could not be read is an :class:`Unavailable` with the reason, never a default of 0, and each fix a
run can try is named by one :class:`Fix`: the runs that try it and the findings that read its
measurement share that key, so a counterfactual cannot be stored under one name and looked up under
another (the script's were stored as ``"script 1"`` and read as ``"workers"``).
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any

from perfsuite.harness.runner import INPUT_BANDS

CONFIDENCE = 0.95
INPUT_EDGE = INPUT_BANDS[0][0]  # below this data wait a step is not input-bound


@dataclass(frozen=True)
class Unavailable:
    """A figure that could not be read here, and why."""

    reason: str


class Fix(enum.Enum):
    """A fix a run can try, interleaved with the job as it is: the key of its measurement."""

    PERSISTENT = "persistent workers"
    MORE_WORKERS = "more workers"
    FEWER_WORKERS = "fewer workers"
    THREADS = "fewer intra-op threads"
    PIN_MEMORY = "pinned memory"


def known(x: float | Unavailable | None) -> float | None:
    """The figure, or None where it is unavailable."""
    return None if x is None or isinstance(x, Unavailable) else float(x)


# --------------------------------------------------------------------------- the window's figures


@dataclass(frozen=True)
class WaitBand:
    """The window's data-wait share with its bootstrap interval (kept in [0, 1]: ``clipped`` says it was); the band
    only when the interval clears its edges. ``source`` names what the share is of (the host's wait for the batch,
    or on CUDA the GPU's idle time)."""

    share: float
    low: float
    high: float
    band: str | None
    between: str | None
    edge: float | None
    steps: int
    confidence: float = CONFIDENCE
    clipped: bool = False
    source: str = "data wait"

    @property
    def input_bound(self) -> bool | None:
        """Whether the interval decides the step waits for its input (True), does not (False), or neither (None)."""
        if self.low >= INPUT_EDGE:
            return True
        if self.high < INPUT_EDGE:
            return False
        return None

    @property
    def interval(self) -> str:
        """``[95% CI 2.8%..100.0%, clipped to [0, 1]]``."""
        return (
            f"[{self.confidence:.0%} CI {self.low:.1%}..{self.high:.1%}{', clipped to [0, 1]' if self.clipped else ''}]"
        )


@dataclass(frozen=True)
class Periodic:
    """Work done every N steps in the window (an evaluation, a checkpoint), kept out of the input's figures.

    ``steps_at``: per run, the window's steps (0-based) that carry it; ``reason``: why none was found or
    why there were too few steps to tell.
    """

    every: int | None
    steps_at: tuple[tuple[int, ...], ...]
    extra_ms_per_step: float = 0.0
    share: float = 0.0
    long_step_ms: float | None = None
    reason: str | None = None

    @property
    def found(self) -> bool:
        return self.every is not None and any(self.steps_at)

    @property
    def steps(self) -> int:
        return sum(len(s) for s in self.steps_at)


@dataclass(frozen=True)
class PeriodicSync:
    """A read the sync probe saw every N steps."""

    op: str
    site: str
    per_step: float
    seen: str


@dataclass(frozen=True)
class Observed:
    """The step ledger's observed steps, averaged over the runs."""

    observed_steps: int = 0
    wall_ms: float = 0.0
    sync_ms: float = 0.0
    copy_ms: float = 0.0
    syncs_per_step: float = 0.0
    sync_sites: dict[str, float] = field(default_factory=dict)
    steps: tuple[dict[str, Any], ...] = ()  # the timeline's observed steps (JSON, drawn by the PNG only)
    periodic_syncs: tuple[PeriodicSync, ...] = ()


@dataclass(frozen=True)
class Ledger:
    """Per step, in ms, parts that add up to the window's mean step, each between 0 and 100% of it.

    ``compute`` is the cached-batch step where it fits in the window's own work, else unavailable; then
    ``rest`` is None and ``work_ms`` (compute and the rest) is one part.
    """

    step_ms: float
    wait_ms: float
    copy_ms: float
    syncs_ms: float
    work_ms: float  # compute and the rest
    compute: float | Unavailable
    periodic_ms: float
    periodic_every: int | None
    cpu: bool
    syncs_per_step: float = 0.0
    sync_sites: dict[str, float] = field(default_factory=dict)
    periodic_syncs: tuple[PeriodicSync, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def sync_name(self) -> str:
        return "reads to Python" if self.cpu else "host syncs"

    @property
    def rest(self) -> float | None:
        c = known(self.compute)
        return None if c is None else self.work_ms - c

    @property
    def parts(self) -> dict[str, float]:
        """The parts by name, in the report's order."""
        out = {"wait for the batch": self.wait_ms, "host->device copy": self.copy_ms, self.sync_name: self.syncs_ms}
        c = known(self.compute)
        if c is None:
            out["compute and the rest"] = self.work_ms
        else:
            out["compute"], out["the rest"] = c, self.work_ms - c
        if self.periodic_ms > 0:
            out[f"periodic work (every {self.periodic_every} steps)"] = self.periodic_ms
        return out

    def share(self, ms: float | None) -> float:
        return ms / self.step_ms if ms is not None and self.step_ms > 0 else 0.0

    @property
    def shares(self) -> dict[str, float]:
        return {k: self.share(v) for k, v in self.parts.items()}


@dataclass(frozen=True)
class CachedBatch:
    """Fed a cached batch the step takes ``cached_ms``; the input costs the steady step less that."""

    step_ms: float  # the steady mean step (periodic work left out)
    cached_ms: float
    cached_low: float
    cached_high: float
    saves_ms: float
    saves_low: float
    saves_high: float
    confidence: float = CONFIDENCE


@dataclass(frozen=True)
class Efficiency:
    """Input efficiency with its two-level interval (runs, then their steps), periodic work left out."""

    value: float
    low: float
    high: float
    runs: int
    periodic_left_out: bool
    caveat: str | None = None
    confidence: float = CONFIDENCE


@dataclass(frozen=True)
class Stages:
    """The loader ledger of the last run: CPU ms per sample by stage, capacity, headroom, and one reconciling line."""

    num_workers: int | None
    persistent: bool
    main_load_ms_per_step: float | None
    capacity: float | None
    capacity_after_overhead: float | None
    headroom: float | None
    headroom_reason: str | None
    demand: str | None
    cores_busy: float | None
    usable_cores: int | None
    overhead_note: str | None = None
    by: dict[str, float] = field(default_factory=dict)  # ms of CPU per sample, costliest stage first
    code: dict[str, str] = field(default_factory=dict)
    process_ms_per_sample: float | None = None
    reconcile: str | None = None
    unavailable: str | None = None  # the ledger's reason where it measured no stage
    epochs_started: int = 0  # epochs begun in the window: workers forked again (when they do not persist)

    @property
    def available(self) -> bool:
        return self.unavailable is None

    @property
    def costliest(self) -> str | None:
        return max(self.by, key=lambda k: self.by[k]) if self.by else None

    @property
    def shares(self) -> dict[str, float]:
        total = sum(self.by.values())
        return {k: v / total if total > 0 else 0.0 for k, v in self.by.items()}


@dataclass(frozen=True)
class Contention:
    """The machine's load over the runs, as the Results recorded it (:func:`perfsuite.judge.contention.load_of`).

    ``reasons``: why *other processes* slow the step (the neighbours' share of the cores, the runnable tasks beyond
    the job's own); ``own``: why the job's own threads and workers do (more of them than cores). CPU pressure and
    the run queue count the job's own tasks, so neither alone makes the machine busy.
    """

    cpu_pressure: float | Unavailable
    runqueue_per_core: float | Unavailable
    foreign: float | Unavailable  # other processes' and the hypervisor's share of the usable cores
    loader_cores_busy: float | Unavailable
    usable_cores: int
    runs: int
    reasons: tuple[str, ...] = ()
    threads: int | None = None  # the training process's intra-op threads, as the runs recorded them
    workers: int | None = None
    own: tuple[str, ...] = ()

    @property
    def busy(self) -> bool:
        """Other processes slow the step (never the job's own threads and workers)."""
        return bool(self.reasons)

    @property
    def oversubscribed(self) -> bool:
        """The job's own threads and workers exceed the usable cores."""
        return bool(self.own)

    @property
    def others_runnable_per_core(self) -> float | None:
        """Runnable tasks per usable core beyond the job's own (its intra-op threads and its loader's busy cores)."""
        queue = known(self.runqueue_per_core)
        if queue is None:
            return None
        own = (self.threads or 1) + (known(self.loader_cores_busy) or 0.0)
        return max(0.0, queue - own / max(1, self.usable_cores))

    source = "each run's own contention record (perfsuite.probes.contention)"


# --------------------------------------------------------------------------- counterfactuals and findings


@dataclass(frozen=True)
class Measured:
    """A fix's samples/s ratio against the job as it is, over interleaved pairs, with its t-interval."""

    ratio: float
    low: float | None
    high: float | None
    pairs: int
    label: str
    contended: str | None = None  # the runs' contention beyond the wall-clock bound, as ab marks it

    @property
    def gain(self) -> bool:
        """A measured gain: the interval lies above 1."""
        return self.low is not None and self.low > 1.0


@dataclass(frozen=True)
class Predicted:
    """A fix's samples/s ratio predicted from this diagnosis's ledger, with the model that gave it."""

    ratio: float
    basis: str


@dataclass(frozen=True)
class Tried:
    """One counterfactual run interleaved with the job as it is."""

    fix: Fix
    label: str  # "num_workers 2 -> 1", or the script's line and arguments
    change: str  # the fix as the user writes it
    why: str
    measured: Measured | Unavailable
    base: tuple[float, ...] = ()
    tried: tuple[float, ...] = ()
    workers: int | None = None  # the worker count it ran with, where it changed it


@dataclass(frozen=True)
class Counterfactuals:
    """The fixes tried, by their :class:`Fix`, and why each other one was not (``none``: why none ran at all)."""

    tried: dict[Fix, Tried] = field(default_factory=dict)
    not_tried: dict[Fix, str] = field(default_factory=dict)
    none: str | None = None

    def measured(self, fix: Fix) -> Measured | Unavailable:
        if fix in self.tried:
            return self.tried[fix].measured
        return Unavailable(f"not tried: {self.not_tried.get(fix) or self.none or 'no counterfactual for it'}")


@dataclass(frozen=True)
class Finding:
    """What limits the job, the evidence, the fix, and its gain predicted beside measured (or why not)."""

    title: str
    evidence: str
    fix: str
    kind: str
    predicted: Predicted | Unavailable
    measured: Measured | Unavailable
    bottleneck: bool = False  # the finding that names what limits the step (the headline when nothing was measured)

    @property
    def effect(self) -> str:
        return effect_text(self.predicted, self.measured)


def effect_text(predicted: Predicted | Unavailable, measured: Measured | Unavailable) -> str:
    """``predicted x1.30 samples/s (basis); measured x1.25 [95% CI x1.10..x1.42], 3 interleaved pairs (label)``."""
    if isinstance(predicted, Predicted):
        p = f"predicted x{predicted.ratio:.2f} samples/s ({predicted.basis})"
    else:
        p = f"predicted: {predicted.reason}"
    if isinstance(measured, Measured):
        m = f"measured x{measured.ratio:.2f}"
        if measured.low is not None and measured.high is not None:
            m += f" [{CONFIDENCE:.0%} CI x{measured.low:.2f}..x{measured.high:.2f}]"
        m += f", {measured.pairs} interleaved pair(s) ({measured.label})"
        if measured.contended:
            m += f"; contended runs, read with care: {measured.contended}"
    else:
        m = f"measured: {measured.reason}"
    return f"{p}; {m}"


def plain(obj: Any) -> Any:
    """JSON-ready data: dataclasses as objects (a Finding with its effect), enums by value, tuples as lists."""
    if isinstance(obj, enum.Enum):
        return obj.value
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        for extra in ("effect", "found", "parts", "shares", "costliest", "busy", "rest", "gain", "available"):
            if hasattr(type(obj), extra) and isinstance(getattr(type(obj), extra), property):
                out[extra] = plain(getattr(obj, extra))
        return out
    if isinstance(obj, dict):
        return {(k.value if isinstance(k, enum.Enum) else str(k)): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(x) for x in obj]
    return obj
