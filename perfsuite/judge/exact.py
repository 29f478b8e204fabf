"""Committed exact baselines: what each test's deterministic metrics must be, checked on every machine.

Exact metrics (syncs per step, graph breaks, ops and bytes per step, FLOPs,
AMP fractions, label violations; see :mod:`perfsuite.core.metrics`) depend on the
code, the torch version and the device type, not on the machine. So they
live in one reviewable file per device type and torch minor version,
committed to the repo and checked wherever the suite runs, a fresh CPU CI
included::

    baselines/exact/cpu__torch-2.13.json
    {
      "schema_version": 2, "device": "cpu", "torch": "2.13",
      "tests": {"tests/perf/test_step.py::test_x": {"syncs_per_step": 0, "graph_breaks": null, ...}},
      "libraries": {"Pillow": "13.0.0", "numpy": "2.4.6", ...},
      "breakdown": {"tests/perf/test_step.py::test_x": {"ops_per_step": {"aten::addmm": 2, ...},
                                                        "h2d_bytes_per_step": {"uint8": 131072}}}
    }

``null`` means "unavailable" (nothing compiled, say): becoming measurable is a
change too. ``breakdown`` keeps what each count is made of (ops by name, bytes
by dtype), one entry per line, so a failure names what moved and the file's
diff shows it in review. A count probes keep by call site (ops, FLOPs, bytes,
the loader's calls) has a second entry, ``"<metric> by site"``, keyed by
line-free labels (op, file, function and code: :func:`perfsuite.probes.sites.labelled`),
so a failure names the line whose count moved, and an edit above it changes
nothing. Schema 1 files (no breakdown) are still read. ``libraries`` heads a file
holding counts that depend on library versions (the loader's counters,
:mod:`perfsuite.probes.loadercount`): where this run's versions differ, those
counts are *inconclusive* with the versions named (:mod:`perfsuite.judge.libraries`).

The file is the gate, so it is read strictly (:meth:`ExactBaselines.load`):
each value must fit its metric's kind in the registry (a count is a finite
number >= 0, a flag true/false, a fraction within [0, 1], a label a string),
NaN and infinities are refused, and every fault names the file, the test and
the field. The gate runs both ways (:func:`check_exact`): an improvement
fails as well, naming the command that rewrites the file, so the file always
says what the code does (PyTorch's pr_time_benchmarks gate). A test with no
entry fails too (:func:`missing_verdict`): deleting an entry must not switch
its gate off. Timing baselines stay per machine (:mod:`perfsuite.judge.baselines`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from perfsuite.core import metrics as registry
from perfsuite.core import tmpfiles
from perfsuite.core.results import Fingerprint, Result
from perfsuite.core.schema import check_exact_file as check_exact_header
from perfsuite.errors import BaselineError
from perfsuite.judge.causes import movers
from perfsuite.judge.engine import explain
from perfsuite.judge.settings import check_setting, pinned_changes
from perfsuite.judge.verdict import Outcome, Verdict, direction, format_value, value_ratio

SCHEMA_VERSION = 2
BY_SITE = " by site"  # "<metric> by site": a breakdown entry keyed by line-free call sites
READABLE_VERSIONS = (1, 2)
# The update command when nothing better is known (the plugin passes the session's own command line).
UPDATE_HINT = "pytest --perfsuite-update-exact"


def torch_minor(version: str) -> str:
    """``2.13.0+cpu`` -> ``2.13``."""
    parts = version.split("+")[0].split(".")
    return ".".join(parts[:2])


def key_for(fingerprint: Fingerprint) -> str:
    """``cpu__torch-2.13`` or ``cuda__torch-2.11``: device type and torch minor version."""
    device = fingerprint.device.split(":")[0]
    return f"{device}__torch-{torch_minor(fingerprint.torch)}"


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows; an exact value must be finite")


def check_value(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be the committed value of metric ``name`` (None: it can).

    ``None`` (unavailable) fits every metric. Otherwise the metric's kind decides:
    exact counts are finite numbers >= 0, flags true/false, fractions within
    [0, 1], labels strings. Only exact kinds belong in the file.
    """
    spec = registry.find(name)
    if spec is None:
        return "is not a metric perfsuite knows (a typo, or a probe of yours that is not installed)"
    if not spec.exact:
        return f"is a {spec.kind} metric; the committed file holds exact metrics only: delete the field"
    if value is None:
        return None
    if spec.kind == "flag":
        return None if isinstance(value, bool) else f"= {value!r:.60} must be true or false (a flag)"
    if spec.kind == "label":
        return None if isinstance(value, str) else f"= {value!r:.60} must be a string (a label)"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"= {value!r:.60} must be a number ({spec.unit or spec.kind})"
    if not math.isfinite(value):
        return f"= {value!r} must be finite"
    if spec.kind == "fraction" and not 0.0 <= value <= 1.0:
        return f"= {value!r} must lie within [0, 1] (a fraction)"
    if value < 0:
        return f"= {value!r} must be >= 0 (a count)"
    return None


