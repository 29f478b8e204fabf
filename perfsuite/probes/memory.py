"""peak_mem_mb (device) and peak_rss_mb (host: the training process's own; its workers' apart in the detail).

peak_rss_mb is the training process's peak RSS, what a user compares with the
process's memory (a summed tree counts the pages forked workers share with it
once per worker: 3.4 GB summed against a real 1.1 GB). The tree's peak (the
process and its workers, summed) is in the detail as ``tree_peak_mb``.

Host RSS is read from /proc by a light background thread (resident pages of
this process and every descendant, i.e. the loader's worker processes),
because psutil is not a dependency and seed 000's workers are where host
memory goes. Each tick reads /proc/<pid>/statm of the known processes; the
process tree itself (the costlier walk) is re-read every few ticks and
whenever a known process has gone (workers re-forked at an epoch boundary).
Summed RSS over-counts pages that forked workers share with the parent (torch's
libraries, copy-on-write data), so the value is an upper bound; the detail
also gives PSS (shared pages split between sharers) read once at the end of the
window where /proc/<pid>/smaps_rollup is readable. PSS is not sampled during
the window because reading smaps costs tens of milliseconds per process.
"""

from __future__ import annotations

import os
from pathlib import Path

from perfsuite.core.results import Metric
from perfsuite.probes.base import Probe, RunContext, WindowTimings
from perfsuite.probes.ticker import Ticker

PROC = Path("/proc")
MB = 1024 * 1024


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` from /proc/<pid>/task/*/children."""
    out: list[int] = []
    try:
        for task in (PROC / str(pid) / "task").iterdir():
            try:
                out.extend(int(c) for c in (task / "children").read_text().split())
            except OSError:
                continue
    except OSError:
        pass
    return out


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (loader workers, their children)."""
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(_children(current))
    return tree


PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
TREE_EVERY = 5  # ticks between walks of the process tree


def _rss_bytes(pid: int) -> int | None:
    try:
        return int((PROC / str(pid) / "statm").read_text().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return None


def _pss_kb(pid: int) -> int | None:
    try:
        for line in (PROC / str(pid) / "smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def rss_mb(pid: int, tree: list[int] | None = None) -> tuple[float, float, int] | None:
    """(main RSS MB, descendants' RSS MB, number of descendants), or None without /proc.

    ``tree`` is a known process tree (pid first); it is walked afresh when not given.
    """
    main = _rss_bytes(pid)
    if main is None:
        return None
    others = [b for p in (tree or process_tree(pid))[1:] if (b := _rss_bytes(p)) is not None]
    return main / MB, sum(others) / MB, len(others)


class MemoryProbe(Probe):
    """Peak device memory in the window and peak host RSS of the process tree."""

    name = "memory"

    def __init__(self, interval_s: float = 0.1) -> None:
        self.interval_s = interval_s
        self._device = "cpu"
        self._ticker = Ticker(self._sample, self.interval_s, "perfsuite-rss")
        self._peak: tuple[float, float, float, int] | None = None  # tree total, main, children, n children
        self._main_peak: float | None = None  # the training process's own peak
        self._pss_mb: float | None = None
        self._cuda: dict[str, float] = {}
        self._tree: list[int] = []
        self._ticks = 0

    def setup(self, ctx: RunContext) -> None:
        self._device = ctx.device
        if self._on_cuda():
            import torch

            torch.cuda.reset_peak_memory_stats(ctx.device)

    def _on_cuda(self) -> bool:
        return self._device.startswith("cuda")

    def _sample(self, walk: bool = False) -> None:
        pid = os.getpid()
        if walk or self._ticks % TREE_EVERY == 0:
            self._tree = process_tree(pid)
        self._ticks += 1
        reading = rss_mb(pid, self._tree)
        if reading is not None and reading[2] < len(self._tree) - 1:  # a process has gone: walk again
            self._tree = process_tree(pid)
            reading = rss_mb(pid, self._tree)
        if reading is None:
            return
        main, children, n = reading
        self._main_peak = main if self._main_peak is None else max(self._main_peak, main)
        if self._peak is None or main + children > self._peak[0]:
            self._peak = (main + children, main, children, n)

    def start(self) -> None:
        if self._on_cuda():
            import torch

            self._cuda["run_peak_mb"] = torch.cuda.max_memory_allocated(self._device) / MB
            torch.cuda.reset_peak_memory_stats(self._device)
        self._sample(walk=True)
        self._ticker.start()

    def stop(self) -> None:
        if not self._ticker.stop():
            return
        self._sample(walk=True)
        pss = [_pss_kb(p) for p in process_tree(os.getpid())]
        known = [kb for kb in pss if kb is not None]
        self._pss_mb = sum(known) * 1024 / MB if pss and len(known) == len(pss) else None
        if self._on_cuda():
            import torch

            self._cuda["peak_mb"] = torch.cuda.max_memory_allocated(self._device) / MB
            self._cuda["peak_reserved_mb"] = torch.cuda.max_memory_reserved(self._device) / MB

    def metrics(self, timings: WindowTimings) -> list[Metric]:
        out: list[Metric] = []
        if not self._on_cuda():
            out.append(
                Metric.unavailable(
                    "peak_mem_mb",
                    f"device={self._device}: no device memory to measure (torch.cuda.max_memory_allocated needs CUDA)",
                    "MB",
                )
            )
        elif "peak_mb" not in self._cuda:
            out.append(Metric.unavailable("peak_mem_mb", "the measured window never started", "MB"))
        else:
            out.append(
                Metric(
                    "peak_mem_mb",
                    self._cuda["peak_mb"],
                    "MB",
                    detail={
                        "window_peak_reserved_mb": self._cuda["peak_reserved_mb"],
                        "run_peak_mb": max(self._cuda.get("run_peak_mb", 0.0), self._cuda["peak_mb"]),
                    },
                )
            )
        if self._peak is None:
            out.append(Metric.unavailable("peak_rss_mb", "no /proc/<pid>/statm to read RSS from (not Linux?)", "MB"))
        else:
            total, main, children, n = self._peak
            out.append(
                Metric(
                    "peak_rss_mb",
                    self._main_peak if self._main_peak is not None else main,
                    "MB",
                    detail={
                        "measure": "the training process's peak RSS (its workers apart: tree_peak_mb)",
                        "tree_peak_mb": total,
                        "tree_measure": "the process tree's summed RSS (shared pages counted per process)",
                        "main_mb": main,
                        "workers_mb": children,
                        "worker_processes": n,
                        "pss_at_end_mb": self._pss_mb,
                    },
                )
            )
        return out
