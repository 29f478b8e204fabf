"""``perfsuite bisect``: the first commit between GOOD and BAD where a metric changed.

An exact counter (syncs, ops, bytes, the loader's counts) is the same on every run of the same code on any
machine, so one run per commit decides: a commit whose value differs from GOOD's is on the bad side. The
search is a binary search over the first-parent commits after GOOD up to BAD, each commit checked out in a
git worktree of its own (as ``perfsuite ab`` does) and measured by ``perfsuite exec`` on the user's command
(or by pytest on a perf test, with that worktree first on ``PYTHONPATH``). Every run is recorded in the
history store, and the values found so far are kept in a state file after each run, so an interrupted bisect
resumes where it stopped.

Timing metrics are not bisected here: one run per commit cannot decide them. :mod:`.timing_bisect` probes
each commit with interleaved repeats against GOOD instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.core import metrics as registry
from perfsuite.core import tmpfiles
from perfsuite.core.results import Result
from perfsuite.tools.history.store import HistoryError, HistoryStore, commit_info


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise HistoryError(f"git {' '.join(args)} failed in {repo}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()


def resolve(repo: Path, rev: str) -> str:
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except HistoryError:
        raise HistoryError(f"unknown revision {rev!r} in {repo}; pass a commit, branch or tag") from None


def commits_between(repo: Path, good: str, bad: str) -> list[str]:
    """The first-parent commits after ``good`` up to and including ``bad``, oldest first."""
    proc = subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", good, bad], capture_output=True)
    if proc.returncode != 0:
        raise HistoryError(f"GOOD {good[:10]} is not an ancestor of BAD {bad[:10]}; pass GOOD older than BAD")
    out = _git(repo, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}")
    return [line for line in out.splitlines() if line]


TIMING_KINDS = frozenset({"timing", "noisy"})


def check_metric(name: str) -> str:
    """How ``name`` is bisected: ``exact`` (one run per commit) or ``timing`` (interleaved repeats per probe,
    :mod:`.timing_bisect`)."""
    spec = registry.find(name)
    if spec is None:
        known = ", ".join(s.name for s in registry.all_specs() if s.kind == "exact")
        raise HistoryError(f"--metric {name!r} is not a perfsuite metric; exact ones: {known}; or a timing: step_ms")
    if spec.kind == "exact":
        return "exact"
    if spec.kind in TIMING_KINDS:
        return "timing"
    raise HistoryError(
        f"--metric {name} is a {spec.kind} metric: perfsuite bisect takes an exact counter (one run per commit) "
        "or a timing (interleaved repeats); bisect one of those, or compare two commits with `perfsuite ab GOOD BAD`"
    )


@dataclass
class Measurer:
    """One run of the job at a commit, in a worktree of its own: ``perfsuite exec`` or pytest on a perf test."""

    repo: Path
    command: Sequence[str] = ()  # the user's command after --
    test: str | None = None  # a perf test id instead, run by ``run_test(worktree, out_dir)``
    exec_args: Sequence[str] = ()
    timeout_s: float | None = None
    run_test: Callable[[Path, Path], Result] | None = None

    def __call__(self, sha: str) -> Result:
        tmp = Path(tempfile.mkdtemp(prefix="perfsuite-bisect-"))
        tree = tmp / "tree"
        try:
            _git(self.repo, "worktree", "add", "--detach", "--quiet", str(tree), sha)
            return self._run(tree, tmp)
        finally:
            subprocess.run(
                ["git", "-C", str(self.repo), "worktree", "remove", "--force", str(tree)], capture_output=True
            )
            subprocess.run(["git", "-C", str(self.repo), "worktree", "prune"], capture_output=True)
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)

    def _run(self, tree: Path, tmp: Path) -> Result:
        env = dict(os.environ)
        if self.test is not None:
            if self.run_test is None:
                raise HistoryError("bisect --test needs a test runner (perfsuite bisect passes perfsuite ab's)")
            return self.run_test(tree, tmp / "results")
        out = tmp / "result.json"
        cmd = [sys.executable, "-m", "perfsuite.cli", "exec", *self.exec_args, "--out", str(out), "--", *self.command]
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=self.timeout_s)
        if proc.returncode != 0 or not out.is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise HistoryError(f"perfsuite exec exited {proc.returncode}: {' | '.join(tail)}")
        return Result.from_json(out.read_bytes())


@dataclass
class Culprit:
    commit: str
    subject: str
    before: Any
    after: Any
    parent: str
    sites: str = ""
    runs: int = 0
    candidates: list[str] = field(default_factory=list)

    def describe(self, metric: str) -> str:
        from perfsuite.core.units import metric_value

        moved = f"{metric_value(metric, self.before, counts=False)} -> {metric_value(metric, self.after)}"
        text = f"{self.commit[:12]} {self.subject!r}: {metric} {moved}"
        return text + (f": {self.sites}" if self.sites else "") + f" (first changed after {self.parent[:12]})"


def _value(result: Result, metric: str) -> Any:
    m = result.metric(metric)
    if not m.available:
        raise HistoryError(f"{metric} was unavailable in the run: {m.reason}")
    return m.value


def bisect(
    repo: Path,
    good: str,
    bad: str,
    metric: str,
    measure: Callable[[str], Result],
    store: HistoryStore | None = None,
    state_path: Path | None = None,
    test_name: str | None = None,
    say: Callable[[str], None] = lambda _m: None,
) -> Culprit | None:
    """The first commit after ``good`` whose ``metric`` differs from ``good``'s (None: BAD's equals it)."""
    if check_metric(metric) != "exact":
        raise HistoryError(f"{metric} is a timing: one run per commit cannot decide it; bisect it by probes")
    good, bad = resolve(repo, good), resolve(repo, bad)
    chain = commits_between(repo, good, bad)
    if not chain:
        raise HistoryError(f"no commit between GOOD {good[:10]} and BAD {bad[:10]}")
    state: dict[str, Any] = {"good": good, "bad": bad, "metric": metric, "values": {}}
    if state_path is not None and state_path.is_file():
        saved = json.loads(state_path.read_text(encoding="utf-8"))
        if (saved.get("good"), saved.get("bad"), saved.get("metric")) == (good, bad, metric):
            state = saved
            say(f"resuming: {len(state['values'])} commit(s) measured before")
    results: dict[str, Result] = {}
    runs = 0

    def value_at(sha: str) -> Any:
        nonlocal runs
        if sha in state["values"] and sha not in results:
            return state["values"][sha]
        if sha not in results:
            say(f"measuring {sha[:12]} ...")
            results[sha] = measure(sha)
            runs += 1
            state["values"][sha] = _value(results[sha], metric)
            if state_path is not None:
                tmpfiles.write_json_atomic(state_path, state)
            if store is not None:
                when = commit_info(repo, sha)
                store.record(results[sha], sha, when[1], when[2], test=test_name)
            say(f"  {sha[:12]}: {metric} = {state['values'][sha]}")
        return state["values"][sha]

    reference = value_at(good)
    if value_at(bad) == reference:
        return None
    lo, hi = -1, len(chain) - 1  # chain[hi] differs; chain[lo] (or GOOD at -1) equals GOOD's value
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if value_at(chain[mid]) == reference:
            lo = mid
        else:
            hi = mid
    culprit, parent = chain[hi], chain[lo] if lo >= 0 else good
    sha, _when, subject = commit_info(repo, culprit)
    found = Culprit(
        sha,
        subject,
        state["values"].get(parent, reference),
        state["values"][culprit],
        parent,
        runs=runs,
        candidates=chain,
    )
    for side in (parent, culprit):  # the call sites need both Results: measure a side only known from the state
        if side not in results:
            results[side] = measure(side)
            found.runs += 1
    before, after = results[parent].metric(metric), results[culprit].metric(metric)
    if before.detail or after.detail:
        from perfsuite.judge.sites import describe, site_changes

        changes = site_changes(before.detail or {}, after.detail or {})
        found.sites = describe(changes) if changes else ""
    return found
