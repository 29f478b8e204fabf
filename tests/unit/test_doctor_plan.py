"""Which fixes the doctor runs, skips, and why (perfsuite.tools.doctor.plan), decided from the first run's recorded
evidence before anything runs: table-driven, without running jobs."""

from __future__ import annotations

import statistics
from typing import Any

import pytest
from doctor_evidence import recorded_contention, result

from perfsuite.tools.doctor import plan
from perfsuite.tools.doctor.evidence import gather
from perfsuite.tools.doctor.model import Fix

BUSY = recorded_contention(0.98, 3.5, neighbours=0.6, threads=2)  # the BiSeNet case: 98% pressure on 2 cores
PERSISTENT = plan.Candidate(Fix.PERSISTENT, "persistent_workers False -> True")
FEWER = plan.Candidate(Fix.FEWER_WORKERS, "num_workers 2 -> 1", workers=1)
THREADS = plan.Candidate(Fix.THREADS, "torch threads 2 -> 1", threads=1)
MORE = plan.Candidate(Fix.MORE_WORKERS, "num_workers 2 -> 4", workers=4)
SHORT = plan.Window(steps=4, warmup=3, epoch_batches=24)  # the runs stop at batch 7 of a 24-batch epoch


# 16 steps whose 4 blocks' medians are 150, 160, 140 and 150 ms: the job's own spread is 5.4%.
HOST = [300.0, 150.0, 140.0, 150.0, 300.0, 160.0, 150.0, 160.0, 300.0, 140.0, 130.0, 140.0, 300.0, 150.0, 145.0, 150.0]
FETCH = [200.0, 10.0, 0.0, 5.0] * 4


def first_run(epochs: int = 0, environment: dict[str, Any] | None = None, **kw: Any) -> Any:
    kw = {"host": HOST, "fetch": FETCH, **kw}
    r = result(
        epoch_fetch=[200.0] * epochs, environment=environment or recorded_contention(0.05, 0.5), cores_busy=1.0, **kw
    )
    r.metrics["loader_process_cpu_ms_per_sample"].detail["epochs_started"] = epochs
    return gather([r], [], 2)


def decided(p: plan.Plan) -> list[tuple[Fix, bool, int | None]]:
    return [(c.fix, c.run, c.steps) for c in p.choices]


