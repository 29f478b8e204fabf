"""The one verdict engine: a head Result against a base, each metric by its declared kind.

The plugin, ``perfsuite compare``, ``perfsuite ab`` and the fault self-test
(:mod:`perfsuite.tools.catch`) all judge through :func:`compare_results`, and every rule is
chosen by the metric's kind (:mod:`perfsuite.core.metrics`): exact kinds compare exactly in
both directions; an exact metric measured in the base and unavailable in the head (nothing compiled
any more) is a regression with that reason, a timing one inconclusive; timing kinds are judged on
their raw per-step samples (:mod:`perfsuite.judge.timing`, :mod:`perfsuite.judge.tails`); noisy summaries are unchanged
within their tolerance and inconclusive beyond it. Failing verdicts carry their likely cause
(:mod:`perfsuite.judge.causes`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from perfsuite.core import metrics as registry
from perfsuite.core.results import Metric, Result
from perfsuite.errors import FingerprintMismatch, WorkloadMismatch
from perfsuite.judge.baseruns import apply_run_count
from perfsuite.judge.contention import Guard
from perfsuite.judge.contention import guard as contention_guard
from perfsuite.judge.settings import SETTINGS, setting_changes
from perfsuite.judge.tails import compare_tail
from perfsuite.judge.timing import (
    MIN_BASE_RUNS,
    can_pair,
    compare_between_runs,
    compare_paired,
    compare_shares,
    compare_timing,
    validate_rule,
)
from perfsuite.judge.verdict import (
    DEFAULT_ALPHA,
    DEFAULT_FACTOR,
    NO_BASE_VALUE,
    Outcome,
    Verdict,
    direction,
    format_value,
    value_ratio,
)

# --------------------------------------------------------------------------- baseline comparison


def refuse_other_workloads(base: Result, head: Result, force: bool) -> None:
    """Two Results of different workloads (a script's and a job's, two jobs) judge nothing: every metric would
    "regress". A script's runs compare whatever its arguments (:func:`perfsuite.jobs.script.workload_of`)."""
    from perfsuite.jobs.script import workload_of

    a, b = workload_of(base), workload_of(head)
    if a != b and not force:
        raise WorkloadMismatch(f"different workloads ({a} vs {b}); pass --force to compare them anyway")


def compare_results(
    base: Result,
    head: Result,
    test_id: str,
    factor: float = DEFAULT_FACTOR,
    alpha: float = DEFAULT_ALPHA,
    force: bool = False,
    only: Callable[[registry.MetricSpec], bool] | None = None,
    base_runs: Sequence[Result] = (),
    runs_needed: int = MIN_BASE_RUNS,
) -> list[Verdict]:
    """Verdicts for head against base, one per registered metric that either measured.

    Metrics neither side measured (GPU telemetry on a CPU) are left out:
    nothing was compared. ``only`` picks metrics by spec (the plugin judges
    exact ones against the committed file instead). ``base_runs``: every run
    a multi-run baseline holds (``base`` is the newest); with 3 or more,
    step_ms is judged with the variance between them
    (:func:`compare_between_runs`). ``runs_needed``: the base runs a wall-clock verdict needs (the
    ``baseline_runs`` setting); from fewer, it is inconclusive unless the change exceeds the job's own
    spread (:mod:`perfsuite.judge.baseruns`). Failing verdicts carry their likely cause.
    """
    validate_rule(factor, alpha)
    refuse_other_workloads(base, head, force)
    base_key, head_key = base.fingerprint.key(), head.fingerprint.key()
    if base_key != head_key and not force:
        raise FingerprintMismatch(
            f"{test_id}: the baseline was recorded on {base_key!r} but this run is {head_key!r}; "
            "timings from different machines do not compare. Record a baseline here with "
            "`pytest --perfsuite-save` (or `nox -s baseline`), or pass --force to compare anyway"
        )
    verdicts = []
    present = set(base.metrics) | set(head.metrics)
    guard = contention_guard(base, head)  # a wall-clock verdict between contended runs abstains (judge.contention)
    for spec in registry.all_specs():
        if spec.name not in present or not spec.compared or (only is not None and not only(spec)):
            continue
        b, h = base.metric(spec.name), head.metric(spec.name)
        if not b.available and not h.available:
            continue
        if spec.name == "step_ms" and len(base_runs) >= MIN_BASE_RUNS and b.available and h.available:
            verdict = _judge_between_runs(spec, base_runs, head, test_id, factor, alpha)
        else:
            verdict = judge_metric(spec, base, head, test_id, factor, alpha)
        held = max(len(base_runs), 1)  # a bare Result is one run
        verdict = apply_run_count(spec, verdict, base.samples.get(spec.samples or spec.name, []), held, runs_needed)
        verdicts.append(explain(guard.apply(spec, verdict), head, base))
    verdicts += setting_changes(base, head, test_id)  # settings, named exactly (judge/settings.py)
    size = measured_size(base, head, next((v for v in verdicts if v.metric == "step_ms"), None), guard)
    if size:  # beside every exact verdict that fails: how much it costs, judged or not
        exact = {s.name for s in registry.all_specs() if s.exact} | {s.name for s in SETTINGS}
        verdicts = [
            replace(v, message=f"{v.message}; {size}") if v.failed and v.metric in exact else v for v in verdicts
        ]
    return verdicts


