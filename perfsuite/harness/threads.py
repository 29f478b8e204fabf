"""Torch's intra-op threads against the cores the run may use: fit them for perfsuite's own workloads, note the rest.

Measured on this project's 2-core VM shared with other jobs (load average 4-13): with
torch's default 2 intra-op threads, super_resolution's smoke step took 38 ms to 1.6 s
from one run to the next (2 workers beside it) and 0.2 to 2.3 s with no workers, and
input efficiency swung 300x between runs of one test; with 1 thread the same step
held 12-46 ms. An intra-op thread that waits for a core at every parallel region
turns each region into a wait for a time slice.

So for the reference workloads the runner sets torch's intra-op threads so that
threads (in the training process) + worker processes (one thread each, as the
DataLoader sets them) fit :func:`perfsuite.core.cores.usable_cores`: ``usable -
workers`` on a CUDA device, where the step's arithmetic runs on the GPU, and 1 on a
CPU device, whose cores the step's arithmetic shares with the loader and with
whatever else the machine runs. It is put back after the run. A user's job keeps its
own setting; any run whose threads and workers exceed the usable cores gets a note
in its Result (and the session summary) saying so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

OVERSUBSCRIBED = "oversubscribed:"


@dataclass
class ThreadPlan:
    """What :func:`fit_threads` did, and the notes the Result gets."""

    before: int
    threads: int
    workers: int
    usable: int
    changed: bool
    notes: list[str] = field(default_factory=list)

    def restore(self) -> None:
        if self.changed:
            import torch

            torch.set_num_threads(self.before)


def fit_threads(job: Any, reference: bool, where: str = "the job") -> ThreadPlan:
    """Set torch's threads for a reference workload; note any run whose threads and workers exceed the cores.

    ``where`` names the user's code the advice points at ("the job", or "the script" under perfsuite exec).
    """
    import torch

    from perfsuite.core.cores import usable_cores

    cores = usable_cores()
    workers = int(getattr(job.loader, "num_workers", 0) or 0)
    before = torch.get_num_threads()
    threads, changed = before, False
    if reference:
        threads = max(1, cores.usable - workers) if str(job.device).startswith("cuda") else 1
        if threads != before:
            torch.set_num_threads(threads)
            changed = True
    plan = ThreadPlan(before, threads, workers, cores.usable, changed)
    if threads + workers > cores.usable:
        fit = max(1, cores.usable - workers)
        fewer = ", or use fewer workers" if where == "the job" else ", or give its DataLoader fewer workers"
        advice = (
            f"perfsuite set torch's threads to {threads}; fewer workers than cores would leave the step one"
            if reference
            else f"call torch.set_num_threads({fit}) in {where}" + (fewer if workers else "")
        )
        plan.notes.append(
            f"{OVERSUBSCRIBED} {threads} intra-op thread(s) in the training process + {workers} loader worker(s) "
            f"on {cores.describe()}: the step and the loader take turns on the same cores, so wall-clock "
            f"figures mix work with waiting for a core ({advice})"
        )
    return plan
