"""The one verdict engine: thresholds, baseline comparison and the committed exact gate.

The plugin, ``perfsuite compare`` and the fault self-test (:mod:`perfsuite.tools.catch`)
all judge through this module, and every rule is chosen by the metric's
declared kind (:mod:`perfsuite.core.metrics`), so there is one answer per question:

* **Thresholds** ("is this run good enough?"): small check classes in the
  shape of pytest-benchmark's ``compute``/``fails``, parsed from keyword names
  ``min_<metric>``, ``max_<metric>`` or a flag (``amp_engaged=True``), for any
  registered metric, a user's own included.
* **Baseline comparison** ("did this change make it worse?",
  :func:`compare_results`): exact kinds compare exactly in both directions;
  a metric measured in the base and unavailable in the head (nothing
  compiled any more) is a regression with that reason; timing kinds are
  judged on their raw per-step samples (step times by :func:`compare_timing`,
  per-step data-wait shares by :func:`compare_shares`); noisy summaries are
  unchanged within their tolerance and inconclusive beyond it.
* **The exact gate** ("does the committed file still say what the code
  does?", :func:`check_exact`): any difference fails, an improvement too,
  with the command that updates the file.

An unavailable metric is never a pass: it is ``unavailable``, with the reason.
Failing verdicts carry their likely cause (:mod:`perfsuite.judge.causes`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from perfsuite.core import metrics as registry
from perfsuite.core.results import Metric, Result
from perfsuite.errors import FingerprintMismatch, PerfsuiteError
from perfsuite.judge.stats import RatioInterval, bootstrap_ratio_ci, mann_whitney_u, median

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
    CHANGED = "changed"  # an exact value moved where no direction is better, or the committed file is stale

    def __str__(self) -> str:
        return self.value


FAILING = frozenset({Outcome.FAIL, Outcome.REGRESSED, Outcome.CHANGED})


@dataclass(frozen=True)
class Verdict:
    """One metric's judgement. For a threshold verdict, ``base`` holds the bound.

    ``ratio`` is head / base (for step_ms: of the medians); ``cause`` is the
    likely reason in the workload's terms, filled in by the plugin.
    """

    test_id: str
    metric: str
    base: float | int | bool | str | None
    head: float | int | bool | str | None
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
        return {
            "test_id": self.test_id,
            "metric": self.metric,
            "base": self.base,
            "head": self.head,
            "ratio": self.ratio,
            "outcome": self.outcome.value,
            "message": self.message,
            "cause": self.cause,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(
            test_id=data["test_id"],
            metric=data["metric"],
            base=data["base"],
            head=data["head"],
            ratio=data["ratio"],
            outcome=Outcome(data["outcome"]),
            message=data["message"],
            cause=data.get("cause"),
        )


def format_value(value: Any) -> str:
    """Short, readable numbers for messages and tables: 0.62, 12.35, 3200."""
    if value is None:
        return "-"
    if isinstance(value, (bool, int)):
        return str(value)
    if isinstance(value, float):
        return f"{value:.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    return str(value)


# --------------------------------------------------------------------------- thresholds


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
            return Verdict(
                test_id,
                self.metric,
                self.bound,
                None,
                None,
                Outcome.UNAVAILABLE,
                f"{self.metric} unavailable ({self.name}): {metric.reason}",
            )
        value = metric.value
        failed = self.fails(value)
        ratio = _ratio(self.bound, value) if not isinstance(self.bound, bool) else None
        return Verdict(
            test_id,
            self.metric,
            self.bound,
            value,
            ratio,
            Outcome.FAIL if failed else Outcome.PASS,
            self.describe(value),
        )


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
    """Every bound a marker may name, from the metric registry (a user's registered metrics included)."""
    out: list[str] = []
    for spec in registry.all_specs():
        if spec.boundable == "flag":
            out.append(spec.name)
        elif spec.boundable == "range":
            out += [f"min_{spec.name}", f"max_{spec.name}"]
    return tuple(out)


def parse_threshold(name: str, bound: Any) -> Threshold:
    """``parse_threshold("max_data_wait_frac", 0.05)`` -> AtMost("data_wait_frac", 0.05)."""
    spec = registry.find(name)
    if spec is not None and spec.boundable == "flag":
        if not isinstance(bound, bool):
            raise PerfsuiteError(f"{name}={bound!r}: {name} is a yes/no metric; write {name}=True or {name}=False")
        return Equals(name, bound)
    kind, _, metric = name.partition("_")
    target = registry.find(metric)
    if kind not in ("min", "max") or target is None or target.boundable != "range":
        raise PerfsuiteError(f"unknown threshold {name!r}; write one of: {', '.join(known_threshold_names())}")
    if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not math.isfinite(bound):
        raise PerfsuiteError(f"{name}={bound!r}: the bound must be a finite number, e.g. {name}=0.05")
    return AtLeast(metric, bound) if kind == "min" else AtMost(metric, bound)


def parse_thresholds(bounds: Mapping[str, Any]) -> tuple[Threshold, ...]:
    """Thresholds from keyword form, e.g. a marker's ``max_syncs_per_step=0, amp_engaged=True``."""
    return tuple(parse_threshold(name, bound) for name, bound in bounds.items())


def check_thresholds(result: Result, test_id: str, thresholds: Sequence[Threshold]) -> list[Verdict]:
    return [t.check(result, test_id) for t in thresholds]


# --------------------------------------------------------------------------- timing rules


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

    @classmethod
    def undecided(cls, reason: str) -> TimingComparison:
        """Inconclusive before any statistic was formed, with the reason."""
        return cls(Outcome.INCONCLUSIVE, None, None, None, None, None, None, reason)


def _too_few(base: Sequence[float], head: Sequence[float], min_samples: int) -> TimingComparison | None:
    if len(base) < min_samples or len(head) < min_samples:
        return TimingComparison.undecided(
            f"too few samples (base n={len(base)}, head n={len(head)}; need {min_samples} or more)"
        )
    return None


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
    if (short := _too_few(base, head, min_samples)) is not None:
        return short
    if min(base) <= 0 or min(head) <= 0:
        return TimingComparison.undecided("samples must be positive times to form a ratio")
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
        outcome, reason = (
            Outcome.INCONCLUSIVE,
            ("significant, but the runs drift as much as they differ (block medians overlap): a busy machine? re-run"),
        )
    elif interval.log_low >= -log_factor and interval.log_high <= log_factor:
        outcome, reason = Outcome.UNCHANGED, f"interval within x{1 / factor:.3g}..x{factor:g}"
    else:
        outcome, reason = Outcome.INCONCLUSIVE, "too noisy to tell: the interval spans the margin"
    return TimingComparison(outcome, base_median, head_median, log_ratio, p_slower, p_faster, interval, reason)


MIN_BASE_RUNS = 3  # runs a baseline needs before its between-run variance is used


def compare_between_runs(
    base_runs: Sequence[Sequence[float]],
    head: Sequence[float],
    factor: float = DEFAULT_FACTOR,
    alpha: float = DEFAULT_ALPHA,
    min_samples: int = MIN_SAMPLES,
) -> TimingComparison:
    """Judge head's step times against a baseline of several runs, with the variance *between* runs.

    With k >= 3 base runs, let m_i be the log median of base run i, mu and s
    their mean and standard deviation, and h head's log median. Regressed:
    h - mu > log(factor), AND the one-sided prediction-interval test
    t = (h - mu) / (s * sqrt(1 + 1/k)) with k - 1 degrees of freedom gives
    p < alpha (head lies beyond what run-to-run drift produced in the base),
    AND Mann-Whitney of head against the pooled base steps gives p < alpha.
    Improved is the mirror image. Unchanged: |h - mu| <= log(factor) and
    neither test fires. Anything else is inconclusive. When the base runs do
    not vary (s = 0) or fewer than 3 runs are stored, the single-run rule
    (:func:`compare_timing`) judges the newest run.
    """
    from scipy.stats import t as t_dist

    _validate_rule(factor, alpha)
    runs = [list(r) for r in base_runs if len(r) >= min_samples and min(r) > 0]
    if len(runs) < MIN_BASE_RUNS or len(head) < min_samples or min(head) <= 0:
        return compare_timing(runs[-1] if runs else [], head, factor, alpha, min_samples)
    logs = [math.log(median(r)) for r in runs]
    k = len(logs)
    mu = sum(logs) / k
    sd = math.sqrt(sum((x - mu) ** 2 for x in logs) / (k - 1))
    if sd == 0.0:
        return compare_timing(runs[-1], head, factor, alpha, min_samples)
    h = math.log(median(head))
    diff = h - mu
    t = diff / (sd * math.sqrt(1 + 1 / k))
    p_slower, p_faster = float(t_dist.sf(t, k - 1)), float(t_dist.cdf(t, k - 1))
    pooled = [x for r in runs for x in r]
    mw_slower = mann_whitney_u(head, pooled, "greater").p_value
    mw_faster = mann_whitney_u(pooled, head, "greater").p_value
    log_factor = math.log(factor)
    spread = f"between-run sd x{math.exp(sd):.3f} over {k} base runs"
    if diff > log_factor and p_slower < alpha and mw_slower < alpha:
        outcome, reason = (
            Outcome.REGRESSED,
            f"slower by more than x{factor:g}, beyond the base runs' drift ({spread}, p={p_slower:.2g})",
        )
    elif diff < -log_factor and p_faster < alpha and mw_faster < alpha:
        outcome, reason = (
            Outcome.IMPROVED,
            f"faster by more than x{factor:g}, beyond the base runs' drift ({spread}, p={p_faster:.2g})",
        )
    elif abs(diff) <= log_factor:
        outcome, reason = Outcome.UNCHANGED, f"within x{1 / factor:.3g}..x{factor:g} of the base runs ({spread})"
    else:
        outcome, reason = (
            Outcome.INCONCLUSIVE,
            (
                f"moved by x{math.exp(diff):.3f}, within what the base runs drift "
                f"({spread}, p={min(p_slower, p_faster):.2g})"
            ),
        )
    return TimingComparison(
        outcome, math.exp(mu), math.exp(h), diff, min(p_slower, 1.0), min(p_faster, 1.0), None, reason
    )


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


def compare_shares(
    base: Sequence[float],
    head: Sequence[float],
    margin: float,
    alpha: float = DEFAULT_ALPHA,
    min_samples: int = MIN_SAMPLES,
) -> TimingComparison:
    """Judge per-step shares (fractions in [0, 1], higher is worse) of head against base.

    regressed: the mean share rose by at least ``margin`` (absolute) AND
    Mann-Whitney one-sided p < alpha; improved is the mirror image;
    unchanged: the means differ by less than ``margin``. Shares near 0 make
    ratios meaningless (0.01 -> 0.02 is noise, not a doubling), hence an
    absolute margin. ``log_ratio`` holds the difference of the means.
    """
    if (short := _too_few(base, head, min_samples)) is not None:
        return short
    b, h = sum(base) / len(base), sum(head) / len(head)
    p_slower = mann_whitney_u(head, base, "greater").p_value
    p_faster = mann_whitney_u(base, head, "greater").p_value
    if h - b >= margin and p_slower < alpha:
        outcome, reason = Outcome.REGRESSED, f"rose by {h - b:.2f} (>= {margin:g}), p={p_slower:.2g}"
    elif b - h >= margin and p_faster < alpha:
        outcome, reason = Outcome.IMPROVED, f"fell by {b - h:.2f} (>= {margin:g}), p={p_faster:.2g}"
    elif abs(h - b) < margin:
        outcome, reason = Outcome.UNCHANGED, f"within +-{margin:g}"
    else:
        outcome, reason = Outcome.INCONCLUSIVE, f"moved by {h - b:+.2f} but not significantly (p={p_slower:.2g})"
    return TimingComparison(outcome, b, h, h - b, p_slower, p_faster, None, reason)


def _validate_rule(factor: float, alpha: float) -> None:
    if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 1.0):
        raise PerfsuiteError(f"factor={factor!r} must be a number above 1; write e.g. 1.05 for a 5% margin")
    if not (isinstance(alpha, (int, float)) and 0.0 < alpha < 0.5):
        raise PerfsuiteError(f"alpha={alpha!r} must lie between 0 and 0.5; write e.g. 0.01")


