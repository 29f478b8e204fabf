"""perfsuite doctor's arithmetic and decisions on hand-made figures (no runs), and its command line's bad input."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from doctor_evidence import recorded_contention
from doctor_evidence import result as _result
from torch.utils.data import DataLoader, TensorDataset

from perfsuite.cli.main import main
from perfsuite.probes.periods import Epochs
from perfsuite.tools import doctor
from perfsuite.tools.doctor import predictions, window
from perfsuite.tools.doctor.model import Counterfactuals, Fix, Measured, Observed, Periodic, Predicted, Unavailable

NONE = Periodic(None, ())


def test_a_band_is_called_only_when_the_interval_clears_its_edges() -> None:
    steady = doctor.wait_band([[30.0] * 20], [[100.0] * 20])
    assert steady.band == "highly input-bound" and steady.low == pytest.approx(0.3)
    low = doctor.wait_band([[0.1] * 20], [[100.0] * 20])
    assert low.band == "not input-bound" and low.between is None
    # Shares that straddle 20%: half the steps wait 5%, half 35%.
    mixed = doctor.wait_band([[5.0, 35.0] * 10], [[100.0] * 20])
    assert mixed.band is None and mixed.edge == pytest.approx(0.20)
    assert mixed.between == "moderately input-bound .. highly input-bound"
    assert mixed.low < 0.2 < mixed.high


def test_interleaved_pairs_give_a_ratio_and_an_interval() -> None:
    r = doctor.ratio_interval([100.0, 110.0, 90.0], [150.0, 160.0, 140.0], "x")
    assert isinstance(r, Measured) and r.pairs == 3 and 1.4 < r.ratio < 1.6 and r.low < r.ratio < r.high
    one = doctor.ratio_interval([100.0], [120.0], "x")
    assert isinstance(one, Measured) and one.low is None  # one pair: a ratio, no interval
    assert isinstance(doctor.ratio_interval([], [], "x"), Unavailable)


@pytest.mark.parametrize("workers,usable,expected", [(0, 2, 2), (1, 2, 2), (2, 2, None), (2, 8, 4), (6, 8, 8)])
def test_more_workers_stop_at_the_usable_cores(workers: int, usable: int, expected: int | None) -> None:
    assert doctor.more_workers(workers, usable) == expected


def test_a_cloned_loader_keeps_everything_but_the_workers() -> None:
    def collate(samples):
        return torch.stack([s[0] for s in samples])

    loader = DataLoader(TensorDataset(torch.arange(10.0)), batch_size=3, drop_last=True, collate_fn=collate)
    clone = doctor.clone_loader(loader, 2)
    assert clone.num_workers == 2 and clone.collate_fn is collate and clone.batch_sampler is loader.batch_sampler
    assert [b.tolist() for b in clone] == [b.tolist() for b in loader]


def test_the_ledger_adds_up_to_the_step() -> None:
    observed = Observed(sync_ms=2.0, copy_ms=1.0, wall_ms=40.0)
    ledger = window.ledger([[10.0] * 4], [[50.0] * 4], [[30.0] * 3], observed, "cuda")
    parts = ledger.parts
    own = 50.0 - 10.0  # the window's step less its wait: split by the observed step's shares
    assert parts["host syncs"] == pytest.approx(own * 2 / 40) and parts["host->device copy"] == pytest.approx(own / 40)
    assert parts["compute"] == pytest.approx(30.0 * (1 - 3 / 40))  # the cached-batch step less its syncs' share
    assert sum(parts.values()) == pytest.approx(ledger.step_ms) == pytest.approx(50.0)
    assert all(0.0 <= share <= 1.0 for share in ledger.shares.values())


@pytest.mark.parametrize("sol_ms", [10.0, 39.0, 40.0, 60.0, 2690.0])
def test_no_ledger_part_is_negative_or_above_the_step(sol_ms: float) -> None:
    """The observed case: a cached-batch step of 2.69 s against a window's 2.04 s step read compute 132% and the
    rest -39%. A cached-batch step slower than the window's own work is from other conditions: unavailable."""
    fetch, host = [[5.0, 15.0] * 5, [10.0] * 10], [[50.0, 50.0] * 5, [50.0] * 10]
    ledger = window.ledger(fetch, host, [[sol_ms] * 5], Observed(sync_ms=0.1, wall_ms=45.0), "cpu")
    assert sum(ledger.parts.values()) == pytest.approx(ledger.step_ms)
    assert all(0.0 <= share <= 1.0 for share in ledger.shares.values()), ledger.shares
    assert all(v >= 0 for v in ledger.parts.values())
    if sol_ms > 40 * 1.05:
        assert "compute" not in ledger.parts and "compute and the rest" in ledger.parts
        assert isinstance(ledger.compute, Unavailable) and ledger.rest is None
        assert any(n.startswith("compute unavailable") for n in ledger.notes)
        assert isinstance(window.cached_batch(host, [[sol_ms] * 5], ledger, NONE, fetch), Unavailable)
        assert isinstance(window.efficiency(host, [[sol_ms] * 5], ledger, NONE, fetch), Unavailable)
    else:
        assert ledger.parts["compute"] <= 40.0 and ledger.parts["the rest"] >= 0