def measured_size(base: Result, head: Result, step: Verdict | None, guard: Guard) -> str:
    """``step time x1.3 measured, not decided from these runs``: the size of what an exact verdict found, in the
    one figure every run measures, where time was not judged; where the guard abstained the ratio is only the
    load difference between the runs, so it is named as not comparable instead of shown; "" where time was
    judged (its own verdict says how much) or without both medians."""
    b, h = base.value("step_ms"), head.value("step_ms")
    if not isinstance(b, (int, float)) or not isinstance(h, (int, float)) or b <= 0 or h <= 0:
        return ""
    if guard.contended(guard.clock(registry.get("step_ms"))):
        busy = max(side.foreign or 0.0 for side in (guard.base, guard.head))
        return f"step time not comparable: other processes took {busy:.0%} of the CPU in one of the runs"
    said = f"step time x{h / b:.3g} measured"
    if step is not None and step.outcome is Outcome.INCONCLUSIVE:
        return f"{said}, not decided from these runs"
    return ""  # judged: its own verdict says how much


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
        # An exact count lost (nothing compiled any more) is a regression; a timing figure that this run could not
        # measure (a speed of light slowed by a neighbour) is nothing to compare.
        lost = spec.kind not in ("timing", "noisy")
        return Verdict(
            test_id,
            name,
            b.value,
            None,
            None,
            Outcome.REGRESSED if lost else Outcome.INCONCLUSIVE,
            f"{name} was {format_value(b.value)} and is now unavailable: {h.reason}"
            + ("" if lost else " (not measured in this run: nothing to compare)"),
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
            unjudged=NO_BASE_VALUE,
        )
    if spec.exact and ("libraries" in b.detail or "libraries" in h.detail):
        from perfsuite.judge.libraries import mismatch

        differs = mismatch(test_id, name, b.detail.get("libraries"), h.detail.get("libraries"), "")
        if differs is not None:
            return differs
    if spec.kind == "timing":
        return _judge_samples(spec, base, head, test_id, factor, alpha)
    if spec.kind == "noisy":
        verdict = _compare_summary(spec, test_id, float(b.value), float(h.value))  # type: ignore[arg-type]
        if name == "predicted_input_efficiency":  # both sides of each prediction, in the runner's terms
            from perfsuite.judge.starvation import predicted_change

            return replace(verdict, message=f"{predicted_change(b, h)} ({verdict.message})")
        return verdict
    return _compare_exact(spec, test_id, b, h)


