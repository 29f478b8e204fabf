"""pytest-xdist support: workers send their Results and verdicts to the controller; one GPU per worker.

Under ``pytest -n N`` every worker judges its own tests. Without this module
each worker would also write the report files (the last one to finish wins)
and the controller, which ran no test, would print no summary. Instead:

* a worker writes no report; at its session end it puts what it judged
  (Results, verdicts, problems, saved baselines) into ``config.workeroutput``,
  which xdist sends to the controller;
* the controller merges each worker's part in ``pytest_testnodedown`` and
  writes one report and one summary, exactly as a run without xdist would.

**One GPU per worker.** xdist is also how a multi-GPU runner runs one test
per GPU: worker *k* (``gw<k>``) gets ``CUDA_VISIBLE_DEVICES`` set to the
*k*-th device before torch initialises CUDA, so its ``cuda`` is its own GPU.
``--perfsuite-worker-gpus`` chooses the devices:

* ``auto`` (the default): the devices in the controller's
  ``CUDA_VISIBLE_DEVICES`` if set, else the GPUs NVML counts; with no GPU the
  environment is left alone (CPU runs). More workers than GPUs is an error, not
  two workers timing each other on one GPU;
* a comma-separated list (``0,1,2,3`` or GPU UUIDs): worker *k* gets entry *k*;
* ``off``: leave ``CUDA_VISIBLE_DEVICES`` as it is in every worker.

This module imports neither xdist nor torch: it only reads what xdist puts on
the config (``workerinput``/``workeroutput``) and on the node.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from perfsuite.errors import PerfsuiteError

if TYPE_CHECKING:
    from perfsuite.plugin.session import PerfSession

OUTPUT_KEY = "perfsuite"
WORKER_GPUS_DEFAULT = "auto"


def worker_id(config: Any) -> str | None:
    """``gw0``, ``gw1``, ... in an xdist worker; None in the controller or without xdist."""
    workerinput = getattr(config, "workerinput", None)
    return workerinput.get("workerid") if isinstance(workerinput, Mapping) else None


def worker_count(config: Any) -> int:
    workerinput = getattr(config, "workerinput", None)
    if isinstance(workerinput, Mapping):
        return int(workerinput.get("workercount", 1))
    return 1


def is_worker(config: Any) -> bool:
    return worker_id(config) is not None


# ---------------------------------------------------------------------------------------------- one GPU each


def nvml_gpu_count() -> int:
    """GPUs NVML sees (0 without a driver or NVML); never imports torch."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML, no driver: no GPU to give out
        return 0
    try:
        return int(pynvml.nvmlDeviceGetCount())
    finally:
        pynvml.nvmlShutdown()


def worker_gpu(
    worker: str, workers: int, spec: str, environ: Mapping[str, str], gpu_count: Callable[[], int] = nvml_gpu_count
) -> str | None:
    """The ``CUDA_VISIBLE_DEVICES`` value for xdist worker ``worker`` (``gw<k>``) of ``workers``; None: leave it.

    ``spec`` is ``auto``, ``off`` or a comma-separated device list (see the module docstring).
    """
    spec = spec.strip()
    if spec == "off":
        return None
    try:
        index = int(worker.removeprefix("gw"))
    except ValueError:
        raise PerfsuiteError(f"xdist worker id {worker!r} is not gw<N>; pass --perfsuite-worker-gpus off") from None
    if spec == "auto":
        visible = environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None:
            devices = [d.strip() for d in visible.split(",") if d.strip()]
            source = f"CUDA_VISIBLE_DEVICES={visible!r}"
        else:
            devices = [str(i) for i in range(gpu_count())]
            source = f"NVML counts {len(devices)} GPU(s)"
        if not devices:
            return None  # a CPU machine: nothing to give out
    else:
        devices = [d.strip() for d in spec.split(",")]
        if not all(devices):
            raise PerfsuiteError(f"--perfsuite-worker-gpus {spec!r}: an empty entry; write e.g. 0,1,2,3")
        source = f"--perfsuite-worker-gpus {spec}"
    if workers > len(devices):
        raise PerfsuiteError(
            f"pytest -n {workers} runs {workers} workers but {source} gives {len(devices)} GPU(s): two workers "
            f"on one GPU would time each other. Use -n {len(devices)}, list more devices with "
            "--perfsuite-worker-gpus, or pass --perfsuite-worker-gpus off to share them on purpose"
        )
    return devices[index]


def check_worker_gpus(config: Any, spec: str, environ: Mapping[str, str] | None = None) -> None:
    """In the controller (``pytest -n N``): refuse a GPU list that cannot give every worker its own GPU,
    once, before any worker starts (a worker's own error would make xdist restart it over and over)."""
    workers = getattr(getattr(config, "option", None), "numprocesses", None)
    if is_worker(config) or not isinstance(workers, int) or workers <= 0:
        return
    worker_gpu(f"gw{workers - 1}", workers, spec, os.environ if environ is None else environ)


