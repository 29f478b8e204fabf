"""tune's search on planted targets whose best setting is known: exact, repeatable, no clock read."""

from __future__ import annotations

import pytest
from fakes import FakeTarget, needs_two_workers, plenty

from perfsuite.tools.tune import SearchConfig, TuneError, tune
from perfsuite.tools.tune.guard import MB, Free
from perfsuite.tools.tune.search import batch_with_margin, worker_ladder


def config(**kw) -> SearchConfig:
    return SearchConfig(**{"max_workers": 8, "max_rounds": 5, **kw})


def workers_run(target: FakeTarget) -> set[int]:
    return {k["num_workers"] for k in target.runs}


@pytest.mark.parametrize(("cap", "ladder"), [(1, [1]), (2, [1, 2]), (6, [1, 2, 4, 6]), (8, [1, 2, 4, 8])])
def test_the_worker_ladder_doubles_up_to_the_usable_cores(cap, ladder) -> None:
    assert worker_ladder(cap) == ladder


def test_a_loader_that_needs_two_workers_is_tuned_to_two_more_add_nothing() -> None:
    target = FakeTarget(needs_two_workers)
    report = tune(target, config(), free=plenty)
    assert report.chosen["num_workers"] == 2
    steps = [(t.knob, t.head[t.knob], t.outcome) for t in report.search.trials]
    assert steps[0] == ("num_workers", 2, "gain")
    assert steps[1][:2] == ("num_workers", 4) and steps[1][2] != "gain"  # the knee: 4 is within delta of 2
    assert 8 not in workers_run(target)  # no step past the first that was not a gain
    gain = report.search.trials[0].speedup()
    assert gain is not None and gain[1] > 1.05  # the interval clears the rule's factor
    # prefetch_factor and persistent_workers change nothing here: each is tried once and not taken
    assert report.chosen["prefetch_factor"] is None and report.chosen["persistent_workers"] is False
    assert [t.knob for t in report.search.trials[2:]] == ["prefetch_factor", "persistent_workers"]
    assert {k: v for k, v in report.search.not_tried[0].items() if k != "why"} == {
        "knob": "pin_memory",
        "value": "True",
    }


def test_each_step_is_interleaved_fresh_runs_decided_by_abs_rule() -> None:
    target = FakeTarget(needs_two_workers)
    report = tune(target, config(), free=plenty)
    first = report.search.trials[0]
    assert first.decision is not None and first.decision.pairs >= 7  # alpha 0.01: 7 pairs before a gain
    assert len(first.base_runs) == len(first.head_runs) == 2 * first.decision.pairs // 2
    assert target.runs[0]["num_workers"] == 0  # the reference run: the job as it is


def test_the_same_seed_gives_the_same_search() -> None:
    a = tune(FakeTarget(needs_two_workers, seed=3), config(), free=plenty)
    b = tune(FakeTarget(needs_two_workers, seed=3), config(), free=plenty)
    assert a.to_dict()["trials"] == b.to_dict()["trials"] and a.chosen == b.chosen


def test_a_setting_past_the_memory_guard_is_not_tried() -> None:
    # 100 MB per worker, 500 MB free: the guard allows 250 MB, so 2 workers (200 MB) may run, 4 (400 MB) may not.
    target = FakeTarget(lambda k: 100.0 * k["num_workers"])  # every worker helps: only the guard stops the climb
    report = tune(target, config(knobs=("num_workers",)), free=lambda: Free(memory=500 * MB, shm=None))
    assert workers_run(target) == {0, 1, 2}
    assert report.chosen["num_workers"] == 2
    refused = report.search.not_tried[0]
    assert refused["knob"] == "num_workers" and refused["value"] == "4"
    assert "needs about 4" in refused["why"] and "more than 50% of the 500 MB free" in refused["why"]


def test_dev_shm_bounds_the_batches_in_flight() -> None:
    target = FakeTarget(lambda k: 100.0 * k["num_workers"] * (k["prefetch_factor"] or 2))
    # 8 KiB batches; 64 KiB of /dev/shm free: 2 workers x 2 batches = 32 KiB fit, 2 x 4 = 64 KiB do not
    report = tune(
        target, config(max_workers=2, knobs=("num_workers", "prefetch_factor")), free=lambda: Free(2**40, 64 * 1024)
    )
    assert report.chosen == {**report.chosen, "num_workers": 2, "prefetch_factor": None}
    assert "of /dev/shm" in report.search.not_tried[0]["why"]
    assert all(k["prefetch_factor"] is None for k in target.runs)


def test_the_loader_ledger_stops_the_worker_climb_when_the_loader_already_outpaces_the_step() -> None:
    # headroom 0.9 per worker: at 1 worker the loader falls short, at 2 it has 1.8x what the step takes
    target = FakeTarget(needs_two_workers, ledger=lambda k: {"loader_headroom": 0.9 * k["num_workers"]})
    report = tune(target, config(knobs=("num_workers",)), free=plenty)
    assert workers_run(target) == {0, 1, 2}  # 4 was not run: the ledger said it cannot help
    assert "loader_headroom 1.80 at num_workers=2" in report.search.not_tried[0]["why"]