def _compare_exact(spec: registry.MetricSpec, test_id: str, b: Metric, h: Metric) -> Verdict:
    outcome = direction(spec, b.value, h.value)
    message = f"{spec.name} {format_value(b.value)} -> {format_value(h.value)} (exact)"
    from perfsuite.judge.causes import movers

    moved = movers(b.detail, h.detail)
    if spec.family == "loader work":  # perfsuite.probes.loadercount: the lines, then the callables by ratio
        from perfsuite.judge.loaderwork import moved as work_moved

        named = moved if "sites" in b.detail and "sites" in h.detail else ""
        moved = "; ".join(x for x in (named, work_moved(b.detail.get("by"), h.detail.get("by"), spec.unit)) if x)
    if outcome is not Outcome.UNCHANGED and moved:
        message += f": {moved}"
    ratio = None if spec.kind in ("label", "flag") else value_ratio(b.value, h.value)
    return Verdict(test_id, spec.name, b.value, h.value, ratio, outcome, message)


def _per_sample(result: Result, samples: Sequence[float]) -> list[float]:
    return [t / result.batch_size for t in samples]


def _judge_samples(
    spec: registry.MetricSpec, base: Result, head: Result, test_id: str, factor: float, alpha: float
) -> Verdict:
    name, key = spec.name, spec.samples or spec.name
    b_samples, h_samples = list(base.samples.get(key, [])), list(head.samples.get(key, []))

    def unjudged(why: str) -> Verdict:
        return Verdict(test_id, name, base.value(name), head.value(name), None, Outcome.INCONCLUSIVE, f"{name}: {why}")

    if not b_samples:
        return unjudged(f"the baseline has no raw {key} samples; re-record it with this perfsuite")
    if spec.rule == "tail":
        return _judge_tail(spec, base, head, test_id, b_samples, h_samples, alpha)
    if spec.rule == "shares":
        t = compare_shares(b_samples, h_samples, spec.tolerance, alpha, factor=factor)
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
            value_ratio(base.value(name), head.value(name)),
            t.outcome,
            message,
        )
    per_sample = key == "step_ms" and base.batch_size != head.batch_size
    if per_sample:
        b_samples, h_samples = _per_sample(base, b_samples), _per_sample(head, h_samples)
    calibration, moved = "", 1.0
    rule_factor = max(spec.factor or factor, factor)  # a metric's own margin, never below the session's
    if spec.scale_by:
        scaled = calibrated(spec, base, head, b_samples, h_samples)
        if scaled is None:  # a raw CPU time moves 20% between runs here: judged uncalibrated it would alarm
            sides = [n for n, r in (("base", base), ("head", head)) if not r.samples.get(spec.scale_by)]
            return unjudged(
                f"{' and '.join(sides) or 'a side'} has no {spec.scale_by} samples beside its {key} ones (recorded "
                "by another perfsuite version, whose calibration kernel differs); re-record it with this one"
            )
        b_samples, h_samples, moved = scaled
        rule_factor = round(rule_factor * max(moved, 1 / moved) ** registry.CALIBRATION_TRUST, 3)
        calibration = (
            f", calibrated: the calibration kernel took x{moved:.3f} the base's CPU time, margin x{rule_factor:.3g}"
        )
    higher = spec.better == "higher"  # a rate: judged as its reciprocal, a time, then shown as the rate again
    as_times = higher and min(b_samples + h_samples) > 0
    b_times = [1.0 / x for x in b_samples] if as_times else b_samples
    h_times = [1.0 / x for x in h_samples] if as_times else h_samples
    if spec.step_order and not per_sample and can_pair(b_times, h_times, alpha):
        t = compare_paired(b_times, h_times, rule_factor, alpha)  # the same steps at the same positions
    else:
        t = compare_timing(b_times, h_times, rule_factor, alpha)
    if t.log_ratio is None:
        return Verdict(test_id, name, None, None, None, t.outcome, f"{name} {t.outcome}: {t.reason}")
    unit = "ms per sample" if per_sample else spec.unit
    assert t.interval is not None  # compare_timing forms an interval whenever it forms a ratio
    b_med, h_med, ratio = t.base_median, t.head_median, t.ratio
    low, high, p_name = t.interval.low, t.interval.high, "p_slower"
    if higher:
        assert b_med and h_med and ratio
        b_med, h_med, ratio, low, high, p_name = 1 / b_med, 1 / h_med, 1 / ratio, 1 / high, 1 / low, "p_lower"
    message = (
        f"{name} median {format_value(b_med)} -> {format_value(h_med)} {unit} "
        f"(x{ratio:.3f}{' step by step' if t.paired else ''}, {t.interval.confidence:.0%} CI x{low:.3f}..x{high:.3f}, "
        f"{p_name}={t.p_slower:.2g}, n={len(b_samples)}/{len(h_samples)}"
        + (f", batch {base.batch_size} -> {head.batch_size}" if per_sample else "")
        + calibration
        + f"){_tail(base, head, name)}"
        f": {_reason(t.reason, higher)}"
    )
    if t.outcome in (Outcome.REGRESSED, Outcome.IMPROVED):
        from perfsuite.judge.causes import movers

        stages = movers(base.metric(name).detail, head.metric(name).detail, head_scale=moved if higher else 1 / moved)
        if stages:
            message += f"; by stage: {stages}"  # head's at the base's calibration, as the medians are
    return Verdict(test_id, name, b_med, h_med, ratio, t.outcome, message)


