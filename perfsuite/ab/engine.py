"""``perfsuite ab BASE HEAD [pytest args]``: two revisions, interleaved in one session, on one machine.

Comparing one stored run with one fresh run cannot separate a 10% slowdown
from a shared machine's drift (docs/baselines.md). This
command compares within one session instead:

1. Both revisions are checked out with ``git worktree add --detach`` into a
   temporary directory, always removed at the end.
2. Their dependencies are compared (``pyproject.toml``'s build requirements,
   dependencies and extras, and ``requirements*.txt``). When they match,
   both sides run in the current environment, each with ``PYTHONPATH``
   pointing at its own worktree (so the code under test, perfsuite itself
   included, is that revision's). When they differ, each side whose
   requirements changed runs in a virtual environment layered over the
   current one with only the changed requirements installed
   (:mod:`perfsuite.ab.envs`; ``--env current|venv`` overrides).
3. Rounds of four fresh ``python -m pytest <args> --perfsuite-save`` processes
   run in ABBA or BAAB order (random, seeded); each writes its Results to a
   private directory.
4. :mod:`perfsuite.judge.adaptive` turns each test's per-run step time (per sample;
   the run's fastest step by default, ``--statistic``) into pairs and a three-way verdict; rounds continue while a test
   is unknown, until ``--max-rounds`` or the ``--budget``. After
   ``--min-rounds``, a round runs only the tests still unknown (decided ones
   are passed to pytest as ``--deselect``), so the budget goes where it decides.
5. Exact metrics are judged by the verdict engine (:func:`compare_results`,
   exact kinds) on the first base and head runs; the step-time tail (p99,
   max, stalls) with the same paired rule at wider factors.

Exit status: 0 nothing regressed, 1 a regression (timing, tail or exact),
2 bad input (not a git repository, an unknown revision, a side's
environment that cannot be built, no perf test selected).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from perfsuite.ab.envs import prepare as prepare_envs
from perfsuite.core.pytest_cmd import plugin_args
from perfsuite.core.results import Result
from perfsuite.errors import PerfsuiteError
from perfsuite.judge.adaptive import DEFAULT_RULE, ABOutcome, ABRule, AdaptiveAB, Decision, RunValues, decide
from perfsuite.judge.contention import contended_run

DEFAULT_BUDGET_S = 900.0
DEFAULT_MAX_ROUNDS = 20
# The tail's paired rules: per-run p99 and max as multiples of the run's median, and stall counts (+1, so
# none -> some is a ratio), judged on the pairs with the same rule as the median at wider factors.
TAIL_RULES = {
    "step_ms_p99": ABRule(factor=1.25, margin=1.25),
    "step_ms_max": ABRule(factor=1.5, margin=1.5),
    "stalls": ABRule(factor=2.0, margin=2.0),
}
SHOWN = ("samples_per_s", "input_efficiency", "data_wait_frac")


class ABError(PerfsuiteError):
    """Bad input to ``perfsuite ab``: exit status 2."""


# --------------------------------------------------------------------------- git


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ABError(f"git {' '.join(args)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()


def repo_root(path: Path) -> Path:
    proc = subprocess.run(["git", "-C", str(path), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ABError(
            f"{path} is not inside a git repository; run perfsuite ab from your project's clone or pass --repo DIR"
        )
    return Path(proc.stdout.strip())


def resolve_rev(repo: Path, rev: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise ABError(
            f"unknown revision {rev!r} in {repo}; pass a commit, branch or tag, e.g. HEAD~1 or "
            "origin/main (for a pull request: `git merge-base origin/main HEAD`)"
        )
    return proc.stdout.strip()


class Worktrees:
    """``git worktree add`` both revisions into one temporary directory; removed on exit, whatever happens."""

    def __init__(self, repo: Path, shas: Mapping[str, str]) -> None:
        self.repo, self.shas = repo, dict(shas)
        self.tmp = Path(tempfile.mkdtemp(prefix="perfsuite-ab-"))
        self.paths: dict[str, Path] = {}

    def __enter__(self) -> Worktrees:
        try:
            for side, sha in self.shas.items():
                path = self.tmp / side
                _git(self.repo, "worktree", "add", "--detach", "--quiet", str(path), sha)
                self.paths[side] = path
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        for path in self.paths.values():
            subprocess.run(
                ["git", "-C", str(self.repo), "worktree", "remove", "--force", str(path)], capture_output=True
            )
        shutil.rmtree(self.tmp, ignore_errors=True)
        subprocess.run(["git", "-C", str(self.repo), "worktree", "prune"], capture_output=True)


# --------------------------------------------------------------------------- one run


@dataclass
class SideRun:
    """One pytest process of one side: its Results by test id, or why there are none."""

    side: str
    results: dict[str, Result]
    seconds: float
    returncode: int
    log_tail: str = ""


def run_side(
    side: str, worktree: Path, pytest_args: Sequence[str], out_dir: Path, python: str, timeout_s: float | None
) -> SideRun:
    """``python -m pytest <args> --perfsuite-save --perfsuite-baselines <out_dir>`` in the side's worktree."""
    from perfsuite.report.compare import load_side

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(worktree), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("PYTEST_XDIST_WORKER", None)
    cmd = [
        python,
        "-m",
        "pytest",
        *pytest_args,
        *plugin_args(),
        "-p",
        "no:cacheprovider",
        "-q",
        "--perfsuite-save",
        "--perfsuite-baselines",
        str(out_dir),
    ]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=worktree, env=env, capture_output=True, text=True, timeout=timeout_s)
        code, log = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, log = -1, f"timed out after {timeout_s:.0f} s\n" + str(exc.stdout or "")[-2000:]
    seconds = time.perf_counter() - start
    results: dict[str, Result] = {}
    if out_dir.is_dir() and any(out_dir.rglob("*.json")):
        results = load_side(out_dir)
    return SideRun(side, results, seconds, code, log[-3000:])


