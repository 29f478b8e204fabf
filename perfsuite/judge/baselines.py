"""BaselineStore: stored Results under ``<root>/<fingerprint key>/<test file>.json``.

File format (one JSON object per test)::

    {"schema_version": 1, "test_id": "tests/perf/test_x.py::test_a[cpu-2]",
     "result": <Result.to_dict()>}

The file name is a readable slug of the pytest node id plus a short hash of
it (node ids hold ``/ : [ ]`` and can be long); the exact id lives inside the
file, which is what loading checks. Saves are atomic (temp file in the same
directory, fsync, then link or replace), so a crash never leaves half a
baseline, and an existing baseline is replaced only when asked.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.core import tmpfiles
from perfsuite.core.results import Fingerprint, Result, parse_json
from perfsuite.errors import BaselineError, ResultError

BASELINE_SCHEMA_VERSION = 1
_RERECORD = "delete it and re-record it with `pytest --perfsuite-save` (or `nox -s baseline`), which replaces it"
_SLUG_MAX = 100


def safe_filename(test_id: str) -> str:
    """``tests/perf/test_x.py::test_a[cpu-2]`` -> ``tests.perf.test_x.py__test_a_cpu-2_-1a2b3c4d.json``."""
    if not test_id:
        raise BaselineError("a baseline needs a test id; pass the pytest node id, e.g. 'tests/perf/test_x.py::test_a'")
    slug = test_id.replace("::", "__").replace("/", ".").replace("\\", ".")
    slug = re.sub(r"[^A-Za-z0-9._-]", "_", slug).lstrip(".")[:_SLUG_MAX]
    digest = hashlib.blake2b(test_id.encode("utf-8"), digest_size=4).hexdigest()
    return f"{slug}-{digest}.json"


@dataclass(frozen=True)
class StoredBaseline:
    """One baseline file, as listed by :meth:`BaselineStore.entries`."""

    key: str
    test_id: str
    path: Path


def read_baseline_file(path: Path) -> tuple[str, Result]:
    """Read one baseline file; BaselineError naming the file and the fault if it is not one."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise BaselineError(f"cannot read baseline {path}: {exc.strerror or exc}") from exc
    try:
        data = parse_json(raw, f"baseline {path}")
    except ResultError as exc:
        raise BaselineError(f"{exc}; {_RERECORD}") from None
    return parse_baseline(data, path)


def parse_baseline_runs(data: Any, path: Path | str) -> list[Result]:
    """Every run a baseline file holds, oldest first: its ``runs`` (``--perfsuite-baseline-runs N``), else result."""
    _, newest = parse_baseline(data, path)
    runs = data.get("runs")
    if runs is None:
        return [newest]
    if not isinstance(runs, list) or not runs:
        raise BaselineError(f"baseline {path}: field 'runs' must be a non-empty list of results; {_RERECORD}")
    out = []
    for i, run in enumerate(runs):
        try:
            out.append(Result.from_dict(run))
        except ResultError as exc:
            raise BaselineError(f"baseline {path}: runs[{i}] is an unreadable result: {exc}; {_RERECORD}") from exc
    return out


def parse_baseline(data: Any, path: Path | str) -> tuple[str, Result]:
    """(test id, Result) from a baseline file's decoded JSON."""
    if not isinstance(data, dict) or "result" not in data or "test_id" not in data:
        raise BaselineError(
            f"baseline {path} is not a baseline file: expected a JSON object with "
            "'schema_version', 'test_id' and 'result'; re-record it with `nox -s baseline`"
        )
    version = data.get("schema_version")
    if isinstance(version, bool) or version != BASELINE_SCHEMA_VERSION:
        raise BaselineError(
            f"baseline {path} has schema_version={version!r:.60}, this perfsuite "
            f"reads {BASELINE_SCHEMA_VERSION}; {_RERECORD}"
        )
    unknown = sorted(str(k) for k in data if k not in ("schema_version", "test_id", "result", "runs"))
    if unknown:
        raise BaselineError(
            f"baseline {path} has unknown field(s) {', '.join(map(repr, unknown))}; a baseline "
            f"holds only schema_version, test_id, result and runs; {_RERECORD}"
        )
    test_id = data["test_id"]
    if not isinstance(test_id, str) or not test_id:
        raise BaselineError(
            f"baseline {path}: field 'test_id' is {test_id!r:.60}; it must be the pytest node id string; {_RERECORD}"
        )
    try:
        result = Result.from_dict(data["result"])
    except ResultError as exc:
        message = str(exc).replace("field '", "field 'result.", 1)
        raise BaselineError(f"baseline {path} holds an unreadable result: {message}; {_RERECORD}") from exc
    return test_id, result