def _reason(reason: str, higher: bool) -> str:
    return reason.replace("slower by", "lower by").replace("faster by", "higher by") if higher else reason


def calibrated(
    spec: registry.MetricSpec, base: Result, head: Result, b: Sequence[float], h: Sequence[float]
) -> tuple[list[float], list[float], float] | None:
    """Both sides' samples at the base's median calibration (``spec.scale_by``), and how far it moved; or None.

    Each sample is divided by the calibration measured beside it (a rate is
    multiplied), then scaled by the base's median calibration, so the figures
    stay in the metric's unit at the base's speed. The third value is the
    head's median calibration over the base's.
    """
    from perfsuite.judge.stats import median

    key = spec.scale_by or ""
    bc, hc = list(base.samples.get(key, [])), list(head.samples.get(key, []))
    if len(bc) != len(b) or len(hc) != len(h) or not bc or not hc or min(bc + hc) <= 0:
        return None
    ref = median(bc)
    if spec.better == "higher":
        b2, h2 = [x * c / ref for x, c in zip(b, bc)], [x * c / ref for x, c in zip(h, hc)]
    else:
        b2, h2 = [x / c * ref for x, c in zip(b, bc)], [x / c * ref for x, c in zip(h, hc)]
    return b2, h2, median(hc) / ref


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
    ratio = value_ratio(b, h) if name != "stalls" else None
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
            value_ratio(b, h),
            Outcome.UNCHANGED,
            f"{name} {format_value(b)} -> {format_value(h)} (within {tol})",
        )
    return Verdict(
        test_id,
        name,
        b,
        h,
        value_ratio(b, h),
        Outcome.INCONCLUSIVE,
        f"{name} {format_value(b)} -> {format_value(h)}: beyond {tol}, but a single summary value "
        "cannot tell noise from change; re-run or compare within one session",
    )


def explain(verdict: Verdict, result: Result, base: Result | None = None) -> Verdict:
    """The verdict with its likely cause attached when it fails (unchanged otherwise); ``base``: the Result
    it was compared with, so a slowdown is placed where the time moved."""
    if not verdict.failed or verdict.cause:
        return verdict
    from perfsuite.judge import causes

    cause = causes.explain(verdict, result, base)
    return verdict.with_cause(str(cause) if cause else None)
