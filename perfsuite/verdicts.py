"""Verdicts: one metric judged against a threshold or a stored baseline.

Two kinds of judgement, kept apart because they answer different questions:

* **Thresholds** ("is this run good enough?"): small check classes in the
  shape of pytest-benchmark's ``compute``/``fails``, parsed from keyword names
  ``min_<metric>``, ``max_<metric>`` or a bare boolean metric (``amp_engaged``).
* **Baseline comparison** ("did this change make it worse?"):
  deterministic counters compare exactly; ``step_ms`` compares its raw
  per-step samples with a rule that needs a large effect AND a significant
  one (see :func:`compare_timing`); metrics that only have a summary value
  compare within a tolerance and are ``inconclusive`` beyond it, because
  without samples noise cannot be told from change.

An unavailable metric is never a pass: it is ``unavailable``, with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from perfsuite.errors import FingerprintMismatch, PerfsuiteError
from perfsuite.results import METRIC_NAMES, Metric, Result
from perfsuite.stats import RatioInterval, bootstrap_ratio_ci, mann_whitney_u, median

DEFAULT_FACTOR = 1.05
DEFAULT_ALPHA = 0.01
MIN_SAMPLES = 5
DRIFT_BLOCKS = 3


class Outcome(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    REGRESSED = "regressed"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"
    UNAVAILABLE = "unavailable"
    NEW = "new"

    def __str__(self) -> str:
        return self.value


FAILING = frozenset({Outcome.FAIL, Outcome.REGRESSED})


@dataclass(frozen=True)
class Verdict:
    """One metric's judgement. For a threshold verdict, ``base`` holds the bound.

    ``ratio`` is head / base (for step_ms: of the medians); ``cause`` is the
    likely reason in the workload's terms, filled in by the plugin.
    """

    test_id: str
    metric: str
    base: float | int | bool | None
    head: float | int | bool | None
    ratio: float | None
    outcome: Outcome
    message: str
    cause: str | None = None

    @property
    def failed(self) -> bool:
        return self.outcome in FAILING

    def with_cause(self, cause: str | None) -> Verdict:
        return replace(self, cause=cause)

    def to_dict(self) -> dict[str, Any]:
        return {"test_id": self.test_id, "metric": self.metric, "base": self.base, "head": self.head,
                "ratio": self.ratio, "outcome": self.outcome.value, "message": self.message, "cause": self.cause}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(test_id=data["test_id"], metric=data["metric"], base=data["base"], head=data["head"],
                   ratio=data["ratio"], outcome=Outcome(data["outcome"]), message=data["message"],
                   cause=data.get("cause"))


def format_value(value: Any) -> str:
    """Short, readable numbers for messages and tables: 0.62, 12.35, 3200."""
    if value is None:
        return "-"
    if isinstance(value, bool) or isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    return str(value)


# --------------------------------------------------------------------------- thresholds

BOOL_METRICS = ("amp_engaged",)
NUMERIC_METRICS = tuple(m for m in METRIC_NAMES if m not in BOOL_METRICS)


@dataclass(frozen=True)
class Threshold:
    """A bound on one metric. ``compute`` reads the metric, ``fails`` judges its value."""

    metric: str
    bound: float | bool

    @property
    def name(self) -> str:
        raise NotImplementedError

    def compute(self, result: Result) -> Metric:
        return result.metric(self.metric)

    def fails(self, value: Any) -> bool:
        raise NotImplementedError

    def describe(self, value: Any) -> str:
        raise NotImplementedError

    def check(self, result: Result, test_id: str) -> Verdict:
        metric = self.compute(result)
        if not metric.available:
            return Verdict(test_id, self.metric, self.bound, None, None, Outcome.UNAVAILABLE,
                           f"{self.metric} unavailable ({self.name}): {metric.reason}")
        value = metric.value
        failed = self.fails(value)
        ratio = _ratio(self.bound, value) if not isinstance(self.bound, bool) else None
        return Verdict(test_id, self.metric, self.bound, value, ratio,
                       Outcome.FAIL if failed else Outcome.PASS, self.describe(value))


@dataclass(frozen=True)
class AtLeast(Threshold):
    """``min_<metric>=bound``: fails below the bound."""

    @property
    def name(self) -> str:
        return f"min_{self.metric}"

    def fails(self, value: Any) -> bool:
        return float(value) < float(self.bound)

    def describe(self, value: Any) -> str:
        op = "<" if self.fails(value) else ">="
        return f"{self.metric} {format_value(value)} {op} {format_value(self.bound)}"


@dataclass(frozen=True)
class AtMost(Threshold):
    """``max_<metric>=bound``: fails above the bound."""

    @property
    def name(self) -> str:
        return f"max_{self.metric}"

    def fails(self, value: Any) -> bool:
        return float(value) > float(self.bound)

    def describe(self, value: Any) -> str:
        op = ">" if self.fails(value) else "<="
        return f"{self.metric} {format_value(value)} {op} {format_value(self.bound)}"


@dataclass(frozen=True)
class Equals(Threshold):
    """``<bool metric>=True|False``: fails when the metric differs."""

    @property
    def name(self) -> str:
        return self.metric

    def fails(self, value: Any) -> bool:
        return bool(value) is not bool(self.bound)

    def describe(self, value: Any) -> str:
        op = "!=" if self.fails(value) else "=="
        return f"{self.metric} {format_value(bool(value))} {op} {format_value(self.bound)}"


def known_threshold_names() -> tuple[str, ...]:
    return tuple(f"{kind}_{m}" for m in NUMERIC_METRICS for kind in ("min", "max")) + BOOL_METRICS


def parse_threshold(name: str, bound: Any) -> Threshold:
    """``parse_threshold("max_data_wait_frac", 0.05)`` -> AtMost("data_wait_frac", 0.05)."""
    if name in BOOL_METRICS:
        if not isinstance(bound, bool):
            raise PerfsuiteError(f"{name}={bound!r}: {name} is a yes/no metric; write {name}=True or {name}=False")
        return Equals(name, bound)
    kind, _, metric = name.partition("_")
    if kind not in ("min", "max") or metric not in NUMERIC_METRICS:
        raise PerfsuiteError(
            f"unknown threshold {name!r}; write one of: {', '.join(known_threshold_names())}"
        )
    if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not math.isfinite(bound):
        raise PerfsuiteError(f"{name}={bound!r}: the bound must be a finite number, e.g. {name}=0.05")
    return AtLeast(metric, bound) if kind == "min" else AtMost(metric, bound)


def parse_thresholds(bounds: Mapping[str, Any]) -> tuple[Threshold, ...]:
    """Thresholds from keyword form, e.g. a marker's ``max_syncs_per_step=0, amp_engaged=True``."""
    return tuple(parse_threshold(name, bound) for name, bound in bounds.items())