# --------------------------------------------------------------------------- baseline comparison


def compare_results(
    base: Result,
    head: Result,
    test_id: str,
    factor: float = DEFAULT_FACTOR,
    alpha: float = DEFAULT_ALPHA,
    force: bool = False,
    only: Callable[[registry.MetricSpec], bool] | None = None,
    base_runs: Sequence[Result] = (),
) -> list[Verdict]:
    """Verdicts for head against base, one per registered metric that either measured.

    Metrics neither side measured (GPU telemetry on a CPU) are left out:
    nothing was compared. ``only`` picks metrics by spec (the plugin judges
    exact ones against the committed file instead). ``base_runs``: every run
    a multi-run baseline holds (``base`` is the newest); with 3 or more,
    step_ms is judged with the variance between them
    (:func:`compare_between_runs`). Failing verdicts carry their likely cause.
    """
    _validate_rule(factor, alpha)
    base_key, head_key = base.fingerprint.key(), head.fingerprint.key()
    if base_key != head_key and not force:
        raise FingerprintMismatch(
            f"{test_id}: the baseline was recorded on {base_key!r} but this run is {head_key!r}; "
            "timings from different machines do not compare. Record a baseline here with "
            "`pytest --perfsuite-save` (or `nox -s baseline`), or pass --force to compare anyway"
        )
    verdicts = []
    present = set(base.metrics) | set(head.metrics)
    for spec in registry.all_specs():
        if spec.name not in present or not spec.compared or (only is not None and not only(spec)):
            continue
        b, h = base.metric(spec.name), head.metric(spec.name)
        if not b.available and not h.available:
            continue
        if spec.name == "step_ms" and len(base_runs) >= MIN_BASE_RUNS and b.available and h.available:
            verdicts.append(explain(_judge_between_runs(spec, base_runs, head, test_id, factor, alpha), head))
            continue
        verdicts.append(explain(judge_metric(spec, base, head, test_id, factor, alpha), head))
    return verdicts


