"""What would decide an inconclusive verdict, and one line of legend per label a report uses.

One source for the terminal tables and the markdown, so both say the same.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar

from perfsuite.core import metrics as registry
from perfsuite.judge.baseruns import NEEDS_RUNS
from perfsuite.judge.contention import ABSTAINED
from perfsuite.judge.verdict import Outcome, Verdict

_PAIRS = re.compile(r"\bn=(\d+)/(\d+)")
AB = "`perfsuite ab BASE HEAD` (interleaved fresh runs of both revisions until decided)"


# What decides a figure more steps cannot help: the runs a machine's noise needs, not more of one run.
ELSEWHERE = f"a quieter runner, several base runs (--perfsuite-save --perfsuite-baseline-runs 3), or {AB}"
# Samples from the loader ledger's replay after the window (perfsuite.probes.stages.REPLAY_BATCHES batches): a
# fixed count, whatever the steps.
REPLAYED_SAMPLES = frozenset({"loader_cpu_ms", "loader_capacity"})


BUSY = f"to decide: the machine was too busy to judge it, and more steps will not change that; {ELSEWHERE}"


def what_would_decide(verdict: Verdict, shared: bool = True) -> str | None:
    """For an inconclusive verdict, the step that would decide it: more steps, or ``perfsuite ab``; else None.

    Never more steps where they cannot help: a verdict the load guard abstained from (the machine was busy,
    :mod:`perfsuite.judge.contention`), a figure from the loader replay's fixed batch count, or one judged
    from fewer base runs than a wall-clock verdict needs (:mod:`perfsuite.judge.baseruns`). ``shared``: the
    report prints each shared reason on a line of its own (a terminal), so a verdict that has one gets None;
    a report that does not (the markdown) gets the hint on the verdict's row.
    """
    if verdict.outcome is not Outcome.INCONCLUSIVE:
        return None
    if verdict.unjudged:
        return None if shared else BUSY  # the shared reason (a busy machine) says what to do
    spec = registry.find(verdict.metric)
    if verdict.message.startswith(f"{verdict.metric} {ABSTAINED}"):
        return BUSY
    if spec is not None and spec.samples in REPLAYED_SAMPLES:
        return f"to decide: more steps add no sample (the loader replay times a fixed number of batches); {ELSEWHERE}"
    if "not measured in this run" in verdict.message:
        return f"to decide: run HEAD again so that it measures {verdict.metric}, or {AB}"
    if NEEDS_RUNS in verdict.message:  # judge.baseruns: the base runs decide it, not the steps
        return f"to decide: more base runs, not more steps (its line says how many); or {AB}"
    if "re-record" in verdict.message:
        return "to decide: re-record the baseline with this perfsuite (--perfsuite-save), then compare again"
    if spec is not None and spec.kind == "timing":
        found = _PAIRS.search(verdict.message)
        if found:
            steps = 4 * max(int(found.group(1)), int(found.group(2)))
            more = f"about 4x the steps on both sides (--steps {steps}, or --perfsuite-steps {steps})"
            more += " halves the interval"
        else:
            more = "more steps on both sides (--steps, or --perfsuite-steps)"
        return f"to decide: {more}; or {AB}"
    if spec is not None and spec.kind == "noisy":
        return f"to decide: one value per run cannot tell noise from a change; {AB}"
    return f"to decide: {AB}"


SETTING = "regressed (setting)"  # judge.settings' label: a fact, not a timing, so the legend says it apart
OUTCOME_LEGEND = {
    "fail": "a threshold (min_/max_ bound) was not met",
    "pass": "a threshold (min_/max_ bound) was met",
    "regressed": "worse than the baseline beyond the factor, and significant",
    SETTING: "a documented fix undone, judged as a fact, whatever the timing beside it",
    "improved": "better than the baseline beyond the factor, and significant",
    "unchanged": "within the factor of the baseline (exact metrics: equal)",
    "changed": "an exact value or label moved where neither direction is better",
    "inconclusive": "it moved, but these samples cannot tell noise from a change (its line says what would decide)",
    "unavailable": "not measured on this machine or in this run (its line says why)",
    "new": "no baseline to compare with yet (--perfsuite-save records one)",
    "same": "perfsuite ab: the interval lies within the margin",
    "unknown": "perfsuite ab: not decided within the rounds or the budget (its line says what would decide)",
}


def labels_of(verdicts: Iterable[Verdict]) -> set[str]:
    """The legend labels ``verdicts`` use: their outcomes, and ``regressed (setting)`` where a setting regressed."""
    verdicts = list(verdicts)
    return {v.outcome.value for v in verdicts} | {SETTING for v in verdicts if v.message.startswith(SETTING)}


def legend(labels: list[str] | set[str] | tuple[str, ...]) -> list[str]:
    """``label: meaning`` for each known label among ``labels``, in the legend's order."""
    wanted = set(labels)
    return [f"{label}: {text}" for label, text in OUTCOME_LEGEND.items() if label in wanted]


# How the hints are worded for the command whose Results are compared: pytest's options unless a command says
# otherwise (perfsuite compare of two `perfsuite exec` Results: perfsuite.cli.hints.for_exec_results).
_WORDING: ContextVar[Callable[[str | None], str | None] | None] = ContextVar("perfsuite_hint_wording", default=None)


@contextlib.contextmanager
def worded(reword: Callable[[str | None], str | None]) -> Iterator[None]:
    """While open, :func:`reworded` hints pass through ``reword``."""
    token = _WORDING.set(reword)
    try:
        yield
    finally:
        _WORDING.reset(token)


def reworded(text: str | None) -> str | None:
    """``text`` in the words of the command whose Results are compared (:func:`worded`)."""
    reword = _WORDING.get()
    return reword(text) if reword is not None else text
