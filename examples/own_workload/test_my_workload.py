"""Perf tests for the example workload, with the reference suite's probes, thresholds and baselines.

Run them with ``pytest examples/own_workload -p perfsuite``; add
``--perfsuite-save`` once to store this machine's baselines and
``--perfsuite-compare`` afterwards to catch regressions.
"""

import pytest


@pytest.mark.perf(max_syncs_per_step=0, min_gpu_util=0.8)
def test_defects_gpu_aug(perf_run):
    """Batched augmentation on the run's device, pinned batches copied with non_blocking=True, no per-step loss
    read: no host syncs."""
    result = perf_run("example_defects", aug="gpu", num_workers=0, pin_memory=True, non_blocking=True)
    assert result.value("samples_per_s") > 0


@pytest.mark.perf(min_syncs_per_step=1)
def test_defects_logging_every_step_is_seen(perf_run):
    """The seeds' per-step loss.item(): the sync probe must see it (a check that the check works)."""
    perf_run("example_defects", aug="cpu", num_workers=0, log_interval=1)
