"""Which fixes the doctor runs, decided before any runs: those that can change its answer, largest first.

After the first unchanged run, each candidate fix (:class:`Candidate`, from :func:`.arms.choose_arms` or
:func:`.script.choose`) is checked against that run's evidence:

* **can its mechanism act within the runs?** Persistent workers change nothing unless an epoch boundary falls
  inside the measured steps: where none did, the fix's runs (and the unchanged runs it is paired with) are
  lengthened so one does, when the epoch's length is known and the budget holds them; otherwise it is skipped,
  saying why;
* **can its effect be told from the job's own spread?** A fix predicted to change samples/s by less than the
  spread of the first run's own step times (the relative standard deviation of its blocks' medians) cannot be
  decided in the budget: it is said so instead of run. A fix predicted to cost is not run either. The exception
  is the busy-machine fix under high CPU pressure: there the spread is the wait for a core that it cuts.

The budget goes to the fixes left, the busy-machine fix (fewer intra-op threads) first when the machine's CPU
pressure is high, then by predicted gain (a fix without a prediction last). Each fix needs two rounds (a run of
it beside a run of the job as it is, twice) for its interval; whatever the budget, the first fix is measured (where
every fix is within the spread, the one predicted largest, saying its interval may not decide).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from perfsuite.tools.doctor.evidence import BUSY_PRESSURE, Evidence
from perfsuite.tools.doctor.model import Fix, Predicted, Unavailable, known

BLOCKS = 4  # the first run's window cut into this many blocks to read its own spread
ROUNDS = 2  # the fewest rounds that give a measurement its interval
UNDECIDABLE = "cannot be decided in the budget"


@dataclass(frozen=True)
class Candidate:
    """A fix a run could try: its key, how the report names it, and the worker count or threads it runs with."""

    fix: Fix
    label: str
    workers: int | None = None
    threads: int | None = None


@dataclass(frozen=True)
class Choice:
    """A candidate with its prediction and the plan's decision: run (``steps``: its runs lengthened to that many
    measured steps, None as the job's) or not, and why."""

    candidate: Candidate
    predicted: Predicted | Unavailable
    run: bool
    why: str
    steps: int | None = None

    @property
    def fix(self) -> Fix:
        return self.candidate.fix


@dataclass(frozen=True)
class Plan:
    """The choices, those to run first in the order they run."""

    choices: tuple[Choice, ...]
    spread: float | None

    @property
    def run(self) -> list[Choice]:
        return [c for c in self.choices if c.run]

    @property
    def skipped(self) -> dict[Fix, str]:
        return {c.fix: c.why for c in self.choices if not c.run}


@dataclass(frozen=True)
class Window:
    """The first run's window: measured steps, warmup, and the epoch's length in batches (None: not known)."""

    steps: int
    warmup: int
    epoch_batches: int | None = None


