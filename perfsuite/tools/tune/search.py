"""The search: hill-climbs over the loader knobs, each step an interleaved comparison judged by ``perfsuite ab``'s rule.

**One step** (:meth:`Search.compare`) runs the accepted setting (A) and one candidate (B) in rounds of
four fresh runs, ABBA or BAAB at random, and hands each run's window time per sample (1 / samples/s,
the throughput the loader and the step deliver together) to :func:`perfsuite.judge.adaptive.run_loop`,
the loop ``perfsuite ab`` runs: paired log ratios, a signed-rank test, a t-interval, a three-way
verdict. Only ``improved`` (faster by more than the rule's factor, significantly) is a measured gain;
``same``, ``unknown`` and ``regressed`` keep the accepted setting. Throughput, not ab's fastest step:
a loader that cannot keep up shows in the steps that wait, which a fastest-step statistic leaves out.

**The climbs**, in order (each keeps the previous ones' choices):

1. ``num_workers`` over 1, 2, 4, ... up to the cores this process may use (affinity and cgroup quota,
   :func:`perfsuite.core.cores.usable_cores`), stopping at the first step that is not a gain: the
   knee, the smallest count within the rule's factor of the best, since every worker costs a core and
   memory. Where the loader ledger measured the loader's headroom (``loader_headroom``, or the
   ledger's ``loader_capacity_samples_per_s`` over the step's demand, the speed of light of the
   reference run) and it is already at least :data:`HEADROOM_ENOUGH`, more workers cannot raise
   samples/s, and the climb stops without spending runs on it.
2. ``prefetch_factor`` over torch's default (2), 4, 8.
3. ``pin_memory``, on CUDA only (it does nothing without a device to copy to).
4. ``persistent_workers``.
5. With ``batch``: ``batch_size`` doubling from the job's own, until a run runs out of memory (caught,
   freed, the search goes on with the largest batch that fit), a run's resident memory passes the
   guard, or samples/s stops improving; then a margin below the largest batch that fit.

A candidate the memory guard refuses (:mod:`perfsuite.tools.tune.guard`) is not run; the report says
why. Ctrl-C stops the search and keeps the best setting found so far.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from perfsuite.judge.adaptive import ABRule, AdaptiveAB, RunValues, run_loop
from perfsuite.tools.tune.guard import Guard
from perfsuite.tools.tune.records import OUTCOMES, RunRecord, Trial, label

# The rule each step is judged by: ab's decision rule (perfsuite.judge.adaptive.decide) with its factor and margin,
# at alpha 0.01 rather than ab's 0.002: a step of a climb is one decision, not one of a CI gate's many, and 0.01
# calls a consistent gain after 7 pairs (4 rounds) where 0.002 needs 9.
TUNE_RULE = ABRule(factor=1.05, margin=1.05, alpha=0.01)
HEADROOM_ENOUGH = 1.5  # loader capacity / step demand above which more workers cannot help
PREFETCH = (None, 4, 8)  # None: torch's default, 2 batches per worker
BATCH_MARGIN = 0.10  # keep the batch this far below the largest that fit
LOADER_KNOBS = ("num_workers", "prefetch_factor", "pin_memory", "persistent_workers")
CHEAPEST = {"num_workers": 1, "prefetch_factor": None, "pin_memory": False, "persistent_workers": False}
BATCH_ROUND = 8  # batch sizes are kept at multiples of this (when the job's own batch is at least this)


def worker_ladder(cap: int) -> list[int]:
    """1, 2, 4, ... up to ``cap``, and ``cap`` itself."""
    ladder, n = [], 1
    while n < cap:
        ladder.append(n)
        n *= 2
    return [*ladder, max(1, cap)]


def batch_with_margin(largest_fit: int, margin: float, start: int) -> int:
    """The largest multiple of the rounding step at or below ``largest_fit x (1 - margin)``, never below ``start``."""
    step = BATCH_ROUND if start >= BATCH_ROUND else 1
    kept = int(math.floor(largest_fit * (1.0 - margin) / step)) * step
    return max(start, min(largest_fit, kept))


@dataclass
class SearchConfig:
    """How long each step may run and what it searches."""

    rule: ABRule = TUNE_RULE
    min_rounds: int = 3
    max_rounds: int = 5
    budget_s: float = 1800.0
    max_workers: int = 1
    cuda: bool = False
    batch: bool = False
    max_batch: int | None = None
    batch_margin: float = BATCH_MARGIN
    seed: int = 0
    confirm_runs: int = 6
    knobs: tuple[str, ...] = LOADER_KNOBS  # which loader knobs to search (batch_size goes by `batch`)

    def __post_init__(self) -> None:
        from perfsuite.tools.tune.targets import TuneError

        unknown = sorted(set(self.knobs) - set(LOADER_KNOBS))
        if unknown:
            raise TuneError(f"cannot search {', '.join(unknown)}; tune searches {', '.join(LOADER_KNOBS)}")
        if self.max_workers < 1:
            raise TuneError(f"max_workers={self.max_workers}: the worker ladder needs at least 1")
        pairs, rounds = gain_rounds(self.rule)
        if self.max_rounds < rounds:
            raise TuneError(
                f"--max-rounds {self.max_rounds} cannot decide a gain: the rule (alpha {self.rule.alpha:g}) needs "
                f"{pairs} pairs, {rounds} rounds of 2; write --max-rounds {rounds} or more"
            )


def gain_rounds(rule: ABRule) -> tuple[int, int]:
    """(pairs, rounds) the rule needs before it can call a gain: its min_pairs, and the signed-rank test's floor.

    A signed-rank p below alpha needs at least log2(1/alpha) pairs (all of one sign); a round gives 2 pairs.
    """
    pairs = max(rule.min_pairs, math.ceil(math.log2(1 / rule.alpha)))
    return pairs, math.ceil(pairs / 2)


def rate_note(d: Any, rule: ABRule) -> str:
    """What decided a step, in samples/s (the direction its line shows): never a time ratio beside a rate."""
    if d.ratio is None:
        return f"{d.reason}; {d.needs}" if d.needs else d.reason
    figures = f"{d.pairs} pairs"
    if d.outcome.value == "improved":
        return f"samples/s higher by more than x{rule.factor:g}, p={d.p_faster:.2g} < {rule.alpha:g} ({figures})"
    if d.outcome.value == "regressed":
        return f"samples/s lower by more than x{rule.factor:g}, p={d.p_slower:.2g} < {rule.alpha:g} ({figures})"
    if d.outcome.value == "same":
        return f"samples/s within x{1 / rule.margin:.3g}..x{rule.margin:g} ({figures})"
    more = f"about {d.more_pairs} more pairs would decide it" if d.more_pairs else "more pairs or a smaller factor"
    return f"undecided after {figures}: {more}"


class Interrupted(Exception):
    """The budget ran out between rounds (Ctrl-C comes as KeyboardInterrupt)."""


@dataclass
class Search:
    """The state of one tuning session: trials so far, what was not tried and why, the accepted setting."""

    run_one: Callable[[Mapping[str, Any]], RunRecord]
    guard: Guard
    config: SearchConfig
    current: dict[str, Any]
    progress: Any = None
    demand: float | None = None  # samples/s the step takes fed a device-resident batch (the reference run)
    trials: list[Trial] = field(default_factory=list)
    not_tried: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra_runs: list[RunRecord] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    run_seconds: list[float] = field(default_factory=list)
    stopped: str = ""

    # ----------------------------------------------------------------------------------------- one step

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def _round_s(self) -> float:
        """A round's expected time: four runs as long as the longest of the last two rounds' runs (measured).

        The longest, not the mean, so that no round starts whose end would pass the budget unless a run
        takes longer than every recent one.
        """
        return 4 * max(self.run_seconds[-8:]) if self.run_seconds else 0.0

    def _budget_left(self) -> bool:
        return self.elapsed() + self._round_s() <= self.config.budget_s

    def _run(self, knobs: Mapping[str, Any]) -> RunRecord:
        record = self.run_one(dict(knobs))
        self.run_seconds.append(record.seconds)
        return record

    def compare(self, knob: str, candidate: Any) -> Trial:
        """The accepted setting against the same with ``knob=candidate``, until decided or out of rounds."""
        base, head = dict(self.current), {**self.current, knob: candidate}
        trial = Trial(knob, base, head)
        self.trials.append(trial)
        title = f"{knob} {_show(base[knob])} -> {_show(candidate)}"

        def measure(order: str, r: int) -> dict[str, list[RunValues | None]]:
            values: list[RunValues | None] = []
            for i, side in enumerate(order):
                if self.progress:
                    self.progress.update(f"{title}: round {r + 1}/{self.config.max_rounds}, run {i + 1}/4 ({side})")
                record = self._run(base if side == "A" else head)
                (trial.base_runs if side == "A" else trial.head_runs).append(record)
                if not record.ok:
                    raise _StepFailed(side, record)
                if record.contended:  # its pair is dropped, not averaged in; the loop's next round replaces it
                    trial.contended += 1
                    values.append(None)
                else:
                    values.append(RunValues(1.0 / float(record.samples_per_s)))  # type: ignore[arg-type]
            return {"step": values}

        def keep_going(loop: AdaptiveAB) -> bool:
            if not self._budget_left():
                raise Interrupted(f"time budget {self.config.budget_s:.0f} s")
            return True

        try:
            loop = run_loop(
                measure,
                self.config.rule,
                seed=self.config.seed + len(self.trials),
                min_rounds=self.config.min_rounds,
                max_rounds=self.config.max_rounds,
                keep_going=keep_going,
            )
        except _StepFailed as exc:
            trial.outcome = "out of memory" if exc.record.oom else "failed"
            who = "the candidate" if exc.side == "B" else "the accepted setting"
            trial.note = f"{who} failed: {exc.record.error}"
        except (KeyboardInterrupt, Interrupted):
            trial.outcome = "interrupted"
            raise
        else:
            track = loop.tracks["step"]
            trial.decision = track.decision
            trial.outcome = OUTCOMES[track.decision.outcome]
            trial.note = rate_note(track.decision, self.config.rule)
            if trial.contended:
                trial.note += (
                    f"; {trial.contended} run(s) ran on a contended machine and their pairs were not counted "
                    "(perfsuite.judge.contention)"
                )
        if self.progress:
            self.progress.trial_done(trial)
        if trial.gain:
            self.current = dict(head)  # a copy: the trial keeps what it compared
        return trial

    def refused(self, knob: str, candidate: Any, why: str) -> None:
        self.not_tried.append({"knob": knob, "value": _show(candidate), "why": why})
        if self.progress:
            self.progress.note(f"{knob}={_show(candidate)} not tried: {why}")

    def guarded(self, knobs: Mapping[str, Any]) -> str | None:
        return self.guard.refuse(
            int(knobs.get("num_workers") or 0), knobs.get("prefetch_factor"), int(knobs.get("batch_size") or 1)
        )

    # ----------------------------------------------------------------------------------------- the climbs

    def climb(self, knob: str, candidates: list[Any]) -> None:
        """Step up ``candidates`` from the accepted value while each step is a measured gain."""
        for value in candidates:
            if value == self.current.get(knob):
                continue
            why = self.guarded({**self.current, knob: value})
            if why:
                self.refused(knob, value, why)
                return
            if knob == "num_workers":
                enough = self._ledger_enough()
                if enough:
                    self.refused(knob, value, enough)
                    return
            if not self.compare(knob, value).gain:
                return

    def _ledger_enough(self) -> str | None:
        """The loader ledger's verdict on more workers, where the runs of the accepted setting measured it."""
        runs = self.runs_of(self.current)
        values = [r.ledger["loader_headroom"] for r in runs if "loader_headroom" in r.ledger]
        if not values and self.demand:  # the ledger's capacity over the step's demand, measured once
            capacity = "loader_capacity_samples_per_s"
            values = [r.ledger[capacity] / self.demand for r in runs if capacity in r.ledger]
        if not values:
            return None
        headroom = sorted(values)[len(values) // 2]
        if headroom >= HEADROOM_ENOUGH:
            return (
                f"the loader ledger measured loader_headroom {headroom:.2f} at {label(self.current, ['num_workers'])} "
                f"(capacity over the step's demand, >= {HEADROOM_ENOUGH:g}): more workers cannot raise samples/s"
            )
        return None

    def workers(self) -> None:
        """Each searched knob starts at its cheapest (1 worker, torch's prefetch, nothing pinned or kept), then
        num_workers climbs: the search does not depend on where the job started."""
        searched = self.config.knobs
        self.current.update({k: v for k, v in CHEAPEST.items() if k in searched})
        if not self.current.get("num_workers"):
            self.current["num_workers"] = 1  # the other knobs need worker processes
        if "num_workers" in searched:
            self.climb("num_workers", worker_ladder(self.config.max_workers)[1:])

    def loader(self) -> None:
        """prefetch_factor, pin_memory (CUDA) and persistent_workers, given the workers chosen."""
        searched = self.config.knobs
        if "prefetch_factor" in searched:
            self.climb("prefetch_factor", list(PREFETCH[1:]))
        if "pin_memory" in searched and self.config.cuda:
            self.climb("pin_memory", [True])
        elif "pin_memory" in searched:
            self.refused("pin_memory", True, "pin_memory needs CUDA: without a device to copy to it does nothing")
        if "persistent_workers" in searched:
            self.climb("persistent_workers", [True])

    def batch(self) -> None:
        """Double batch_size until out of memory, past the guard, or no gain; keep a margin below the largest fit."""
        start = int(self.current["batch_size"])
        largest_fit, limit = start, self.config.max_batch
        value = start
        while True:
            value *= 2
            if limit is not None and value > limit:
                self.refused("batch_size", value, f"above --max-batch {limit}")
                break
            why = self.guarded({**self.current, "batch_size": value})
            if why:
                self.refused("batch_size", value, why)
                break
            trial = self.compare("batch_size", value)
            if trial.outcome in ("out of memory", "failed"):
                break
            if self._rss_past_guard(trial.head_runs):
                trial.note += f"; {self._rss_past_guard(trial.head_runs)}"
                if trial.gain:  # it ran, but it does not fit within the guard: step back
                    self.current["batch_size"] = largest_fit
                    trial.outcome = "out of memory"
                break
            largest_fit = value
            if not trial.gain:
                break
        kept = batch_with_margin(largest_fit, self.config.batch_margin, start)
        if kept < self.current["batch_size"]:
            self.notes.append(
                f"batch_size {self.current['batch_size']} -> {kept}: {self.config.batch_margin:.0%} below the "
                f"largest batch that fit ({largest_fit})"
            )
            self.current["batch_size"] = kept

    def _rss_past_guard(self, runs: list[RunRecord]) -> str | None:
        """On the host, memory is resident memory: a batch whose run passed the guard's share does not fit."""
        from perfsuite.tools.tune.guard import MB

        peaks = [r.peak_rss_mb for r in runs if r.peak_rss_mb is not None]
        if not peaks:
            return None
        free = self.guard.free().memory / MB
        if max(peaks) > self.guard.share * (free + max(peaks)):
            return (
                f"peak RSS {max(peaks):.0f} MB is past {self.guard.share:.0%} of the memory it had "
                f"({free + max(peaks):.0f} MB)"
            )
        return None

    # ----------------------------------------------------------------------------------------- the result

    def runs_of(self, knobs: Mapping[str, Any]) -> list[RunRecord]:
        """Every successful run of exactly this setting, in any trial or confirmation."""
        want = {k: knobs.get(k) for k in knobs}
        out = []
        for trial in self.trials:
            for runs, side in ((trial.base_runs, trial.base), (trial.head_runs, trial.head)):
                if {k: side.get(k) for k in want} == want:
                    out += [r for r in runs if r.ok]
        out += [r for r in self.extra_runs if r.ok and {k: r.knobs.get(k) for k in want} == want]
        return out

    def confirm(self) -> None:
        """Runs of the final setting until it has ``confirm_runs`` (its thresholds come from them)."""
        while len(self.runs_of(self.current)) < self.config.confirm_runs:
            if not self._budget_left():
                raise Interrupted(f"time budget {self.config.budget_s:.0f} s")
            if self.progress:
                have = len(self.runs_of(self.current))
                self.progress.update(f"confirming {label(self.current)}: run {have + 1}/{self.config.confirm_runs}")
            record = self._run(self.current)
            self.extra_runs.append(record)
            if not record.ok:
                self.notes.append(f"a confirmation run of the chosen setting failed: {record.error}")
                return


class _StepFailed(Exception):
    def __init__(self, side: str, record: RunRecord) -> None:
        super().__init__(record.error)
        self.side, self.record = side, record


def _show(value: Any) -> str:
    return "default" if value is None else str(value)