def _tidy(value: Any) -> Any:
    """An integral float count as an int, so the file and the messages read ``597``, not ``597.0``
    (counts only: a fraction stays ``0.0``)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


class ExactBaselines:
    """One committed file of exact values, for one device type and torch minor version.

    ``directory`` is the exact directory itself (``baselines/exact`` by default,
    ``--perfsuite-exact-dir``), independent of where timing baselines live.
    """

    def __init__(self, directory: Path | str, key: str) -> None:
        self.path = Path(directory) / f"{key}.json"
        self.key = key
        self.tests: dict[str, dict[str, Any]] = {}
        self.breakdown: dict[str, dict[str, dict[str, Any]]] = {}
        self.settings: dict[str, dict[str, Any]] = {}  # loader settings pinned per test (judge/settings.py)
        # The library versions that counts depending on them were recorded with (the loader's counters).
        self.libraries: dict[str, Any] | None = None
        self._recorded: set[str] = set()
        self.loaded = False
        self.changed = False

    @classmethod
    def open(cls, directory: Path | str, key: str) -> ExactBaselines:
        """The store for ``key`` (see :func:`key_for`), loaded if its file exists."""
        store = cls(directory, key)
        store.load()
        return store

    def _error(self, what: str, update: str) -> BaselineError:
        return BaselineError(
            f"exact baselines {self.path}: {what}; fix it, restore it from git, or rewrite it: `{update}`"
        )

    def load(self, update: str = UPDATE_HINT) -> None:
        """Read the file if it exists, field by field; a fault is a BaselineError naming the file, test and field."""
        if self.path.exists() and not self.path.is_file():
            raise self._error("is a directory or device, not a file", update)
        if not self.path.is_file():
            return
        if self.path.stat().st_size == 0:
            raise self._error("is empty (0 bytes): was it written by a run that was stopped?", update)
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"), parse_constant=_refuse_constant)
        except (OSError, ValueError) as exc:
            raise self._error(f"cannot be read ({exc})", update) from None
        if not isinstance(data, dict) or data.get("schema_version") not in READABLE_VERSIONS:
            version = data.get("schema_version") if isinstance(data, dict) else None
            raise self._error(
                f"expected a JSON object with schema_version {SCHEMA_VERSION}, found schema_version={version!r:.40}",
                update,
            )
        tests = data.get("tests")
        if not isinstance(tests, dict):
            raise self._error("field 'tests' must map test ids to objects of metric values", update)
        header = check_exact_header(data, self.key)  # device and torch against the file's name
        if header:
            raise self._error(header, update)
        for test_id, values in tests.items():
            if not isinstance(values, dict):
                raise self._error(f"tests[{test_id!r}] = {values!r:.60} must be an object of metric values", update)
            for name, value in values.items():
                problem = check_value(name, value)
                if problem:
                    raise self._error(f"tests[{test_id!r}][{name!r}] {problem}", update)
        breakdown = data.get("breakdown", {})
        if not isinstance(breakdown, dict):
            raise self._error("field 'breakdown' must map test ids to objects", update)
        for test_id, per_metric in breakdown.items():
            if not isinstance(per_metric, dict):
                raise self._error(f"breakdown[{test_id!r}] must map metric names to objects", update)
            for name, parts in per_metric.items():
                bad = not isinstance(parts, dict) or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in parts.values()
                )
                if bad:
                    raise self._error(f"breakdown[{test_id!r}][{name!r}] must map names to finite numbers", update)
        settings = data.get("settings", {})
        if not isinstance(settings, dict) or not all(isinstance(v, dict) for v in settings.values()):
            raise self._error("field 'settings' must map test ids to objects of loader settings", update)
        for test_id, pinned in settings.items():
            for name, value in pinned.items():
                problem = check_setting(name, value)
                if problem:
                    raise self._error(f"settings[{test_id!r}][{name!r}] = {value!r:.40} {problem}", update)
        libraries = data.get("libraries")
        if libraries is not None and not (
            isinstance(libraries, dict) and all(isinstance(v, (str, type(None))) for v in libraries.values())
        ):
            raise self._error("field 'libraries' must map library names to version strings (or null)", update)
        self.tests = {k: dict(v) for k, v in tests.items()}
        self.breakdown = {k: {m: dict(p) for m, p in v.items()} for k, v in breakdown.items()}
        self.settings = {k: dict(v) for k, v in settings.items()}
        self.libraries = dict(libraries) if libraries is not None else None
        self.loaded = True

    @property
    def display(self) -> str:
        """The file as people read it in a repo: ``baselines/exact/cpu__torch-2.13.json``."""
        return str(Path(*self.path.parts[-3:]))

    def expected(self, test_id: str) -> Mapping[str, Any] | None:
        return self.tests.get(test_id)

    def expected_breakdown(self, test_id: str) -> Mapping[str, Mapping[str, Any]]:
        return self.breakdown.get(test_id, {})

    def expected_settings(self, test_id: str) -> Mapping[str, Any]:
        return self.settings.get(test_id, {})

    def record(
        self,
        test_id: str,
        values: Mapping[str, Any],
        breakdown: Mapping[str, Mapping[str, Any]] | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        """Set a test's values (checked as :meth:`load` checks them: a NaN count is never written)."""
        for name, value in values.items():
            problem = check_value(name, value)
            if problem:
                raise BaselineError(
                    f"{test_id}: not recording exact values in {self.path}: {name} {problem} (the run measured it so)"
                )
        values = {k: _tidy(v) if registry.get(k).kind == "exact" else v for k, v in values.items()}
        self._recorded.add(test_id)
        parts = {m: {k: _tidy(v) for k, v in p.items()} for m, p in (breakdown or {}).items() if p}
        if self.tests.get(test_id) != values or self.breakdown.get(test_id, {}) != parts:
            self.tests[test_id] = values
            if parts:
                self.breakdown[test_id] = parts
            else:
                self.breakdown.pop(test_id, None)
            self.changed = True
        if settings is not None and self.settings.get(test_id, {}) != dict(settings):
            if settings:
                self.settings[test_id] = dict(settings)
            else:
                self.settings.pop(test_id, None)
            self.changed = True

    def _stamp_libraries(self) -> None:
        """Head the file with this process's library versions when it holds counts that depend on them.

        Entries not recorded in this session were counted with the versions the file said before: where those
        differ, their version-dependent values are dropped (the test then asks to be recorded again) rather
        than kept under a header that no longer describes them.
        """
        from perfsuite.probes.loadercount import METRICS, library_versions

        dependent = [t for t, values in self.tests.items() if any(m in values for m in METRICS)]
        if not dependent:
            self.libraries = None
            return
        now = library_versions()
        if self.libraries is not None and self.libraries != now:
            for test_id in dependent:
                if test_id not in self._recorded:
                    self.tests[test_id] = {k: v for k, v in self.tests[test_id].items() if k not in METRICS}
                    parts = {
                        k: v
                        for k, v in self.breakdown.get(test_id, {}).items()
                        if k.removesuffix(BY_SITE) not in METRICS
                    }
                    if parts:
                        self.breakdown[test_id] = parts
                    else:
                        self.breakdown.pop(test_id, None)
        self.libraries = now

    def remove(self, test_ids: Iterable[str]) -> list[str]:
        """Drop the entries of tests that no longer exist; the ids removed."""
        gone = [t for t in test_ids if t in self.tests]
        for test_id in gone:
            del self.tests[test_id]
            self.breakdown.pop(test_id, None)
            self.settings.pop(test_id, None)
            self.changed = True
        return gone

    def save(self) -> Path:
        """Write atomically (temp file, fsync, replace), sorted, one metric per line for review."""
        device, _, torch = self.key.partition("__torch-")
        self._stamp_libraries()
        payload: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "device": device,
            "torch": torch,
            "tests": {k: dict(sorted(v.items())) for k, v in sorted(self.tests.items())},
            "breakdown": {
                k: {m: dict(sorted(p.items())) for m, p in sorted(v.items())} for k, v in sorted(self.breakdown.items())
            },
        }
        if self.settings:  # loader settings pinned per test, written only once some are
            payload["settings"] = {k: dict(sorted(v.items())) for k, v in sorted(self.settings.items())}
        if self.libraries is not None:
            payload["libraries"] = dict(sorted(self.libraries.items()))
        tmpfiles.write_text_atomic(self.path, json.dumps(payload, indent=2, allow_nan=False) + "\n")
        self.changed = False
        return self.path


