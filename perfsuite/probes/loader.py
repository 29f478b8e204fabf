"""The loader ledger: what the input pipeline costs in CPU time, per sample, by process and by stage.

The seeds' GPUs waited on their loaders; wall-clock time on a shared CPU swings
with the neighbours, CPU time spent per sample barely does. Two measurements:

**The window, read from the OS.** Nothing runs inside the workers and nothing
wraps the Dataset: at the window's edges (and every ``tick_s`` between, for the
timeline) the probe reads, from /proc and ``getrusage`` (:mod:`perfsuite.probes.oscpu`):

* every child process of the training process: the live ones' CPU time, plus
  the whole CPU time of those reaped in the window (non-persistent workers are
  forked again and joined every epoch: ``RUSAGE_CHILDREN`` keeps what they
  spent). Over the window this total is exact:
  ``reaped(end) - reaped(start) + live(end) - live(start)``;
* the pin-memory thread, when the loader has one;
* the training process's own loading: the thread CPU time the runner records
  around each ``next(loader)`` (``WindowTimings.fetch_cpu_s``; always recorded,
  so the window runs the same code with or without this probe). With
  ``num_workers=0`` that is all the loading; with workers it is receiving
  batches and forking workers at each epoch.

Children that were never the training loader's workers (an evaluation loader,
a subprocess the step starts) are tracked by the sampler and reported apart.

**The stages, replayed after the window** (:mod:`perfsuite.probes.stages`): the
Dataset's ``__getitem__`` (its transform apart where it holds one), the
``collate_fn`` and pinning, on the same indices in every run, timed with the
thread's CPU clock. The window's figure less the replayed stages is what the
worker processes cost beyond the loader's own code (forking, pickling batches
between processes, the worker loop).

Metrics: ``loader_cpu_ms_per_sample`` (the replayed stages, judged per batch),
``loader_process_cpu_ms_per_sample`` (the window, from the OS),
``main_load_ms_per_step`` (the training process's own loading, per window step),
``loader_capacity_samples_per_s`` and, from the runner, ``loader_headroom``.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from perfsuite.core.results import Metric
from perfsuite.probes import oscpu
from perfsuite.probes.base import Probe, RunContext, WindowTimings
from perfsuite.probes.stages import REPLAY_BATCHES, Replay, replay
from perfsuite.probes.ticker import Ticker

TICK_S = 0.05
SCAN_EVERY = 4  # ticks between scans of every child (the workers alone are read on the others)


def _iterator(stream: Any) -> Any:
    return getattr(stream, "_it", None)


def worker_pids(stream: Any) -> list[int]:
    """Pids of the worker processes of the loader iterator a BatchStream holds now ([] without workers)."""
    workers = getattr(_iterator(stream), "_workers", None) or []
    return [int(w.pid) for w in workers if getattr(w, "pid", None)]


def _pin_tid(stream: Any) -> int | None:
    thread = getattr(_iterator(stream), "_pin_memory_thread", None)
    tid = getattr(thread, "native_id", None)
    return int(tid) if tid else None


def wait_idle(stream: Any, timeout_s: float = 1.0, quiet_s: float = 0.02) -> float:
    """Wait until the loader's workers stop using CPU (their prefetch queues full); the seconds waited.

    The speed-of-light steps run right after the window; workers still refilling
    their prefetch slots would take cores from them on a machine whose cores
    the step shares. Returns at once without workers or /proc.
    """
    pids = worker_pids(stream)
    if not pids or oscpu.available() is not None:
        return 0.0
    start = time.perf_counter()
    last = sum(ns for p in pids if (ns := oscpu.process_cpu_ns(p)) is not None)
    while time.perf_counter() - start < timeout_s:
        time.sleep(quiet_s)
        now = sum(ns for p in pids if (ns := oscpu.process_cpu_ns(p)) is not None)
        if now - last < quiet_s * 1e9 * 0.05:  # under 5% of one core: idle
            break
        last = now
    return time.perf_counter() - start


def effective_processes(num_workers: int, usable: int) -> int:
    """Processes that can load at once: the workers the cores allow, or the training process itself."""
    return max(1, min(num_workers, usable)) if num_workers > 0 else 1


class LoaderProbe(Probe):
    """The loader ledger (see the module docstring)."""

    name = "loader"

    def __init__(
        self,
        tick_s: float = TICK_S,
        replay_batches: int = REPLAY_BATCHES,
        replay_repeats: int = 3,
        replay_budget_s: float = 2.0,
    ) -> None:
        self.tick_s = tick_s
        self.replay_batches, self.replay_repeats, self.replay_budget_s = replay_batches, replay_repeats, replay_budget_s
        self._ctx: RunContext | None = None
        self._reset()

    def _reset(self) -> None:
        self._why: str | None = None
        self._t0 = 0.0
        self._reaped0 = self._reaped1 = 0
        self._live0: dict[int, int] = {}
        self._live1: dict[int, int] = {}
        self._workers: dict[int, int] = {}  # pid -> last CPU ns seen, for pids that were the loader's workers
        self._others: dict[int, int] = {}  # pid -> last CPU ns seen, for other children
        self._pins: dict[int, list[int]] = {}  # tid -> [first, last] CPU ns
        self._series: list[tuple[float, int]] = []
        self._sampler_ns = 0
        self._ticks = 0
        self._ticker: Ticker | None = None
        self._stopped = True
        self._replay: Replay | str | None = None
        self._samples: dict[str, list[float]] = {}

    # -- the window: OS reads only --------------------------------------------------------------------------
    def setup(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._reset()
        self._why = oscpu.available()
        if self._why is None and ctx.batches is None:
            self._why = "the runner did not hand the probe its batch stream"

    def _read(self, scan: bool = True) -> tuple[int, dict[int, int]]:
        stream = self._ctx.batches if self._ctx else None
        current = set(worker_pids(stream))
        reaped, live = oscpu.children_snapshot(None if scan else sorted(current | set(self._others)))
        for pid, ns in live.items():
            if pid in current or pid in self._workers:
                self._workers[pid] = ns
                self._others.pop(pid, None)
            else:
                self._others[pid] = ns
        tid = _pin_tid(stream)
        if tid is not None and (tns := oscpu.thread_cpu_ns(tid)) is not None:
            self._pins.setdefault(tid, [tns, tns])[1] = tns
        return reaped, live

    def _tick(self) -> None:
        t0 = time.thread_time_ns()
        self._ticks += 1
        reaped, live = self._read(scan=self._ticks % SCAN_EVERY == 0)
        pins = sum(last - first for first, last in self._pins.values())
        self._series.append((time.perf_counter() - self._t0, reaped + sum(live.values()) + pins))
        self._sampler_ns += time.thread_time_ns() - t0

    def start(self) -> None:
        if self._why is not None:
            return
        self._stopped = False
        self._t0 = time.perf_counter()
        self._reaped0, self._live0 = self._read()
        self._series = [(0.0, self._reaped0 + sum(self._live0.values()))]
        self._ticker = Ticker(self._tick, self.tick_s, "perfsuite-loader-ledger")
        self._ticker.start()

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._ticker is not None:
            self._ticker.stop()
        self._reaped1, self._live1 = self._read()

    # -- after the window: the stages -----------------------------------------------------------------------
    def after_window(self) -> None:
        ctx = self._ctx
        if ctx is None or ctx.job is None:
            self._replay = "no job to replay"
            return
        try:
            self._replay = replay(
                ctx.job.loader,
                ctx.batch_size,
                ctx.device,
                batches=self.replay_batches,
                repeats=self.replay_repeats,
                budget_s=self.replay_budget_s,
            )
        except Exception as exc:  # noqa: BLE001 - the user's Dataset outside its worker: report, never fail the run
            self._replay = (
                f"replaying the loader's stages in the training process raised {type(exc).__name__}: {exc} "
                "(a Dataset that only works inside a DataLoader worker?)"
            )

    # -- results ---------------------------------------------------------------------------------------------
    def _window(self, timings: WindowTimings, usable: int) -> dict[str, Any] | str:
        """The window's CPU by process, in ms; or why it is unavailable."""
        if self._why is not None:
            return self._why
        if self._stopped is False or not self._series:
            return "the measured window did not complete"
        children = (self._reaped1 - self._reaped0) + sum(self._live1.values()) - sum(self._live0.values())
        others = sum(max(0, ns - self._live0.get(pid, 0)) for pid, ns in self._others.items())
        pins = sum(last - first for first, last in self._pins.values())
        main = sum(timings.fetch_cpu_s) * 1e3
        workers_ms = max(0.0, (children - others) / 1e6)
        total = workers_ms + main + pins / 1e6
        wall = timings.wall_s
        return {
            "workers_ms": workers_ms,
            "main_ms": main,
            "pin_ms": pins / 1e6,
            "other_children_ms": others / 1e6,
            "other_children": len(self._others),
            "workers_seen": len(self._workers),
            "total_ms": total,
            "window_s": wall,
            "cores_busy": total / 1e3 / wall if wall > 0 else 0.0,
            "sampler_cpu_ms": self._sampler_ns / 1e6,
            # The ledger's cost in the window: its sampler's CPU over the loader's, and over the cores' time.
            "ledger_overhead": (self._sampler_ns / 1e6) / total if total > 0 else 0.0,
            "ledger_core_share": self._sampler_ns / 1e9 / (wall * usable) if wall > 0 else 0.0,
        }

    def metrics(self, timings: WindowTimings) -> list[Metric]:
        from perfsuite.core.cores import usable_cores

        cores = usable_cores()
        window = self._window(timings, cores.usable)
        rep = self._replay
        samples = timings.samples or timings.steps * timings.batch_size
        loader = self._ctx.job.loader if self._ctx and self._ctx.job else None
        workers = int(getattr(loader, "num_workers", 0) or 0)
        eff = effective_processes(workers, cores.usable)
        out: list[Metric] = []

        if isinstance(window, str):
            process = Metric.unavailable("loader_process_cpu_ms_per_sample", window, "ms/sample")
        elif samples <= 0:
            process = Metric.unavailable(
                "loader_process_cpu_ms_per_sample", "no sample reached the window", "ms/sample"
            )
        else:
            process = Metric(
                "loader_process_cpu_ms_per_sample",
                window["total_ms"] / samples,
                "ms/sample",
                detail={**window, "samples": samples, "epochs_started": timings.epochs_started},
            )
        out.append(process)

        if timings.fetch_cpu_s:
            per_step = [s * 1e3 for s in timings.fetch_cpu_s]
            detail: dict[str, Any] = {
                "mean": statistics.fmean(per_step),
                "total_ms": sum(per_step),
                "num_workers": workers,
            }
            if not isinstance(window, str):
                detail["pin_ms_per_step"] = window["pin_ms"] / max(1, timings.steps)
            out.append(Metric("main_load_ms_per_step", statistics.median(per_step), "ms/step", detail=detail))
        else:
            out.append(
                Metric.unavailable("main_load_ms_per_step", "the runner recorded no fetch in the window", "ms/step")
            )

        if timings.epoch_fetch_cpu_ms:
            out.append(
                Metric(
                    "epoch_start_cpu_ms",
                    statistics.median(timings.epoch_fetch_cpu_ms),
                    "ms",
                    detail={"epochs_started": len(timings.epoch_fetch_cpu_ms), "num_workers": workers},
                )
            )
        else:
            out.append(Metric.unavailable("epoch_start_cpu_ms", "no epoch started inside the measured window", "ms"))
        if isinstance(rep, str) or rep is None or not rep.per_batch_ms:
            why = rep if isinstance(rep, str) else "the stages were not replayed"
            out.append(Metric.unavailable("loader_cpu_ms_per_sample", why, "ms/sample"))
            out.append(Metric.unavailable("loader_capacity_samples_per_s", why, "samples/s"))
            return out
        replayed = statistics.median(rep.per_batch_ms)
        by = {name: statistics.median(values) for name, values in rep.stages.items()}
        costliest = max(by, key=lambda k: by[k]) if by else None
        detail = {
            "by": by,
            "code": dict(rep.code),
            "costliest": costliest,
            "batches": len(rep.per_batch_ms),
            "batch_size": rep.batch_size,
            "repeats": rep.repeats,
            "calibration_ms": statistics.median(rep.cal_ms),
            "replay_cpu_s": rep.cpu_s,
            "replay_processes": rep.processes,
            **({"replay_share_cpu_s": list(rep.share_cpu_s)} if rep.share_cpu_s else {}),
            **({"sampler": rep.sampler} if rep.sampler else {}),
        }
        if rep.h2d_ms:
            detail["h2d_ms_per_batch"] = statistics.median(rep.h2d_ms)
        if process.available and replayed > 0:
            detail["process_ms_per_sample"] = process.value
            detail["beyond_stages_ms"] = float(process.value) - replayed  # type: ignore[arg-type]
            detail["process_over_stages"] = float(process.value) / replayed  # type: ignore[arg-type]
        out.append(Metric("loader_cpu_ms_per_sample", replayed, "ms/sample", detail=detail))
        window_ms = float(process.value) if process.available else None  # type: ignore[arg-type]
        after, overhead_note = after_overhead(eff, replayed, window_ms)
        out.append(
            Metric(
                "loader_capacity_samples_per_s",
                eff * 1e3 / replayed if replayed > 0 else 0.0,
                "samples/s",
                detail={
                    "processes": eff,
                    "num_workers": workers,
                    "usable_cores": cores.usable,
                    "cores": cores.describe(),
                    "stages_ms_per_sample": replayed,
                    # What the processes manage once the window's worker overhead (forking, IPC) is paid too:
                    # what loader_headroom compares with the demand.
                    "after_overhead": after,
                    "overhead_note": overhead_note,
                    "process_ms_per_sample": window_ms,
                    "serial": workers == 0,
                },
            )
        )
        self._samples = {
            "loader_cpu_ms": list(rep.per_batch_ms),
            "loader_calib_ms": list(rep.cal_ms),
            "loader_capacity": [eff * 1e3 / ms if ms > 0 else 0.0 for ms in rep.per_batch_ms],
        }
        return out

    def samples(self) -> dict[str, list[float]]:
        """Per replayed batch: CPU ms per sample, the calibration's ms, and the capacity (read after metrics())."""
        return dict(self._samples)

    def timeline(self) -> dict[str, list[float]]:
        """``loader_cpu_t`` (s since the window began) and ``loader_cpu_cores`` (cores the loader kept busy)."""
        if len(self._series) < 2:
            return {}
        t, cores = [], []
        for (ta, a), (tb, b) in zip(self._series, self._series[1:]):
            if tb > ta:
                t.append(tb)
                cores.append(max(0.0, (b - a) / 1e9 / (tb - ta)))
        return {"loader_cpu_t": t, "loader_cpu_cores": cores}