def _judge_between_runs(
    spec: registry.MetricSpec, base_runs: Sequence[Result], head: Result, test_id: str, factor: float, alpha: float
) -> Verdict:
    per_sample = any(r.batch_size != head.batch_size for r in base_runs)
    runs = [
        _per_sample(r, r.samples.get("step_ms", [])) if per_sample else list(r.samples.get("step_ms", []))
        for r in base_runs
    ]
    h_samples = _per_sample(head, head.samples.get("step_ms", [])) if per_sample else list(head.samples["step_ms"])
    t = compare_between_runs(runs, h_samples, factor, alpha)
    if t.log_ratio is None:
        return Verdict(test_id, spec.name, None, None, None, t.outcome, f"step_ms {t.outcome}: {t.reason}")
    unit = "ms per sample" if per_sample else spec.unit
    message = (
        f"step_ms median {format_value(t.base_median)} -> {format_value(t.head_median)} {unit} "
        f"(x{t.ratio:.3f}, {len(base_runs)} base runs){_tail(base_runs[-1], head, 'step_ms')}: {t.reason}"
    )
    return Verdict(test_id, spec.name, t.base_median, t.head_median, t.ratio, t.outcome, message)


def judge_metric(
    spec: registry.MetricSpec,
    base: Result,
    head: Result,
    test_id: str,
    factor: float = DEFAULT_FACTOR,
    alpha: float = DEFAULT_ALPHA,
) -> Verdict:
    """One metric of head against base, by the rule its kind declares."""
    name = spec.name
    b, h = base.metric(name), head.metric(name)
    if b.available and not h.available:
        return Verdict(
            test_id,
            name,
            b.value,
            None,
            None,
            Outcome.REGRESSED,
            f"{name} was {format_value(b.value)} and is now unavailable: {h.reason}",
        )
    if not h.available:
        return Verdict(test_id, name, None, None, None, Outcome.UNAVAILABLE, f"{name} unavailable: {h.reason}")
    if not b.available:
        return Verdict(
            test_id,
            name,
            None,
            h.value,
            None,
            Outcome.NEW,
            f"{name} {format_value(h.value)}: no baseline value ({b.reason})",
        )
    if spec.kind == "timing":
        return _judge_samples(spec, base, head, test_id, factor, alpha)
    if spec.kind == "noisy":
        return _compare_summary(spec, test_id, float(b.value), float(h.value))  # type: ignore[arg-type]
    return _compare_exact(spec, test_id, b, h)


