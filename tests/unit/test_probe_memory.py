"""peak_rss_mb is the training process's own, the tree's (loader workers) apart; peak_mem_mb needs CUDA."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

from perfsuite.probes.base import WindowTimings
from perfsuite.probes.memory import MemoryProbe, process_tree, rss_mb

TIMINGS = WindowTimings(start_s=0.0, end_s=1.0, steps=2, batch_size=1)


def test_the_process_tree_includes_child_processes() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in process_tree(os.getpid())
        main, children, n = rss_mb(os.getpid())
        assert n >= 1 and children > 0 and main > 0
    finally:
        child.kill()
        child.wait()


def test_cpu_run_reports_host_peak_with_workers_and_no_device_peak() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    probe = MemoryProbe()
    try:
        probe.setup(SimpleNamespace(device="cpu", observe_steps=0))
        probe.start()
        probe.stop()
        probe.stop()  # safe twice
    finally:
        child.kill()
        child.wait()
    metrics = {m.name: m for m in probe.metrics(TIMINGS)}
    rss = metrics["peak_rss_mb"]
    assert rss.detail["worker_processes"] >= 1
    # The training process's own peak, the tree's apart (a summed tree counted shared pages once per worker).
    assert rss.value >= rss.detail["main_mb"] > 0
    assert rss.detail["tree_peak_mb"] == rss.detail["main_mb"] + rss.detail["workers_mb"] > rss.value
    assert metrics["peak_mem_mb"].value is None and "CUDA" in metrics["peak_mem_mb"].reason


def test_stop_without_start_is_harmless() -> None:
    probe = MemoryProbe()
    probe.setup(SimpleNamespace(device="cpu", observe_steps=0))
    probe.stop()
    assert {m.name for m in probe.metrics(TIMINGS)} == {"peak_mem_mb", "peak_rss_mb"}