# --------------------------------------------------------------------------- stale entries


def test_file_of(test_id: str) -> str:
    """``tests/perf/test_x.py`` from ``tests/perf/test_x.py::test_a[cpu]#label``."""
    return test_id.split("::", 1)[0]


def stale_entries(
    committed: Iterable[str], collected: Iterable[str], root: Path, partial_files: Iterable[str] = ()
) -> list[str]:
    """Committed test ids whose test no longer exists.

    ``collected`` holds the node ids this session collected (before -k/-m
    deselection). An entry is stale when its test file is gone from ``root``,
    or when its file was collected whole and the test (the id before ``#label``) was not.
    Entries of files this session did not collect, or collected only in part
    (``partial_files``: selected by node id), are left alone: a run of one
    test says nothing about the others.
    """
    collected = set(collected)
    files = {test_file_of(n) for n in collected} - set(partial_files)
    stale = []
    for test_id in committed:
        node = test_id.split("#", 1)[0]
        path = test_file_of(test_id)
        if not (root / path).exists() or (path in files and node not in collected):
            stale.append(test_id)
    return sorted(stale)


# --------------------------------------------------------------------------- the committed exact gate


def exact_values(result: Result) -> dict[str, Any]:
    """The exact metrics of a Result, as the committed file stores them: value, or None if unavailable."""
    out: dict[str, Any] = {}
    for spec in registry.all_specs():
        if spec.exact and spec.name in result.metrics:
            m = result.metrics[spec.name]
            out[spec.name] = m.value if m.available else None
    return out