def _direction(spec: registry.MetricSpec, b: Any, h: Any) -> Outcome:
    """Exact comparison: unchanged, or regressed/improved by the spec's better direction (changed for labels)."""
    if spec.kind == "label":
        return Outcome.UNCHANGED if b == h else Outcome.CHANGED
    bv, hv = float(b), float(h)
    if abs(hv - bv) <= spec.tolerance * max(1.0, abs(bv)):
        return Outcome.UNCHANGED
    worse = hv > bv if spec.better == "lower" else hv < bv
    return Outcome.REGRESSED if worse else Outcome.IMPROVED


def _compare_exact(spec: registry.MetricSpec, test_id: str, b: Metric, h: Metric) -> Verdict:
    outcome = _direction(spec, b.value, h.value)
    message = f"{spec.name} {format_value(b.value)} -> {format_value(h.value)} (exact)"
    moved = movers(b.detail, h.detail)
    if outcome is not Outcome.UNCHANGED and moved:
        message += f": {moved}"
    ratio = None if spec.kind in ("label", "flag") else _ratio(b.value, h.value)
    return Verdict(test_id, spec.name, b.value, h.value, ratio, outcome, message)


def movers(base_detail: Mapping[str, Any], head_detail: Mapping[str, Any], top: int = 3) -> str:
    """What moved inside an exact metric: new call sites (``sites``) or the biggest changes in ``by``."""
    from perfsuite.judge.causes import short_path

    if "sites" in head_detail or "sites" in base_detail:
        before = {(s["op"], s["site"]): s["per_step"] for s in base_detail.get("sites", []) if isinstance(s, Mapping)}
        after = {(s["op"], s["site"]): s["per_step"] for s in head_detail.get("sites", []) if isinstance(s, Mapping)}
        keys = set(before) | set(after)
        changes = sorted(((after.get(k, 0.0) - before.get(k, 0.0), k) for k in keys), key=lambda c: -abs(c[0]))
        return ", ".join(
            f"{op} at {short_path(site)} {delta:+.3g}/step" for delta, (op, site) in changes[:top] if delta
        )
    b_by, h_by = base_detail.get("by"), head_detail.get("by")
    if isinstance(b_by, Mapping) and isinstance(h_by, Mapping):
        keys = set(b_by) | set(h_by)
        changes = sorted(
            ((float(h_by.get(k, 0)) - float(b_by.get(k, 0)), k) for k in keys), key=lambda c: (-abs(c[0]), c[1])
        )
        return ", ".join(
            f"{k} {format_value(float(b_by.get(k, 0)))} -> {format_value(float(h_by.get(k, 0)))}"
            for delta, k in changes[:top]
            if delta
        )
    examples = head_detail.get("examples")
    if isinstance(examples, list) and examples:
        return str(examples[0])[:240]
    return ""