CASES = {
    # name: (evidence, window, candidates, run_s, left_s, [(fix, run, steps)], {fix: words in why})
    "busy machine at the default budget: fewer threads first, persistent workers not lengthened past the budget": (
        first_run(environment=BUSY),
        SHORT,
        [PERSISTENT, FEWER, THREADS],
        51.0,
        249.0,
        [(Fix.THREADS, True, None), (Fix.PERSISTENT, False, 23), (Fix.FEWER_WORKERS, False, None)],
        {
            Fix.PERSISTENT: ["lengthened to 23 measured steps", "left out to keep within --budget"],
            Fix.FEWER_WORKERS: ["cannot be decided in the budget", "within the job's own spread"],
        },
    ),
    "no budget: persistent workers lengthened so an epoch boundary falls inside": (
        first_run(environment=BUSY),
        SHORT,
        [PERSISTENT, THREADS],
        51.0,
        None,
        [(Fix.THREADS, True, None), (Fix.PERSISTENT, True, 23)],
        {},
    ),
    "epoch length unknown: persistent workers skipped, saying why": (
        first_run(),
        plan.Window(steps=4, warmup=3),
        [PERSISTENT, THREADS],
        10.0,
        None,
        [(Fix.THREADS, True, None), (Fix.PERSISTENT, False, None)],
        {Fix.PERSISTENT: ["no epoch boundary falls inside the 4 measured steps", "not known"]},
    ),
    "an epoch in the window: persistent workers run as they are, largest predicted gain first": (
        first_run(epochs=6, host=[300.0] * 18, fetch=[200.0, 10.0, 0.0] * 6),
        SHORT,
        [THREADS, PERSISTENT],
        10.0,
        None,
        [(Fix.THREADS, True, None), (Fix.PERSISTENT, True, None)],
        {},
    ),
    "a budget too short for any fix's two rounds: the top fix is measured all the same": (
        first_run(environment=BUSY),
        SHORT,
        [THREADS, MORE],
        60.0,
        30.0,
        [(Fix.THREADS, True, None), (Fix.MORE_WORKERS, False, None)],
        {
            Fix.THREADS: ["the top fix is measured", "each fix needs 2 rounds"],
            Fix.MORE_WORKERS: ["each fix needs 2 rounds", "left out to keep within --budget"],
        },
    ),
    "beside busy neighbours the busy-machine fix runs first though the spread (their load) hides its prediction": (
        first_run(environment=BUSY, host=[100.0] * 8 + [300.0] * 8, fetch=[10.0] * 16),
        SHORT,
        [MORE, THREADS],
        10.0,
        25.0,
        [(Fix.THREADS, True, None), (Fix.MORE_WORKERS, False, None)],
        {Fix.THREADS: ["within the job's own spread (+-58%", "but run first", "waited for a core 98%"]},
    ),
    "on a quiet machine the same spread rules the threads fix out, and the other fix is measured": (
        first_run(host=[100.0] * 8 + [300.0] * 8, fetch=[10.0] * 16),
        SHORT,
        [MORE, THREADS],
        10.0,
        25.0,
        [(Fix.MORE_WORKERS, True, None), (Fix.THREADS, False, None)],
        {Fix.THREADS: ["cannot be decided in the budget: predicted x1.54"]},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_fixes_run_and_skipped_follow_the_evidence(case: str) -> None:
    e, window, candidates, run_s, left_s, expected, words = CASES[case]
    p = plan.choose(candidates, e, window, run_s, left_s)
    assert decided(p) == expected, [(c.fix, c.run, c.why) for c in p.choices]
    for fix, needed in words.items():
        why = next(c.why for c in p.choices if c.fix is fix)
        assert all(w in why for w in needed), why


def test_a_fix_predicted_to_change_nothing_is_said_so_not_run_and_an_unpredicted_one_runs_last() -> None:
    """The step fed a cached batch takes as long as the window's: no wait for a core to give back."""
    e = first_run(host=[300.0] * 18, fetch=[10.0] * 18, sol=[290.0] * 5)
    p = plan.choose([FEWER, MORE, THREADS], e, SHORT, 10.0, None)
    assert decided(p) == [(Fix.MORE_WORKERS, True, None), (Fix.FEWER_WORKERS, False, None), (Fix.THREADS, False, None)]
    assert all("cannot be decided in the budget: predicted x1.00" in c.why for c in p.choices if not c.run)


def test_the_jobs_own_spread_is_read_from_its_first_runs_blocks() -> None:
    steady = first_run(host=[200.0] * 16, fetch=[10.0] * 16)
    assert plan.own_spread(steady) == 0.0
    varied = first_run(host=[100.0] * 8 + [300.0] * 8, fetch=[10.0] * 16)
    assert plan.own_spread(varied) == pytest.approx(statistics.stdev([100, 100, 300, 300]) / 200)
    spiked = first_run(host=[100.0, 100.0, 100.0, 900.0] * 4, fetch=[10.0] * 16)
    assert plan.own_spread(spiked) == 0.0  # one slow step a block (an epoch start) is not the job's spread
    assert plan.own_spread(first_run(host=[100.0] * 3, fetch=[1.0] * 3)) is None


def test_where_every_fix_is_within_the_spread_the_top_one_is_measured_all_the_same_saying_so() -> None:
    e = first_run(host=[300.0] * 18, fetch=[10.0] * 18, sol=[290.0] * 5)
    p = plan.choose([FEWER, THREADS], e, SHORT, 10.0, 5.0)
    assert decided(p) == [(Fix.FEWER_WORKERS, True, None), (Fix.THREADS, False, None)]
    assert "run all the same so that one fix is measured" in p.choices[0].why


class _Ledger:
    """The step ledger probe's stand-in: its summary of one run."""

    def summary(self) -> dict[str, Any]:
        return {}


def test_a_jobs_runs_shorter_than_its_epoch_are_lengthened_for_persistent_workers_and_paired_at_that_length() -> None:
    """The runner's side of the plan: a Job's DataLoader of 24 batches, 3 warm-up and 4 measured steps (the runs stop
    at batch 7): the persistent-workers arm and the unchanged runs paired with it run 23 measured steps."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    import perfsuite
    from perfsuite.harness.runner import RunSpec
    from perfsuite.tools.doctor.budget import Budget
    from perfsuite.tools.doctor.runs import epoch_batches, planned

    loader = DataLoader(TensorDataset(torch.zeros(96, 2)), batch_size=4, num_workers=2)
    spec = RunSpec(perfsuite.Job(step=lambda b: b, loader=loader), steps=4, warmup=3)
    assert epoch_batches(spec) == 24
    first = result(epoch_fetch=[], environment=BUSY, cores_busy=1.0)
    first.metrics["loader_process_cpu_ms_per_sample"].detail["epochs_started"] = 0
    arms, why = planned(spec, first, _Ledger(), 2, 10.0, Budget(None), 2)
    persistent = next(a for a in arms if a.fix is Fix.PERSISTENT)
    assert persistent.spec.steps == 23 and persistent.base is not None and persistent.base.steps == 23
    assert persistent.base.workload is spec.workload  # the job as it is, only longer
    assert all(a.base is None for a in arms if a.fix is not Fix.PERSISTENT)


def test_a_scripts_counterfactuals_are_planned_from_its_first_run() -> None:
    """The BiSeNet case as a script: 2 workers, 2 threads, 98% pressure, runs that stop at batch 7 of 24. Fewer
    threads runs first; persistent workers are lengthened past the epoch when nothing bounds the time, and left
    out, saying so, at the default budget."""
    from perfsuite.harness.runner import RunSpec
    from perfsuite.tools.doctor.budget import Budget
    from perfsuite.tools.doctor.script import Run, choose, planned

    first_result = first_run(environment=BUSY).results[0]
    loader = {"site": {"file": "train.py", "line": 88}, "given": {"num_workers": 2}, "threads": 2, "batches": 24}
    first = Run(first_result, {}, loader)
    options = choose(first, usable=2)
    assert [o.fix for o in options] == [Fix.PERSISTENT, Fix.FEWER_WORKERS, Fix.THREADS]
    spec = RunSpec("face_parsing", steps=4, warmup=3)  # the plan reads only its lengths
    unlimited, _ = planned(spec, first, options, 2, 51.0, Budget(None), 3)
    assert [(c.fix, c.steps) for c in unlimited][:2] == [(Fix.THREADS, None), (Fix.PERSISTENT, 23)]
    budget = Budget(300.0)
    default, left = planned(spec, first, options, 2, 51.0, budget, 3)
    assert [c.fix for c in default] == [Fix.THREADS] and "lengthened to 23" in left[Fix.PERSISTENT]
    assert any("each fix needs 2 rounds" in x for x in budget.left_out)