def exact_breakdown(result: Result) -> dict[str, dict[str, Any]]:
    """What each exact count is made of (``detail["by"]``: ops by name, bytes by dtype), for the committed file."""
    out: dict[str, dict[str, Any]] = {}
    for spec in registry.all_specs():
        m = result.metrics.get(spec.name)
        if spec.exact and m is not None and m.available:
            by = m.detail.get("by")
            if isinstance(by, Mapping) and by:
                out[spec.name] = {str(k): v for k, v in by.items()}
            by_site = m.detail.get("by_site")
            if isinstance(by_site, Mapping) and by_site:
                out[spec.name + BY_SITE] = {str(k): v for k, v in by_site.items()}
    return out


def _moved(
    name: str, family: str, unit: str, parts: Mapping[str, Mapping[str, Any]], head_detail: Mapping[str, Any]
) -> str:
    """What moved inside a count against the file: the lines whose count changed (the file's ``by site``), then
    what the count is made of (``by``: ops by name, the loader's callables by ratio)."""
    named = []
    if name + BY_SITE in parts and "sites" in head_detail:
        named.append(movers({"by_site": parts[name + BY_SITE]}, head_detail))
    if name in parts:
        if family == "loader work":  # the callables that changed most, by ratio
            from perfsuite.judge.loaderwork import moved as work_moved

            named.append(work_moved(parts[name], head_detail.get("by"), unit))
        elif not named:  # a count with sites beside its "by" (ops by name) is compared by name here
            by_name = {k: v for k, v in head_detail.items() if k not in ("sites", "by_site")}
            named.append(movers({"by": parts[name]}, by_name if "by_site" in head_detail else head_detail))
    return "; ".join(n for n in named if n)


