"""Whether the machine is too busy for tune to measure anything, asked before the search spends its budget.

tune drops every run the contention guard calls contended (:mod:`perfsuite.judge.contention`): its pair is
not counted and a later round replaces it. On a machine that stays busy every round is replaced in turn, so
the whole budget goes on runs that are then discarded: under load, twice 216 s and 279 s, ending NOT TUNED
(issue 56). So when the reference run was contended, the machine is read once more for a moment; if it is
still beyond the wall-clock bound, tune stops there and says what it would take.
"""

from __future__ import annotations

import time

from perfsuite.judge.contention import Load, wall_bound

READ_S = 2.0  # how long the second reading watches the machine


def read_machine(seconds: float = READ_S) -> Load:
    """Other processes' share of the usable cores (and the hypervisor's steal) over ``seconds`` from now."""
    from perfsuite.core.cores import usable_cores
    from perfsuite.probes.contention import snapshot, span

    before = snapshot()
    time.sleep(seconds)
    figures = span(before, snapshot(), usable_cores().usable)
    neighbours = figures.get("neighbours")
    foreign = None if neighbours is None else min(1.0, neighbours + (figures.get("steal") or 0.0))
    return Load(foreign, figures.get("cpu_pressure_some"), figures.get("runqueue_per_core"))


def too_busy(reference: str, now: Load, budget_s: float) -> str | None:
    """Why tune would spend ``budget_s`` on runs it then discards, and what it would take; None: go ahead."""
    bound = wall_bound()
    if now.foreign is None or now.foreign <= bound:
        return None
    return (
        f"the machine is busy: the reference run read {reference}, and {READ_S:g} s later other processes still "
        f"took {now.foreign:.0%} of the usable CPU. tune drops every run beyond the wall-clock bound ({bound:.0%}, "
        f"perfsuite.judge.contention), so its budget ({budget_s:g} s) would go on runs it then discards; nothing "
        f"was run or written. It would take: other processes below {bound:.0%} of the usable cores (stop the "
        "builds and tests beside it; `uptime`'s load average below the usable cores), a runner of its own, or "
        "PERFSUITE_WALL_BOUND raised to accept a busier machine's timings (each run then shows its load)"
    )