def test_a_cpu_run_names_its_reads_for_what_they_are() -> None:
    ledger = window.ledger([[1.0]], [[10.0]], [[5.0]], Observed(sync_ms=1.0, wall_ms=9.0), "cpu")
    assert "reads to Python" in ledger.parts and "host syncs" not in ledger.parts
    assert any("waits for no queued work" in n for n in ledger.notes)


def _eval_every(n: int, steps: int = 20, eval_ms: float = 2400.0) -> list[float]:
    return [100.0 + (eval_ms if (i + 1) % n == 0 else 0.0) for i in range(steps)]


def test_periodic_work_is_named_with_its_period_and_kept_out_of_the_input_figures() -> None:
    """The UNet case: an evaluation every 5 steps (2.4 s) in the window made the mean step, and the efficiency
    against the cached-batch median, blame the input (0.3% data wait)."""
    host = [_eval_every(5), _eval_every(5)]
    fetch = [[0.3] * 20, [0.3] * 20]
    sol = [[99.0] * 5, [99.5] * 5]
    periodic = window.periodic_work(fetch, host)
    assert periodic.found and periodic.every == 5 and periodic.steps == 8
    assert periodic.extra_ms_per_step == pytest.approx(2400.0 / 5, rel=0.01)
    ledger = window.ledger(fetch, host, sol, Observed(wall_ms=100.0), "cpu", periodic)
    assert ledger.parts["periodic work (every 5 steps)"] == pytest.approx(periodic.extra_ms_per_step)
    assert sum(ledger.parts.values()) == pytest.approx(ledger.step_ms)
    eff = window.efficiency(host, sol, ledger, periodic, fetch)
    assert not isinstance(eff, Unavailable) and eff.value > 0.95 and eff.periodic_left_out
    cached = window.cached_batch(host, sol, ledger, periodic, fetch)
    assert not isinstance(cached, Unavailable) and cached.saves_ms < 5.0  # the input costs ~nothing


def test_long_steps_at_the_epochs_length_are_the_loaders_not_periodic_work() -> None:
    host = [_eval_every(3, 18, 500.0)]
    assert window.periodic_work([[0.0] * 18], host).every == 3
    assert not window.periodic_work([[0.0] * 18], host, [Epochs(6)]).found
    once = window.periodic_work([[1.0] * 18], [[100.0] * 17 + [900.0]])
    assert not once.found and "too few steps to tell" in str(once.reason)  # once: not periodic, and said so