class BaselineStore:
    """Baselines under ``root``, one directory per fingerprint key."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def path_for(self, fingerprint: Fingerprint, test_id: str) -> Path:
        return self.root / fingerprint.key() / safe_filename(test_id)

    def save(self, result: Result, test_id: str, overwrite: bool = False, keep_runs: int = 1) -> Path:
        """Write ``result`` as the baseline of ``test_id`` on its fingerprint; returns the path.

        ``keep_runs`` > 1 keeps that many runs in the file (``runs``, oldest
        first; the newest is also ``result``): the runs already stored on
        this fingerprint, then this one, the oldest dropped first.
        """
        path = self.path_for(result.fingerprint, test_id)
        if path.exists() and not overwrite:
            raise _exists_error(path, test_id)
        payload: dict[str, Any] = {
            "schema_version": BASELINE_SCHEMA_VERSION,
            "test_id": test_id,
            "result": result.to_dict(),
        }
        if keep_runs > 1:
            try:
                earlier = self.load_runs(result.fingerprint, test_id) if path.exists() else []
            except BaselineError:  # an unreadable file is what this save replaces: its runs start again here
                earlier = []
            runs = [*earlier, result][-keep_runs:]
            if len(runs) > 1:
                payload["runs"] = [r.to_dict() for r in runs]
        publish = os.replace if overwrite else (lambda tmp, dest: _link_new(tmp, dest, test_id))
        return tmpfiles.write_json_atomic(path, payload, publish)

    def load(self, fingerprint: Fingerprint, test_id: str) -> Result | None:
        """The baseline of ``test_id`` on this fingerprint; None when there is none (reported as new)."""
        return self._load_path(self.path_for(fingerprint, test_id), test_id, fingerprint.key())

    def load_runs(self, fingerprint: Fingerprint, test_id: str) -> list[Result]:
        """Every stored run of ``test_id`` on this fingerprint, oldest first; [] when there is no baseline."""
        path = self.path_for(fingerprint, test_id)
        if self._load_path(path, test_id, fingerprint.key()) is None:
            return []
        return parse_baseline_runs(parse_json(path.read_bytes(), f"baseline {path}"), path)

    def load_any(self, test_id: str) -> Result | None:
        """A baseline of ``test_id`` under any fingerprint (first key in sorted order), for mismatch hints."""
        name = safe_filename(test_id)
        if not self.root.is_dir():
            return None
        for key_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            found = self._load_path(key_dir / name, test_id, key_dir.name)
            if found is not None:
                return found
        return None

    def entries(self, key: str | None = None) -> list[StoredBaseline]:
        """Every stored baseline (or those of one fingerprint key), sorted by key and test id."""
        if not self.root.is_dir():
            return []
        dirs = [self.root / key] if key else sorted(p for p in self.root.iterdir() if p.is_dir())
        found = []
        for key_dir in dirs:
            for path in sorted(key_dir.glob("*.json")) if key_dir.is_dir() else []:
                test_id, _ = read_baseline_file(path)
                found.append(StoredBaseline(key_dir.name, test_id, path))
        return sorted(found, key=lambda e: (e.key, e.test_id))

    def _load_path(self, path: Path, test_id: str, key: str) -> Result | None:
        if not path.exists():
            return None
        stored_id, result = read_baseline_file(path)
        if stored_id != test_id:
            raise BaselineError(
                f"baseline {path} belongs to test {stored_id!r}, not {test_id!r}; "
                "was it copied or renamed by hand? delete it and re-record with `nox -s baseline`"
            )
        if result.fingerprint.key() != key:
            raise BaselineError(
                f"baseline {path} was recorded on {result.fingerprint.key()!r} but sits under "
                f"{key!r}; move it to {self.root / result.fingerprint.key()} or re-record it"
            )
        return result


def _exists_error(path: Path, test_id: str) -> BaselineError:
    return BaselineError(
        f"baseline for {test_id} already exists at {path}; refusing to overwrite it. To replace it on "
        "purpose, re-record with `pytest --perfsuite-save` or `nox -s baseline` (overwrite=True in the library)"
    )


def _link_new(tmp: Path, path: Path, test_id: str) -> None:
    """Publish ``tmp`` at ``path`` only if nothing is there: a hard link fails atomically if it exists."""
    try:
        os.link(tmp, path)
    except FileExistsError as exc:
        raise _exists_error(path, test_id) from exc
    except OSError:  # file systems without hard links: check, then replace
        if path.exists():
            raise _exists_error(path, test_id) from None
        os.replace(tmp, path)