def _per_sample(result: Result, samples: Sequence[float]) -> list[float]:
    return [t / result.batch_size for t in samples]


def _judge_samples(
    spec: registry.MetricSpec, base: Result, head: Result, test_id: str, factor: float, alpha: float
) -> Verdict:
    name, key = spec.name, spec.samples or spec.name
    b_samples, h_samples = list(base.samples.get(key, [])), list(head.samples.get(key, []))
    if not b_samples:
        return Verdict(
            test_id,
            name,
            base.value(name),
            head.value(name),
            None,
            Outcome.INCONCLUSIVE,
            f"{name}: the baseline has no raw {key} samples; re-record it with this perfsuite",
        )
    if spec.rule == "tail":
        return _judge_tail(spec, base, head, test_id, b_samples, h_samples, alpha)
    if spec.rule == "shares":
        t = compare_shares(b_samples, h_samples, spec.tolerance, alpha)
        if t.log_ratio is None:
            return Verdict(test_id, name, None, None, None, t.outcome, f"{name} {t.outcome}: {t.reason}")
        message = (
            f"{name} {format_value(base.value(name))} -> {format_value(head.value(name))} (per-step mean "
            f"{t.base_median:.3f} -> {t.head_median:.3f}, n={len(b_samples)}/{len(h_samples)}): {t.reason}"
        )
        return Verdict(
            test_id,
            name,
            base.value(name),
            head.value(name),
            _ratio(base.value(name), head.value(name)),
            t.outcome,
            message,
        )
    per_sample = key == "step_ms" and base.batch_size != head.batch_size
    if per_sample:
        b_samples, h_samples = _per_sample(base, b_samples), _per_sample(head, h_samples)
    t = compare_timing(b_samples, h_samples, spec.factor or factor, alpha)
    if t.log_ratio is None:
        return Verdict(test_id, name, None, None, None, t.outcome, f"{name} {t.outcome}: {t.reason}")
    unit = "ms per sample" if per_sample else spec.unit
    assert t.interval is not None  # compare_timing forms an interval whenever it forms a ratio
    message = (
        f"{name} median {format_value(t.base_median)} -> {format_value(t.head_median)} {unit} "
        f"(x{t.ratio:.3f}, {t.interval.confidence:.0%} CI x{t.interval.low:.3f}..x{t.interval.high:.3f}, "
        f"p_slower={t.p_slower:.2g}, n={len(b_samples)}/{len(h_samples)}"
        + (f", batch {base.batch_size} -> {head.batch_size}" if per_sample else "")
        + f"){_tail(base, head, name)}"
        f": {t.reason}"
    )
    return Verdict(test_id, name, t.base_median, t.head_median, t.ratio, t.outcome, message)


