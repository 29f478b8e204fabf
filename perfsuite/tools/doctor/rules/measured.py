"""A finding for each fix measured but joined to no other rule's finding: no measurement is left out.

It runs after the registry's rules (it reads what they found) and predicts a tried fix by the rule that
predicts its :class:`~perfsuite.tools.doctor.model.Fix`.
"""

from __future__ import annotations

from collections.abc import Callable

from perfsuite.tools.doctor.evidence import Evidence
from perfsuite.tools.doctor.model import CONFIDENCE, Counterfactuals, Finding, Fix, Measured, Predicted, Unavailable
from perfsuite.tools.doctor.stats import ci

PredictFix = Callable[[Evidence, Fix, "int | None"], "Predicted | Unavailable"]


def unjoined(e: Evidence, cf: Counterfactuals, found: list[Finding], predict: PredictFix) -> list[Finding]:
    joined = {id(f.measured) for f in found}
    out = []
    for t in cf.tried.values():
        if id(t.measured) in joined or not isinstance(t.measured, Measured):
            continue
        m = t.measured
        costs = m.high is not None and m.high < 1
        verdict = "helps" if m.gain else "costs" if costs else "no clear effect"
        fix = t.change if m.gain else f"keep it as it is ({t.change} costs)" if costs else t.change
        out.append(
            Finding(
                f"measured: {t.change} ({verdict})",
                f"{t.why}; samples/s {m.ratio - 1:+.0%}{ci(m.low, m.high, '.2f') if m.low is not None else ''} over "
                f"{m.pairs} interleaved pair(s) ({CONFIDENCE:.0%} interval on the ratio)"
                + ("" if m.gain or costs else "; no clear effect at this length: more --rounds would tell"),
                fix,
                "counterfactual",
                predict(e, t.fix, t.workers),
                m,
            )
        )
    return out
