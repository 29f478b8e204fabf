"""The memory guard: a setting whose loader would need more memory than is safely free is not tried.

A DataLoader holds up to ``num_workers x prefetch_factor`` batches in flight, each in shared memory
(/dev/shm, where worker processes hand tensors to the training process), and every worker is a process
with its own resident memory. Seed 002's advice for an out-of-memory error was "lower batch_size or
prefetch_factor": the guard does that arithmetic before the run instead of after the crash::

    workers x prefetch x batch bytes + workers x worker RSS  <=  half of the memory free now
    workers x prefetch x batch bytes                          <=  half of /dev/shm free now

Half, because the step, the model and everyone else on the machine need the rest. Memory is read with
psutil (``available``: what can be allocated without swapping), /dev/shm with ``shutil.disk_usage``.
Worker RSS is the summed RSS the memory probe measured per worker (an upper bound: shared pages are
counted in every worker), so the guard errs on the side of not trying.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MB = 1024 * 1024
SHARE = 0.5  # of free memory and of free /dev/shm a setting may plan to use
SHM = Path("/dev/shm")


@dataclass(frozen=True)
class Free:
    """Memory free now: host memory (bytes) and /dev/shm (bytes, None where there is none)."""

    memory: int
    shm: int | None


def free_now(shm: Path = SHM) -> Free:
    """What psutil says is available, and what /dev/shm has free."""
    import psutil

    try:
        shm_free: int | None = shutil.disk_usage(shm).free
    except OSError:
        shm_free = None
    return Free(int(psutil.virtual_memory().available), shm_free)


@dataclass(frozen=True)
class Footprint:
    """What one batch and one worker cost, measured in the reference run."""

    batch_bytes_per_sample: float | None  # bytes of one collated sample (None: not measured)
    worker_rss_bytes: float  # resident memory of one worker process
    worker_rss_source: str  # how it was measured, for the report

    def need(self, workers: int, prefetch: int, batch_size: int) -> tuple[float, float]:
        """(host bytes, /dev/shm bytes) a loader setting plans to hold."""
        in_flight = workers * prefetch * batch_size * (self.batch_bytes_per_sample or 0.0)
        return in_flight + workers * self.worker_rss_bytes, in_flight


class Guard:
    """Says why a loader setting would cross the guard, or None when it may be tried."""

    def __init__(self, footprint: Footprint, free: Callable[[], Free] = free_now, share: float = SHARE) -> None:
        self.footprint, self.free, self.share = footprint, free, share

    def refuse(self, workers: int, prefetch: int | None, batch_size: int) -> str | None:
        if workers <= 0:
            return None
        prefetch = 2 if prefetch is None else prefetch  # torch's default
        host, shm = self.footprint.need(workers, prefetch, batch_size)
        now = self.free()
        if host > self.share * now.memory:
            return (
                f"needs about {host / MB:.0f} MB ({workers} workers x {self.footprint.worker_rss_bytes / MB:.0f} MB "
                f"RSS + {workers}x{prefetch} batches of {batch_size} in flight), more than {self.share:.0%} of the "
                f"{now.memory / MB:.0f} MB free"
            )
        if now.shm is not None and shm > self.share * now.shm:
            return (
                f"needs about {shm / MB:.0f} MB of /dev/shm for {workers}x{prefetch} batches of {batch_size} in "
                f"flight, more than {self.share:.0%} of the {now.shm / MB:.0f} MB free there (a container's "
                "/dev/shm is often 64 MB: docker run --shm-size)"
            )
        return None

    def describe(self) -> str:
        fp, now = self.footprint, self.free()
        per_sample = _bytes(fp.batch_bytes_per_sample) + "/sample" if fp.batch_bytes_per_sample else "unknown"
        shm = f"{now.shm / MB:.0f} MB" if now.shm is not None else "none"
        return (
            f"memory guard: batches {per_sample}, worker RSS {fp.worker_rss_bytes / MB:.0f} MB "
            f"({fp.worker_rss_source}); free now {now.memory / MB:.0f} MB, /dev/shm {shm}; a setting may plan "
            f"{self.share:.0%} of each"
        )


def _bytes(n: float) -> str:
    for unit, size in (("MiB", MB), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"
