"""num_workers=0 on an input-bound step: the training process loads every batch between its steps."""

from __future__ import annotations

from perfsuite.tools.doctor import predictions as model
from perfsuite.tools.doctor.evidence import Evidence
from perfsuite.tools.doctor.model import Counterfactuals, Finding, Fix, Predicted, Unavailable
from perfsuite.tools.doctor.rules.base import Rule, band, input_bound, wait_text


def find(e: Evidence, cf: Counterfactuals) -> list[Finding]:
    if not input_bound(e) or e.stages.num_workers != 0:
        return []
    tried = cf.tried.get(Fix.MORE_WORKERS)
    k = tried.workers if tried is not None and tried.workers else 2
    return [
        Finding(
            f"{band(e)}: num_workers=0, the training process loads every batch between its steps",
            f"{wait_text(e)}; the training process spends {e.stages.main_load_ms_per_step or 0:.3g} ms of CPU per "
            "step in next(loader)",
            f"DataLoader(num_workers={k}, persistent_workers=True)",
            "num_workers",
            model.predict_workers(e, k, e.last),
            cf.measured(Fix.MORE_WORKERS),
            bottleneck=True,
        )
    ]


def predict(e: Evidence, fix: Fix, workers: int | None) -> Predicted | Unavailable:
    return model.predict_workers(e, workers, e.last) if workers is not None else Unavailable("no worker count")


RULE = Rule("workers_zero", find, (Fix.MORE_WORKERS,), predict)