def test_a_short_window_s_epochs_are_told_by_what_their_count_allows_not_steps_over_count() -> None:
    """An unchanged script, 10 window steps, 6 per epoch: 2 epoch starts. Its epoch ends (workers shut down, the
    loop's own end) came out as "periodic work every 6 steps", since 10 / 2 = 5 was taken as the epoch's length."""
    host = [[100.0 + (400.0 if i in (2, 8) else 0.0) for i in range(10)]]
    fetch = [[0.0] * 10]
    assert window.periodic_work(fetch, host).every == 6
    assert not window.periodic_work(fetch, host, [Epochs(2)]).found  # 2 starts in 10 steps allow L = 4..9
    assert not window.periodic_work(fetch, host, [Epochs(2, (3, 9))]).found  # the steps that end an epoch
    assert window.periodic_work(fetch, host, [Epochs(2, (0, 6))]).found  # elsewhere: the job's own work
    assert window.periodic_work(fetch, host, [Epochs(3)]).found  # 3 starts in 10 steps allow L = 3..4 only


def test_identical_runs_give_input_efficiencies_that_agree_within_their_intervals() -> None:
    import random

    rng = random.Random(0)

    def run() -> tuple[list[list[float]], list[list[float]], list[list[float]]]:
        host = [[rng.gauss(200, 20) for _ in range(20)] for _ in range(3)]
        fetch = [[rng.uniform(0, 30) for _ in range(20)] for _ in range(3)]
        sol = [[rng.gauss(120, 10) for _ in range(5)] for _ in range(3)]
        return host, fetch, sol

    effs = []
    for _ in range(2):
        host, fetch, sol = run()
        ledger = window.ledger(fetch, host, sol, Observed(wall_ms=100.0), "cpu")
        effs.append(window.efficiency(host, sol, ledger, NONE, fetch))
    a, b = effs
    assert not isinstance(a, Unavailable) and not isinstance(b, Unavailable)
    assert a.low <= a.value <= a.high <= 1.0 and b.low <= b.value <= b.high <= 1.0
    assert a.low <= b.high and b.low <= a.high


def test_capacity_after_the_overhead_never_exceeds_the_stages() -> None:
    """Observed: 235.6 samples/s from the stages, 733.6 after the workers' overhead."""
    from perfsuite.probes.loader import after_overhead

    value, note = after_overhead(2, 8.49, 2.73)
    assert value == pytest.approx(2e3 / 8.49) and "different load" in str(note)
    value, note = after_overhead(2, 1.0, 4.0)
    assert value == pytest.approx(500.0) and note is None


