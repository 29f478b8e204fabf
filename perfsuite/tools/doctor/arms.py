"""The fixes a run can try on a Job or a reference workload, and the RunSpec that tries each.

The first run says what could be tried (:func:`choose_arms`) and :mod:`.plan` which of those run: workers
that do not persist as ``persistent_workers=True``; the worker count as more workers below the cores, fewer
when they fill them (the step's thread shares the cores); the training process's intra-op threads as fewer
when threads and workers together exceed the cores or the machine is under CPU pressure. Each :class:`Arm`
carries its :class:`Fix`, the key its measurement is stored and read under.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from perfsuite.core.results import Result
from perfsuite.harness.runner import RunSpec
from perfsuite.judge.contention import load_of
from perfsuite.tools.doctor.evidence import BUSY_PRESSURE
from perfsuite.tools.doctor.model import Fix


def clone_loader(loader: Any, num_workers: int, persistent: bool | None = None) -> Any:
    """The same DataLoader (dataset, sampler, collate_fn, pinning) with another number of workers.

    ``persistent`` None: from num_workers=0 the fix tried is the one the doctor names, workers that persist
    across epochs; otherwise the loader's own setting. True/False: that setting (with workers).
    """
    from torch.utils.data import DataLoader, IterableDataset

    keep = bool(loader.persistent_workers) or loader.num_workers == 0
    kwargs: dict[str, Any] = {
        "num_workers": num_workers,
        "collate_fn": loader.collate_fn,
        "pin_memory": loader.pin_memory,
        "timeout": loader.timeout if num_workers > 0 else 0,
        "worker_init_fn": loader.worker_init_fn,
        "multiprocessing_context": loader.multiprocessing_context if num_workers > 0 else None,
        "generator": loader.generator,
        "persistent_workers": num_workers > 0 and (keep if persistent is None else persistent),
        "pin_memory_device": loader.pin_memory_device,
    }
    if num_workers > 0:
        kwargs["prefetch_factor"] = loader.prefetch_factor or 2
    if isinstance(loader.dataset, IterableDataset):  # its batches are made from the stream: no sampler to pass
        kwargs.update(batch_size=loader.batch_size, drop_last=loader.drop_last)
    elif loader.batch_sampler is not None:
        kwargs["batch_sampler"] = loader.batch_sampler
    else:
        kwargs.update(batch_size=None, sampler=loader.sampler)
    return DataLoader(loader.dataset, **kwargs)


def more_workers(workers: int, usable: int) -> int | None:
    """The worker count to try next, or None when no more processes could load at once."""
    if workers == 0:
        return min(2, usable) if usable >= 1 else None
    if workers < usable:
        return min(2 * workers, usable)
    return None


def fewer_workers(workers: int, usable: int) -> int | None:
    """Fewer workers when they fill the cores (with the training thread): one core left to the step; else None."""
    if workers >= usable and workers > 1:
        return max(1, usable - 1)
    return None


def with_workers(spec: RunSpec, k: int, persistent: bool | None = None) -> RunSpec:
    """The run with ``num_workers=k`` (and ``persistent_workers`` when given): a reference workload's knobs, or
    the user's DataLoader cloned before it binds."""
    from perfsuite.jobs.contract import Job
    from perfsuite.jobs.registry import is_job_target

    if not is_job_target(spec.workload):
        flat: dict[str, Any] = {"num_workers": k}
        if k == 0:
            flat.update(persistent_workers=False, prefetch_factor=None)
        elif persistent is not None:
            flat.update(persistent_workers=persistent)
        elif spec.knobs.loader.num_workers == 0:
            flat.update(persistent_workers=True)
        return dataclasses.replace(spec, knobs=spec.knobs.replace(**flat))
    if isinstance(spec.workload, Job):  # one Job object serves every run: change a copy, never the user's
        job = spec.workload
        if job.loader is not None:
            loader = clone_loader(job.loader, k, persistent)
            return dataclasses.replace(spec, workload=dataclasses.replace(job, loader=loader))
        kwargs = {**job.loader_kwargs, "num_workers": k}
        if persistent is not None:
            kwargs["persistent_workers"] = persistent and k > 0
        return dataclasses.replace(spec, workload=dataclasses.replace(job, loader_kwargs=kwargs))
    previous = spec.mutate

    def mutate(job: Any) -> None:
        if previous is not None:
            previous(job)
        if job.loader is not None:
            job.loader = clone_loader(job.loader, k, persistent)
        else:
            job.loader_kwargs = {**job.loader_kwargs, "num_workers": k}
            if persistent is not None:
                job.loader_kwargs["persistent_workers"] = persistent and k > 0

    return dataclasses.replace(spec, mutate=mutate)