def after_overhead(processes: int, stages_ms: float, window_ms: float | None) -> tuple[float | None, str | None]:
    """The capacity once the window's worker overhead is paid, never above the stages' own, and a note when the
    window's processes spent less CPU per sample than the replayed stages (measured under other conditions: the
    replay in one busy thread, the window's workers on quieter cores), so that no overhead could be measured."""
    if not window_ms or stages_ms <= 0:
        return None, None
    if window_ms < stages_ms:
        return processes * 1e3 / stages_ms, (
            f"the window's processes spent {window_ms:.3g} ms of CPU per sample, less than the replayed stages "
            f"({stages_ms:.3g} ms): the two ran under different load, so no overhead is measured and the capacity "
            "after it is the stages'"
        )
    return processes * 1e3 / window_ms, None


def loader_headroom(capacity: Metric | None, demand_per_s: float | None, source: str) -> Metric:
    """The loader's capacity over the samples/s the step takes: below 1 the loader cannot feed the step."""
    if capacity is None or not capacity.available:
        why = capacity.reason if capacity is not None else "no loader capacity was measured"
        return Metric.unavailable("loader_headroom", f"no loader capacity: {why}", "x")
    if not demand_per_s or demand_per_s <= 0:
        return Metric.unavailable("loader_headroom", f"no demand to compare with: {source}", "x")
    after = capacity.detail.get("after_overhead")
    supply = float(after if after else capacity.value)  # type: ignore[arg-type]
    value = supply / demand_per_s
    return Metric(
        "loader_headroom",
        value,
        "x",
        detail={
            "capacity_samples_per_s": supply,
            "capacity_basis": "after the worker processes' overhead in the window" if after else "the stages alone",
            "demand_samples_per_s": demand_per_s,
            "demand": source,
            "feeds": value >= 1.0,
        },
    )
