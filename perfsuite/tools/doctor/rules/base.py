"""What every rule shares: the :class:`Rule` record the registry holds, and the band's words.

A rule is one module under :mod:`perfsuite.tools.doctor.rules` with a ``RULE``: its condition and its
finding (``find``), and, where a run can try its fix, the :class:`~perfsuite.tools.doctor.model.Fix` it
predicts (``predicts``, read by the plan before anything runs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from perfsuite.harness.runner import input_band
from perfsuite.tools.doctor.evidence import Evidence
from perfsuite.tools.doctor.model import Counterfactuals, Finding, Fix, Predicted, Unavailable
from perfsuite.tools.doctor.stats import ci

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
    return e.wait.band or input_band(e.wait.share)


def wait_text(e: Evidence) -> str:
    """``data wait 27.0% [95% CI 20.5%..33.0%]``, and the edge it spans when no band is decided."""
    w = e.wait
    text = f"data wait {w.share:.1%}{ci(w.low * 100, w.high * 100, '.1f', '%')}"
    if not w.band:
        text += f" (the interval spans the {w.edge or 0:.0%} edge: {w.between}; --rounds narrows it)"
    return text


def input_bound(e: Evidence) -> bool:
    return band(e) in ("moderately input-bound", "highly input-bound")