@dataclass
class Arm:
    """One counterfactual: the fix a finding names, run interleaved with the job as it is."""

    fix: Fix
    label: str  # "num_workers 2 -> 1"
    change: str  # "DataLoader(num_workers=1)"
    spec: RunSpec
    threads: int | None = None  # torch.set_num_threads for this arm's runs (a user's job sets its own otherwise)
    workers: int | None = None  # the worker count it runs with, where it changes it
    base: RunSpec | None = None  # the job as it is at this arm's length, where the plan lengthened its runs
    why: str = ""  # the plan's reason to run it


def choose_arms(spec: RunSpec, result: Result, usable: int) -> tuple[list[Arm], dict[Fix, str]]:
    """The fixes a run can try on this job, and why each other one cannot be tried; :mod:`.plan` decides which run.

    Workers that do not persist as ``persistent_workers=True``; the worker count as more workers below the
    cores, fewer when they fill them (the step's thread shares the cores); the training process's intra-op
    threads as fewer when threads and workers together exceed the cores, or as one on a machine under CPU
    pressure.
    """
    import torch

    arms: list[Arm] = []
    why: dict[Fix, str] = {}
    workers = result.knobs.get("num_workers")
    if not isinstance(workers, int) or not rebuildable(result):
        why[Fix.MORE_WORKERS] = why[Fix.PERSISTENT] = (
            "the loader is not a DataLoader whose workers perfsuite can change"
        )
    else:
        if workers > 0 and not bool(result.knobs.get("persistent_workers")):  # the plan checks it can act
            arms.append(
                Arm(
                    Fix.PERSISTENT,
                    "persistent_workers False -> True",
                    "DataLoader(persistent_workers=True)",
                    with_workers(spec, workers, persistent=True),
                )
            )
        k = more_workers(workers, usable)
        fewer = fewer_workers(workers, usable)
        if k is not None:
            arms.append(
                Arm(
                    Fix.MORE_WORKERS,
                    f"num_workers {workers} -> {k}",
                    f"DataLoader(num_workers={k})" + _stream_caveat(spec),
                    with_workers(spec, k),
                    workers=k,
                )
            )
        elif fewer is not None:
            arms.append(
                Arm(
                    Fix.FEWER_WORKERS,
                    f"num_workers {workers} -> {fewer}",
                    f"DataLoader(num_workers={fewer})" + _stream_caveat(spec),
                    with_workers(spec, fewer),
                    workers=fewer,
                )
            )
        else:
            why[Fix.MORE_WORKERS] = f"num_workers={workers} on {usable} usable core(s): no other count to try"
    from perfsuite.jobs.registry import is_job_target

    threads = torch.get_num_threads()  # a user's job runs with the process's; perfsuite fits a reference's itself
    nw = workers if isinstance(workers, int) else 0
    fit = max(1, usable - nw)
    pressure = load_of(result).pressure or 0.0
    if not is_job_target(spec.workload):
        why[Fix.THREADS] = "perfsuite already fits a reference workload's intra-op threads to the cores left to it"
    elif (threads + nw > usable and threads > fit) or (pressure >= BUSY_PRESSURE and threads > 1):
        fit = 1 if threads <= fit else fit
        arms.append(
            Arm(Fix.THREADS, f"torch threads {threads} -> {fit}", f"torch.set_num_threads({fit})", spec, threads=fit)
        )
    return arms, why


def _stream_caveat(spec: RunSpec) -> str:
    """What a worker count means for a Job's IterableDataset: each worker runs the whole ``__iter__`` unless the
    stream shards itself by ``get_worker_info()``, so another count may change the samples, not only their pace."""
    from torch.utils.data import IterableDataset

    dataset = getattr(getattr(spec.workload, "loader", None), "dataset", None)
    if not isinstance(dataset, IterableDataset):
        return ""
    return (
        f" ({type(dataset).__name__} is an IterableDataset: each worker yields its whole stream unless __iter__ "
        "shards it by torch.utils.data.get_worker_info())"
    )


def rebuildable(result: Result) -> bool:
    """Whether the run's loader is a DataLoader perfsuite can clone with other workers (its knobs were read)."""
    return "num_workers" in result.knobs and not str(result.knob_sources.get("num_workers", "")).startswith("not known")
