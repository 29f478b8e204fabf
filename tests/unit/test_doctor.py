"""perfsuite doctor's arithmetic and decisions on hand-made figures (no runs), and its command line's bad input."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from perfsuite.cli.main import main
from perfsuite.tools import doctor


def test_a_band_is_called_only_when_the_interval_clears_its_edges() -> None:
    steady = doctor.wait_band([[30.0] * 20], [[100.0] * 20])
    assert steady["band"] == "highly input-bound" and steady["low"] == pytest.approx(0.3)
    low = doctor.wait_band([[0.1] * 20], [[100.0] * 20])
    assert low["band"] == "not input-bound" and low["between"] is None
    # Shares that straddle 20%: half the steps wait 5%, half 35%.
    mixed = doctor.wait_band([[5.0, 35.0] * 10], [[100.0] * 20])
    assert mixed["band"] is None and mixed["edge"] == pytest.approx(0.20)
    assert mixed["between"] == "moderately input-bound .. highly input-bound"
    assert mixed["low"] < 0.2 < mixed["high"]


def test_interleaved_pairs_give_a_ratio_and_an_interval() -> None:
    r = doctor.ratio_interval([100.0, 110.0, 90.0], [150.0, 160.0, 140.0])
    assert r["pairs"] == 3 and 1.4 < r["ratio"] < 1.6 and r["low"] < r["ratio"] < r["high"]
    assert doctor.ratio_interval([100.0], [120.0])["low"] is None  # one pair: a ratio, no interval


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
    observed = {"sync_ms": 2.0, "copy_ms": 1.0, "wall_ms": 40.0}
    ledger = doctor._ledger([[10.0] * 4], [[50.0] * 4], [[30.0] * 3], observed, "cuda")
    parts = ledger["parts"]
    own = 50.0 - 10.0  # the window's step less its wait: split by the observed step's shares
    assert parts["host syncs"] == pytest.approx(own * 2 / 40) and parts["host->device copy"] == pytest.approx(own / 40)
    assert parts["compute"] == pytest.approx(30.0 * (1 - 3 / 40))  # the cached-batch step less its syncs' share
    assert sum(parts.values()) == pytest.approx(ledger["step_ms"]) == pytest.approx(50.0)
    assert all(0.0 <= share <= 1.0 for share in ledger["shares"].values())


@pytest.mark.parametrize("sol_ms", [10.0, 39.0, 40.0, 60.0, 2690.0])
def test_no_ledger_part_is_negative_or_above_the_step(sol_ms: float) -> None:
    """The observed case: a cached-batch step of 2.69 s against a window's 2.04 s step read compute 132% and the
    rest -39%. A cached-batch step slower than the window's own work is from other conditions: unavailable."""
    fetch, host = [[5.0, 15.0] * 5, [10.0] * 10], [[50.0, 50.0] * 5, [50.0] * 10]
    ledger = doctor._ledger(fetch, host, [[sol_ms] * 5], {"sync_ms": 0.1, "wall_ms": 45.0}, "cpu")
    assert sum(v for v in ledger["parts"].values() if v is not None) == pytest.approx(ledger["step_ms"])
    assert all(0.0 <= share <= 1.0 for share in ledger["shares"].values()), ledger["shares"]
    assert all(v is None or v >= 0 for v in ledger["parts"].values())
    if sol_ms > 40 * 1.05:
        assert "compute" not in ledger["parts"] and "compute and the rest" in ledger["parts"]
        assert any(n.startswith("compute unavailable") for n in ledger["notes"])
        assert not doctor._cached(host, [[sol_ms] * 5], ledger)["available"]
        assert not doctor._efficiency(host, [[sol_ms] * 5], ledger, {}, fetch)["available"]
    else:
        assert ledger["parts"]["compute"] <= 40.0 and ledger["parts"]["the rest"] >= 0


def test_a_cpu_run_names_its_reads_for_what_they_are() -> None:
    ledger = doctor._ledger([[1.0]], [[10.0]], [[5.0]], {"sync_ms": 1.0, "wall_ms": 9.0}, "cpu")
    assert "reads to Python" in ledger["parts"] and "host syncs" not in ledger["parts"]
    assert any("waits for no queued work" in n for n in ledger["notes"])


def _eval_every(n: int, steps: int = 20, eval_ms: float = 2400.0) -> list[float]:
    return [100.0 + (eval_ms if (i + 1) % n == 0 else 0.0) for i in range(steps)]


def test_periodic_work_is_named_with_its_period_and_kept_out_of_the_input_figures() -> None:
    """The UNet case: an evaluation every 5 steps (2.4 s) in the window made the mean step, and the efficiency
    against the cached-batch median, blame the input (0.3% data wait)."""
    host = [_eval_every(5), _eval_every(5)]
    fetch = [[0.3] * 20, [0.3] * 20]
    sol = [[99.0] * 5, [99.5] * 5]
    periodic = doctor.periodic_work(fetch, host)
    assert periodic["found"] and periodic["every"] == 5 and periodic["steps"] == 8
    assert periodic["extra_ms_per_step"] == pytest.approx(2400.0 / 5, rel=0.01)
    ledger = doctor._ledger(fetch, host, sol, {"wall_ms": 100.0}, "cpu", periodic)
    assert ledger["parts"]["periodic work (every 5 steps)"] == pytest.approx(periodic["extra_ms_per_step"])
    assert sum(ledger["parts"].values()) == pytest.approx(ledger["step_ms"])
    eff = doctor._efficiency(host, sol, ledger, periodic, fetch)
    assert eff["available"] and eff["value"] > 0.95 and eff["periodic_left_out"]
    assert doctor._cached(host, sol, ledger, periodic, fetch)["saves_ms"] < 5.0  # the input costs ~nothing


def test_long_steps_at_the_epochs_length_are_the_loaders_not_periodic_work() -> None:
    host = [_eval_every(3, 18, 500.0)]
    assert doctor.periodic_work([[0.0] * 18], host)["every"] == 3
    assert not doctor.periodic_work([[0.0] * 18], host, epoch_steps=3.0)["found"]
    assert not doctor.periodic_work([[1.0] * 18], [[100.0] * 17 + [900.0]])["found"]  # once: not periodic


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
        ledger = doctor._ledger(fetch, host, sol, {"wall_ms": 100.0}, "cpu")
        effs.append(doctor._efficiency(host, sol, ledger, {}, fetch))
    a, b = effs
    assert a["low"] <= a["value"] <= a["high"] <= 1.0 and b["low"] <= b["value"] <= b["high"] <= 1.0
    assert a["low"] <= b["high"] and b["low"] <= a["high"]


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