STALL_FACTOR = 5.0  # as the runner counts stalls: steps slower than 5x their run's median


def exceedance_p(base: Sequence[float], head: Sequence[float]) -> tuple[int, float]:
    """(k, p): k head samples lie above every base sample; p = C(n_head, k) / C(n, k) is the chance of that
    under "no change" (the top k of both runs pooled all fall in head), an exact, distribution-free tail test."""
    top = max(base)
    k = sum(1 for x in head if x > top)
    if k == 0:
        return 0, 1.0
    return k, math.comb(len(head), k) / math.comb(len(base) + len(head), k)


def compare_tail(
    metric: str,
    base: Sequence[float],
    head: Sequence[float],
    factor: float,
    alpha: float = DEFAULT_ALPHA,
    min_samples: int = MIN_SAMPLES,
) -> TimingComparison:
    """Judge the step-time tail of one run against another, relative to each run's own median.

    Dividing by the run's median leaves the shape of the tail: a uniformly
    slower run (a busy machine, or a real slowdown, which step_ms judges) has
    the same tail, a periodic hiccup or a stall does not.

    * ``step_ms_p99``: regressed when the normalised p99 grew by ``factor``
      AND at least two head steps lie above the slowest base step with exact
      exceedance p < alpha (:func:`exceedance_p`); grew without that:
      inconclusive; improved is the mirror image; else unchanged.
    * ``step_ms_max``: one step is never certain: grown by ``factor`` is
      inconclusive (``recompiles`` is the exact check of a recompile stall),
      else unchanged.
    * ``stalls`` (steps > 5x the median): regressed when the count rose to at
      least twice the base's plus two AND a one-sided Fisher exact test of the
      stall rates gives p < alpha; any other rise of two or more:
      inconclusive; else unchanged (fewer stalls: improved, same test).

    ``log_ratio`` holds log(head / base) of the normalised statistic (for
    stalls: of count + 1). A single run pair is all this sees, so the rule
    asks for large and certain effects; ``perfsuite ab`` judges tails across
    many runs.
    """
    import numpy as np

    if (short := _too_few(base, head, min_samples)) is not None:
        return short
    if min(base) <= 0 or min(head) <= 0:
        return TimingComparison.undecided("samples must be positive times")
    b = np.asarray(base, dtype=float) / median(base)
    h = np.asarray(head, dtype=float) / median(head)
    if metric == "stalls":
        from scipy.stats import fisher_exact

        sb, sh = int((b > STALL_FACTOR).sum()), int((h > STALL_FACTOR).sum())
        table = [[sh, len(h) - sh], [sb, len(b) - sb]]
        p_slower = float(fisher_exact(table, alternative="greater").pvalue)
        p_faster = float(fisher_exact(table, alternative="less").pvalue)
        log_ratio = math.log((sh + 1) / (sb + 1))
        if sh >= factor * sb + 2 and p_slower < alpha:
            outcome, reason = Outcome.REGRESSED, f"{sb} -> {sh} stalls, Fisher p={p_slower:.2g}"
        elif sb >= factor * sh + 2 and p_faster < alpha:
            outcome, reason = Outcome.IMPROVED, f"{sb} -> {sh} stalls, Fisher p={p_faster:.2g}"
        elif abs(sh - sb) >= 2:
            outcome, reason = (
                Outcome.INCONCLUSIVE,
                (
                    f"{sb} -> {sh} stalls, not certain from one run each "
                    f"(Fisher p={min(p_slower, p_faster):.2g}); compare with perfsuite ab"
                ),
            )
        else:
            outcome, reason = Outcome.UNCHANGED, f"{sb} -> {sh} stalls"
        return TimingComparison(outcome, float(sb), float(sh), log_ratio, p_slower, p_faster, None, reason)
    if metric == "step_ms_max":
        top_b, top_h = float(b.max()), float(h.max())
        log_ratio = math.log(top_h / top_b)
        if abs(log_ratio) >= math.log(factor):
            outcome, reason = (
                Outcome.INCONCLUSIVE,
                (
                    f"the slowest step moved from x{top_b:.3g} to x{top_h:.3g} the run's "
                    "median; one step cannot be certain (recompiles is the exact check)"
                ),
            )
        else:
            outcome, reason = Outcome.UNCHANGED, f"within x{factor:g} relative to the median"
        return TimingComparison(outcome, top_b, top_h, log_ratio, None, None, None, reason)
    q_b, q_h = float(np.percentile(b, 99)), float(np.percentile(h, 99))
    log_ratio = math.log(q_h / q_b)
    k_up, p_slower = exceedance_p(b.tolist(), h.tolist())
    k_down, p_faster = exceedance_p(h.tolist(), b.tolist())
    log_factor = math.log(factor)
    if log_ratio >= log_factor and k_up >= 2 and p_slower < alpha:
        outcome, reason = (
            Outcome.REGRESSED,
            (
                f"p99 x{q_b:.3g} -> x{q_h:.3g} the run's median; {k_up} steps beyond "
                f"the slowest base step (exact p={p_slower:.2g})"
            ),
        )
    elif log_ratio <= -log_factor and k_down >= 2 and p_faster < alpha:
        outcome, reason = Outcome.IMPROVED, f"p99 x{q_b:.3g} -> x{q_h:.3g} the run's median (exact p={p_faster:.2g})"
    elif abs(log_ratio) >= log_factor:
        outcome, reason = (
            Outcome.INCONCLUSIVE,
            (
                f"p99 x{q_b:.3g} -> x{q_h:.3g} the run's median, not certain from "
                f"one run each (p={min(p_slower, p_faster):.2g}); compare with "
                "perfsuite ab"
            ),
        )
    else:
        outcome, reason = Outcome.UNCHANGED, f"within x{factor:g} relative to the median"
    return TimingComparison(outcome, q_b, q_h, log_ratio, p_slower, p_faster, None, reason)