def test_the_ledgers_capacity_over_the_steps_demand_stops_the_climb_too() -> None:
    # the ledger: 220 samples/s of loader capacity per worker; the step takes 200 (the reference run's speed of
    # light). At 1 worker the headroom is 1.1, short of 1.5, so 2 is tried; at 2 it is 2.2, so 4 is not
    target = FakeTarget(
        needs_two_workers,
        ledger=lambda k: {"loader_capacity_samples_per_s": 220.0 * k["num_workers"]},
        demand=200.0,
    )
    report = tune(target, config(knobs=("num_workers",)), free=plenty)
    assert workers_run(target) == {0, 1, 2}
    assert "loader_headroom 2.20 at num_workers=2" in report.search.not_tried[0]["why"]


def test_batch_search_meets_a_planted_out_of_memory_and_keeps_a_margin_below_the_largest_fit() -> None:
    target = FakeTarget(
        lambda k: 20.0 * k["batch_size"],  # every doubling helps, until memory runs out
        fail=lambda k: (True, "OutOfMemoryError: planted") if k["batch_size"] > 32 else None,
    )
    report = tune(target, config(knobs=("num_workers",), max_workers=1, batch=True), free=plenty)
    batches = [(t.head["batch_size"], t.outcome) for t in report.search.trials if t.knob == "batch_size"]
    assert batches == [(16, "gain"), (32, "gain"), (64, "out of memory")]
    assert report.chosen["batch_size"] == 24 == batch_with_margin(32, 0.10, 8)
    assert any("below the largest batch that fit (32)" in n for n in report.search.notes)
    assert len(report.search.runs_of(report.chosen)) >= 6  # the kept batch was run (confirmation) for its thresholds
    assert report.to_dict()["batch_searched"] is True and report.tuned_knobs()["batch_size"] == 24


def test_without_batch_the_recipe_keeps_its_batch_size() -> None:
    report = tune(FakeTarget(needs_two_workers), config(knobs=("num_workers",)), free=plenty)
    assert "batch_size" not in report.tuned_knobs() and report.to_dict()["batch_searched"] is False


@pytest.mark.parametrize(("fit", "margin", "start", "kept"), [(32, 0.1, 8, 24), (128, 0.1, 64, 112), (6, 0.1, 3, 5)])
def test_the_margin_rounds_down_to_multiples_of_eight(fit, margin, start, kept) -> None:
    assert batch_with_margin(fit, margin, start) == kept


def test_ctrl_c_keeps_the_best_setting_found_so_far() -> None:
    target = FakeTarget(needs_two_workers, interrupt_after=40)
    report = tune(target, config(), free=plenty)
    assert report.interrupted and report.chosen["num_workers"] == 2
    assert report.search.trials[-1].outcome == "interrupted"


def test_a_job_that_fails_at_every_setting_is_an_error_naming_each_failure() -> None:
    target = FakeTarget(fail=lambda k: (False, f"ValueError: broken at {k['num_workers']}"))
    with pytest.raises(TuneError, match="failed at every setting") as info:
        tune(target, config(max_workers=2), free=plenty)
    assert "as it is: ValueError: broken at 0" in str(info.value) and "num_workers=2" in str(info.value)


def test_a_failing_candidate_ends_its_climb_without_a_gain() -> None:
    target = FakeTarget(
        needs_two_workers, fail=lambda k: (False, "RuntimeError: worker") if k["num_workers"] > 1 else None
    )
    report = tune(target, config(knobs=("num_workers",)), free=plenty)
    assert report.chosen["num_workers"] == 1 and report.search.trials[0].outcome == "failed"


def test_a_bound_no_setting_meets_is_reported_unmet() -> None:
    report = tune(
        FakeTarget(needs_two_workers), config(knobs=("num_workers",)), free=plenty, required={"min_samples_per_s": 500}
    )
    assert report.unmet and "min_samples_per_s=500" in report.unmet[0]


def test_requiring_a_metric_tune_does_not_measure_is_bad_input() -> None:
    with pytest.raises(TuneError, match="bound one of those"):
        tune(FakeTarget(), config(), free=plenty, required={"max_syncs_per_step": 0})


def test_unknown_knobs_to_search_are_refused() -> None:
    with pytest.raises(TuneError, match="cannot search amp"):
        SearchConfig(knobs=("num_workers", "amp"))


def test_the_suggested_test_is_python_that_pins_the_tuned_knobs() -> None:
    import ast

    from perfsuite.tools.tune.session import suggested_test

    report = tune(FakeTarget(needs_two_workers), config(knobs=("num_workers",)), free=plenty)
    source = suggested_test(report)
    ast.parse(source)
    assert source.startswith("def test_planted_tuned(perf_run):")
    assert 'perf_run("planted", num_workers=2, prefetch_factor=None' in source


def test_a_round_is_expected_to_take_four_of_the_longest_recent_runs() -> None:
    """The budget check (no round starts whose expected end passes --budget) uses the measured runs' longest of
    the last two rounds, not their mean: before, a mean-sized estimate let a slow round end past the budget."""
    from types import SimpleNamespace

    from perfsuite.tools.tune.search import Search

    runs = SimpleNamespace(run_seconds=[30.0] + [5.0, 5.0, 12.0, 5.0, 5.0, 5.0, 5.0, 5.0])
    assert Search._round_s(runs) == 4 * 12.0  # type: ignore[arg-type]  # the 30 s run is older than two rounds
    assert Search._round_s(SimpleNamespace(run_seconds=[])) == 0.0  # type: ignore[arg-type]
