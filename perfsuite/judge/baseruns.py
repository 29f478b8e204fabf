"""How many base runs a wall-clock verdict needs, and the one exception: a change beyond the job's own spread.

The contention study (docs/contention.md) showed that one run against one run cannot hold 0.5% A/A false alarms
on a job whose identical runs land x1.106 apart: a whole run lands slower in every step, which nothing inside one
pair can tell from a change. Several base runs measure that drift (:func:`perfsuite.judge.timing.compare_between_runs`:
0 A/A alarms in 478 groups). So a wall-clock verdict from fewer than ``baseline_runs`` base runs (3 unless
configured) is *inconclusive*, saying how many more runs would decide it, unless the change is larger than
:func:`spread_margin` of the one base run's own steps. Exact verdicts never pass through here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from perfsuite.core import metrics as registry
from perfsuite.judge.contention import clock_of
from perfsuite.judge.stats import median
from perfsuite.judge.verdict import Outcome, Verdict

# The smallest margin one base run may decide by: identical quiet runs of the study's three jobs landed up to
# x1.31 apart step by step (faces; x1.23 the other way), and x1.3 with SPREAD_MADS holds every cell's kept A/A
# pairs to 0 alarms (`python scripts/contention_study.py --table`; fitted on that data, so in-sample).
SPREAD_FLOOR = 1.3
# How many median absolute deviations of the base run's log step times the change must exceed as well: a job
# whose steps scatter (faces waits for its loader: 0.44, x1.55 per MAD) also lands further apart run to run
# (x1.106, against x1.038 for face_parsing at 0.043), so its own scatter widens its margin.
SPREAD_MADS = 2.0
DECIDED = frozenset({Outcome.REGRESSED, Outcome.IMPROVED, Outcome.UNCHANGED})
NEEDS_RUNS = "a wall-clock verdict needs"  # in every message of a verdict this module left undecided (report hints)


def needs_runs(spec: registry.MetricSpec) -> bool:
    """Whether ``spec``'s verdict moves with a whole run landing slower: a wall-clock figure judged as a ratio.

    Tails are judged against each run's own median and shares as absolute fractions, so a run that lands
    slower in every step leaves both where they were; CPU-time figures have their own guard and study."""
    return spec.kind == "timing" and spec.rule == "ratio" and clock_of(spec) == "wall"


def spread_margin(samples: Sequence[float]) -> float:
    """The factor one base run decides by: :data:`SPREAD_FLOOR`, or :data:`SPREAD_MADS` median absolute
    deviations of the run's log samples where that is wider (inf without positive samples)."""
    logs = [math.log(x) for x in samples if x > 0]
    if not logs:
        return math.inf
    centre = median(logs)
    mad = median([abs(x - centre) for x in logs])
    return max(SPREAD_FLOOR, math.exp(SPREAD_MADS * mad))


def runs_hint(held: int, needed: int) -> str:
    """``1 base run of the 3 a wall-clock verdict needs: record 2 more (...)``."""
    runs = "run" if held == 1 else "runs"
    return (
        f"{held} base {runs} of the {needed} {NEEDS_RUNS}: record {needed - held} more "
        f"(nox -s baseline, or perfsuite run --repeat {needed} --out base.json)"
    )


def apply_run_count(
    spec: registry.MetricSpec, verdict: Verdict, base_samples: Sequence[float], held: int, needed: int
) -> Verdict:
    """The verdict, or an inconclusive one saying how many more base runs would decide it.

    Applies to :func:`needs_runs` metrics judged from ``held`` < ``needed`` base runs. A regressed or improved
    verdict whose ratio lies beyond :func:`spread_margin` of the base run's samples stands (said so in its
    message); every other decided verdict, unchanged included, becomes inconclusive with the measured figures.
    """
    if held >= needed or not needs_runs(spec) or verdict.outcome not in DECIDED:
        return verdict
    margin = spread_margin(base_samples)
    ratio = verdict.ratio
    beyond = ratio is not None and ratio > 0 and abs(math.log(ratio)) > math.log(margin)
    if beyond and verdict.outcome is not Outcome.UNCHANGED:
        decided = f"beyond x{margin:.3g}, this job's own spread, so one base run decides it"
        return replace(verdict, message=f"{verdict.message}; {decided}")
    return replace(
        verdict,
        outcome=Outcome.INCONCLUSIVE,
        message=(
            f"{spec.name} not decided: {runs_hint(held, needed)}; from fewer, only a change beyond x{margin:.3g} "
            f"(this job's own spread) is judged (measured: {verdict.message})"
        ),
        cause=None,
    )
