"""The measured size beside an exact verdict, and what would decide a verdict the load guard abstained from
(issue 45 items 3 and 4)."""

from __future__ import annotations

from fixed_fingerprint import FP

from perfsuite.core.results import Metric, Result
from perfsuite.judge.engine import compare_results
from perfsuite.judge.verdict import Outcome, Verdict
from perfsuite.report.hints import what_would_decide


def run(step_ms: float, ops: float, neighbours: float) -> Result:
    window = {"neighbours": neighbours, "steal": 0.0, "cpu_pressure_some": 0.5, "runqueue_per_core": 2.0}
    return Result(
        "w",
        "smoke",
        {},
        {
            "step_ms": Metric("step_ms", step_ms, "ms"),
            "ops_per_step": Metric("ops_per_step", ops, "ops/step", detail={"by": {"add": ops}}),
        },
        {"step_ms": [step_ms * (1 + i / 100) for i in range(12)]},
        FP,
        4,
        12,
        1,
        environment={"contention": {"window": window}},
    )


def by_metric(base: Result, head: Result) -> dict[str, Verdict]:
    return {v.metric: v for v in compare_results(base, head, "t")}


def test_an_exact_verdict_says_the_step_time_measured_when_the_guard_abstained():
    got = by_metric(run(10.0, 182, 0.02), run(67.0, 195, 0.92))
    assert got["step_ms"].outcome is Outcome.INCONCLUSIVE
    assert got["ops_per_step"].outcome is Outcome.REGRESSED
    message = got["ops_per_step"].message  # x6.7 is the load difference between the runs, not the change's cost
    assert message.endswith("; step time not comparable: other processes took 92% of the CPU in one of the runs")
    assert "x6.7" not in message


def test_a_judged_step_time_is_not_restated_beside_the_exact_verdict():
    got = by_metric(run(10.0, 182, 0.02), run(67.0, 195, 0.02))
    assert got["step_ms"].outcome is Outcome.REGRESSED
    assert "step time" not in got["ops_per_step"].message


def test_what_would_decide_never_asks_for_more_steps_where_they_cannot_help():
    abstained = by_metric(run(10.0, 182, 0.02), run(12.0, 182, 0.92))["step_ms"]
    # A busy machine is a reason many figures share: it says once, on its own line, what would decide them.
    assert what_would_decide(abstained) is None and abstained.unjudged
    hint = abstained.unjudged
    assert "steps" not in hint.replace("more steps will not", "")
    assert "a quieter runner" in hint and "perfsuite ab" in hint and "--perfsuite-baseline-runs 3" in hint
    replayed = Verdict("t", "loader_cpu_ms_per_sample", 1.0, 1.2, 1.2, Outcome.INCONCLUSIVE, "too noisy, n=16/16")
    hint = what_would_decide(replayed)
    assert hint is not None and "--steps" not in hint and "fixed number of batches" in hint
    per_step = Verdict("t", "step_ms", 1.0, 1.2, 1.2, Outcome.INCONCLUSIVE, "step_ms median 1 -> 1.2 (n=6/6)")
    assert "--steps 24" in str(what_would_decide(per_step))  # a per-step figure: more steps do help
