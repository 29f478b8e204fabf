"""What every rule shares: the :class:`Rule` record the registry holds, and the band's words.

A rule is one module under :mod:`perfsuite.tools.doctor.rules` with a ``RULE``: its condition and its
finding (``find``), and, where a run can try its fix, the :class:`~perfsuite.tools.doctor.model.Fix` it
predicts (``predicts``, read by the plan before anything runs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from perfsuite.tools.doctor.evidence import Evidence
from perfsuite.tools.doctor.model import Counterfactuals, Finding, Fix, Measured, Predicted, Unavailable, known

Find = Callable[[Evidence, Counterfactuals], list[Finding]]
Predict = Callable[[Evidence, Fix, "int | None"], "Predicted | Unavailable"]


@dataclass(frozen=True)
class Rule:
    """One kind of finding: ``find`` reads the evidence and the counterfactuals; ``predict`` gives the gain of each
    fix in ``predicts`` before it is run (``workers``: the count a worker fix runs with)."""

    name: str
    find: Find
    predicts: tuple[Fix, ...] = ()
    predict: Predict | None = None


def band(e: Evidence) -> str:
    """The band the data wait's interval decides; where it crosses an edge, "not decided" with the interval."""
    w = e.wait
    if w.band:
        return w.band
    if w.input_bound:
        return f"input-bound (moderately or highly: not decided, {w.source} {w.share:.1%} {w.interval})"
    return f"input-bound not decided ({w.source} {w.share:.1%} {w.interval})"


def wait_text(e: Evidence) -> str:
    """``data wait 27.0% [95% CI 20.5%..33.0%]``, and the edge it spans when no band is decided."""
    w = e.wait
    text = f"{w.source} {w.share:.1%} {w.interval}"
    if not w.band:
        text += f" (the interval spans the {w.edge or 0:.0%} edge: {w.between}; --rounds narrows it)"
    return text


def input_bound(e: Evidence) -> bool:
    """The interval decides the step waits for its input (its low end at the first band's edge or above)."""
    return e.wait.input_bound is True


def not_input_bound(e: Evidence) -> bool:
    """The interval decides the step does not wait for its input (its high end below the first band's edge)."""
    return e.wait.input_bound is False


def waits_for_a_core(e: Evidence) -> bool:
    """Not input-bound, and the step's wait for a core ("the rest") outweighs its compute."""
    rest, compute = e.ledger.rest, known(e.ledger.compute)
    return not input_bound(e) and rest is not None and rest > (compute or 0.0)


def best(cf: Counterfactuals, *fixes: Fix) -> Measured | Unavailable:
    """The largest measured ratio among ``fixes``, or the first one's reason."""
    got: list[Measured] = []
    for f in fixes:
        m = cf.tried[f].measured if f in cf.tried else None
        if isinstance(m, Measured):
            got.append(m)
    return max(got, key=lambda m: m.ratio) if got else cf.measured(fixes[0])
