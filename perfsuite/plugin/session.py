"""The plugin's library half: judge one test's Results against thresholds and stored baselines.

plugin.py only translates between pytest and this module, so the rules live
here, testable without pytest:

* thresholds are the test's marker bounds, overridden by ``[tool.perfsuite]``
  bounds for the run's machine class (see settings.machine_thresholds);
* an unavailable metric is never a pass: its threshold is ``unavailable``
  with the reason, and a test whose thresholds are all unavailable (and
  which nothing else judged) is skipped with those reasons;
* comparing: exact metrics are checked against the committed file for the
  run's device type and torch version (:mod:`perfsuite.judge.exact`, found in
  ``exact_dir`` whatever the timing baselines directory is), on any machine; a
  test with no committed values fails unless ``allow_missing_exact``. Timings
  are checked against this machine's stored baseline: a missing one is
  ``new``, one from another fingerprint is refused unless forced, a corrupt
  one is an error naming the file. Saving overwrites only because saving was
  asked for, and ``update_exact`` rewrites the committed exact values, never
  from an interrupted session.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.core import metrics as registry
from perfsuite.core.results import Result
from perfsuite.errors import BaselineError, FingerprintMismatch
from perfsuite.judge import causes
from perfsuite.judge.baselines import BaselineStore
from perfsuite.judge.engine import compare_results
from perfsuite.judge.exact import (
    UPDATE_HINT,
    ExactBaselines,
    check_exact,
    exact_breakdown,
    exact_values,
    key_for,
    missing_verdict,
    stale_entries,
)
from perfsuite.judge.settings import loader_settings
from perfsuite.judge.thresholds import check_thresholds, parse_thresholds
from perfsuite.judge.verdict import NO_BASELINE, Outcome, Verdict
from perfsuite.plugin.settings import Settings, machine_thresholds, machine_tuned

# Baseline outcomes that count as having judged the test (new and unavailable do not).
_DECISIVE = frozenset({Outcome.PASS, Outcome.FAIL, Outcome.REGRESSED, Outcome.IMPROVED, Outcome.UNCHANGED})


@dataclass(frozen=True)
class Recorded:
    """One Result a test produced. ``check`` False exempts it from the thresholds (not from baselines)."""

    result_id: str
    result: Result
    check: bool = True


@dataclass
class Judgement:
    """What one test's results came to: verdicts, failure lines, unavailable thresholds."""

    verdicts: list[Verdict] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    unavailable: list[str] = field(default_factory=list)
    thresholds: int = 0
    decided: bool = False
    saved: list[Path] = field(default_factory=list)
    tuned: dict[str, Any] = field(default_factory=dict)  # the knobs perfsuite tune chose (pyproject), if any

    @property
    def skip_reason(self) -> str | None:
        """Set when the test had thresholds, none could be measured here, and nothing else judged it."""
        if self.failures or self.decided or not self.thresholds or not self.unavailable:
            return None
        return "perfsuite: no threshold could be checked on this machine: " + "; ".join(self.unavailable)


