"""Reads to the host every step, at their sites."""

from __future__ import annotations

from perfsuite.tools.doctor import predictions as model
from perfsuite.tools.doctor.evidence import Evidence
from perfsuite.tools.doctor.model import Counterfactuals, Finding, Predicted, Unavailable
from perfsuite.tools.doctor.rules.base import Rule


def find(e: Evidence, cf: Counterfactuals) -> list[Finding]:
    led = e.ledger
    if led.syncs_per_step <= 0:
        return []
    top = ", ".join(f"{site} ({t:.3g} ms)" for site, t in list(led.sync_sites.items())[:3])
    beside = (
        "; beside them, every N steps: "
        + ", ".join(f"{s.op} at {s.site} ({s.seen}, {s.per_step:.3g}/step)" for s in led.periodic_syncs[:3])
        if led.periodic_syncs
        else ""
    )
    cpu = (
        "; on this CPU run a read to Python waits for no device queue: the time shown is the op's own; on a GPU "
        "each one stalls until the queued work drains"
        if led.cpu
        else ""
    )
    return [
        Finding(
            f"host syncs: {led.syncs_per_step:g} per step",
            f"{top or 'sites unknown'}{beside}{cpu}",
            "read the value every N steps, or keep it on the device (accumulate the loss; log_interval)",
            "syncs",
            predict_syncs(e),
            Unavailable("not tried: a change to the step's code"),
        )
    ]


def predict_syncs(e: Evidence) -> Predicted | Unavailable:
    """The step without its reads' time."""
    ms = e.ledger.syncs_ms
    r = model.ratio(e.steady_ms, e.steady_ms - ms)
    if r is None:
        return Unavailable("no steady step to predict from")
    cpu = " (a CPU run: on a GPU the gain is the queue's drain, not shown here)" if e.ledger.cpu else ""
    return Predicted(r, f"the reads' {ms:.3g} ms/step removed{cpu}")


RULE = Rule("syncs", find)
