"""Baselines with several runs per test: stored oldest first, and step_ms judged with the between-run variance."""

from __future__ import annotations

import json

from perfsuite.core.results import Fingerprint, Metric, Result
from perfsuite.judge.baselines import BaselineStore
from perfsuite.judge.engine import compare_results
from perfsuite.judge.timing import compare_between_runs, compare_timing
from perfsuite.judge.verdict import Outcome


def _run(level, n=30):
    return [level * (1 + 0.01 * ((i * 7) % 11 - 5) / 5) for i in range(n)]


DRIFTING = [_run(10.0), _run(11.0), _run(9.2), _run(10.5), _run(9.6)]  # ~7% between-run sd


def test_a_shift_within_the_runs_drift_is_not_a_regression():
    head = _run(11.2)  # x1.12 of the mean run: alone against one run, the single-run rule calls it regressed
    assert compare_timing(DRIFTING[0], head).outcome is Outcome.REGRESSED
    t = compare_between_runs(DRIFTING, head)
    assert t.outcome is Outcome.INCONCLUSIVE and "within what the base runs drift" in t.reason


def test_a_shift_far_beyond_the_drift_is_regressed_and_the_mirror_improved():
    assert compare_between_runs(DRIFTING, _run(16.0)).outcome is Outcome.REGRESSED
    assert compare_between_runs(DRIFTING, _run(6.0)).outcome is Outcome.IMPROVED


def test_the_mean_run_is_unchanged():
    assert compare_between_runs(DRIFTING, _run(10.0)).outcome is Outcome.UNCHANGED


def test_fewer_than_three_runs_use_the_single_run_rule():
    head = _run(11.2)
    assert compare_between_runs(DRIFTING[:2], head) == compare_timing(DRIFTING[1], head)


def _result(level, seed=0):
    steps = _run(level)
    return Result(
        workload="w",
        scale="smoke",
        knobs={},
        metrics={"step_ms": Metric("step_ms", sorted(steps)[15], "ms")},
        samples={"step_ms": steps},
        fingerprint=Fingerprint.collect("cpu"),
        batch_size=8,
        steps=30,
        warmup=0,
    )


def test_store_keeps_the_newest_runs_oldest_first(tmp_path):
    store = BaselineStore(tmp_path)
    for level in (10.0, 11.0, 9.2, 10.5):
        path = store.save(_result(level), "t::x", overwrite=True, keep_runs=3)
    runs = store.load_runs(_result(1.0).fingerprint, "t::x")
    assert [r.samples["step_ms"][0] for r in runs] == [_run(v)[0] for v in (11.0, 9.2, 10.5)]
    assert store.load(_result(1.0).fingerprint, "t::x").samples["step_ms"][0] == _run(10.5)[0]
    data = json.loads(path.read_text())
    assert set(data) == {"schema_version", "test_id", "result", "runs"}


def test_a_single_run_file_stays_as_it_was(tmp_path):
    store = BaselineStore(tmp_path)
    path = store.save(_result(10.0), "t::x", overwrite=True)
    assert set(json.loads(path.read_text())) == {"schema_version", "test_id", "result"}
    assert len(store.load_runs(_result(1.0).fingerprint, "t::x")) == 1


def test_compare_results_uses_the_runs_for_step_ms():
    runs = [_result(v) for v in (10.0, 11.0, 9.2, 10.5, 9.6)]
    head = _result(12.0)  # x1.25 the newest run: beyond one base run's x1.2 margin, within the runs' drift
    (single,) = [v for v in compare_results(runs[-1], head, "t", runs_needed=1) if v.metric == "step_ms"]
    (between,) = [v for v in compare_results(runs[-1], head, "t", base_runs=runs) if v.metric == "step_ms"]
    (short,) = [v for v in compare_results(runs[-1], head, "t") if v.metric == "step_ms"]
    assert single.outcome is Outcome.REGRESSED  # baseline_runs = 1: the single-run rule decides
    assert short.outcome is Outcome.INCONCLUSIVE and "1 base run of the 3" in short.message  # x1.25 < x1.3
    assert between.outcome is Outcome.INCONCLUSIVE and "5 base runs" in between.message


def test_perfsuite_run_repeat_keeps_the_runs_and_compare_judges_between_them(tmp_path, capsys):
    """``perfsuite run --repeat 3 --out base.json`` writes one baseline file of its runs; compare judges step
    times against all of them (issue 45 item 5)."""
    from perfsuite.cli.main import main
    from perfsuite.cli.run import write_runs

    base = write_runs(tmp_path / "base.json", "w", [_result(level) for level in (10.0, 11.0, 9.2)])
    assert len(json.loads(base.read_text())["runs"]) == 3
    head = write_runs(tmp_path / "head.json", "w", [_result(10.4)])
    assert "runs" not in json.loads(head.read_text())  # one run: a plain Result
    assert main(["compare", str(base), str(head), "--json"]) == 0
    (step,) = [v for v in json.loads(capsys.readouterr().out)["results"] if v["metric"] == "step_ms"]
    assert "3 base runs" in step["message"] and step["outcome"] in ("unchanged", "inconclusive")


def test_repeat_with_ranks_is_refused_up_front(capsys):
    from perfsuite.cli.main import main

    assert main(["run", "face_parsing", "--repeat", "3", "--nproc-per-node", "2", "--oversubscribe"]) == 2
    assert "--repeat 3 with --nproc-per-node 2" in capsys.readouterr().err


def test_saved_baselines_keep_three_runs_unless_configured():
    from perfsuite.core import options
    from perfsuite.plugin.settings import Settings

    assert options.BY_NAME["baseline_runs"].default == 3 == Settings().baseline_runs
