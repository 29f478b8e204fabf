"""The loader ledger's calibrated rule: per-batch CPU time judged in units of the calibration timed beside it."""

from __future__ import annotations

from perfsuite.core.results import Metric, Result
from perfsuite.judge.engine import compare_results
from perfsuite.judge.verdict import Outcome
from perfsuite.probes.stages import calibrate
from tests.unit.fixed_fingerprint import FP

BATCHES = [0.150, 0.152, 0.149, 0.151, 0.150, 0.153, 0.148, 0.150]
CALIB = [1.60, 1.61, 1.59, 1.60, 1.62, 1.60, 1.59, 1.61]


def ledger(cpu: list[float], calib: list[float] | None, by: dict[str, float] | None = None) -> Result:
    samples = {"loader_cpu_ms": cpu, **({"loader_calib_ms": calib} if calib is not None else {})}
    value = sorted(cpu)[len(cpu) // 2]
    detail = {"by": by} if by else {}
    metrics = {"loader_cpu_ms_per_sample": Metric("loader_cpu_ms_per_sample", value, "ms/sample", detail=detail)}
    return Result("job", "smoke", {"num_workers": 2}, metrics, samples, FP, 32, 18, 3)


def verdict(base: Result, head: Result):
    (v,) = [v for v in compare_results(base, head, "t", force=True) if v.metric == "loader_cpu_ms_per_sample"]
    return v


def test_a_core_running_slower_for_everything_is_not_a_regression() -> None:
    slow = 1.3  # the machine, not the loader: the calibration moved as much as the loader's code
    v = verdict(ledger(BATCHES, CALIB), ledger([x * slow for x in BATCHES], [c * slow for c in CALIB]))
    assert v.outcome is not Outcome.REGRESSED, v.message
    assert "the calibration kernel took x1.300" in v.message


def test_the_loader_costing_more_at_the_same_calibration_is_a_regression() -> None:
    v = verdict(ledger(BATCHES, CALIB), ledger([x * 1.5 for x in BATCHES], CALIB))
    assert v.outcome is Outcome.REGRESSED, v.message
    assert "calibrated: the calibration kernel took x1.000" in v.message


def test_the_margin_widens_by_calibration_trust_of_how_far_the_calibration_moved(monkeypatch) -> None:
    from perfsuite.core import metrics

    base, head = ledger(BATCHES, CALIB), ledger([x * 1.44 * 1.3 for x in BATCHES], [c * 1.44 for c in CALIB])
    assert f"margin x{metrics.LOADER_FACTOR * 1.44**metrics.CALIBRATION_TRUST:.3g}" in verdict(base, head).message
    monkeypatch.setattr(metrics, "CALIBRATION_TRUST", 0.5)
    assert "margin x1.32" in verdict(base, head).message  # 1.1 x sqrt(1.44)


def test_a_side_without_calibration_samples_is_inconclusive_never_judged_raw() -> None:
    v = verdict(ledger(BATCHES, None), ledger([x * 1.5 for x in BATCHES], CALIB))
    assert v.outcome is Outcome.INCONCLUSIVE
    assert "base has no loader_calib_ms samples" in v.message and "re-record" in v.message


def test_the_calibration_kernel_measures_positive_thread_cpu_time() -> None:
    assert all(calibrate(parts) > 0 for parts in (1, 3))


def test_the_stages_that_moved_are_shown_at_the_base_calibration() -> None:
    """On a core running x1.3 slower, a collate costing x5 is named; __getitem__, which only ran slower, is not."""
    slow = 1.3
    base = ledger(BATCHES, CALIB, {"__getitem__": 0.14, "collate_fn": 0.01})
    head = ledger(
        [x * slow * 1.5 for x in BATCHES],
        [c * slow for c in CALIB],
        {"__getitem__": 0.14 * slow, "collate_fn": 0.08 * slow},
    )
    v = verdict(base, head)
    assert v.outcome is Outcome.REGRESSED, v.message
    assert v.message.endswith("by stage: collate_fn 0.01 -> 0.08"), v.message