@pytest.mark.parametrize(
    "argv,message",
    [
        (["doctor", "no_such_workload"], "unknown workload or job 'no_such_workload': workloads are captcha_slider"),
        (["doctor", "tests/unit/test_doctor.py::test_the_ledger_adds_up_to_the_step"], "ran no perfsuite job"),
        (["doctor", "tests/unit/test_doctor.py::no_such_test"], "names no test"),
        (["doctor", "gray_classifier", "--rounds", "0"], "--rounds 0"),
    ],
    ids=["unknown-name", "test-without-perf_run", "no-such-test", "rounds"],
)
def test_bad_targets_exit_2_saying_what_to_write(argv, message, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_an_existing_output_file_is_not_overwritten_unless_asked(tmp_path, capsys) -> None:
    out = tmp_path / "report.md"
    out.write_text("mine")
    assert main(["doctor", "gray_classifier", "--markdown", str(out)]) == 2
    assert "exists; pass --overwrite" in capsys.readouterr().err and out.read_text() == "mine"


# --------------------------------------------------------------------------- findings on hand-made runs


def _assess(results: list[Any], cf: Counterfactuals | None = None) -> doctor.Diagnosis:
    return doctor.assess("faces", results, [], cf or Counterfactuals(), 2)


def _tried(fix: Fix, base: list[Any], runs: list[Any], change: str, **kw: Any) -> Counterfactuals:
    from perfsuite.tools.doctor.diagnosis import tried

    return Counterfactuals({fix: tried(fix, change, change, "test", base, runs, **kw)})


def test_worker_start_up_at_each_epoch_maps_to_persistent_workers_with_predicted_and_measured_gains() -> None:
    """Observed: 67-94% of the loader's CPU 'forking workers at each epoch' and no finding naming the fix."""
    base = [_result(samples_per_s=10.0), _result(samples_per_s=11.0)]
    tried = [_result(persistent=True, samples_per_s=15.0), _result(persistent=True, samples_per_s=16.0)]
    d = _assess(base, _tried(Fix.PERSISTENT, base, tried, "persistent_workers False -> True"))
    worker = next(f for f in d.findings if f.kind == "stage:worker processes")
    assert worker.fix.startswith("DataLoader(persistent_workers=True)")
    assert isinstance(worker.predicted, Predicted) and worker.predicted.ratio > 1.0
    assert isinstance(worker.measured, Measured) and worker.measured.pairs == 2
    assert worker.measured.ratio == pytest.approx(((15 / 10) * (16 / 11)) ** 0.5)
    assert "predicted x" in worker.effect and "measured x" in worker.effect
    assert not any(f.kind == "counterfactual" for f in d.findings)  # joined to its finding, not listed apart


def test_every_loader_stage_that_costs_maps_to_its_own_fix() -> None:
    r = _result(by={"__getitem__": 3.0, "collate_fn": 2.0, "transform": 0.1}, process_ms=5.0)
    d = _assess([r])
    fixes = {f.kind: f for f in d.findings if f.kind.startswith("stage:")}
    assert "store images at the size you train on" in fixes["stage:__getitem__"].fix
    assert "decode on the GPU" in fixes["stage:__getitem__"].fix
    assert "default_collate" in fixes["stage:collate_fn"].fix
    assert "stage:transform" not in fixes  # 2% of the loader: no finding of its own
    assert all("not tried:" in f.effect for f in fixes.values())  # a code change: said why it was not tried


def test_the_headline_is_the_bottleneck_never_a_statistical_caveat() -> None:
    """Observed headline: 'data wait between bands ... run longer'; then 'highly input-bound' over an interval that
    crossed the 20% edge. Input-bound is decided (the interval clears 5%), the band is not, and the title says so."""
    fetch = [5.0, 35.0] * 9
    d = _assess([_result(fetch=fetch, host=[100.0] * 18, epoch_fetch=[])])
    assert d.evidence.wait.band is None  # the interval spans the 20% edge
    assert "between bands" not in d.bottleneck and "run longer" not in d.findings[0].fix
    assert d.bottleneck.startswith("input-bound (moderately or highly: not decided, data wait 20.0% [95% CI")
    assert "spans the 20% edge" in d.findings[0].evidence


def test_headroom_above_1_beside_a_data_wait_is_reconciled_in_one_sentence() -> None:
    """Observed: 'loader headroom x8.08' beside a 27% data wait, and no sentence saying why."""
    d = _assess([_result()])
    s = d.evidence.stages
    assert s.headroom is not None and s.headroom > 1 and d.evidence.wait.share > 0.2
    assert str(s.reconcile).startswith(f"headroom x{s.headroom:.2f} yet data wait")
    assert "epoch start" in str(s.reconcile) and "share 2 core(s)" in str(s.reconcile)


def test_the_busy_machine_finding_gives_its_figures_and_the_fix() -> None:
    d = _assess([_result(cores_busy=1.4, environment=recorded_contention(0.99, 3.0, neighbours=0.6))])
    busy = next(f for f in d.findings if f.kind == "busy")
    assert "99% of the time" in busy.evidence and "3 runnable tasks per usable core" in busy.evidence
    assert "other processes and steal took 60%" in busy.evidence
    own = next(f for f in d.findings if f.kind == "cores")  # the loader's 1.4 cores beside a thread: the job's own
    assert "keeping 1.40 core(s) busy on 2 usable core(s)" in own.evidence and "1.40" not in busy.evidence
    assert "fewer workers" in busy.fix and "decode moved off the CPU" in busy.fix
    quiet = _assess([_result(cores_busy=0.2, environment=recorded_contention(0.01, 0.5))])
    assert not any(f.kind == "busy" for f in quiet.findings)
    unrecorded = _assess([_result(cores_busy=0.2, environment={})])
    assert isinstance(unrecorded.evidence.contention.cpu_pressure, Unavailable)  # said, never a 0


def test_recorded_contention_and_script_counterfactuals_reach_every_finding() -> None:
    """Issue 46: a script at CPU pressure 100% raised no busy-machine finding (the doctor read ``cpu_pressure``,
    the Results store ``cpu_pressure_some``), and its counterfactuals, stored as "script 1..3" and read as
    "workers"/"persistent", showed "not tried" beside their own measurement. The contention goes in as the
    probe writes it, the counterfactuals as the script's ``choose`` names them: renaming a key on one side only
    fails here."""
    from perfsuite.tools.doctor.script import Run, assess_script, choose

    busy = recorded_contention(1.0, 8.0, neighbours=0.7)
    base = [_result(workers=1, samples_per_s=s, environment=busy, cores_busy=0.9) for s in (10.0, 11.0)]
    loader = {"site": {"file": "train.py", "line": 88}, "given": {"num_workers": 1}, "threads": 2}
    chosen = choose(Run(base[0], {}, loader), usable=2)
    assert [c.fix for c in chosen] == [Fix.MORE_WORKERS, Fix.PERSISTENT, Fix.FEWER_WORKERS, Fix.THREADS]
    gains = {Fix.MORE_WORKERS: 1.1, Fix.PERSISTENT: 8.5, Fix.FEWER_WORKERS: 1.3, Fix.THREADS: 1.2}
    runs = {
        i: [
            Run(_result(workers=1, samples_per_s=b.value("samples_per_s") * gains[cf.fix] * k), {}, loader)
            for b, k in zip(base, (1.0, 1.05))
        ]
        for i, cf in enumerate(chosen)
    }
    d = assess_script("train.py", [Run(b, {}, loader) for b in base], chosen, runs, usable=2)
    kinds = {f.kind: f for f in d.findings}
    assert known_pressure(d) == pytest.approx(1.0)
    assert "some task waited for a core 100% of the time" in kinds["busy"].evidence
    assert "8 runnable tasks per usable core" in kinds["busy"].evidence
    assert kinds["busy"].fix.count("train.py:88") == 1  # the tried change, at its line once
    persistent = kinds["stage:worker processes"]
    assert isinstance(persistent.measured, Measured) and persistent.measured.ratio == pytest.approx(8.5 * 1.05**0.5)
    assert isinstance(kinds["busy"].measured, Measured) and kinds["busy"].measured.ratio == pytest.approx(
        1.3 * 1.05**0.5
    )
    assert isinstance(kinds["num_workers"].measured, Measured)
    assert not any("not tried: no counterfactual" in f.effect for f in d.findings)
    # The measured fix first, and in the headline.
    assert d.findings[0] is persistent and d.bottleneck.startswith(persistent.title) and "x8." in d.bottleneck
    # Every fix shows a predicted figure or a reason beside its measurement.
    assert all(("predicted x" in f.effect or "predicted: " in f.effect) and "measured" in f.effect for f in d.findings)


def known_pressure(d: doctor.Diagnosis) -> float | None:
    from perfsuite.tools.doctor.model import known

    return known(d.evidence.contention.cpu_pressure)


def test_no_prediction_claims_more_than_the_inputs_whole_share() -> None:
    """Observed: x1.44 predicted from cheapening a __getitem__ that costs 43 ms of CPU per step beside 3.4 s of
    the neighbours' time per step."""
    r = _result(
        by={"__getitem__": 10.0, "collate_fn": 0.1},
        fetch=[1000.0] * 18,
        host=[3400.0] * 18,
        sol=[3300.0] * 5,
        epoch_fetch=[],
        environment=recorded_contention(1.0, 8.0),
    )
    d = _assess([r])
    ceiling = predictions.input_ceiling(d.evidence)
    assert ceiling is not None
    for f in d.findings:
        if f.kind.startswith("stage:") or f.kind == "num_workers":
            assert isinstance(f.predicted, Unavailable) or f.predicted.ratio <= ceiling[0] + 1e-9, f.effect


@pytest.mark.parametrize(
    "workers,persistent,epochs,expected",
    [
        (2, False, 3, [Fix.PERSISTENT, Fix.FEWER_WORKERS]),
        (2, True, 3, [Fix.FEWER_WORKERS]),
        (2, False, 0, [Fix.PERSISTENT, Fix.FEWER_WORKERS]),  # the plan checks it can act (test_doctor_plan)
        (1, False, 2, [Fix.PERSISTENT, Fix.MORE_WORKERS]),
    ],
)
def test_the_arms_tried_follow_the_evidence(workers: int, persistent: bool, epochs: int, expected: list[Fix]) -> None:
    """Fewer workers are tried exactly when they fill the cores (observed: no counterfactual 'because 8 workers
    fill 2 cores'); persistent workers whenever workers do not persist (perfsuite.tools.doctor.plan then checks an
    epoch boundary falls inside the runs)."""
    from perfsuite.harness.runner import RunSpec

    r = _result(workers=workers, persistent=persistent, epoch_fetch=[200.0] * epochs)
    r.metrics["loader_process_cpu_ms_per_sample"].detail["epochs_started"] = epochs
    arms, why = doctor.choose_arms(RunSpec("face_parsing"), r, usable=2)
    assert [a.fix for a in arms] == expected
    workers_arm = next(a for a in arms if a.fix in (Fix.MORE_WORKERS, Fix.FEWER_WORKERS))
    assert workers_arm.label == f"num_workers {workers} -> {1 if workers == 2 else 2}"
    assert Fix.THREADS in why  # a reference workload: perfsuite fits its threads already
    if Fix.PERSISTENT in expected:
        arm = next(a for a in arms if a.fix is Fix.PERSISTENT)
        assert arm.spec.knobs.loader.persistent_workers and arm.spec.knobs.loader.num_workers == workers


def test_a_cloned_loader_over_a_stream_keeps_its_batches() -> None:
    """An IterableDataset's loader takes no sampler: its clone is built from the batch size (a doctor run on a
    Job over a stream raised torch's ValueError here)."""

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(torch.arange(7.0).unbind(0))

    loader = DataLoader(Stream(), batch_size=3, drop_last=True)
    clone = doctor.clone_loader(loader, 0)
    assert clone.batch_size == 3 and clone.drop_last
    assert [b.tolist() for b in clone] == [b.tolist() for b in loader] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_a_worker_count_for_a_stream_says_each_worker_yields_it_whole_unless_it_shards() -> None:
    from types import SimpleNamespace

    from perfsuite.harness.runner import RunSpec
    from perfsuite.tools.doctor.arms import _stream_caveat

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(torch.arange(7.0).unbind(0))

    over_stream = RunSpec(SimpleNamespace(loader=DataLoader(Stream(), batch_size=3)))
    assert "Stream is an IterableDataset" in _stream_caveat(over_stream)
    assert "get_worker_info()" in _stream_caveat(over_stream)
    assert _stream_caveat(RunSpec(SimpleNamespace(loader=DataLoader(TensorDataset(torch.arange(4.0)))))) == ""


def test_a_cloned_loader_can_persist() -> None:
    loader = DataLoader(TensorDataset(torch.arange(8.0)), batch_size=2, num_workers=1)
    assert doctor.clone_loader(loader, 1, persistent=True).persistent_workers
    assert not doctor.clone_loader(loader, 1).persistent_workers  # the loader's own setting


def test_the_report_gives_one_step_time_and_one_data_wait() -> None:
    """Observed: two step times (2.04e+03 and 2.66e+03 ms) and two data waits (7.0% and 5.0%) in one report."""
    import json
    import re

    from perfsuite.tools.doctor import report

    env = recorded_contention(0.5, 2.0)
    d = _assess([_result(environment=env), _result(environment=env)])
    text = report.format_terminal(d)
    waits = set(re.findall(r"data wait (\d+(?:\.\d)?)%", text))
    assert {f"{float(w):.0f}" for w in waits} == {f"{d.evidence.wait.share * 100:.0f}"}, waits
    step = f"{d.evidence.ledger.step_ms:.3g}"
    assert f"the window's mean step of {step} ms" in text and text.count("mean step of") == 1
    assert "machine over the runs: CPU pressure 50%" in text and "gain: predicted x" in text
    markdown = report.format_markdown([d])
    assert "| **step** |" in markdown and "| predicted | measured |" in markdown
    data = json.loads(report.to_json([d]))["diagnoses"][0]
    assert data["contention"]["cpu_pressure"] == pytest.approx(0.5) and data["findings"][0]["effect"]


def test_fewer_workers_predict_back_only_the_loaders_share_of_the_wait_for_a_core() -> None:
    """Observed on the example under load 12: a loader keeping 0.01 cores busy was predicted x2.48 from one
    worker fewer (measured x0.65): the other processes, not the loader, held the cores."""
    quiet_loader = _assess([_result(cores_busy=0.01, environment=recorded_contention(0.5, 7.0))])
    got = predictions.predict_workers(quiet_loader.evidence, 1, quiet_loader.results[-1])
    assert isinstance(got, Predicted) and got.ratio == pytest.approx(1.0, abs=0.01)
    assert "share 2 core(s)" not in (quiet_loader.evidence.stages.reconcile or "")  # 0.01 cores: not a reason
    busy_loader = _assess([_result(cores_busy=1.5, environment=recorded_contention(0.5, 1.0))])
    got = predictions.predict_workers(busy_loader.evidence, 1, busy_loader.results[-1])
    assert isinstance(got, Predicted) and got.ratio > 1.0
    # The cached-batch step slower than the window's own work: the wait for a core is not known, so no figure.
    unknown = _assess([_result(cores_busy=1.5, sol=[900.0] * 5, environment=recorded_contention(0.5, 1.0))])
    assert isinstance(unknown.evidence.ledger.compute, Unavailable)
    got = predictions.predict_workers(unknown.evidence, 1, unknown.results[-1])
    assert isinstance(got, Unavailable) and "not told apart" in got.reason


def test_a_loader_cost_maps_to_its_fix_even_when_the_step_hardly_waits() -> None:
    """Observed on the example: 92% of the loader's CPU forking workers, a 4% data wait, and no finding naming
    persistent_workers=True beside its measured counterfactual."""
    d = _assess([_result(fetch=[3.0, 0.0, 0.0] * 6, host=[200.0] * 18, epoch_fetch=[3.0] * 6)])
    assert d.bottleneck.startswith("not input-bound") or d.bottleneck.startswith("busy machine")
    worker = next(f for f in d.findings if f.kind == "stage:worker processes")
    assert worker.fix.startswith("DataLoader(persistent_workers=True)")


def test_the_budget_keeps_the_rounds_that_fit() -> None:
    budget = doctor.Budget(seconds=100.0, start=0.0)
    budget.elapsed = lambda: 40.0  # type: ignore[method-assign]
    # Which counterfactuals fit is the plan's (tests/unit/test_doctor_plan.py); the rounds are the budget's.
    assert not budget.another_round(80.0, 1, 3) and "rounds 2..3 of 3" in budget.left_out[-1]
    assert budget.summary()[0] == "--budget 1.66667 min: took 0.7 min (within it)"
