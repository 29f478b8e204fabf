"""A wall-clock verdict from fewer base runs than ``baseline_runs``: inconclusive, saying how many more would decide
it, unless the change exceeds the one base run's own spread (perfsuite.judge.baseruns; issue 45 item 5)."""

from __future__ import annotations

import math

import pytest

from perfsuite.core import metrics as registry
from perfsuite.core.results import Fingerprint, Metric, Result
from perfsuite.judge.baseruns import SPREAD_FLOOR, SPREAD_MADS, apply_run_count, needs_runs, spread_margin
from perfsuite.judge.engine import compare_results
from perfsuite.judge.verdict import Outcome, Verdict


def _run(level, n=30):
    return [level * (1 + 0.01 * ((i * 7) % 11 - 5) / 5) for i in range(n)]  # +-1% around level, deterministic


FP = Fingerprint.collect("cpu")


def _result(steps, ops=10):
    return Result(
        workload="w",
        scale="smoke",
        knobs={},
        metrics={
            "step_ms": Metric("step_ms", sorted(steps)[len(steps) // 2], "ms"),
            "ops_per_step": Metric("ops_per_step", ops, "ops"),
        },
        samples={"step_ms": list(steps)},
        fingerprint=FP,
        batch_size=8,
        steps=len(steps),
        warmup=0,
    )


def _step(verdicts):
    (v,) = [v for v in verdicts if v.metric == "step_ms"]
    return v


def test_one_base_run_of_three_is_inconclusive_with_the_count():
    v = _step(compare_results(_result(_run(10.0)), _result(_run(12.5)), "t"))  # x1.25: beyond x1.2, within x1.3
    assert v.outcome is Outcome.INCONCLUSIVE
    assert "1 base run of the 3 a wall-clock verdict needs: record 2 more" in v.message
    assert "perfsuite run --repeat 3 --out base.json" in v.message and "x1.250" in v.message  # the measured figure


def test_the_count_follows_the_configured_runs_and_the_runs_held():
    base = [_result(_run(x)) for x in (10.0, 10.2)]
    v = _step(compare_results(base[-1], _result(_run(12.5)), "t", base_runs=base, runs_needed=5))
    assert v.outcome is Outcome.INCONCLUSIVE and "2 base runs of the 5" in v.message and "record 3 more" in v.message


def test_unchanged_from_one_base_run_is_not_decided_either():
    v = _step(compare_results(_result(_run(10.0)), _result(_run(10.0)), "t"))
    assert v.outcome is Outcome.INCONCLUSIVE and "record 2 more" in v.message


def test_k_base_runs_are_judged():
    runs = [_result(_run(x)) for x in (10.0, 10.3, 9.8)]
    assert _step(compare_results(runs[-1], _result(_run(10.0)), "t", base_runs=runs)).outcome is Outcome.UNCHANGED
    v = _step(compare_results(runs[-1], _result(_run(14.0)), "t", base_runs=runs))
    assert v.outcome is Outcome.REGRESSED and "3 base runs" in v.message and "record" not in v.message


def test_one_base_run_decides_a_change_beyond_its_spread():
    slower = _step(compare_results(_result(_run(10.0)), _result(_run(15.0)), "t"))  # x1.5 > x1.3
    faster = _step(compare_results(_result(_run(10.0)), _result(_run(6.0)), "t"))
    assert slower.outcome is Outcome.REGRESSED and "beyond x1.3, this job's own spread" in slower.message
    assert faster.outcome is Outcome.IMPROVED


def test_a_scattered_base_run_widens_the_margin():
    scattered = [10.0 * (2.0 if i % 2 else 1.0) for i in range(30)]  # half the steps twice as long: MAD log 2 / 2
    assert spread_margin(scattered) == pytest.approx(math.exp(SPREAD_MADS * math.log(2) / 2))  # x2, not x1.3
    assert spread_margin(_run(10.0)) == SPREAD_FLOOR
    assert spread_margin([]) == math.inf
    v = _step(compare_results(_result(scattered), _result([x * 1.5 for x in scattered]), "t"))
    assert v.outcome is Outcome.INCONCLUSIVE and "beyond x2" in v.message  # x1.5 < x2: not decided from one run


def test_one_base_run_suffices_when_configured():
    v = _step(compare_results(_result(_run(10.0)), _result(_run(12.5)), "t", runs_needed=1))
    assert v.outcome is Outcome.REGRESSED and "record" not in v.message


def test_exact_verdicts_are_untouched():
    head = _result(_run(10.0), ops=12)
    (ops,) = [v for v in compare_results(_result(_run(10.0)), head, "t") if v.metric == "ops_per_step"]
    assert ops.outcome is Outcome.REGRESSED and "record" not in ops.message


@pytest.mark.parametrize(
    "name,needs",
    [
        ("step_ms", True),
        ("epoch_fetch_ms", True),
        ("step_cpu_ms", False),
        ("step_ms_p99", False),
        ("data_wait_frac", False),
        ("ops_per_step", False),
    ],
)
def test_which_metrics_need_the_runs(name, needs):
    assert needs_runs(registry.get(name)) is needs


def test_undecided_and_new_verdicts_pass_through():
    spec = registry.get("step_ms")
    for outcome in (Outcome.INCONCLUSIVE, Outcome.NEW, Outcome.UNAVAILABLE):
        v = Verdict("t", "step_ms", None, None, None, outcome, "m")
        assert apply_run_count(spec, v, _run(10.0), 1, 3) is v


def test_the_hint_asks_for_base_runs_not_steps():
    from perfsuite.report.hints import what_would_decide

    v = _step(compare_results(_result(_run(10.0)), _result(_run(12.5)), "t"))  # its message holds n=30/30
    hint = what_would_decide(v)
    assert hint is not None and "more base runs, not more steps" in hint and "--steps" not in hint
