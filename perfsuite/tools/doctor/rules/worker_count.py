"""An input-bound step with workers: the count tried (more below the cores, fewer when they fill them)."""

from __future__ import annotations

from perfsuite.tools.doctor import predictions as model
from perfsuite.tools.doctor.evidence import Evidence
from perfsuite.tools.doctor.model import Counterfactuals, Finding, Fix, Predicted, Unavailable
from perfsuite.tools.doctor.rules.base import Rule, input_bound


def find(e: Evidence, cf: Counterfactuals) -> list[Finding]:
    nw = e.stages.num_workers
    if not input_bound(e) or not nw:
        return []
    fix = Fix.MORE_WORKERS if Fix.MORE_WORKERS in cf.tried else Fix.FEWER_WORKERS
    tried = cf.tried.get(fix)
    k = tried.workers if tried is not None else None
    why = cf.not_tried.get(Fix.MORE_WORKERS) or cf.not_tried.get(Fix.FEWER_WORKERS) or cf.none
    s = e.stages
    return [
        Finding(
            f"num_workers {nw} -> {k}" if k is not None else "the number of workers",
            f"loader capacity {s.capacity or 0:.4g} samples/s from the stages"
            + (f", headroom x{s.headroom:.2f}" if s.headroom else "")
            + (f"; {why}" if k is None and why else ""),
            f"DataLoader(num_workers={k})" if k is not None else "cut the loader's cost per sample (above)",
            "num_workers",
            model.predict_workers(e, k, e.last) if k is not None else Unavailable(why or "no other count to try"),
            cf.measured(fix),
        )
    ]


def predict(e: Evidence, fix: Fix, workers: int | None) -> Predicted | Unavailable:
    return model.predict_workers(e, workers, e.last) if workers is not None else Unavailable("no worker count")


RULE = Rule("worker_count", find, (Fix.MORE_WORKERS, Fix.FEWER_WORKERS), predict)
