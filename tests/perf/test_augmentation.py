"""Seed 000: augmentation on CPU workers starves the GPU; moved to the GPU (batched Kornia) it should not."""

from __future__ import annotations

import pytest
from perf_matrix import PINNED, WORKLOADS


@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.perf(max_syncs_per_step=0)
def test_cpu_augmentation(perf_run, workload):
    """Per-sample PIL/NumPy in two workers, as the seeds shipped it, with pinned non-blocking copies: no host
    syncs in the step (the copies' own syncs are test_loader_settings' subject)."""
    perf_run(workload, aug="cpu", num_workers=2, **PINNED)


@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.perf(max_syncs_per_step=0)
def test_gpu_augmentation(perf_run, workload):
    """Batched on the run's device, with no host syncs: Kornia's stock ColorJiggle and blur cost 5-6 per
    batch (they branch on tensor values in Python), which is why perfsuite/augment/gpu.py avoids them."""
    perf_run(workload, aug="gpu", num_workers=2, **PINNED)


@pytest.mark.parametrize("workload", WORKLOADS)
def test_gpu_augmentation_is_not_slower_than_cpu_augmentation(perf_run, workload):
    """Within one session, so machine drift cancels: on a GPU the batched path must not lose."""
    if not perf_run.device.startswith("cuda"):
        pytest.skip(
            "on a CPU device both placements run on the same cores; the ratio says nothing "
            "about feeding a GPU (run with --perfsuite-device cuda)"
        )
    from perfsuite.judge.timing import compare_timing
    from perfsuite.judge.verdict import Outcome

    cpu = perf_run(workload, aug="cpu", num_workers=2, label="cpu-aug", **PINNED)
    gpu = perf_run(workload, aug="gpu", num_workers=2, label="gpu-aug", **PINNED)
    verdict = compare_timing(cpu.samples["step_ms"], gpu.samples["step_ms"])
    assert verdict.outcome is not Outcome.REGRESSED, (
        f"GPU augmentation is slower than CPU augmentation on {workload}: {verdict.reason} "
        f"(step_ms median {verdict.base_median:.3g} -> {verdict.head_median:.3g})"
    )
