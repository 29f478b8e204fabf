"""Bisect of a timing metric: each probe an interleaved A/B of a commit against GOOD, decided by the ab rule.

One run per commit cannot place a timing change (a shared machine's run-to-run spread is larger than the
changes worth finding), so each commit the binary search looks at is *probed*: it runs in rounds of four,
ABBA or BAAB (random, seeded by the commit), A being GOOD and B the candidate, each run a fresh process
in a worktree of its own, and :func:`perfsuite.judge.adaptive.run_loop` turns the adjacent pairs into the
three-way verdict that ``perfsuite ab`` gives (:func:`perfsuite.judge.adaptive.decide`: a Wilcoxon
signed-rank test and a t-interval on the log ratio, at least 6 pairs). ``same`` puts the candidate on GOOD's
side, a change in BAD's direction on BAD's; anything else (``unknown`` after ``max_rounds``, or a change
the other way) is **inconclusive**: the bisect stops there and reports the range still in doubt, never a
guess. Every run is recorded in the history store; each probe's decision is kept in the state file, so a
resumed bisect does not probe a decided commit again (a probe cut off midway is run again from its start).

The per-run value is the caller's (``value_of``): ``perfsuite bisect`` passes ``perfsuite ab``'s per-run
statistic for step times, the layers not letting this module import :mod:`perfsuite.ab`.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from perfsuite.core import tmpfiles
from perfsuite.core.results import Result
from perfsuite.judge.adaptive import ABOutcome, ABRule, RunValues, run_loop
from perfsuite.tools.history.bisect import commits_between, resolve
from perfsuite.tools.history.store import HistoryError, HistoryStore, commit_info

SAME, CHANGED, INCONCLUSIVE = "same", "changed", "inconclusive"


@dataclass
class Probe:
    """One commit against GOOD: the verdict, the ratio (candidate / GOOD) and what it cost."""

    commit: str
    outcome: str  # same | changed | inconclusive
    verdict: str  # the ab rule's own word: same | regressed | improved | unknown
    ratio: float | None
    low: float | None
    high: float | None
    pairs: int
    runs: int
    good_median: float | None
    candidate_median: float | None
    reason: str

    def describe(self) -> str:
        ratio = "no ratio" if self.ratio is None else f"x{self.ratio:.3f}"
        if self.low is not None and self.high is not None:
            ratio += f" [x{self.low:.3f}..x{self.high:.3f}]"
        return f"{self.commit[:12]}: {self.outcome} ({self.verdict}, {ratio}, {self.pairs} pairs, {self.runs} runs)"


@dataclass
class TimingBisect:
    """The outcome: a culprit, no change at BAD, or an inconclusive probe with the range still in doubt."""

    metric: str
    status: str  # found | same | inconclusive
    probes: list[Probe]
    runs: int  # made by this call (a resumed bisect counts only its own)
    culprit: str | None = None
    subject: str = ""
    parent: str | None = None
    doubt: list[str] = field(default_factory=list)  # the commits any of which may be the first changed
    stopped_at: Probe | None = None
    value_label: str = ""  # what the per-run value is, when it is not the metric's own value

    def describe(self) -> str:
        if self.status == "same":
            return f"{self.metric} is the same at GOOD and BAD ({self.probes[-1].describe()}): nothing to bisect"
        if self.status == "inconclusive":
            assert self.stopped_at is not None
            span = f"{self.doubt[0][:12]}..{self.doubt[-1][:12]}" if self.doubt else "none"
            return (
                f"inconclusive at {self.stopped_at.describe()}: {self.stopped_at.reason}. "
                f"The first change lies in {len(self.doubt)} commit(s) {span}, not narrowed further"
            )
        probe = next(p for p in self.probes if p.commit == self.culprit)
        assert self.culprit is not None and self.parent is not None
        before, after = probe.good_median, probe.candidate_median
        from perfsuite.core.units import metric_value, sig

        if before is None or after is None:
            values = "?"
        elif self.value_label:  # a derived per-run value: its label names the unit
            values = f"{sig(before)} -> {sig(after)}"
        else:
            values = f"{metric_value(self.metric, before, counts=False)} -> {metric_value(self.metric, after)}"
        return (
            f"{self.culprit[:12]} {self.subject!r}: {self.metric} {values} "
            f"({self.value_label or 'its value'}, median per run, GOOD vs it; "
            f"x{probe.ratio:.3f} [x{probe.low:.3f}..x{probe.high:.3f}], {probe.pairs} pairs) "
            f"(first changed after {self.parent[:12]})"
        )


def probe(
    good: str,
    candidate: str,
    run_once: Callable[[str], float],
    rule: ABRule,
    max_rounds: int,
    min_rounds: int = 3,
) -> Probe:
    """Interleaved rounds of GOOD (A) and ``candidate`` (B) until the ab rule decides or ``max_rounds``."""
    values: dict[str, list[float]] = {"A": [], "B": []}
    runs = 0

    def one_round(order: str, _index: int) -> Mapping[str, Sequence[RunValues | None]]:
        nonlocal runs
        out: list[RunValues | None] = []
        for side in order:
            value = run_once(good if side == "A" else candidate)
            runs += 1
            values[side].append(value)
            out.append(RunValues(value) if math.isfinite(value) and value > 0 else None)
        return {"probe": out}

    loop = run_loop(one_round, rule, seed=int(candidate[:8], 16), min_rounds=min_rounds, max_rounds=max_rounds)
    d = loop.tracks["probe"].decision
    outcome = SAME if d.outcome is ABOutcome.SAME else INCONCLUSIVE if d.outcome is ABOutcome.UNKNOWN else CHANGED
    reason = d.reason + (f"; {d.needs}" if d.needs else "")
    if d.outcome is ABOutcome.UNKNOWN:
        reason = f"undecided after {len(loop.orders)} rounds (--max-rounds {max_rounds}): {reason}"
    finite = {k: [v for v in vs if math.isfinite(v)] for k, vs in values.items()}
    return Probe(
        candidate,
        outcome,
        d.outcome.value,
        d.ratio,
        d.low,
        d.high,
        d.pairs,
        runs,
        median(finite["A"]) if finite["A"] else None,
        median(finite["B"]) if finite["B"] else None,
        reason,
    )


def bisect_timing(
    repo: Path,
    good: str,
    bad: str,
    metric: str,
    measure: Callable[[str], Result],
    value_of: Callable[[Result], float],
    rule: ABRule,
    max_rounds: int = 20,
    store: HistoryStore | None = None,
    state_path: Path | None = None,
    test_name: str | None = None,
    say: Callable[[str], None] = lambda _m: None,
    value_label: str = "",
) -> TimingBisect:
    """The first commit after ``good`` whose ``metric`` moved as BAD's did, each probe an interleaved A/B."""
    good, bad = resolve(repo, good), resolve(repo, bad)
    chain = commits_between(repo, good, bad)
    if not chain:
        raise HistoryError(f"no commit between GOOD {good[:10]} and BAD {bad[:10]}")
    key = {"good": good, "bad": bad, "metric": metric, "mode": "timing", "rule": asdict(rule)}
    state: dict[str, Any] = {**key, "probes": {}}
    if state_path is not None and state_path.is_file():
        saved = json.loads(state_path.read_text(encoding="utf-8"))
        if all(saved.get(k) == v for k, v in key.items()):
            state = saved
            say(f"resuming: {len(state['probes'])} commit(s) decided before")
    session = uuid.uuid4().hex[:8]  # run tags unique to this call, so a redone probe's runs are recorded too
    runs = 0
    subjects: dict[str, tuple[float, str]] = {}

    def run_once(sha: str) -> float:
        nonlocal runs
        result = measure(sha)
        runs += 1
        if store is not None:
            if sha not in subjects:
                _sha, when, subject = commit_info(repo, sha)
                subjects[sha] = (when, subject)
            when, subject = subjects[sha]
            store.record(result, sha, when, subject, test=test_name, run=f"bisect-{session}-{runs}")
        return value_of(result)

    def decided(sha: str) -> Probe:
        if sha in state["probes"]:
            return Probe(**state["probes"][sha])
        say(f"probing {sha[:12]} against GOOD {good[:12]} ...")
        p = probe(good, sha, run_once, rule, max_rounds)
        state["probes"][sha] = asdict(p)
        if state_path is not None:
            tmpfiles.write_json_atomic(state_path, state)
        say(f"  {p.describe()}")
        return p

    probes: list[Probe] = []
    at_bad = decided(bad)
    probes.append(at_bad)
    if at_bad.outcome != CHANGED:
        status = SAME if at_bad.outcome == SAME else INCONCLUSIVE
        stopped = at_bad if status == INCONCLUSIVE else None
        return TimingBisect(metric, status, probes, runs, doubt=chain if stopped else [], stopped_at=stopped)
    lo, hi = -1, len(chain) - 1  # chain[hi] changed as BAD did; chain[lo] (GOOD at -1) is the same as GOOD
    while hi - lo > 1:
        mid = (lo + hi) // 2
        p = decided(chain[mid])
        probes.append(p)
        if p.outcome == SAME:
            lo = mid
        elif p.outcome == CHANGED and p.verdict == at_bad.verdict:
            hi = mid
        else:
            if p.outcome == CHANGED:  # a change the other way: this commit is neither GOOD's nor BAD's side
                p.outcome, p.reason = INCONCLUSIVE, f"{p.verdict}, the opposite of BAD's {at_bad.verdict}: {p.reason}"
            return TimingBisect(metric, INCONCLUSIVE, probes, runs, doubt=chain[lo + 1 : hi + 1], stopped_at=p)
    culprit, parent = chain[hi], chain[lo] if lo >= 0 else good
    _sha, _when, subject = commit_info(repo, culprit)
    return TimingBisect(metric, "found", probes, runs, culprit, subject, parent, value_label=value_label)