def check_thresholds(result: Result, test_id: str, thresholds: Sequence[Threshold]) -> list[Verdict]:
    return [t.check(result, test_id) for t in thresholds]


# --------------------------------------------------------------------------- baseline comparison

# Counters that a given code path produces exactly; any increase is a regression.
EXACT_COUNTERS = ("syncs_per_step", "graph_breaks", "recompiles", "label_violations")
# Metrics with only a summary value in a Result; compared within a tolerance.
SUMMARY_METRICS = ("data_wait_frac", "gpu_util", "gpu_power_w", "gpu_mem_mb", "sm_clock_mhz",
                   "compile_s", "amp_lowp_frac", "peak_mem_mb", "peak_rss_mb")
# Fractions get an absolute tolerance (0.01 -> 0.02 is noise, not a doubling); others relative.
ABS_TOLERANCE = {"data_wait_frac": 0.05, "amp_lowp_frac": 0.05}
REL_TOLERANCE = 0.10


@dataclass(frozen=True)
class TimingComparison:
    """Everything :func:`compare_timing` looked at, for messages and tests."""

    outcome: Outcome
    base_median: float | None
    head_median: float | None
    log_ratio: float | None
    p_slower: float | None
    p_faster: float | None
    interval: RatioInterval | None
    reason: str

    @property
    def ratio(self) -> float | None:
        return None if self.log_ratio is None else math.exp(self.log_ratio)


