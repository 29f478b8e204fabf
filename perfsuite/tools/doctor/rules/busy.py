"""The noisy neighbour: other processes' load slows the step, which waits for a core.

It reads the neighbours' share of the cores (never the job's own threads and workers: those are
:mod:`.oversubscribed`'s). It leads (the bottleneck) when the step is not input-bound and its wait for a core
("the rest") outweighs its compute. Its fix a run can try: fewer intra-op threads, or fewer workers.
"""

from __future__ import annotations

from perfsuite.tools.doctor import predictions as model
from perfsuite.tools.doctor.evidence import BUSY_PRESSURE, BUSY_RUN_QUEUE, Evidence
from perfsuite.tools.doctor.model import Counterfactuals, Finding, Fix, Predicted, Unavailable, known
from perfsuite.tools.doctor.rules.base import Rule, best, waits_for_a_core


def find(e: Evidence, cf: Counterfactuals) -> list[Finding]:
    c = e.contention
    if not c.busy:
        return []
    figures = list(c.reasons)
    rest = e.ledger.rest
    if rest is not None:
        figures.append(
            f"the step's work beyond the same step fed a cached batch with the loader idle ('the rest') is "
            f"{rest:.3g} ms/step, {e.ledger.share(rest):.0%} of it"
        )
    nw = e.stages.num_workers
    fixes = []
    fewer = cf.tried.get(Fix.FEWER_WORKERS)
    if nw:
        fixes.append(fewer.change if fewer is not None else f"fewer workers (num_workers<{nw})")
    threads = cf.tried.get(Fix.THREADS)
    fixes.append(threads.change if threads is not None else "fewer intra-op threads (torch.set_num_threads)")
    fixes.append("decode moved off the CPU (torchvision.io.decode_jpeg on the GPU, DALI)")
    pressure, queue = known(c.cpu_pressure) or 0.0, known(c.runqueue_per_core) or 0.0
    if pressure >= BUSY_PRESSURE or queue > BUSY_RUN_QUEUE:
        fixes.append("on a shared CI runner, a dedicated one: wall-clock figures from this machine mix in its load")
    return [
        Finding(
            "busy machine (noisy neighbour): the step waits for a core",
            "; ".join(figures) + f" (read from {c.source})",
            "; ".join(fixes),
            "busy",
            model.wait_for_a_core(e),
            best(cf, Fix.FEWER_WORKERS, Fix.THREADS),
            bottleneck=waits_for_a_core(e),
        )
    ]


def predict(e: Evidence, fix: Fix, workers: int | None) -> Predicted | Unavailable:
    return model.wait_for_a_core(e)


RULE = Rule("busy", find, (Fix.THREADS,), predict)
