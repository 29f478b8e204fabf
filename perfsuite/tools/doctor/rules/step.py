"""Not input-bound (the wait's interval lies below the first band's edge): the step itself is the bottleneck; its fix
(mixed precision, compile) is the job's to measure."""

from __future__ import annotations

from perfsuite.tools.doctor.evidence import Evidence
from perfsuite.tools.doctor.model import Counterfactuals, Finding, Unavailable, known
from perfsuite.tools.doctor.rules.base import Rule, not_input_bound, wait_text


def find(e: Evidence, cf: Counterfactuals) -> list[Finding]:
    if not not_input_bound(e):
        return []
    evidence = wait_text(e)
    c = known(e.ledger.compute)
    if c is not None:
        evidence += f"; compute {c:.3g} of {e.ledger.step_ms:.3g} ms per step"
    knobs = e.last.knobs
    fixes = [f for f, k in (("amp='bf16'", "amp"), ("compile='default'", "compile")) if k in knobs and knobs[k] is None]
    fix = (
        "speed up the step: " + ", ".join(fixes)
        if fixes
        else "speed up the step itself (mixed precision, torch.compile, a cheaper model); the input keeps up"
    )
    return [
        Finding(
            "not input-bound: the step itself is the bottleneck",
            evidence,
            fix,
            "step",
            Unavailable("the gain of mixed precision or compile depends on the model: measure it with perfsuite ab"),
            Unavailable("not tried: a change to the step"),
            bottleneck=True,
        )
    ]


RULE = Rule("step", find)
