"""Committed exact baselines: what each test's deterministic metrics must be, checked on every machine.

Exact metrics (syncs per step, graph breaks, ops and bytes per step, FLOPs,
AMP fractions, label violations; see :mod:`perfsuite.core.metrics`) depend on the
code, the torch version and the device type, not on the machine. So they
live in one reviewable file per device type and torch minor version,
committed to the repo and checked wherever the suite runs, a fresh CPU CI
included::

    baselines/exact/cpu__torch-2.13.json
    {
      "schema_version": 1, "device": "cpu", "torch": "2.13",
      "tests": {"tests/perf/test_step.py::test_x": {"syncs_per_step": 0.0, "graph_breaks": null, ...}}
    }

``null`` means "unavailable" (nothing compiled, say): becoming measurable is a
change too. The gate runs both ways (:func:`perfsuite.judge.exact.check_exact`):
an improvement fails as well, naming the command that rewrites the file, so
the file always says what the code does (PyTorch's pr_time_benchmarks gate).
Timing baselines stay per machine (:mod:`perfsuite.judge.baselines`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from perfsuite.core import metrics as registry
from perfsuite.core import tmpfiles
from perfsuite.core.results import Fingerprint, Result
from perfsuite.errors import BaselineError
from perfsuite.judge.engine import explain
from perfsuite.judge.verdict import Outcome, Verdict, direction, format_value, value_ratio

SCHEMA_VERSION = 1
SUBDIR = "exact"


def torch_minor(version: str) -> str:
    """``2.13.0+cpu`` -> ``2.13``."""
    parts = version.split("+")[0].split(".")
    return ".".join(parts[:2])


def key_for(fingerprint: Fingerprint) -> str:
    """``cpu__torch-2.13`` or ``cuda__torch-2.11``: device type and torch minor version."""
    device = fingerprint.device.split(":")[0]
    return f"{device}__torch-{torch_minor(fingerprint.torch)}"


class ExactBaselines:
    """One committed file of exact values, for one device type and torch minor version."""

    def __init__(self, root: Path | str, key: str) -> None:
        self.path = Path(root) / SUBDIR / f"{key}.json"
        self.key = key
        self.tests: dict[str, dict[str, Any]] = {}
        self.loaded = False
        self.changed = False

    @classmethod
    def open(cls, root: Path | str, key: str) -> ExactBaselines:
        """The store for ``key`` (see :func:`key_for`), loaded if its file exists."""
        store = cls(root, key)
        store.load()
        return store

    def load(self) -> None:
        """Read the file if it exists; a malformed file is an error naming it and the field."""
        if not self.path.is_file():
            return
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise BaselineError(
                f"exact baselines {self.path} cannot be read ({exc}); restore it from git or "
                "rewrite it with `nox -s perf -- --perfsuite-update-exact`"
            ) from exc
        if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
            raise BaselineError(
                f"exact baselines {self.path}: expected a JSON object with schema_version "
                f"{SCHEMA_VERSION}; rewrite it with `nox -s perf -- --perfsuite-update-exact`"
            )
        tests = data.get("tests")
        if not isinstance(tests, dict) or not all(isinstance(v, dict) for v in tests.values()):
            raise BaselineError(
                f"exact baselines {self.path}: field 'tests' must map test ids to objects of metric values"
            )
        for test_id, values in tests.items():
            for name, value in values.items():
                if not (value is None or isinstance(value, (bool, int, float, str))):
                    raise BaselineError(
                        f"exact baselines {self.path}: tests[{test_id!r}][{name!r}] = {value!r} "
                        "must be a number, true/false, a string or null"
                    )
        self.tests = {k: dict(v) for k, v in tests.items()}
        self.loaded = True

    @property
    def display(self) -> str:
        """The file as people read it in a repo: ``baselines/exact/cpu__torch-2.13.json``."""
        return str(Path(*self.path.parts[-3:]))

    def expected(self, test_id: str) -> Mapping[str, Any] | None:
        return self.tests.get(test_id)

    def record(self, test_id: str, values: Mapping[str, Any]) -> None:
        if self.tests.get(test_id) != dict(values):
            self.tests[test_id] = dict(values)
            self.changed = True

    def save(self) -> Path:
        """Write atomically (temp file, fsync, replace), sorted, one metric per line for review."""
        device, _, torch = self.key.partition("__torch-")
        payload = {
            "schema_version": SCHEMA_VERSION,
            "device": device,
            "torch": torch,
            "tests": {k: dict(sorted(v.items())) for k, v in sorted(self.tests.items())},
        }
        tmpfiles.write_json_atomic(self.path, payload)
        self.changed = False
        return self.path


# --------------------------------------------------------------------------- the committed exact gate

UPDATE_HINT = "nox -s perf -- --perfsuite-update-exact"


def exact_values(result: Result) -> dict[str, Any]:
    """The exact metrics of a Result, as the committed file stores them: value, or None if unavailable."""
    out: dict[str, Any] = {}
    for spec in registry.all_specs():
        if spec.exact and spec.name in result.metrics:
            m = result.metrics[spec.name]
            out[spec.name] = m.value if m.available else None
    return out


def check_exact(
    expected: Mapping[str, Any] | None, head: Result, test_id: str, source: str, update: str = UPDATE_HINT
) -> list[Verdict]:
    """Head's exact metrics against the committed expected values: any difference fails, both ways.

    An improvement fails too (as changed), so the committed file always says
    what the code does; the message names the command that rewrites it.
    """
    if expected is None:
        return [
            Verdict(
                test_id,
                "exact",
                None,
                None,
                None,
                Outcome.NEW,
                f"no committed exact values for this test in {source}; record them with `{update}`",
            )
        ]
    verdicts: list[Verdict] = []
    actual = exact_values(head)
    for name in [n for n in registry.names() if n in expected or n in actual]:
        spec = registry.get(name)
        want, got = expected.get(name, "<absent>"), actual.get(name, "<absent>")
        if want is None and got is None:
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
        else:
            outcome = direction(spec, want, got)
            verdict = Verdict(
                test_id,
                name,
                want,
                got,
                None if spec.kind in ("label", "flag") else value_ratio(want, got),
                outcome,
                f"{name} {format_value(want)} -> {format_value(got)} (exact, {source})",
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
    return verdicts
