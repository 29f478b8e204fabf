"""CPU time read from the operating system: of a process, of one of its threads, and of its reaped children.

The loader ledger (:mod:`perfsuite.probes.loader`) counts what DataLoader workers
spend without running anything inside them, so every figure here comes from the
kernel:

* a live process or thread: ``/proc/<pid>/schedstat`` (and ``task/<tid>/schedstat``),
  whose first field is the scheduler's run time in nanoseconds: user + system, exact.
  ``/proc/<pid>/stat``'s utime/stime count in clock ticks (10 ms here), too coarse
  for a few milliseconds per sample; they are the fallback where schedstat is absent.
* a process that has exited and been waited for: its whole CPU time moves into the
  parent's ``getrusage(RUSAGE_CHILDREN)`` (microseconds), which is how the CPU time
  of non-persistent workers, forked again and joined every epoch, is still counted.

A zombie (exited, not yet reaped) still answers from /proc, with its final time.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

PROC = Path("/proc")
_TICK_S = 1.0 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


def _read(path: Path) -> bytes | None:
    """A small /proc file's bytes (raw os calls: a sampler reads several per tick)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)


def _schedstat_ns(path: Path) -> int | None:
    data = _read(path)
    try:
        return int(data.split()[0]) if data else None
    except (ValueError, IndexError):
        return None


def _stat_ns(path: Path) -> int | None:
    """utime + stime from a /proc stat file (fields 14 and 15, after the parenthesised name)."""
    data = _read(path)
    try:
        fields = data.rsplit(b")", 1)[1].split() if data else []
        return int((int(fields[11]) + int(fields[12])) * _TICK_S * 1e9) if fields else None
    except (ValueError, IndexError):
        return None


def process_cpu_ns(pid: int) -> int | None:
    """CPU time (user + system) of every thread of ``pid`` so far, in ns; None once it is gone (reaped)."""
    ns = _schedstat_ns(PROC / str(pid) / "schedstat")
    return ns if ns is not None else _stat_ns(PROC / str(pid) / "stat")


def thread_cpu_ns(tid: int, pid: int | None = None) -> int | None:
    """CPU time of one thread (a native thread id, e.g. ``threading.Thread.native_id``), in ns."""
    task = PROC / str(pid if pid is not None else os.getpid()) / "task" / str(tid)
    ns = _schedstat_ns(task / "schedstat")
    return ns if ns is not None else _stat_ns(task / "stat")


def reaped_children_cpu_ns() -> int:
    """CPU time of every child this process has waited for (user + system, their whole lives), in ns."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return int(round((usage.ru_utime + usage.ru_stime) * 1e9))


def children(pid: int | None = None) -> list[int]:
    """Direct children of ``pid`` (this process by default), from /proc/<pid>/task/*/children."""
    out: list[int] = []
    root = PROC / str(pid if pid is not None else os.getpid()) / "task"
    try:
        tasks = os.listdir(root)
    except OSError:
        return out
    for task in tasks:
        data = _read(root / task / "children")
        if data:
            out.extend(int(c) for c in data.split())
    return out


def available() -> str | None:
    """None when this OS answers the readers above; otherwise why not (for an unavailable metric's reason)."""
    if not (PROC / str(os.getpid()) / "stat").is_file():
        return "no /proc on this OS: the loader ledger reads worker CPU time from /proc (Linux)"
    return None


def children_snapshot(pids: list[int] | None = None) -> tuple[int, dict[int, int]]:
    """(reaped children's CPU, {pid: CPU} of the live children), read consistently.

    A child reaped between the two reads would be counted twice or not at all,
    so the reaped total is read before and after the live ones, and the pair is
    read again until it did not move.
    """
    for _ in range(20):
        before = reaped_children_cpu_ns()
        live = {pid: ns for pid in (children() if pids is None else pids) if (ns := process_cpu_ns(pid)) is not None}
        if reaped_children_cpu_ns() == before:
            return before, live
    return before, live