# The per-run statistic of step times the paired verdict is on. Contention only ever adds time to a step, so a
# run's fastest steps are its least disturbed. Measured on the power table's pools (docs/ab.md; chosen on those same
# pools, so in-sample): per-pair spread of log ratios, quiet / one busy process: median 0.115 / 0.307, p10
# 0.099 / 0.176, min 0.126 / 0.206; real +10% detected (<= 15 rounds) under one busy process: median 13%,
# p10 91.5%, min 98.5%, A/A false alarms 0.5%, 2.0%, 0.5%. Quiet, all three: 0% and 100%.
RUN_STATISTICS = {
    "min": lambda steps: float(np.min(steps)),
    "p10": lambda steps: float(np.percentile(steps, 10)),
    "median": lambda steps: float(np.median(steps)),
}
DEFAULT_STATISTIC = "min"


def run_statistic(step_ms: Sequence[float] | np.ndarray, name: str = DEFAULT_STATISTIC) -> float:
    """One run's step time (ms) by ``name`` (:data:`RUN_STATISTICS`); NaN for a run without steps."""
    steps = np.asarray(step_ms, dtype=float)
    return RUN_STATISTICS[name](steps) if steps.size else float("nan")


def per_run_values(result: Result, statistic: str = DEFAULT_STATISTIC) -> RunValues:
    """The per-run statistic (step time per sample, ms; :func:`run_statistic`) and the tail's per-run values."""
    steps = np.asarray(result.samples.get("step_ms", []), dtype=float)
    if steps.size == 0:
        return RunValues(float("nan"))
    batch = max(1, result.batch_size)
    med = float(np.median(steps))
    # The tail relative to the run's own median (a uniformly slower run has the same tail); stalls + 1.
    extras = {
        "step_ms_p99": float(np.percentile(steps, 99)) / med,
        "step_ms_max": float(steps.max()) / med,
        "stalls": float((steps > 5.0 * med).sum()) + 1.0,
    }
    for name in SHOWN:
        value = result.value(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            extras[name] = float(value)
    return RunValues(run_statistic(steps, statistic) / batch, extras)


def counted_values(result: Result, statistic: str, where: str, contended: list[str]) -> RunValues | None:
    """The run's values, or None (its pair dropped, a later round repeats it) when its machine was contended.

    A contended run is listed in ``contended`` with its figures (perfsuite.judge.contention): an interleaved
    round in which one side waited for a neighbour is not averaged in.
    """
    busy = contended_run(result)
    if busy:
        contended.append(f"{where}: {busy}")
        return None
    return per_run_values(result, statistic)


# --------------------------------------------------------------------------- the session


@dataclass
class TestReport:
    test_id: str
    decision: Decision
    decided_at: int | None
    tails: dict[str, Decision] = field(default_factory=dict)
    exact: list[Any] = field(default_factory=list)  # Verdicts of the engine
    shown: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    @property
    def exact_failed(self) -> list[Any]:
        return [v for v in self.exact if v.failed]

    @property
    def tail_regressed(self) -> list[str]:
        return [m for m, d in self.tails.items() if d.outcome is ABOutcome.REGRESSED]

    @property
    def verdict(self) -> str:
        if self.decision.outcome is ABOutcome.REGRESSED or self.exact_failed or self.tail_regressed:
            return "regressed"
        return self.decision.outcome.value


@dataclass
class ABSession:
    base_rev: str
    head_rev: str
    base_sha: str
    head_sha: str
    rule: ABRule
    env: str
    statistic: str = DEFAULT_STATISTIC
    loop: AdaptiveAB | None = None
    tests: list[TestReport] = field(default_factory=list)
    elapsed_s: float = 0.0
    runs: int = 0
    run_seconds: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    stopped: str = ""
    contended: list[str] = field(default_factory=list)  # runs whose pair was not counted (judge.contention)

    @property
    def regressed(self) -> bool:
        return any(t.verdict == "regressed" for t in self.tests)


class Progress:
    """One updating line on a terminal; plain lines elsewhere (CI logs, pipes)."""

    def __init__(self, stream: TextIO, tty: bool | None = None) -> None:
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self._width = 0

    def update(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r" + text.ljust(self._width))
            self._width = max(self._width, len(text))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self._width:
            self.stream.write("\n")
            self.stream.flush()


def run_ab(
    repo: Path,
    base_rev: str,
    head_rev: str,
    pytest_args: Sequence[str],
    *,
    rule: ABRule = DEFAULT_RULE,
    budget_s: float = DEFAULT_BUDGET_S,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    min_rounds: int = 3,
    seed: int = 0,
    env_mode: str = "auto",
    statistic: str = DEFAULT_STATISTIC,
    python: str | None = None,
    progress: Progress | None = None,
) -> ABSession:
    """Check out both revisions, run interleaved rounds until decided or out of budget, judge."""
    repo = repo_root(repo)
    base_sha, head_sha = resolve_rev(repo, base_rev), resolve_rev(repo, head_rev)
    session = ABSession(base_rev, head_rev, base_sha, head_sha, rule, env="", statistic=statistic)
    start = time.perf_counter()
    first: dict[str, dict[str, Result]] = {}
    with Worktrees(repo, {"A": base_sha, "B": head_sha}) as trees:
        envs, session.env = prepare_envs(env_mode, repo, trees.shas, trees.paths, trees.tmp, python)
        runs_dir = trees.tmp / "runs"
        loop = AdaptiveAB(rule, seed)
        session.loop = loop
        round_s: list[float] = []  # each round's measured time: the longest so far is the next one's expectation
        for r in range(max_rounds):
            if r >= min_rounds and loop.done():
                session.stopped = "every test decided"
                break
            if round_s and budget_overrun(time.perf_counter() - start, round_s, budget_s):
                session.stopped = (
                    f"time budget {budget_s:.0f} s: another round would end at about "
                    f"{time.perf_counter() - start + max(round_s):.0f} s (the longest round so far took "
                    f"{max(round_s):.0f} s)"
                )
                break
            round_start = time.perf_counter()
            order = loop.next_order()
            deselect = decided_nodes(loop) if r >= min_rounds else []
            round_args = [*pytest_args, *(arg for node in deselect for arg in ("--deselect", node))]
            values: dict[str, list[RunValues | None]] = {}
            for i, side in enumerate(order):
                if progress:
                    progress.update(_progress_text(loop, r, max_rounds, order, i, start, budget_s))
                remaining = budget_s * 1.5 - (time.perf_counter() - start)
                run = run_side(
                    side,
                    trees.paths[side],
                    round_args,
                    runs_dir / f"r{r:03d}-{i}{side}",
                    envs[side].python,
                    timeout_s=max(60.0, remaining),
                )
                session.runs += 1
                session.run_seconds.append(run.seconds)
                if not run.results:
                    if r == 0:
                        raise ABError(
                            f"the {'BASE' if side == 'A' else 'HEAD'} run ({side}, "
                            f"{base_rev if side == 'A' else head_rev}) produced no perf results "
                            f"(pytest exit {run.returncode}); do the pytest arguments select perf tests "
                            f"there? Its output ends:\n{run.log_tail}"
                        )
                    session.problems.append(
                        f"round {r + 1}, run {i + 1} ({side}): no results (pytest exit {run.returncode})"
                    )
                if run.returncode not in (0, 1) and run.results:
                    session.problems.append(f"round {r + 1}, run {i + 1} ({side}): pytest exit {run.returncode}")
                first.setdefault(side, run.results)
                for test_id, result in run.results.items():
                    where = f"round {r + 1}, run {i + 1} ({side}) `{test_id}`"
                    slot = values.setdefault(test_id, [None] * len(order))
                    slot[i] = counted_values(result, statistic, where, session.contended)
            loop.add_round(order, values)
            round_s.append(time.perf_counter() - round_start)
        else:
            session.stopped = f"--max-rounds {max_rounds}"
    if progress:
        progress.update(_progress_text(loop, len(loop.orders), max_rounds, "", 0, start, budget_s, final=True))
        progress.close()
    session.elapsed_s = time.perf_counter() - start
    session.tests = [_judge_test(test_id, loop, first) for test_id in sorted(loop.tracks)]
    return session


def budget_overrun(elapsed_s: float, round_s: Sequence[float], budget_s: float) -> bool:
    """Whether another round, expected to take as long as the longest measured so far, would end past the budget.

    The longest, not the mean: rounds vary (a neighbour's load, a test's slow start), and a mean-sized
    estimate let a session end past its budget. After ``--min-rounds`` rounds run fewer tests, so the
    longest round is an upper bound of the next.
    """
    return bool(round_s) and elapsed_s + max(round_s) > budget_s


def decided_nodes(loop: AdaptiveAB) -> list[str]:
    """Pytest node ids whose every result is decided: later rounds deselect them and spend their time on the rest.

    A result id is the node id, or ``node#label`` for a test with several
    ``perf_run`` calls; a node is skipped only when all of its results are
    decided (a decision is frozen, so further runs of it would not change it).
    """
    open_nodes = {test_id.split("#", 1)[0] for test_id in loop.pending()}
    return sorted({t.split("#", 1)[0] for t in loop.tracks} - open_nodes)


def _progress_text(
    loop: AdaptiveAB, r: int, max_rounds: int, order: str, i: int, start: float, budget: float, final: bool = False
) -> str:
    decided = len(loop.tracks) - len(loop.pending())
    elapsed = time.perf_counter() - start
    where = "done" if final else f"round {r + 1}/{max_rounds} {order} run {i + 1}/4"
    return f"perfsuite ab: {where}; {decided}/{len(loop.tracks) or '?'} tests decided; {elapsed:.0f}/{budget:.0f} s"


def _judge_test(test_id: str, loop: AdaptiveAB, first: Mapping[str, Mapping[str, Result]]) -> TestReport:
    from perfsuite.judge.engine import compare_results

    track = loop.tracks[test_id]
    report = TestReport(test_id, track.decision, track.decided_at)
    for metric, tail_rule in TAIL_RULES.items():
        pairs = [
            (b.extras[metric], h.extras[metric]) for b, h in track.pairs if metric in b.extras and metric in h.extras
        ]
        if pairs:
            report.tails[metric] = decide(pairs, tail_rule)
    for name in SHOWN:
        b = [p[0].extras[name] for p in track.pairs if name in p[0].extras]
        h = [p[1].extras[name] for p in track.pairs if name in p[1].extras]
        if b or h:
            report.shown[name] = (_median(b), _median(h))
    base, head = first.get("A", {}).get(test_id), first.get("B", {}).get(test_id)
    if base is None or head is None:
        report.missing.append("BASE" if base is None else "HEAD")
    else:
        report.exact = compare_results(base, head, test_id, force=True, only=lambda spec: spec.exact)
    return report


def _median(values: Sequence[float]) -> float | None:
    if not values:
        return None
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


# --------------------------------------------------------------------------- reports


def _ratio_text(d: Decision) -> str:
    if d.ratio is None:
        return "-"
    return f"x{d.ratio:.3f} (x{d.low:.3f}..x{d.high:.3f})"


def to_dict(s: ABSession) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "base": {"rev": s.base_rev, "sha": s.base_sha},
        "head": {"rev": s.head_rev, "sha": s.head_sha},
        "environment": s.env,
        "rule": {
            "factor": s.rule.factor,
            "margin": s.rule.margin,
            "alpha": s.rule.alpha,
            "confidence": s.rule.confidence,
            "min_pairs": s.rule.min_pairs,
            "statistic": s.statistic,
        },
        "rounds": len(s.loop.orders) if s.loop else 0,
        "orders": list(s.loop.orders) if s.loop else [],
        "runs": s.runs,
        "elapsed_s": round(s.elapsed_s, 3),
        "stopped": s.stopped,
        "problems": s.problems,
        "contended": s.contended,
        "regressed": s.regressed,
        "tests": [
            {
                "test_id": t.test_id,
                "verdict": t.verdict,
                "step_ms_per_sample": t.decision.to_dict(),
                "decided_at_round": t.decided_at,
                "tails": {m: d.to_dict() for m, d in t.tails.items()},
                "exact": [v.to_dict() for v in t.exact],
                "shown": {m: {"base": b, "head": h} for m, (b, h) in t.shown.items()},
                "missing": t.missing,
            }
            for t in s.tests
        ],
    }


def format_markdown(s: ABSession) -> str:
    counts: dict[str, int] = {}
    for t in s.tests:
        counts[t.verdict] = counts.get(t.verdict, 0) + 1
    summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items(), key=lambda kv: _ORDER.index(kv[0]))) or "no tests"
    rounds = len(s.loop.orders) if s.loop else 0
    lines = [
        f"**perfsuite ab:** {summary}: `{s.head_rev}` ({s.head_sha[:10]}) against `{s.base_rev}` ({s.base_sha[:10]})",
        "",
        f"{rounds} rounds of interleaved fresh processes (ABBA/BAAB at random), {s.runs} runs, "
        f"{s.elapsed_s:.0f} s; stopped: {s.stopped or '-'}; {s.env}. Rule: regressed when slower than "
        f"x{s.rule.factor:g} with signed-rank p < {s.rule.alpha:g}; same when the {s.rule.confidence:.0%} interval "
        f"lies within ±{(s.rule.margin - 1):.0%}.",
        "",
        f"| test | verdict | {s.statistic} step ms/sample, median over runs (base -> head) | ratio (CI) | pairs "
        "| what decided it / what would |",
        "|---|---|---:|---:|---:|---|",
    ]
    for t in sorted(s.tests, key=lambda t: (_ORDER.index(t.verdict), t.test_id)):
        d = t.decision
        medians = _side_medians(s, t.test_id)
        why = d.reason if d.outcome is not ABOutcome.UNKNOWN else f"{d.reason}; {d.needs}"
        if t.exact_failed:
            why = f"exact: {len(t.exact_failed)} regressed; timing {d.outcome.value}: {why}"
        elif t.exact:
            held = sum(v.outcome.value == "unchanged" for v in t.exact)
            why = f"exact: {held}/{len(t.exact)} unchanged; timing: {why}"
        lines.append(f"| `{t.test_id}` | **{t.verdict}** | {medians} | {_ratio_text(d)} | {d.pairs} | {_cell(why)} |")
    details = []
    for t in s.tests:
        for v in t.exact_failed:
            details.append(f"- `{t.test_id}`: {v.outcome.value}: {v.message}" + (f" — {v.cause}" if v.cause else ""))
        for metric in t.tail_regressed:
            details.append(f"- `{t.test_id}`: {metric} regressed (per-run, paired): {t.tails[metric].reason}")
        if t.missing:
            details.append(f"- `{t.test_id}`: no results on {', '.join(t.missing)}")
    if details:
        lines += ["", "**Exact and tail findings**", "", *details]
    shown = [t for t in s.tests if t.shown or t.tails]
    if shown:
        lines += [
            "",
            "<details><summary>tail, throughput and input efficiency per test (medians over runs)</summary>",
            "",
            "| test | metric | base | head | verdict |",
            "|---|---|---:|---:|---|",
        ]
        for t in shown:
            for m, (b, h) in t.shown.items():
                lines.append(f"| `{t.test_id}` | {m} | {_num(b)} | {_num(h)} | shown |")
            for m, d in t.tails.items():
                b, h = _tail_medians(t, m, s)
                label = f"{m} (x the run's median)" if m != "stalls" else "stalls (steps > 5x median)"
                lines.append(f"| `{t.test_id}` | {label} | {_num(b)} | {_num(h)} | {d.outcome.value} |")
        lines += ["", "</details>"]
    if s.problems:
        lines += ["", "**Problems**", "", *(f"- {p}" for p in s.problems)]
    if s.contended:
        lines += [
            "",
            f"**Contended runs** ({len(s.contended)}): their pairs were not counted; later rounds replace them",
            "",
            *(f"- {c}" for c in s.contended[:20]),
            *([f"- ... and {len(s.contended) - 20} more"] if len(s.contended) > 20 else []),
        ]
    return "\n".join(lines) + "\n"


_ORDER = ["regressed", "unknown", "improved", "same"]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _num(v: float | None) -> str:
    from perfsuite.judge.verdict import format_value

    return format_value(v)


def _side_medians(s: ABSession, test_id: str) -> str:
    track = s.loop.tracks[test_id] if s.loop else None
    if not track or not track.pairs:
        return "-"
    b = _median([p[0].value for p in track.pairs])
    h = _median([p[1].value for p in track.pairs])
    return f"{_num(b)} -> {_num(h)}"


def _tail_medians(t: TestReport, metric: str, s: ABSession) -> tuple[float | None, float | None]:
    track = s.loop.tracks[t.test_id] if s.loop else None
    if not track:
        return None, None
    shift = 1.0 if metric == "stalls" else 0.0
    b = _median([p[0].extras[metric] - shift for p in track.pairs if metric in p[0].extras])
    h = _median([p[1].extras[metric] - shift for p in track.pairs if metric in p[1].extras])
    return b, h