def _judge_tail(
    spec: registry.MetricSpec,
    base: Result,
    head: Result,
    test_id: str,
    b_samples: Sequence[float],
    h_samples: Sequence[float],
    alpha: float,
) -> Verdict:
    name = spec.name
    t = compare_tail(name, b_samples, h_samples, spec.factor or 2.0, alpha)
    b, h = base.value(name), head.value(name)
    message = f"{name} {format_value(b)} -> {format_value(h)} (n={len(b_samples)}/{len(h_samples)}): {t.reason}"
    ratio = _ratio(b, h) if name != "stalls" else None
    return Verdict(test_id, name, b, h, ratio, t.outcome, message)


def _tail(base: Result, head: Result, name: str) -> str:
    """For step_ms: throughput, p99/max and stalls of both sides, so a tail is never hidden by the median."""
    if name != "step_ms":
        return ""
    parts = []
    for metric in ("samples_per_s", "step_ms_p99", "step_ms_max", "stalls"):
        b, h = base.value(metric), head.value(metric)
        if b is not None and h is not None:
            parts.append(f"{metric} {format_value(b)} -> {format_value(h)}")
    return "; " + ", ".join(parts) if parts else ""


def _ratio(base: Any, head: Any) -> float | None:
    try:
        return float(head) / float(base) if float(base) != 0 else None
    except (TypeError, ValueError):
        return None


