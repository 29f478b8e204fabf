"""Thresholds, exact counters, the timing rule, and the fingerprint guard."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from fixed_fingerprint import FP

from perfsuite.core.results import Metric, Result
from perfsuite.errors import FingerprintMismatch, PerfsuiteError
from perfsuite.judge.engine import compare_results
from perfsuite.judge.thresholds import AtLeast, AtMost, Equals, known_threshold_names, parse_threshold, parse_thresholds
from perfsuite.judge.timing import block_medians, compare_timing
from perfsuite.judge.verdict import Outcome, Verdict


def make_result(step_ms=(), fingerprint=FP, samples=None, **metrics) -> Result:
    ms = {name: v if isinstance(v, Metric) else Metric(name, v) for name, v in metrics.items()}
    if step_ms:
        ms.setdefault("step_ms", Metric("step_ms", float(np.median(step_ms)), "ms"))
    return Result(
        workload="w",
        scale="smoke",
        knobs={},
        metrics=ms,
        samples={"step_ms": list(step_ms), **(samples or {})},
        fingerprint=fingerprint,
        batch_size=8,
        steps=len(step_ms),
        warmup=0,
    )


def noisy(level: float, n: int = 30, spread: float = 0.03, seed: int = 0) -> list[float]:
    return list(level * np.random.default_rng(seed).lognormal(0.0, spread, n))


# ----------------------------------------------------------------------------- thresholds


@pytest.mark.parametrize(
    "name,bound,cls,metric",
    [
        ("min_samples_per_s", 100, AtLeast, "samples_per_s"),
        ("max_syncs_per_step", 0, AtMost, "syncs_per_step"),
        ("max_data_wait_frac", 0.05, AtMost, "data_wait_frac"),
        ("min_gpu_util", 0.8, AtLeast, "gpu_util"),
        ("max_graph_breaks", 0, AtMost, "graph_breaks"),
        ("max_recompiles", 1, AtMost, "recompiles"),
        ("amp_engaged", True, Equals, "amp_engaged"),
        ("max_step_ms", 20.0, AtMost, "step_ms"),
        ("min_amp_lowp_frac", 0.5, AtLeast, "amp_lowp_frac"),
        ("max_peak_mem_mb", 2048, AtMost, "peak_mem_mb"),
    ],
)
def test_parse_threshold_names(name, bound, cls, metric):
    threshold = parse_threshold(name, bound)
    assert type(threshold) is cls and threshold.metric == metric and threshold.name == name


@pytest.mark.parametrize(
    "name,bound,match",
    [
        ("max_data_wait", 0.05, "unknown threshold 'max_data_wait'.*max_data_wait_frac"),
        ("most_syncs_per_step", 0, "unknown threshold"),
        ("min_amp_engaged", 1, "unknown threshold"),
        ("amp_engaged", 1, "write amp_engaged=True"),
        ("max_step_ms", "20", "finite number"),
        ("max_step_ms", float("inf"), "finite number"),
        ("max_step_ms", True, "finite number"),
    ],
    ids=["typo", "bad-prefix", "bool-with-prefix", "bool-not-bool", "string", "inf", "bool-bound"],
)
def test_parse_threshold_rejects(name, bound, match):
    with pytest.raises(PerfsuiteError, match=match):
        parse_threshold(name, bound)


def test_known_names_list_both_directions_and_bools():
    names = known_threshold_names()
    assert {"min_samples_per_s", "max_data_wait_frac", "amp_engaged"} <= set(names)
    assert "min_amp_engaged" not in names


def test_failing_threshold_message_names_metric_value_bound():
    (t,) = parse_thresholds({"max_data_wait_frac": 0.05})
    v = t.check(make_result(data_wait_frac=0.62), "t::a")
    assert v.outcome is Outcome.FAIL and v.failed
    assert v.message == "data_wait_frac 0.62 > 0.05"
    assert (v.base, v.head, v.cause) == (0.05, 0.62, None)
    assert v.with_cause("data-bound: augmentation on CPU workers").cause.startswith("data-bound")


@pytest.mark.parametrize(
    "name,bound,value,outcome",
    [
        ("min_samples_per_s", 100, 99.9, Outcome.FAIL),
        ("min_samples_per_s", 100, 100, Outcome.PASS),
        ("max_syncs_per_step", 0, 0, Outcome.PASS),
        ("max_syncs_per_step", 0, 1, Outcome.FAIL),
        ("amp_engaged", True, False, Outcome.FAIL),
        ("amp_engaged", False, False, Outcome.PASS),
    ],
)
def test_threshold_outcomes_at_the_boundary(name, bound, value, outcome):
    metric = parse_threshold(name, bound).metric
    assert parse_threshold(name, bound).check(make_result(**{metric: value}), "t").outcome is outcome


def test_unavailable_metric_is_never_a_pass():
    r = make_result(gpu_util=Metric.unavailable("gpu_util", "no NVML: running on cpu"))
    v = parse_threshold("min_gpu_util", 0.8).check(r, "t")
    assert v.outcome is Outcome.UNAVAILABLE and "no NVML" in v.message
    missing = parse_threshold("max_recompiles", 0).check(make_result(), "t")
    assert missing.outcome is Outcome.UNAVAILABLE and "no probe measured recompiles" in missing.message


def test_verdict_dict_round_trip():
    v = Verdict("t::a", "step_ms", 1.0, 2.0, 2.0, Outcome.REGRESSED, "slower", "cause")
    assert Verdict.from_dict(v.to_dict()) == v and v.to_dict()["outcome"] == "regressed"


# ----------------------------------------------------------------------------- exact metrics


@pytest.mark.parametrize(
    "metric,base,head,outcome",
    [
        ("syncs_per_step", 0, 1, Outcome.REGRESSED),
        ("syncs_per_step", 2, 0, Outcome.IMPROVED),
        ("graph_breaks", 3, 3, Outcome.UNCHANGED),
        ("recompiles", 0, 1, Outcome.REGRESSED),
        ("label_violations", 0, 4, Outcome.REGRESSED),
        ("amp_engaged", True, False, Outcome.REGRESSED),
        ("amp_engaged", False, True, Outcome.IMPROVED),
        ("amp_engaged", True, True, Outcome.UNCHANGED),
    ],
)
def test_exact_metrics_compare_exactly(metric, base, head, outcome):
    steps = noisy(10)
    verdicts = compare_results(make_result(steps, **{metric: base}), make_result(steps, **{metric: head}), "t")
    (v,) = [v for v in verdicts if v.metric == metric]
    assert v.outcome is outcome and (v.base, v.head) == (base, head)


def test_metric_only_in_head_is_new_and_a_timing_figure_not_measured_in_the_head_is_inconclusive():
    """An exact count lost is a regression (the compile test below); a noisy or timing figure the head could not
    measure (NVML gone, a speed of light a neighbour slowed) has nothing to compare: inconclusive, with the reason."""
    eff = Metric("input_efficiency", 0.84, detail={"band": "moderately"})
    base = make_result(noisy(10), gpu_util=0.9, input_efficiency=eff)
    slowed = Metric.unavailable("input_efficiency", "the window ran 1.67x its speed of light")
    head = make_result(
        noisy(10), recompiles=0, gpu_util=Metric.unavailable("gpu_util", "no NVML"), input_efficiency=slowed
    )
    by_metric = {v.metric: v for v in compare_results(base, head, "t")}
    assert by_metric["recompiles"].outcome is Outcome.NEW
    for name, why in (("gpu_util", "no NVML"), ("input_efficiency", "1.67x its speed of light")):
        assert by_metric[name].outcome is Outcome.INCONCLUSIVE and "now unavailable: " in by_metric[name].message
        assert why in by_metric[name].message


def test_a_metric_neither_side_measured_is_left_out():
    why = Metric.unavailable("gpu_util", "no NVML")
    verdicts = compare_results(make_result(noisy(10), gpu_util=why), make_result(noisy(10), gpu_util=why), "t")
    assert "gpu_util" not in {v.metric for v in verdicts}


def test_compiled_base_against_uncompiled_head_is_a_regression_naming_why():
    """compile_off through the engine: graph_breaks measured in the base, unavailable in the head."""
    base = make_result(noisy(10), graph_breaks=Metric("graph_breaks", 0, detail={"graphs": 1}))
    head = make_result(noisy(10), graph_breaks=Metric.unavailable("graph_breaks", "compile=None: nothing compiled"))
    (v,) = [v for v in compare_results(base, head, "t") if v.metric == "graph_breaks"]
    assert v.failed and "compile=None: nothing compiled" in v.message and v.cause.startswith("graph breaks")


@pytest.mark.parametrize(
    "base,head,outcome",
    [
        (1.0, 0.0, Outcome.REGRESSED),
        (0.0, 1.0, Outcome.IMPROVED),
        (0.75, 0.75, Outcome.UNCHANGED),
        (1.0, 0.99, Outcome.REGRESSED),
    ],
)
def test_amp_lowp_frac_is_exact(base, head, outcome):
    steps = noisy(10)
    (v,) = [
        v
        for v in compare_results(make_result(steps, amp_lowp_frac=base), make_result(steps, amp_lowp_frac=head), "t")
        if v.metric == "amp_lowp_frac"
    ]
    assert v.outcome is outcome


def test_a_label_metric_that_changes_fails_as_changed():
    fmt = "input float32 contiguous; params float32 contiguous"
    head = make_result(noisy(10), input_format=fmt.replace("input float32 contiguous", "input float32 channels_last"))
    (v,) = [
        v for v in compare_results(make_result(noisy(10), input_format=fmt), head, "t") if v.metric == "input_format"
    ]
    assert v.outcome is Outcome.CHANGED and v.failed and "channels_last" in v.message


def test_exact_regressions_name_their_top_movers():
    b = Metric("h2d_bytes_per_step", 100.0, detail={"by": {"uint8": 100.0}})
    h = Metric("h2d_bytes_per_step", 900.0, detail={"by": {"uint8": 100.0, "int64": 800.0}})
    (v,) = [
        v
        for v in compare_results(
            make_result(noisy(10), h2d_bytes_per_step=b), make_result(noisy(10), h2d_bytes_per_step=h), "t"
        )
        if v.metric == b.name
    ]
    assert v.outcome is Outcome.REGRESSED and "int64 0 -> 800" in v.message and "int64" in v.cause


def wait(shares, value):
    return {"samples": {"data_wait": shares}, "data_wait_frac": value}


def test_data_wait_is_judged_on_its_per_step_shares():
    rng = np.random.default_rng(0)
    low = list(rng.uniform(0.0, 0.04, 30))
    high = list(rng.uniform(0.3, 0.6, 30))
    base = make_result(noisy(10), **wait(low, 0.02))
    same = make_result(noisy(10), **wait(list(rng.uniform(0.0, 0.04, 30)), 0.02))
    worse = make_result(noisy(10), **wait(high, 0.43))
    by = {v.metric: v for v in compare_results(base, worse, "t")}
    assert by["data_wait_frac"].outcome is Outcome.REGRESSED and by["data_wait_frac"].cause.startswith("data-bound")
    assert {v.metric: v for v in compare_results(base, same, "t")}["data_wait_frac"].outcome is Outcome.UNCHANGED
    one_spike = make_result(noisy(10), **wait(low[:-1] + [0.9], 0.05))
    assert {v.metric: v for v in compare_results(base, one_spike, "t")}[
        "data_wait_frac"
    ].outcome is not Outcome.REGRESSED


@pytest.mark.parametrize(
    "metric,base,head,outcome",
    [
        ("gpu_util", 0.80, 0.83, Outcome.UNCHANGED),
        ("gpu_util", 0.80, 0.40, Outcome.INCONCLUSIVE),
        ("peak_rss_mb", 100.0, 110.0, Outcome.UNCHANGED),
        ("peak_rss_mb", 100.0, 200.0, Outcome.INCONCLUSIVE),
    ],
)
def test_summary_metrics_use_a_tolerance_and_never_guess(metric, base, head, outcome):
    verdicts = compare_results(make_result(noisy(10), **{metric: base}), make_result(noisy(10), **{metric: head}), "t")
    (v,) = [v for v in verdicts if v.metric == metric]
    assert v.outcome is outcome


# ----------------------------------------------------------------------------- timing rule


def test_clear_slowdown_regresses_and_speedup_improves():
    base = noisy(10, seed=1)
    assert compare_timing(base, noisy(12, seed=2)).outcome is Outcome.REGRESSED
    assert compare_timing(base, noisy(8, seed=2)).outcome is Outcome.IMPROVED


def test_same_distribution_is_unchanged():
    assert compare_timing(noisy(10, seed=1), noisy(10, seed=2)).outcome is Outcome.UNCHANGED


def test_significant_but_below_factor_is_not_regressed():
    t = compare_timing(noisy(10, 60, 0.005, seed=1), noisy(10.3, 60, 0.005, seed=2))
    assert t.p_slower < 1e-6 and t.outcome is not Outcome.REGRESSED


def test_too_few_samples_is_inconclusive_with_reason():
    t = compare_timing([10.0] * 4, [20.0] * 30)
    assert t.outcome is Outcome.INCONCLUSIVE and "too few samples (base n=4" in t.reason


def test_burst_of_contention_in_one_block_is_not_a_regression():
    base = noisy(10, seed=1)
    head = noisy(10, seed=2)[:12] + noisy(13, 18, seed=3)  # a neighbour starts a job mid-run
    t = compare_timing(base, head)
    assert t.ratio > 1.05 and t.outcome is Outcome.INCONCLUSIVE and "block medians overlap" in t.reason
    assert compare_timing(base, head, blocks=1).outcome is Outcome.REGRESSED


def test_block_medians_cover_every_sample():
    assert block_medians([1, 2, 3, 4, 5, 6, 7], 3) == [2.0, 4.5, 6.5]
    assert block_medians([5.0, 1.0], 3) == [5.0, 1.0]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"factor": 0.95}, "above 1"),
        ({"alpha": 0.0}, "between 0 and 0.5"),
        ({"alpha": 0.7}, "between 0 and 0.5"),
    ],
)
def test_rule_settings_are_validated(kwargs, match):
    with pytest.raises(PerfsuiteError, match=match):
        compare_timing(noisy(10), noisy(10), **kwargs)


def test_factor_and_alpha_are_configurable():
    base, head = noisy(10, seed=1), noisy(11, seed=2)
    assert compare_timing(base, head, factor=1.05).outcome is Outcome.REGRESSED
    assert compare_timing(base, head, factor=1.2).outcome is not Outcome.REGRESSED


def test_step_ms_verdict_reports_medians_and_throughput():
    base = make_result(noisy(10, seed=1), samples_per_s=800.0)
    head = make_result(noisy(13, seed=2), samples_per_s=615.0)
    (v, *_rest) = compare_results(base, head, "t::a", runs_needed=1)  # x1.3: one base run, as baseline_runs = 1
    assert v.metric == "step_ms" and v.outcome is Outcome.REGRESSED
    assert v.ratio == pytest.approx(1.3, rel=0.05) and "samples_per_s 800 -> 615" in v.message
    assert v.cause.startswith("slow steps")


def test_step_times_compare_per_sample_when_batch_sizes_differ():
    base = make_result(noisy(10, seed=1))
    head = dataclasses.replace(make_result(noisy(5, seed=2)), batch_size=2)  # half the time, a quarter the samples
    (v, *_rest) = compare_results(base, head, "t")
    assert v.outcome is Outcome.REGRESSED and "ms per sample" in v.message and "batch 8 -> 2" in v.message


def test_baseline_without_samples_is_inconclusive():
    base = dataclasses.replace(make_result(noisy(10)), samples={"step_ms": []})
    (v, *_rest) = compare_results(base, make_result(noisy(10)), "t")
    assert v.outcome is Outcome.INCONCLUSIVE and "no raw step_ms samples" in v.message


# ----------------------------------------------------------------------------- fingerprints


def test_other_fingerprint_refused_unless_forced():
    other = dataclasses.replace(FP, cpu_model="Other CPU")
    base, head = make_result(noisy(10)), make_result(noisy(10), fingerprint=other)
    with pytest.raises(FingerprintMismatch, match="--perfsuite-save.*--force"):
        compare_results(base, head, "t::a")
    assert compare_results(base, head, "t::a", force=True, runs_needed=1)[0].outcome is Outcome.UNCHANGED


def test_a_loader_call_site_names_the_callee_s_own_change_before_the_calls_under_its_line():
    """Issue 56: ``PIL.Image.Image.resize at face_dataset.py:47 +24/sample`` counts every call under the line,
    while the resize itself went from 3 to 4 calls: its own change is what a reader looks for first."""
    from perfsuite.judge.causes import movers
    from perfsuite.probes.sites import SiteCount, site_detail

    def detail(resizes: int, under: float) -> dict:
        site = SiteCount(
            "PIL.Image.Image.resize", "face_dataset.py:47", under, "sample", "__getitem__", "img.resize(s)"
        )
        by = {"__getitem__: PIL.Image.Image.resize": float(resizes), "__getitem__: PIL.Image.open": 1.0}
        return {"by": by, **site_detail([site])}

    text = movers(detail(3, 72.0), detail(4, 96.0))
    assert text == (
        "PIL.Image.Image.resize 3 -> 4 per sample itself; under the line: PIL.Image.Image.resize at "
        "face_dataset.py:47 +24/sample"
    ), text
    assert movers(detail(3, 72.0), detail(3, 96.0)).startswith("PIL.Image.Image.resize at")  # its own count held
