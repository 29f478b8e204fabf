"""Runs on two gloo ranks through torchrun: per-rank figures, the DDP faults' causes, the planted stragglers.

Every run here comes from one launch per session (the ``ddp_runs`` fixture):
the ddp references, each DDP fault of the catalog, and a user's own DDP job.
Ground truth: a sleep planted on rank k in its loader, its backward or its
optimizer step is named with that rank and that phase, never another.
"""

from __future__ import annotations

import pytest

from perfsuite.core.results import Result

PLANTED = {  # fault: (rank, phase) it plants a sleep in
    "straggler_loader": (1, "loader"),
    "straggler_backward": (0, "forward+backward"),
    "straggler_optimizer": (1, "after backward"),
}


def test_the_reference_has_each_ranks_own_figures(ddp_runs: dict[str, Result]) -> None:
    result = ddp_runs["ref:ddp"]
    assert [r.rank for r in result.ranks] == [0, 1]
    assert len({r.pid for r in result.ranks}) == 2
    for rank in result.ranks:
        step = rank.metric("step_ms")
        assert step.available and step.detail["p50"] <= step.detail["p95"]
        assert len(rank.samples["step_ms"]) == result.steps
        assert rank.metric("data_wait_frac").available
        assert rank.value("syncs_per_step") == 0  # the reference reads nothing back
        assert rank.metric("ops_per_step").available  # an exact counter, per rank
    # The job's step is its slowest rank's; throughput counts every rank's samples.
    merged = result.samples["step_ms"]
    assert merged == [max(r.samples["step_ms"][i] for r in result.ranks) for i in range(result.steps)]
    assert result.metric("samples_per_s").detail["samples"] == 2 * result.steps * result.batch_size
    assert result.knobs["nproc_per_node"] == 2
    # Deterministic figures of the good pipeline: each rank reads its half, a new order every epoch.
    assert result.value("dataset_passes_per_epoch") == 1.0
    assert result.metric("dataset_passes_per_epoch").detail["epoch_samples_by_rank"] == {"0": 24, "1": 24}
    assert result.value("repeated_epoch_orders") == 0
    assert result.value("ddp_unused_search") is False


@pytest.mark.parametrize("fault", sorted(PLANTED))
def test_a_planted_straggler_is_named_with_its_rank_and_phase(fault: str, ddp_runs: dict[str, Result]) -> None:
    rank, phase = PLANTED[fault]
    detail = ddp_runs[f"fault:{fault}"].metric("straggler_wait_frac").detail
    assert (detail["rank"], detail["phase"]) == (rank, phase), detail["summary"]
    lags = detail["lag_ms_by_rank"]
    assert lags[str(rank)] > lags[str(1 - rank)]


def test_the_unchanged_reference_names_no_one_a_straggler_of_a_planted_size(ddp_runs: dict[str, Result]) -> None:
    """The planted sleep is 150 ms per step; the unchanged run's mean lag stays well below it."""
    lags = ddp_runs["ref:ddp"].metric("straggler_wait_frac").detail["lag_ms_by_rank"]
    assert max(lags.values()) < 150.0


def test_only_the_slow_loader_is_an_input_straggler(ddp_runs: dict[str, Result]) -> None:
    assert ddp_runs["fault:straggler_loader"].metric("input_skew_frac").detail["rank"] == 1
    for fault in ("straggler_backward", "straggler_optimizer"):
        assert ddp_runs[f"fault:{fault}"].metric("input_skew_frac").detail["rank"] is None, fault


def test_a_rank0_only_read_shows_on_rank0_only(ddp_runs: dict[str, Result]) -> None:
    result = ddp_runs["fault:rank0_loss_read"]
    assert [r.value("syncs_per_step") for r in result.ranks] == [1.0, 0.0]
    assert result.metric("syncs_per_step").detail["by_rank"] == {"0": 1.0, "1": 0.0}
    assert any(note.startswith("syncs_per_step differs across ranks") for note in result.notes)


@pytest.mark.parametrize(
    ("fault", "row_names"),
    [
        ("no_distributed_sampler", ("samples per epoch: rank 0 48, rank 1 48 of a 48-sample dataset",)),
        ("set_epoch_missing", ("set_epoch",)),
        ("workers_times_ranks", ("num_workers per rank: rank 0 2, rank 1 2",)),
        ("rank0_loss_read", ("rank 0 1, rank 1 0",)),
        ("find_unused_parameters", ("find_unused_parameters=True",)),
        ("straggler_loader", ("rank 1's loader",)),
        ("straggler_backward", ("rank 0 arrives last", "forward+backward")),
        ("straggler_optimizer", ("rank 1 arrives last", "after backward")),
    ],
)
def test_perfsuite_compare_names_the_ddp_cause(
    fault: str, row_names: tuple[str, ...], ddp_runs: dict[str, Result], tmp_path, capsys, monkeypatch
) -> None:
    """`perfsuite compare` on the reference and the fault's Result: the failing row says what happened, where."""
    monkeypatch.setenv("PERFSUITE_WALL_BOUND", "1")  # the naming is tested, beside the other test workers' load
    from perfsuite.cli.main import main
    from perfsuite.harness.faults.catalog import FAULTS

    base, head = tmp_path / "base.json", tmp_path / "head.json"
    base.write_text(ddp_runs[f"ref:{FAULTS[fault].reference}"].to_json(), encoding="utf-8")
    head.write_text(ddp_runs[f"fault:{fault}"].to_json(), encoding="utf-8")
    assert main(["compare", str(base), str(head)]) == 1
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if f"| {FAULTS[fault].signal} |" in line)
    assert "**regressed**" in row, row
    for name in row_names:
        assert name in row, row


def test_a_users_own_ddp_job_runs_on_two_ranks(ddp_runs: dict[str, Result]) -> None:
    result = ddp_runs["job:tiny_ddp"]
    assert result.workload == "tiny_ddp" and len(result.ranks) == 2
    assert result.value("dataset_passes_per_epoch") == 1.0  # its DistributedSampler shards 64 samples: 32 each
    assert result.value("repeated_epoch_orders") == 0  # its epoch_start=sampler.set_epoch is called per epoch
    assert result.metric("straggler_wait_frac").available
    assert result.knob_sources["num_workers"] == "set by the user's code"