def missing_verdict(test_id: str, source: str, update: str, allowed: bool) -> Verdict:
    """A test with no committed exact values: a failure (its gate would be off), or new when the user allows it."""
    if allowed:
        return Verdict(
            test_id,
            "exact",
            None,
            None,
            None,
            Outcome.NEW,
            f"no committed exact values for this test in {source} (allowed by --perfsuite-allow-missing-exact); "
            f"record them with `{update}`",
        )
    return Verdict(
        test_id,
        "exact",
        None,
        None,
        None,
        Outcome.FAIL,
        f"no committed exact values for this test in {source}, so its exact gate would be off; record them with "
        f"`{update}` and commit the file (or pass --perfsuite-allow-missing-exact)",
    )


def check_exact(
    expected: Mapping[str, Any] | None,
    head: Result,
    test_id: str,
    source: str,
    update: str = UPDATE_HINT,
    breakdown: Mapping[str, Mapping[str, Any]] | None = None,
    allow_missing: bool = False,
    settings: Mapping[str, Any] | None = None,
    libraries: Mapping[str, Any] | None = None,
) -> list[Verdict]:
    """Head's exact metrics against the committed expected values: any difference fails, both ways.

    An improvement fails too (as changed), so the committed file always says
    what the code does; the message names the command that rewrites it, and,
    where the file keeps a breakdown, what moved (``aten::copy_ 2 -> 6``).
    """
    if expected is None:
        return [missing_verdict(test_id, source, update, allow_missing)]
    verdicts: list[Verdict] = []
    actual = exact_values(head)
    parts = breakdown or {}
    for name in [n for n in registry.names() if n in expected or n in actual]:
        spec = registry.get(name)
        want, got = expected.get(name, "<absent>"), actual.get(name, "<absent>")
        if want is None and got is None:
            continue
        head_libraries = head.metric(name).detail.get("libraries") if got not in (None, "<absent>") else None
        if head_libraries is not None and want not in (None, "<absent>"):
            from perfsuite.judge.libraries import mismatch

            differs = mismatch(test_id, name, libraries, head_libraries, f" (re-record them: `{update}`)")
            if differs is not None:
                verdicts.append(differs)
                continue
        if got is None:
            reason = head.metric(name).reason
            verdict = Verdict(
                test_id,
                name,
                want,
                None,
                None,
                Outcome.REGRESSED,
                f"{name} was {format_value(want)} in {source} and is now unavailable: {reason}",
            )
        elif want in (None, "<absent>") or got == "<absent>":
            verdict = Verdict(
                test_id,
                name,
                None if want == "<absent>" else want,
                None if got == "<absent>" else got,
                None,
                Outcome.CHANGED,
                f"{name} is {format_value(got)} but {source} says {format_value(want)}; "
                f"if that is intended, update it: `{update}`",
            )
        elif check_value(name, got):
            verdict = Verdict(
                test_id,
                name,
                want,
                None,
                None,
                Outcome.FAIL,
                f"{name} measured {got!r:.60}, which no count can be ({check_value(name, got)}); {source} says "
                f"{format_value(want)}",
            )
        else:
            outcome = direction(spec, want, got)
            message = f"{name} {format_value(want)} -> {format_value(got)} (exact, {source})"
            if outcome is not Outcome.UNCHANGED:
                moved = _moved(name, spec.family, spec.unit, parts, head.metric(name).detail)
                message += f": {moved}" if moved else ""
            verdict = Verdict(
                test_id,
                name,
                want,
                got,
                None if spec.kind in ("label", "flag") else value_ratio(want, got),
                outcome,
                message,
            )
            if outcome is Outcome.IMPROVED:
                verdict = replace(
                    verdict,
                    outcome=Outcome.CHANGED,
                    message=f"{verdict.message}: better than the committed value; commit it: `{update}`",
                )
            elif outcome is not Outcome.UNCHANGED:
                verdict = replace(verdict, message=f"{verdict.message}; if intended, update it: `{update}`")
        verdicts.append(explain(verdict, head))
    return verdicts + pinned_changes(settings or {}, head, test_id, source, update)  # loader settings pinned
