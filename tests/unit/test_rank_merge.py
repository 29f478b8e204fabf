"""One Result from every rank's report: the job's figures, the straggler and its phase, scaling efficiency.

Hand-made rank reports, so every expected figure is known exactly; the runs
on real ranks are in tests/faults/test_ddp.py.
"""

from __future__ import annotations

import math

import pytest
from fixed_fingerprint import FP as FIXED

from perfsuite.core.results import Fingerprint, Metric, RankResult, Result
from perfsuite.errors import ResultError
from perfsuite.harness.ranks import merge as rank_merge
from perfsuite.harness.ranks.merge import RankReport, merge, scaling_efficiency
from perfsuite.probes.ranks import PHASE_KEYS, PHASES

STEPS = 8


def _result(step_ms, wait=0.1, syncs=0.0, fmt="input float32", wall=1.0, samples=64) -> Result:
    return Result(
        "w",
        "smoke",
        {"num_workers": 0},
        {
            "samples_per_s": Metric("samples_per_s", samples / wall, detail={"wall_s": wall, "samples": samples}),
            "step_ms": Metric("step_ms", sorted(step_ms)[len(step_ms) // 2]),
            "data_wait_frac": Metric("data_wait_frac", wait),
            "syncs_per_step": Metric("syncs_per_step", syncs, detail={"sites": []}),
            "input_format": Metric("input_format", fmt),
            "input_efficiency": Metric("input_efficiency", 0.9 - wait),
            "repeated_epoch_orders": Metric("repeated_epoch_orders", 0),
        },
        {"step_ms": list(step_ms), "data_wait": [wait] * len(step_ms), "fetch_ms": [wait * 10] * len(step_ms)},
        FIXED,
        8,
        len(step_ms),
        1,
    )


def _phases(extra: dict[str, float] | None = None, jitter: float = 0.0, rank: int = 0) -> dict[str, list[float]]:
    base = {"loader": 2.0, "host prep": 1.0, "forward+backward": 20.0, "after backward": 3.0}
    out = {}
    for p in PHASES:  # jitter: this rank's loader is slower every other step (noise, by turns across ranks)
        noise = [jitter if p == "loader" and (i + rank) % 2 else 0.0 for i in range(STEPS)]
        out[PHASE_KEYS[p]] = [base[p] + (extra or {}).get(p, 0.0) + noise[i] for i in range(STEPS)]
    return out


def _report(rank: int, phases=None, **kw) -> RankReport:
    result = kw.pop("result", None) or _result([30.0 + rank] * STEPS)
    return RankReport(
        rank,
        result,
        phases=phases if phases is not None else _phases(rank=rank),
        sync_forward=kw.pop("sync_forward", True),
        epoch_samples=kw.pop("epoch_samples", 24),
        dataset_len=kw.pop("dataset_len", 48),
        threads=kw.pop("threads", 1),
        workers=kw.pop("workers", 0),
        pid=100 + rank,
        **kw,
    )


def test_the_jobs_step_is_its_slowest_ranks_and_throughput_counts_every_rank() -> None:
    a = _report(0, result=_result([10.0, 30.0] * 4, wall=1.0))
    b = _report(1, result=_result([20.0, 20.0] * 4, wall=2.0))
    merged = merge([b, a], cores=2)
    assert merged.samples["step_ms"] == [20.0, 30.0] * 4
    assert merged.value("samples_per_s") == pytest.approx(128 / 2.0)
    assert [r.rank for r in merged.ranks] == [0, 1] and merged.ranks[1].pid == 101
    p95 = merged.ranks[0].metric("step_ms").detail["p95"]
    assert merged.ranks[0].metric("step_ms").detail["p50"] == 20.0 and p95 == pytest.approx(30.0)
    assert merged.knobs["nproc_per_node"] == 2


def test_an_exact_metric_is_the_worst_ranks_with_every_ranks_value_and_a_note() -> None:
    a = _report(0, result=_result([10.0] * STEPS, syncs=1.0, wait=0.3))
    b = _report(1, result=_result([10.0] * STEPS, syncs=0.0, wait=0.1, fmt="input bfloat16"))
    merged = merge([a, b], cores=2)
    syncs = merged.metric("syncs_per_step")
    assert syncs.value == 1.0 and syncs.detail["rank"] == 0 and syncs.detail["by_rank"] == {"0": 1.0, "1": 0.0}
    assert "syncs_per_step differs across ranks: rank 0 1, rank 1 0" in merged.notes
    assert merged.value("input_format") == "rank 0: input float32 | rank 1: input bfloat16"
    assert merged.value("data_wait_frac") == 0.3 and merged.samples["data_wait"] == [0.3] * STEPS
    assert merged.value("input_efficiency") == pytest.approx(0.6)  # higher is better: the worst is the lowest


def test_a_metric_unavailable_on_one_rank_says_so() -> None:
    metric, note = rank_merge.worst(
        "syncs_per_step", {0: Metric("syncs_per_step", 2.0), 1: Metric.unavailable("syncs_per_step", "no observe")}
    )
    assert metric.value == 2.0 and metric.detail["unavailable_on"] == {"1": "no observe"} and note is None


@pytest.mark.parametrize(
    ("rank", "phase"),
    [(1, "loader"), (0, "forward+backward"), (1, "after backward"), (0, "host prep")],
)
@pytest.mark.parametrize("sync_forward", [True, False])
def test_the_straggler_is_the_rank_and_phase_that_is_late(rank: int, phase: str, sync_forward: bool) -> None:
    reports = [
        _report(r, phases=_phases({phase: 100.0} if r == rank else None, jitter=1.0, rank=r), sync_forward=sync_forward)
        for r in (0, 1)
    ]
    metric, shares = rank_merge.straggler_wait(reports, [130.0] * STEPS)
    d = metric.detail
    assert (d["rank"], d["phase"]) == (rank, phase), d["summary"]
    assert d["excess_ms_by_phase"][phase] == pytest.approx(100.0, abs=1.0)
    assert d["last_in_steps"] == f"{STEPS}/{STEPS}"
    assert all(s == pytest.approx(101.0 / 130.0, abs=0.02) for s in shares)


def test_ranks_late_by_turns_are_no_straggler() -> None:
    """Noise: each rank is 20 ms late every other step. Large enough, but never the same rank."""
    reports = [_report(r, phases=_phases(jitter=20.0, rank=r)) for r in (0, 1)]
    metric, _ = rank_merge.straggler_wait(reports, [50.0] * STEPS)
    assert metric.detail["rank"] is None and metric.detail["summary"].startswith("no straggler")
    assert metric.value == pytest.approx(20.0 / 50.0)


def test_three_ranks_name_the_one_behind_the_other_two() -> None:
    reports = [_report(r, phases=_phases({"loader": 50.0} if r == 2 else None)) for r in (0, 1, 2)]
    metric, _ = rank_merge.straggler_wait(reports, [80.0] * STEPS)
    assert metric.detail["rank"] == 2 and metric.detail["phase"] == "loader"


def test_straggler_unavailable_says_why() -> None:
    reports = [_report(0), _report(1, straggler_reason="the job's model is not a DistributedDataParallel module")]
    metric, shares = rank_merge.straggler_wait(reports, [10.0] * STEPS)
    assert not metric.available and metric.reason.startswith("rank 1: the job's model") and shares == []


def test_input_skew_names_the_rank_whose_loader_lags() -> None:
    slow = _report(1, result=_result([10.0] * STEPS, wait=0.5))
    metric, skews = rank_merge.input_skew([_report(0), slow, _report(2)])
    assert metric.detail["rank"] == 1 and skews == [pytest.approx(0.4)] * STEPS
    quiet, _ = rank_merge.input_skew([_report(0), _report(1)])
    assert quiet.detail["rank"] is None and quiet.value == 0.0


def test_dataset_passes_count_what_every_rank_drew_in_one_epoch() -> None:
    assert rank_merge.dataset_passes([_report(0), _report(1)]).value == 1.0
    whole = rank_merge.dataset_passes([_report(0, epoch_samples=48), _report(1, epoch_samples=48)])
    assert whole.value == 2.0 and whole.detail["epoch_samples_by_rank"] == {"0": 48, "1": 48}
    short = rank_merge.dataset_passes([_report(0), _report(1, epoch_samples=None)])
    assert not short.available and "rank 1 drew no complete epoch" in short.reason


def test_oversubscription_is_threads_and_workers_of_every_rank_per_core() -> None:
    over = rank_merge.oversubscription([_report(0, workers=2), _report(1, workers=2)], cores=2)
    assert over.value == 3.0 and over.detail["rule"] == "2 ranks x (threads + workers) = 6 on 2 core(s)"


def test_scaling_efficiency_is_a_geometric_mean_with_a_t_interval() -> None:
    pairs = [(100.0, 160.0), (100.0, 180.0), (100.0, 170.0)]
    metric = scaling_efficiency(pairs, 2)
    ratios = [0.8, 0.9, 0.85]
    assert metric.value == pytest.approx(math.exp(sum(map(math.log, ratios)) / 3))
    assert metric.detail["low"] < metric.value < metric.detail["high"] <= 1.0
    assert metric.detail["rounds"] == 3


def test_scaling_efficiency_never_reports_a_figure_above_one() -> None:
    metric = scaling_efficiency([(100.0, 230.0), (100.0, 220.0)], 2)
    assert not metric.available and "above 1 is not scaling" in metric.reason
    capped = scaling_efficiency([(100.0, 150.0), (100.0, 199.0)], 2)
    assert capped.available and capped.detail["high"] == 1.0


@pytest.mark.parametrize(
    ("pairs", "nproc", "why"),
    [([(1.0, 1.8)], 2, "an interval needs 2 or more"), ([(1.0, 1.0)] * 3, 1, "one rank")],
)
def test_scaling_efficiency_unavailable_says_why(pairs, nproc, why) -> None:
    metric = scaling_efficiency(pairs, nproc)
    assert not metric.available and why in metric.reason


def test_a_result_with_ranks_round_trips_through_json() -> None:
    merged = merge([_report(0), _report(1)], cores=2)
    again = Result.from_json(merged.to_json())
    assert again == merged and isinstance(again.ranks[0], RankResult)
    assert again.ranks[1].samples[PHASE_KEYS["loader"]] == [2.0] * STEPS


def test_ranks_out_of_order_are_refused_naming_the_field() -> None:
    data = merge([_report(0), _report(1)], cores=2).to_dict()
    data["ranks"].reverse()
    with pytest.raises(ResultError, match="ranks 0, 1, ... in order"):
        Result.from_dict(data)


def test_fingerprint_is_rank_zeros() -> None:
    merged = merge([_report(0), _report(1)], cores=2)
    assert isinstance(merged.fingerprint, Fingerprint) and merged.fingerprint == FIXED


def test_input_efficiency_above_one_is_not_reported_as_a_figure() -> None:
    faster = _report(0, result=_result([10.0] * STEPS, wait=-0.3))  # 0.9 - wait = 1.2 on both ranks
    merged = merge([faster, _report(1, result=_result([10.0] * STEPS, wait=-0.25))], cores=2)
    m = merged.metric("input_efficiency")
    assert not m.available and "x1.150 on rank 1, the worst rank" in m.reason
    assert merge([_report(0), _report(1)], cores=2).value("input_efficiency") == pytest.approx(0.8)
