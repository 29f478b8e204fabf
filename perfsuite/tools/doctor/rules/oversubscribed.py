"""The job's own threads and workers beyond the usable cores: the step and the loader take turns on them.

A finding of its own beside the busy machine's (other processes' load): its fix is the job's, fewer intra-op
threads (``torch.set_num_threads``) or fewer workers. It leads when the step is not input-bound, waits for a core
more than it computes, and no neighbour explains the wait.
"""

from __future__ import annotations

from perfsuite.tools.doctor import predictions as model
from perfsuite.tools.doctor.evidence import Evidence
from perfsuite.tools.doctor.model import Counterfactuals, Finding, Fix, Predicted, Unavailable
from perfsuite.tools.doctor.rules.base import Rule, best, waits_for_a_core


def find(e: Evidence, cf: Counterfactuals) -> list[Finding]:
    c = e.contention
    if not c.oversubscribed:
        return []
    threads, workers = c.threads or 1, c.workers or 0
    fit = max(1, c.usable_cores - workers)
    fixes = []
    tried = cf.tried.get(Fix.THREADS)
    if tried is not None:
        fixes.append(tried.change)
    elif threads > fit:
        fixes.append(f"torch.set_num_threads({fit}) (OMP_NUM_THREADS={fit})")
    fewer = cf.tried.get(Fix.FEWER_WORKERS)
    if workers > 1:
        fixes.append(fewer.change if fewer is not None else f"fewer workers (num_workers<{workers})")
    return [
        Finding(
            f"oversubscribed cores: the job's own {threads} thread(s) and {workers} worker(s) on "
            f"{c.usable_cores} usable core(s)",
            "; ".join(c.own) + f" (read from {c.source})",
            "; ".join(fixes) or "fewer threads or workers than usable cores",
            "cores",
            model.wait_for_a_core(e),
            best(cf, Fix.THREADS, Fix.FEWER_WORKERS),
            bottleneck=waits_for_a_core(e) and not c.busy,
        )
    ]


def predict(e: Evidence, fix: Fix, workers: int | None) -> Predicted | Unavailable:
    return model.wait_for_a_core(e)


RULE = Rule("oversubscribed", find, (Fix.THREADS,), predict)