def compare_timing(
    base: Sequence[float],
    head: Sequence[float],
    factor: float = DEFAULT_FACTOR,
    alpha: float = DEFAULT_ALPHA,
    min_samples: int = MIN_SAMPLES,
    blocks: int = DRIFT_BLOCKS,
) -> TimingComparison:
    """Judge raw step times (lower is better) of head against base.

    regressed: median ratio > factor AND Mann-Whitney one-sided p < alpha AND
    the (1 - alpha) bootstrap interval of the ratio lies above 1 AND the drift
    gate holds: cut each run into ``blocks`` consecutive blocks, and every
    head block's median must exceed every base block's. improved is the
    mirror image. unchanged: the interval lies within [1/factor, factor].
    Anything else is inconclusive.

    Why the drift gate: both tests treat a run's steps as independent, but
    on a shared machine the level drifts between runs (a neighbour's compile
    job), so they call any two runs different. Drift within a run is the one
    trace of that noise a single base/head pair carries; a real slowdown
    shows in every block, a burst of contention does not. The factor gate
    keeps tiny real differences quiet. Measured rates: scripts/verdict_power.py.
    """
    _validate_rule(factor, alpha)
    if len(base) < min_samples or len(head) < min_samples:
        return TimingComparison(Outcome.INCONCLUSIVE, None, None, None, None, None, None,
                                f"too few samples (base n={len(base)}, head n={len(head)}; need {min_samples} or more)")
    if min(base) <= 0 or min(head) <= 0:
        return TimingComparison(Outcome.INCONCLUSIVE, None, None, None, None, None, None,
                                "samples must be positive times to form a ratio")
    base_median, head_median = median(base), median(head)
    log_ratio = math.log(head_median) - math.log(base_median)
    p_slower = mann_whitney_u(head, base, "greater").p_value
    p_faster = mann_whitney_u(base, head, "greater").p_value
    interval = bootstrap_ratio_ci(base, head, confidence=1.0 - alpha)
    base_blocks, head_blocks = block_medians(base, blocks), block_medians(head, blocks)
    log_factor = math.log(factor)
    slower = log_ratio > log_factor and p_slower < alpha and interval.log_low > 0.0
    faster = log_ratio < -log_factor and p_faster < alpha and interval.log_high < 0.0
    if slower and min(head_blocks) > max(base_blocks):
        outcome, reason = Outcome.REGRESSED, f"slower by more than x{factor:g}, significant, in every part of the run"
    elif faster and max(head_blocks) < min(base_blocks):
        outcome, reason = Outcome.IMPROVED, f"faster by more than x{factor:g}, significant, in every part of the run"
    elif slower or faster:
        outcome, reason = Outcome.INCONCLUSIVE, ("significant, but the runs drift as much as they differ "
                                                 "(block medians overlap): a busy machine? re-run")
    elif interval.log_low >= -log_factor and interval.log_high <= log_factor:
        outcome, reason = Outcome.UNCHANGED, f"interval within x{1 / factor:.3g}..x{factor:g}"
    else:
        outcome, reason = Outcome.INCONCLUSIVE, "too noisy to tell: the interval spans the margin"
    return TimingComparison(outcome, base_median, head_median, log_ratio, p_slower, p_faster, interval, reason)


def block_medians(samples: Sequence[float], blocks: int) -> list[float]:
    """Medians of ``blocks`` consecutive, near-equal slices of the samples (in measurement order)."""
    blocks = max(1, min(blocks, len(samples)))
    size, extra = divmod(len(samples), blocks)
    out, start = [], 0
    for i in range(blocks):
        stop = start + size + (1 if i < extra else 0)
        out.append(median(samples[start:stop]))
        start = stop
    return out


def _validate_rule(factor: float, alpha: float) -> None:
    if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 1.0):
        raise PerfsuiteError(f"factor={factor!r} must be a number above 1; write e.g. 1.05 for a 5% margin")
    if not (isinstance(alpha, (int, float)) and 0.0 < alpha < 0.5):
        raise PerfsuiteError(f"alpha={alpha!r} must lie between 0 and 0.5; write e.g. 0.01")


def compare_results(
    base: Result,
    head: Result,
    test_id: str,
    factor: float = DEFAULT_FACTOR,
    alpha: float = DEFAULT_ALPHA,
    force: bool = False,
) -> list[Verdict]:
    """Verdicts for head against its baseline: step_ms, then exact counters, then summary metrics.

    Only metrics that either result measured are judged. ``samples_per_s``
    follows from step_ms and is named in its message, not judged twice.
    """
    _validate_rule(factor, alpha)
    base_key, head_key = base.fingerprint.key(), head.fingerprint.key()
    if base_key != head_key and not force:
        raise FingerprintMismatch(
            f"{test_id}: the baseline was recorded on {base_key!r} but this run is {head_key!r}; "
            "timings from different machines do not compare. Record a baseline here with "
            "`pytest --perfsuite-save` (or `nox -s baseline`), or pass --force to compare anyway"
        )
    verdicts = [_compare_step_ms(base, head, test_id, factor, alpha)]
    present = set(base.metrics) | set(head.metrics)
    for name in EXACT_COUNTERS + BOOL_METRICS + SUMMARY_METRICS:
        if name in present:
            verdicts.append(_compare_metric(base, head, test_id, name))
    return verdicts


