"""The harness's note that the job's own threads and workers exceed the cores."""

from __future__ import annotations

from perfsuite.tools.doctor.evidence import Evidence
from perfsuite.tools.doctor.model import Counterfactuals, Finding, Fix, Unavailable
from perfsuite.tools.doctor.rules.base import Rule


def find(e: Evidence, cf: Counterfactuals) -> list[Finding]:
    if e.contention.busy:
        return []
    out = []
    for note in sorted({n for n in e.last.notes if n.startswith("oversubscribed:")}):
        what, _, advice = note.removeprefix("oversubscribed: ").rpartition(" (")
        out.append(
            Finding(
                "oversubscribed cores",
                what,
                advice.rstrip(")"),
                "cores",
                Unavailable("no model"),
                cf.measured(Fix.THREADS),
            )
        )
    return out


RULE = Rule("oversubscribed", find)
