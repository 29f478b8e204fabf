"""Seed 003 and the training step: AMP actually engaged, torch.compile without graph breaks, no per-step syncs.

Augmentation off and no workers, so these cases measure the step, not the loader.
"""

from __future__ import annotations

import pytest
from perf_matrix import PINNED, SMALLEST, WORKLOADS

STEP_ONLY = {"aug": "none", "num_workers": 0, **PINNED}


@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.perf(amp_engaged=True, min_amp_lowp_frac=0.5, max_syncs_per_step=0)
def test_bf16_autocast_engages(perf_run, workload):
    """amp='bf16' (never a bool: seed 003's `amp: true` trained FP32 for weeks)."""
    perf_run(workload, amp="bf16", **STEP_ONLY)


@pytest.mark.perf(amp_engaged=False, max_amp_lowp_frac=0.0)
def test_fp32_is_reported_as_fp32(perf_run):
    """The other side of the AMP check: a run without autocast must not look mixed-precision."""
    perf_run(SMALLEST, amp=None, **STEP_ONLY)


@pytest.mark.perf(max_graph_breaks=0, max_recompiles=0, max_syncs_per_step=0)
def test_compiled_step_has_no_graph_breaks(perf_run):
    """torch.compile on the smallest workload: one graph, compiled once (drop_last keeps shapes fixed)."""
    perf_run(SMALLEST, compile="default", **STEP_ONLY)


@pytest.mark.perf(min_syncs_per_step=1, max_syncs_per_step=1)
def test_loss_read_every_step_is_one_sync(perf_run):
    """The seeds' per-step loss.item(): exactly one host sync per step, and the probe must see it."""
    perf_run(SMALLEST, log_interval=1, **STEP_ONLY)
