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
    ledger = doctor._ledger([[10.0] * 4], [[50.0] * 4], [[30.0] * 3], {"sync_ms": 2.0, "copy_ms": 1.0}, "cuda")
    parts = ledger["parts"]
    assert parts["compute"] == pytest.approx(28.0)  # the cached-batch step less its syncs
    assert sum(parts.values()) == pytest.approx(ledger["step_ms"]) == pytest.approx(50.0)
    assert parts["the rest"] == pytest.approx(50 - 10 - 1 - 2 - 28)


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
