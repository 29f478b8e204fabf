"""Work done every N steps (an evaluation, a checkpoint): named with its period, kept out of the input's figures."""

from __future__ import annotations

from perfsuite.tools.doctor import predictions as model
from perfsuite.tools.doctor.evidence import Evidence
from perfsuite.tools.doctor.model import Counterfactuals, Finding, Predicted, Unavailable
from perfsuite.tools.doctor.rules.base import Rule


def find(e: Evidence, cf: Counterfactuals) -> list[Finding]:
    p = e.periodic
    if not p.found:
        return []
    reads = "".join(f"; its reads: {s.op} at {s.site}, {s.seen}" for s in e.ledger.periodic_syncs[:3])
    return [
        Finding(
            f"periodic work every {p.every} steps (an evaluation, a checkpoint, logging)",
            f"{p.steps} step(s) of the window took {p.long_step_ms or 0:.3g} ms of their own work against the other "
            f"steps' median; {p.extra_ms_per_step:.3g} ms/step, {p.share:.0%} of the window's time{reads}. "
            "Kept out of input efficiency and the input's cost",
            "run it less often, or asynchronously (a separate process or stream for evaluation and checkpoints)",
            "periodic",
            predict_periodic(e),
            Unavailable("not tried: its interval is the job's choice"),
        )
    ]


def predict_periodic(e: Evidence) -> Predicted | Unavailable:
    """The upper bound: the step without its periodic work."""
    r = model.ratio(e.ledger.step_ms, e.ledger.step_ms - e.periodic.extra_ms_per_step)
    return Predicted(r, "the upper bound: the periodic work removed") if r else Unavailable("no step to predict from")


RULE = Rule("periodic", find)
