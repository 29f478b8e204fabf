"""The doctor's rules, one module each, in the manner of a linter's: a rule's condition, finding, prediction and
fix are read, tested and changed in its own module; adding a rule is a module and a line in :data:`RULES`.

The order of :data:`RULES` is the order findings are listed in before ranking (ties keep it), and the first
rule that names a :class:`~perfsuite.tools.doctor.model.Fix` in its ``predicts`` predicts it.
"""

from __future__ import annotations

from perfsuite.tools.doctor.evidence import Evidence
from perfsuite.tools.doctor.model import Counterfactuals, Finding, Fix, Predicted, Unavailable
from perfsuite.tools.doctor.rules import (
    busy,
    measured,
    oversubscribed,
    periodic,
    sm_underused,
    stages,
    step,
    syncs,
    worker_count,
    workers_zero,
)
from perfsuite.tools.doctor.rules.base import Rule

RULES: tuple[Rule, ...] = (
    busy.RULE,
    oversubscribed.RULE,
    workers_zero.RULE,
    step.RULE,
    stages.RULE,
    worker_count.RULE,
    periodic.RULE,
    syncs.RULE,
    sm_underused.RULE,
)


def predict_fix(e: Evidence, fix: Fix, workers: int | None = None) -> Predicted | Unavailable:
    """A fix's gain predicted before it runs, by the first rule that predicts it."""
    for rule in RULES:
        if fix in rule.predicts and rule.predict is not None:
            return rule.predict(e, fix, workers)
    return Unavailable(f"no model predicts {fix.value}")


def run(e: Evidence, cf: Counterfactuals) -> list[Finding]:
    """Every rule's findings, unranked, and one for each measured fix no rule's finding holds."""
    found = [f for rule in RULES for f in rule.find(e, cf)]
    return found + measured.unjoined(e, cf, found, predict_fix)


__all__ = ["RULES", "Rule", "predict_fix", "run"]