def _compare_step_ms(base: Result, head: Result, test_id: str, factor: float, alpha: float) -> Verdict:
    base_samples, head_samples = base.samples.get("step_ms", []), head.samples.get("step_ms", [])
    if not head_samples and not head.metric("step_ms").available:
        return Verdict(test_id, "step_ms", None, None, None, Outcome.UNAVAILABLE,
                       f"step_ms unavailable: {head.metric('step_ms').reason or 'no raw samples in head'}")
    if not base_samples:
        return Verdict(test_id, "step_ms", base.value("step_ms"), head.value("step_ms"), None, Outcome.INCONCLUSIVE,
                       "step_ms: the baseline has no raw step_ms samples; re-record it with this perfsuite")
    t = compare_timing(base_samples, head_samples, factor, alpha)
    if t.log_ratio is None:
        return Verdict(test_id, "step_ms", None, None, None, t.outcome, f"step_ms {t.outcome}: {t.reason}")
    ratio = t.ratio
    throughput = ""
    if base.value("samples_per_s") and head.value("samples_per_s"):
        throughput = (f"; samples_per_s {format_value(float(base.value('samples_per_s')))} -> "
                      f"{format_value(float(head.value('samples_per_s')))}")
    message = (
        f"step_ms median {format_value(t.base_median)} -> {format_value(t.head_median)} ms "
        f"(x{ratio:.3f}, {t.interval.confidence:.0%} CI x{t.interval.low:.3f}..x{t.interval.high:.3f}, "
        f"p_slower={t.p_slower:.2g}, n={len(base_samples)}/{len(head_samples)}){throughput}: {t.reason}"
    )
    return Verdict(test_id, "step_ms", t.base_median, t.head_median, ratio, t.outcome, message)


def _compare_metric(base: Result, head: Result, test_id: str, name: str) -> Verdict:
    b, h = base.metric(name), head.metric(name)
    if not h.available:
        return Verdict(test_id, name, b.value, None, None, Outcome.UNAVAILABLE, f"{name} unavailable: {h.reason}")
    if not b.available:
        return Verdict(test_id, name, None, h.value, None, Outcome.NEW,
                       f"{name} {format_value(h.value)}: no baseline value ({b.reason})")
    if name in BOOL_METRICS:
        return _compare_bool(test_id, name, bool(b.value), bool(h.value))
    if name in EXACT_COUNTERS:
        return _compare_counter(test_id, name, float(b.value), float(h.value), b.value, h.value)
    return _compare_summary(test_id, name, float(b.value), float(h.value))


def _ratio(base: Any, head: Any) -> float | None:
    try:
        return float(head) / float(base) if float(base) != 0 else None
    except (TypeError, ValueError):
        return None


def _compare_bool(test_id: str, name: str, b: bool, h: bool) -> Verdict:
    if b == h:
        outcome = Outcome.UNCHANGED
    else:
        outcome = Outcome.REGRESSED if b and not h else Outcome.IMPROVED
    return Verdict(test_id, name, b, h, None, outcome, f"{name} {b} -> {h}")


def _compare_counter(test_id: str, name: str, b: float, h: float, b_raw: Any, h_raw: Any) -> Verdict:
    if h > b:
        outcome = Outcome.REGRESSED
    elif h < b:
        outcome = Outcome.IMPROVED
    else:
        outcome = Outcome.UNCHANGED
    return Verdict(test_id, name, b_raw, h_raw, _ratio(b, h), outcome,
                   f"{name} {format_value(b_raw)} -> {format_value(h_raw)} (exact)")


def _compare_summary(test_id: str, name: str, b: float, h: float) -> Verdict:
    if name in ABS_TOLERANCE:
        tol, within = f"+-{ABS_TOLERANCE[name]:g}", abs(h - b) <= ABS_TOLERANCE[name]
    else:
        tol, within = f"+-{REL_TOLERANCE:.0%}", abs(h - b) <= REL_TOLERANCE * max(abs(b), abs(h))
    if within:
        return Verdict(test_id, name, b, h, _ratio(b, h), Outcome.UNCHANGED,
                       f"{name} {format_value(b)} -> {format_value(h)} (within {tol})")
    return Verdict(test_id, name, b, h, _ratio(b, h), Outcome.INCONCLUSIVE,
                   f"{name} {format_value(b)} -> {format_value(h)}: beyond {tol}, but a single summary value "
                   "cannot tell noise from change; re-run or compare within one session")