def own_spread(e: Evidence) -> float | None:
    """How far the job's own runs may differ with nothing changed: the relative standard deviation of the first
    run's block medians (a median per block, so one slow step, an epoch start, does not make the block), None with
    fewer than 2 blocks of 2 steps."""
    import statistics

    host = list(e.results[0].samples.get("host_step_ms", []))
    n = len(host) // BLOCKS if len(host) >= 2 * BLOCKS else len(host) // 2
    if n < 2:
        return None
    medians = [statistics.median(host[i : i + n]) for i in range(0, n * (len(host) // n), n)]
    mid = statistics.fmean(medians)
    return statistics.stdev(medians) / mid if mid > 0 else None


def epochs_in_window(e: Evidence) -> int:
    r = e.results[0]
    detail = r.metric("loader_process_cpu_ms_per_sample").detail
    return int(detail.get("epochs_started") or len(r.samples.get("epoch_fetch_ms", [])))


def lengthened(window: Window) -> int | None:
    """The measured steps that hold the first epoch boundary and a step after it, or None where not known."""
    if window.epoch_batches is None or window.epoch_batches < window.warmup:
        return None
    return window.epoch_batches - window.warmup + 2


def choose(
    candidates: Sequence[Candidate],
    e: Evidence,
    window: Window,
    run_s: float,
    left_s: float | None,
    rounds: int = ROUNDS,
) -> Plan:
    """The plan for ``candidates`` from the first run's evidence ``e``, a run costing ``run_s`` and ``left_s`` of the
    budget left (None: no budget)."""
    from perfsuite.tools.doctor.rules import predict_fix

    spread = own_spread(e)
    pressure = known(e.contention.cpu_pressure) or 0.0
    pending: list[Choice] = []
    done: list[Choice] = []
    for c in candidates:
        p = predict_fix(e, c.fix, c.workers)
        steps = None
        if c.fix is Fix.PERSISTENT and epochs_in_window(e) == 0:
            steps = lengthened(window)
            if steps is None:
                why = (
                    f"no epoch boundary falls inside the {window.steps} measured steps, so keeping workers alive "
                    "across epochs cannot change them, and the epoch's length is not known to lengthen the runs"
                )
                done.append(Choice(c, p, False, why))
                continue
        if isinstance(p, Predicted) and p.ratio < 1.0:
            done.append(Choice(c, p, False, f"predicted x{p.ratio:.2f}: a loss, not run"))
            continue
        if not isinstance(p, Predicted) or spread is None or abs(p.ratio - 1.0) > spread:
            pending.append(Choice(c, p, True, "", steps))
            continue
        if busy_first(c.fix, pressure):
            why = (
                f"predicted x{p.ratio:.2f}, within the job's own spread (+-{spread:.0%} between blocks), but run "
                f"first: some task waited for a core {pressure:.0%} of the time, and that wait, which this fix "
                "cuts, is the spread"
            )
            pending.append(Choice(c, p, True, why, steps))
            continue
        why = (
            f"{UNDECIDABLE}: predicted x{p.ratio:.2f}, within the job's own spread "
            f"(+-{spread:.0%} between blocks of its first run)"
        )
        done.append(Choice(c, p, False, why))
    pending.sort(key=lambda ch: order(ch, pressure))
    fitted = fit(pending, window, run_s, left_s, rounds)
    undecidable = [c for c in done if c.why.startswith(UNDECIDABLE)]
    if not any(c.run for c in fitted) and undecidable:  # nothing else runs: the top fix is measured all the same
        top = min(undecidable, key=lambda ch: order(ch, pressure))
        done.remove(top)
        fitted.insert(0, _why(top, "run all the same so that one fix is measured: its interval may not decide it"))
    return Plan(tuple(fitted + done), spread)


def busy_first(fix: Fix, pressure: float) -> bool:
    """The busy-machine fix (fewer intra-op threads) on a machine whose CPU pressure is high: it runs first, and the
    job's spread does not rule it out, since on such a machine that spread is the very wait for a core it cuts."""
    return fix is Fix.THREADS and pressure >= BUSY_PRESSURE


def order(c: Choice, pressure: float) -> tuple[int, float]:
    """The busy-machine fix first when the CPU pressure is high; then the largest predicted gain; unpredicted last."""
    first = 0 if busy_first(c.fix, pressure) else 1
    gain = c.predicted.ratio if isinstance(c.predicted, Predicted) else 0.0
    return first, -gain


def fit(pending: list[Choice], window: Window, run_s: float, left_s: float | None, rounds: int) -> list[Choice]:
    """The choices the budget holds, in order: each needs ``rounds`` runs of it (and, lengthened, as many of the job
    as it is at its length); the later rounds' unchanged runs once. The first that needs no lengthened runs always
    runs when nothing before it did."""
    if left_s is None:
        return [_why(c, "run (no --budget)") for c in pending]
    out: list[Choice] = []
    used = run_s * (rounds - 1)  # the later rounds' unchanged runs
    for c in pending:
        cost = cost_s(c, window, run_s) * rounds
        name = f"{c.candidate.label}: " + (
            f"each fix needs {rounds} rounds (a run of it beside a run as it is, each round)"
            if rounds > 1
            else "each fix needs a run beside the first (one round: a ratio without an interval)"
        )
        if c.steps is not None:
            name += (
                f", its runs and theirs lengthened to {c.steps} measured steps so an epoch boundary "
                f"({window.epoch_batches} batches an epoch) falls inside"
            )
        if used + cost <= left_s:
            used += cost
            out.append(_why(c, f"{name}: {cost:.0f}s, within the {left_s:.0f}s left"))
        elif c.steps is None and not any(x.run for x in out):
            used += cost
            over = f"{cost:.0f}s, {used:.0f}s with the job's runs as it is in the later rounds"
            out.append(_why(c, f"{name}: {over}, over the {left_s:.0f}s left, but the top fix is measured"))
        else:
            why = (
                f"left out to keep within --budget: {name}: {cost:.0f}s, and {max(0.0, left_s - used):.0f}s of the "
                f"{left_s:.0f}s was left after the fixes before it"
            )
            out.append(Choice(c.candidate, c.predicted, False, why, c.steps))
    return out


def cost_s(c: Choice, window: Window, run_s: float) -> float:
    """One round's seconds for ``c``: a run, or lengthened, a run of it and one of the job as it is at that length."""
    if c.steps is None:
        return run_s
    return 2 * run_s * (window.warmup + c.steps) / max(1, window.warmup + window.steps)


def _why(c: Choice, why: str) -> Choice:
    """``c`` to run, with ``why`` after any reason it already had."""
    return Choice(c.candidate, c.predicted, True, f"{c.why}; {why}" if c.why else why, c.steps)