def _compare_summary(spec: registry.MetricSpec, test_id: str, b: float, h: float) -> Verdict:
    name = spec.name
    if spec.abs_tol:
        tol, within = f"+-{spec.tolerance:g}", abs(h - b) <= spec.tolerance
    else:
        tol, within = f"+-{spec.tolerance:.0%}", abs(h - b) <= spec.tolerance * max(abs(b), abs(h))
    if within:
        return Verdict(
            test_id,
            name,
            b,
            h,
            _ratio(b, h),
            Outcome.UNCHANGED,
            f"{name} {format_value(b)} -> {format_value(h)} (within {tol})",
        )
    return Verdict(
        test_id,
        name,
        b,
        h,
        _ratio(b, h),
        Outcome.INCONCLUSIVE,
        f"{name} {format_value(b)} -> {format_value(h)}: beyond {tol}, but a single summary value "
        "cannot tell noise from change; re-run or compare within one session",
    )


def explain(verdict: Verdict, result: Result) -> Verdict:
    """The verdict with its likely cause attached when it fails (unchanged otherwise)."""
    if not verdict.failed or verdict.cause:
        return verdict
    from perfsuite.judge import causes

    cause = causes.explain(verdict, result)
    return verdict.with_cause(str(cause) if cause else None)


# --------------------------------------------------------------------------- the committed exact gate

UPDATE_HINT = "nox -s perf -- --perfsuite-update-exact"


def exact_values(result: Result) -> dict[str, Any]:
    """The exact metrics of a Result, as the committed file stores them: value, or None if unavailable."""
    out: dict[str, Any] = {}
    for spec in registry.all_specs():
        if spec.exact and spec.name in result.metrics:
            m = result.metrics[spec.name]
            out[spec.name] = m.value if m.available else None
    return out


def check_exact(
    expected: Mapping[str, Any] | None, head: Result, test_id: str, source: str, update: str = UPDATE_HINT
) -> list[Verdict]:
    """Head's exact metrics against the committed expected values: any difference fails, both ways.

    An improvement fails too (as changed), so the committed file always says
    what the code does; the message names the command that rewrites it.
    """
    if expected is None:
        return [
            Verdict(
                test_id,
                "exact",
                None,
                None,
                None,
                Outcome.NEW,
                f"no committed exact values for this test in {source}; record them with `{update}`",
            )
        ]
    verdicts: list[Verdict] = []
    actual = exact_values(head)
    for name in [n for n in registry.names() if n in expected or n in actual]:
        spec = registry.get(name)
        want, got = expected.get(name, "<absent>"), actual.get(name, "<absent>")
        if want is None and got is None:
            continue
        if got is None:
            reason = head.metric(name).reason
            verdict = Verdict(
                test_id,
                name,
                want,
                None,
                None,
                Outcome.REGRESSED,
                f"{name} was {format_value(want)} in {source} and is now unavailable: {reason}",
            )
        elif want in (None, "<absent>") or got == "<absent>":
            verdict = Verdict(
                test_id,
                name,
                None if want == "<absent>" else want,
                None if got == "<absent>" else got,
                None,
                Outcome.CHANGED,
                f"{name} is {format_value(got)} but {source} says {format_value(want)}; "
                f"if that is intended, update it: `{update}`",
            )
        else:
            outcome = _direction(spec, want, got)
            verdict = Verdict(
                test_id,
                name,
                want,
                got,
                None if spec.kind in ("label", "flag") else _ratio(want, got),
                outcome,
                f"{name} {format_value(want)} -> {format_value(got)} (exact, {source})",
            )
            if outcome is Outcome.IMPROVED:
                verdict = replace(
                    verdict,
                    outcome=Outcome.CHANGED,
                    message=f"{verdict.message}: better than the committed value; commit it: `{update}`",
                )
            elif outcome is not Outcome.UNCHANGED:
                verdict = replace(verdict, message=f"{verdict.message}; if intended, update it: `{update}`")
        verdicts.append(explain(verdict, head))
    return verdicts