def assign_worker_gpu(config: Any, spec: str, environ: dict[str, str] | None = None) -> str | None:
    """In an xdist worker, set ``CUDA_VISIBLE_DEVICES`` to this worker's GPU; returns what it set (or None)."""
    wid = worker_id(config)
    if wid is None:
        return None
    env = os.environ if environ is None else environ
    device = worker_gpu(wid, worker_count(config), spec, env)
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = device
    return device


# ---------------------------------------------------------------------------------------------- gathering


def worker_payload(perf: PerfSession | None) -> dict[str, Any]:
    """What a worker sends to the controller: JSON-safe, as xdist's channel wants."""
    if perf is None:
        return {"results": {}, "verdicts": [], "problems": [], "saved": []}
    recorded = {
        key: {
            "tests": {rid: perf.exact[key].tests[rid] for rid in rids if rid in perf.exact[key].tests},
            "breakdown": {rid: perf.exact[key].breakdown[rid] for rid in rids if rid in perf.exact[key].breakdown},
            "settings": {rid: perf.exact[key].settings.get(rid, {}) for rid in rids},
        }
        for key, rids in perf.recorded.items()
    }
    return {
        "results": {rid: result.to_dict() for rid, result in perf.results.items()},
        "verdicts": [v.to_dict() for v in perf.verdicts],
        "problems": list(perf.problems),
        "saved": [str(p) for p in perf.saved],
        # the exact gate's counts, so the controller's gate line adds up every worker's checks
        "exact_counts": {rid: list(c) for rid, c in perf.exact_counts.items()},
        "exact_sources": dict(perf.exact_sources),
        "exact_missing": list(perf.exact_missing),
        "exact_failed": perf.exact_failed,
        "timing_new": list(perf.timing_new),
        "exact_loaded": {key: str(store.path) for key, store in perf.exact.items() if store.loaded},
        "exact_recorded": recorded,  # --perfsuite-update-exact: the controller writes the file once
        "stale": {key: list(ids) for key, ids in perf.stale.items()},
        "interrupted": perf.interrupted,
    }


def send_to_controller(config: Any, perf: PerfSession | None) -> None:
    """In a worker: hand this worker's Results and verdicts to the controller (``config.workeroutput``)."""
    output = getattr(config, "workeroutput", None)
    if isinstance(output, dict):
        output[OUTPUT_KEY] = worker_payload(perf)


def worker_part(workeroutput: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The part a worker sent (None if it sent none: it crashed before its session ended)."""
    payload = (workeroutput or {}).get(OUTPUT_KEY)
    return payload if isinstance(payload, Mapping) else None


def has_content(part: Mapping[str, Any]) -> bool:
    """Whether the worker judged anything (a worker that ran no perf test sends an empty part)."""
    return any(part.get(key) for key in ("results", "verdicts", "problems", "saved"))


def merge_worker_part(perf: PerfSession, part: Mapping[str, Any]) -> None:
    """In the controller: add one worker's part to the session, as if its tests had run here."""
    from pathlib import Path

    from perfsuite.core.results import Result
    from perfsuite.judge.verdict import Verdict

    for rid, data in part.get("results", {}).items():
        perf.results[rid] = Result.from_dict(data)
    perf.verdicts += [Verdict.from_dict(v) for v in part.get("verdicts", [])]
    perf.problems += list(part.get("problems", []))
    perf.saved += [Path(p) for p in part.get("saved", [])]
    perf.exact_counts.update({rid: (int(c[0]), int(c[1])) for rid, c in part.get("exact_counts", {}).items()})
    perf.exact_sources.update(part.get("exact_sources", {}))
    perf.exact_missing += list(part.get("exact_missing", []))
    perf.exact_failed += int(part.get("exact_failed", 0))
    perf.timing_new += list(part.get("timing_new", []))
    perf.interrupted = perf.interrupted or part.get("interrupted")
    from perfsuite.errors import BaselineError

    keys = set(part.get("exact_loaded", {})) | set(part.get("exact_recorded", {})) | set(part.get("stale", {}))
    for key in sorted(keys):
        try:
            store = perf.exact_store_for(key)
        except BaselineError:  # a damaged file: each worker already failed its tests with the message
            continue
        recorded = part.get("exact_recorded", {}).get(key, {})
        breakdown = recorded.get("breakdown", {})
        for rid, values in recorded.get("tests", {}).items():
            store.record(rid, values, breakdown.get(rid), recorded.get("settings", {}).get(rid))
            perf.recorded.setdefault(key, []).append(rid)
        stale = part.get("stale", {}).get(key, [])
        if stale:
            perf.stale[key] = sorted(set(perf.stale.get(key, [])) | set(stale))
            if perf.settings.update_exact and not perf.interrupted:
                store.remove(stale)
