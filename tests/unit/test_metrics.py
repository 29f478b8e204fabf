"""The metric registry: one declaration per metric, read by thresholds, verdicts, causes and the docs."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfsuite.core import metrics
from perfsuite.core.results import Fingerprint, Metric, Result
from perfsuite.errors import PerfsuiteError
from perfsuite.judge.engine import compare_results
from perfsuite.judge.thresholds import known_threshold_names, parse_threshold
from perfsuite.judge.verdict import Outcome

METRICS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def test_the_docs_metrics_table_is_generated_from_the_registry() -> None:
    text = METRICS_PAGE.read_text(encoding="utf-8")
    table = text.split("<!-- metrics-table:start -->\n", 1)[1].split("<!-- metrics-table:end -->", 1)[0]
    assert table == metrics.render_table(), "docs/metrics.md is stale: regenerate it from metrics.render_table()"


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"kind": "exactish"}, "kind='exactish'"),
        ({"better": "up"}, "better='up'"),
        ({"kind": "label", "better": "lower"}, "a label has no better direction"),
        ({"kind": "timing"}, "names its samples key"),
        ({"tolerance": -1.0}, "tolerance=-1.0"),
        ({"name": "not a name"}, "must be an identifier"),
    ],
    ids=["kind", "better", "label-direction", "timing-samples", "tolerance", "name"],
)
def test_bad_declarations_say_what_to_write(kwargs, match) -> None:
    fields = {"name": "my_metric", "unit": "x", "kind": "exact", "better": "lower", "family": "mine", "probe": "mine"}
    with pytest.raises(PerfsuiteError, match=match):
        metrics.MetricSpec(**{**fields, **kwargs})


def test_a_users_probe_metric_can_be_bounded_and_compared(monkeypatch) -> None:
    spec = metrics.MetricSpec("retries_per_step", "retries", "exact", "lower", "flaky storage", "my_probe")
    monkeypatch.setattr(metrics, "_REGISTRY", dict(metrics._REGISTRY))
    with pytest.raises(PerfsuiteError, match="unknown threshold"):
        parse_threshold("max_retries_per_step", 0)
    metrics.register(spec)
    assert "max_retries_per_step" in known_threshold_names()
    assert parse_threshold("max_retries_per_step", 0).metric == "retries_per_step"
    fp = Fingerprint.collect("cpu")

    def result(value: float) -> Result:
        return Result("w", "smoke", {}, {"retries_per_step": Metric("retries_per_step", value)}, {}, fp, 1, 2, 0)

    (v,) = compare_results(result(0.0), result(2.0), "t")
    assert v.outcome is Outcome.REGRESSED and v.cause == "flaky storage"


def test_a_second_different_declaration_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(metrics, "_REGISTRY", dict(metrics._REGISTRY))
    clash = metrics.MetricSpec("syncs_per_step", "n", "exact", "higher", "other", "mine")
    with pytest.raises(PerfsuiteError, match="already declared by probe 'syncs'"):
        metrics.register(clash)
    metrics.register(metrics.get("syncs_per_step"))  # the same declaration again is fine


def test_unknown_metric_names_list_the_known_ones() -> None:
    with pytest.raises(PerfsuiteError, match="known metrics: samples_per_s"):
        metrics.get("sample_per_s")


def test_one_family_label_per_cause() -> None:
    """The labels once spelled two ways ('host sync' vs 'host syncs') come from one place now."""
    families = {s.name: s.family for s in metrics.all_specs()}
    assert families["syncs_per_step"] == "host syncs" and families["graph_breaks"] == "graph breaks"
    assert families["amp_lowp_frac"] == families["amp_engaged"] == "AMP not engaged"