class PerfSession:
    """Judges tests one by one and keeps every verdict for the session's summary and reports."""

    def __init__(self, settings: Settings, update_command: str = UPDATE_HINT) -> None:
        self.settings = settings
        self.update_command = update_command  # this session's own command line with --perfsuite-update-exact
        self.store = BaselineStore(settings.baselines)
        self.verdicts: list[Verdict] = []
        self.results: dict[str, Result] = {}
        self.problems: list[str] = []
        self.saved: list[Path] = []
        self.exact: dict[str, ExactBaselines] = {}
        self.exact_counts: dict[str, tuple[int, int]] = {}  # result id -> (held, checked)
        self.exact_sources: dict[str, str] = {}  # result id -> what its exact metrics were held against
        self.exact_missing: list[str] = []  # result ids with no committed exact values
        self.recorded: dict[str, list[str]] = {}  # exact key -> result ids recorded (update_exact)
        self.stale: dict[str, list[str]] = {}  # exact key -> committed ids of tests that no longer exist
        self.timing_new: list[str] = []
        self.exact_failed = 0
        self.interrupted: str | None = None  # why the session was cut short (Ctrl-C), if it was

    def exact_store(self, result: Result) -> ExactBaselines:
        return self.exact_store_for(key_for(result.fingerprint))

    def exact_store_for(self, key: str) -> ExactBaselines:
        """The committed exact file for ``key``, read once; a damaged file raises each time it is asked for."""
        if key not in self.exact:
            store = ExactBaselines(self.settings.exact_dir, key)
            store.load(self.update_command)
            self.exact[key] = store
        return self.exact[key]

    def find_stale(self, collected: Iterable[str], root: Path, partial_files: Iterable[str] = ()) -> None:
        """Note the committed entries of tests that no longer exist (see exact.stale_entries); with
        ``update_exact``, drop them from the file that is being rewritten. ``partial_files`` were selected
        by node id, so what was not collected of them is not gone."""
        for key, store in self.exact.items():
            gone = stale_entries(store.tests, collected, root, partial_files)
            if gone:
                self.stale[key] = gone
            if self.settings.update_exact and not self.interrupted:
                store.remove(gone)

    def finish(self) -> list[Path]:
        """Write the committed exact files that ``update_exact`` changed; their paths. Nothing after an interrupt:
        a file rewritten from part of a session would drop the values of the tests that did not run."""
        if self.interrupted:
            return []
        return [store.save() for store in self.exact.values() if store.changed]

    def bounds_for(self, result: Result, marker_bounds: Mapping[str, Any], test_name: str, nodeid: str) -> dict:
        machine = result.fingerprint.machine_class
        return {**marker_bounds, **machine_thresholds(self.settings, machine, test_name, nodeid)}

    def judge(
        self, records: list[Recorded], marker_bounds: Mapping[str, Any], test_name: str, nodeid: str
    ) -> Judgement:
        out = Judgement()
        try:
            for rec in records:
                self.results[rec.result_id] = rec.result
                out.tuned = machine_tuned(self.settings, rec.result.fingerprint.machine_class, test_name, nodeid)
                if rec.check:
                    self._thresholds(rec, self.bounds_for(rec.result, marker_bounds, test_name, nodeid), out)
                if self.settings.compare:
                    self._check_exact(rec, out)
                    self._compare(rec, out)
                if self.settings.update_exact:
                    try:
                        store = self.exact_store(rec.result)
                        store.record(
                            rec.result_id,
                            exact_values(rec.result),
                            exact_breakdown(rec.result),
                            loader_settings(rec.result),
                        )
                        self.recorded.setdefault(store.key, []).append(rec.result_id)
                    except BaselineError as exc:
                        self._problem(out, f"baseline error: {exc}")
                if self.settings.save and not self.interrupted:
                    self._save(rec, out)
        finally:  # whatever goes wrong with one record, the verdicts reached so far stay in the report
            self.verdicts += out.verdicts
        return out

    def _thresholds(self, rec: Recorded, bounds: Mapping[str, Any], out: Judgement) -> None:
        out.thresholds += len(bounds)
        for verdict in check_thresholds(rec.result, rec.result_id, parse_thresholds(bounds)):
            if verdict.outcome is Outcome.UNAVAILABLE:
                out.unavailable.append(verdict.message)
            else:
                out.decided = True
            out.verdicts.append(self._explained(verdict, rec.result, out))

    def _save(self, rec: Recorded, out: Judgement) -> None:
        try:
            path = self.store.save(rec.result, rec.result_id, overwrite=True, keep_runs=self.settings.baseline_runs)
        except OSError as exc:  # a full disk, a read-only or missing directory: one line, the test fails
            where = self.store.path_for(rec.result.fingerprint, rec.result_id)
            self._problem(
                out,
                f"baseline error: cannot save {where}: {exc.strerror or exc}; free space or pass "
                "--perfsuite-baselines a writable directory",
            )
            return
        out.saved.append(path)
        self.saved.append(path)

    def _check_exact(self, rec: Recorded, out: Judgement) -> None:
        """Exact metrics against the committed file for this device type and torch version."""
        if self.settings.update_exact:
            return  # being rewritten from this run: nothing to hold it against
        try:
            store = self.exact_store(rec.result)
        except BaselineError as exc:
            self._problem(out, f"baseline error: {exc}")
            return
        s = self.settings
        if not store.loaded:
            verdict = missing_verdict(
                rec.result_id,
                f"{store.path} (no committed exact file for {store.key})",
                self.update_command,
                s.allow_missing_exact,
            )
            verdicts = [verdict]
        else:
            verdicts = check_exact(
                store.expected(rec.result_id),
                rec.result,
                rec.result_id,
                store.display,
                self.update_command,
                store.expected_breakdown(rec.result_id),
                s.allow_missing_exact,
                store.expected_settings(rec.result_id),
                libraries=store.libraries,
            )
        if store.expected(rec.result_id) is None:
            self.exact_missing.append(rec.result_id)
        else:
            checked = [v for v in verdicts if v.outcome is not Outcome.NEW]
            self._count_exact(rec.result_id, checked, store.display)
        for verdict in verdicts:
            out.decided |= verdict.outcome in _DECISIVE
            out.verdicts.append(self._explained(verdict, rec.result, out))

    def _count_exact(self, result_id: str, checked: list[Verdict], source: str) -> None:
        held = sum(v.outcome is Outcome.UNCHANGED for v in checked)
        self.exact_counts[result_id] = (held, len(checked))
        self.exact_sources[result_id] = source
        self.exact_failed += sum(v.failed for v in checked)

    def _compare(self, rec: Recorded, out: Judgement) -> None:
        head, rid, s = rec.result, rec.result_id, self.settings
        try:
            base = self.store.load(head.fingerprint, rid)
            if base is None:
                # Timing baselines are per machine: another machine's (a GPU runner's, committed beside this one's)
                # is no baseline here. --perfsuite-force compares with it anyway.
                other = self.store.load_any(rid)
                if other is None or not s.force:
                    self.timing_new.append(rid)
                    elsewhere = (
                        f" (one from {other.fingerprint.key()!r} is there: timings from different machines do not "
                        "compare; --perfsuite-force compares with it anyway)"
                        if other is not None
                        else ""
                    )
                    out.verdicts.append(
                        Verdict(
                            rid,
                            "timing",
                            None,
                            None,
                            None,
                            Outcome.NEW,
                            f"no timing baseline for this machine under {self.store.root / head.fingerprint.key()}"
                            + elsewhere,
                            unjudged=NO_BASELINE,
                        )
                    )
                    return
                base = other
            committed = self.exact_store(head).expected(rid) is not None
            runs = (
                self.store.load_runs(head.fingerprint, rid) if base.fingerprint.key() == head.fingerprint.key() else []
            )
            verdicts = compare_results(
                base,
                head,
                rid,
                factor=s.factor,
                alpha=s.alpha,
                force=s.force,
                only=(lambda spec: not spec.exact) if committed else None,
                base_runs=runs,
                runs_needed=s.baseline_runs,
            )
        except FingerprintMismatch as exc:
            self._problem(out, f"comparison refused: {exc}")
            return
        except BaselineError as exc:
            replaced = " (--perfsuite-save replaces it with this run's result)" if s.save else ""
            self._problem(out, f"baseline error: {exc}{replaced}")
            return
        if not committed:  # the exact metrics were judged against this machine's baseline: count them there
            exact = [v for v in verdicts if registry.find(v.metric) is not None and registry.get(v.metric).exact]
            judged = (Outcome.UNCHANGED, Outcome.REGRESSED, Outcome.IMPROVED, Outcome.CHANGED)
            self._count_exact(rid, [v for v in exact if v.outcome in judged], "this machine's baselines")
        for verdict in verdicts:
            if verdict.outcome is Outcome.UNAVAILABLE and not base.metric(verdict.metric).available:
                continue  # unmeasurable on both sides (gpu_util on a CPU): nothing was compared, nothing lost
            out.decided |= verdict.outcome in _DECISIVE
            out.verdicts.append(self._explained(verdict, head, out, base))

    def _explained(self, verdict: Verdict, result: Result, out: Judgement, base: Result | None = None) -> Verdict:
        if not verdict.failed:
            return verdict
        cause = causes.with_tuning(causes.explain(verdict, result, base), result, out.tuned)
        out.failures.append(f"{verdict.test_id}: {causes.failure_line(verdict, cause)}")
        return verdict.with_cause(str(cause) if cause else None)

    def _problem(self, out: Judgement, message: str) -> None:
        out.failures.append(message)
        self.problems.append(message)
