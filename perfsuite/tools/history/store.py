"""The history store: one JSON file per run, keyed by commit, machine and test, in a plain folder.

Layout: ``<root>/<commit[:2]>/<commit>/<machine>__<test>.json``. A folder, not a database, so that it can
live in the repository, in a CI artifact or on a ``perf-results`` branch and be merged by git; each entry
is written to a temporary and published with a hard link, which refuses to overwrite, so two processes
recording at once never lose or duplicate a commit+machine+test (the second is told it exists), and a
recording killed midway leaves no partial entry (its temporary is swept by the next write). An entry that
cannot be read is named in :attr:`HistoryStore.problems` and skipped; nothing is deleted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.core import tmpfiles
from perfsuite.core.results import Result
from perfsuite.errors import PerfsuiteError

SCHEMA = 1
DEFAULT_ROOT = Path("perf-history")
SHA = re.compile(r"^[0-9a-f]{7,40}$")


class HistoryError(PerfsuiteError):
    """A history entry or store that cannot be used (exit 2 from the CLI)."""


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:120] or "x"


def machine_of(result: Result) -> dict[str, Any]:
    """What makes timings comparable: the hardware and the torch build (a Result's fingerprint key)."""
    fp = result.fingerprint
    return {
        "key": fp.key(),
        "device": fp.device,
        "hardware": fp.gpu_model or f"{fp.cpu_model} ({fp.cpu_cores} cores)",
        "torch": fp.torch,
    }


def test_of(result: Result) -> str:
    """The test a Result is for: its workload (a perf test's id or a script's command)."""
    return result.workload


@dataclass(frozen=True)
class Entry:
    """One recorded run."""

    commit: str
    commit_time: float  # seconds since the epoch, the committer date (kept; the order is ancestry's: .ancestry)
    subject: str
    machine: dict[str, Any]
    test: str
    recorded: float
    result: Result
    path: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "commit": self.commit,
            "commit_time": self.commit_time,
            "subject": self.subject,
            "machine": self.machine,
            "test": self.test,
            "recorded": self.recorded,
            "result": json.loads(self.result.to_json()),
        }

    @classmethod
    def from_dict(cls, data: Any, path: Path | None = None) -> Entry:
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise HistoryError(f"{path}: not a perfsuite history entry (schema {SCHEMA})")
        try:
            result = Result.from_dict(data["result"])
            return cls(
                str(data["commit"]),
                float(data["commit_time"]),
                str(data.get("subject", "")),
                dict(data["machine"]),
                str(data["test"]),
                float(data["recorded"]),
                result,
                path,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise HistoryError(f"{path}: a history entry with a missing or bad field ({exc})") from exc


def commit_info(repo: Path, rev: str = "HEAD") -> tuple[str, float, str]:
    """(full sha, committer time, subject) of ``rev`` in ``repo``."""
    proc = subprocess.run(
        ["git", "-C", str(repo), "log", "-1", "--format=%H%x00%ct%x00%s", rev, "--"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0 or "\x00" not in proc.stdout:
        raise HistoryError(
            f"cannot read commit {rev!r} in {repo}: {proc.stderr.strip() or 'not a git repository'}; "
            "pass --commit SHA and --repo DIR (a clone that has it)"
        )
    sha, when, subject = proc.stdout.strip().split("\x00", 2)
    return sha, float(when), subject


def _publish_once(tmp: Path, path: Path) -> None:
    os.link(tmp, path)  # FileExistsError when the entry is there already: never overwritten


@dataclass
class HistoryStore:
    """A history folder (see the module docstring)."""

    root: Path = DEFAULT_ROOT
    problems: list[str] = field(default_factory=list)

    def path_for(self, commit: str, machine: dict[str, Any], test: str, run: str | None = None) -> Path:
        tail = f"__{_slug(run)}" if run else ""
        return self.root / commit[:2] / commit / f"{_slug(machine['key'])}__{_slug(test)}{tail}.json"

    def record(
        self,
        result: Result,
        commit: str,
        commit_time: float,
        subject: str = "",
        test: str | None = None,
        run: str | None = None,
    ) -> Path | None:
        """Write one run; None when this commit+machine+test (+``run``, a repeat's tag: a timing bisect's
        interleaved runs) is recorded already (the first one is kept)."""
        if not SHA.match(commit):
            raise HistoryError(f"commit {commit!r} is not a git sha; pass the full or abbreviated hex id")
        machine = machine_of(result)
        entry = Entry(commit, commit_time, subject, machine, test or test_of(result), time.time(), result)
        path = self.path_for(commit, machine, entry.test, run)
        if path.exists():
            return None
        try:
            tmpfiles.write_json_atomic(path, entry.to_dict(), publish=_publish_once)
        except FileExistsError:  # another process recorded it meanwhile
            return None
        return path

    def entries(self) -> Iterator[Entry]:
        """Every readable entry; unreadable ones are named in :attr:`problems` and skipped."""
        self.problems.clear()
        if not self.root.is_dir():
            return
        for path in sorted(self.root.glob("*/*/*.json")):
            if path.name.startswith("."):
                continue
            try:
                yield Entry.from_dict(json.loads(path.read_text(encoding="utf-8")), path)
            except (OSError, ValueError, HistoryError) as exc:
                self.problems.append(f"{path}: skipped, cannot be read ({str(exc).split(': ', 1)[-1][:200]})")

    def find(self, commit: str, machine_key: str, test: str) -> Entry | None:
        for entry in self.entries():
            if entry.commit.startswith(commit) and entry.machine["key"] == machine_key and entry.test == test:
                return entry
        return None


def load_result_files(paths: Iterable[Path]) -> list[tuple[Path, Result]]:
    """Result JSON files (a folder is searched for ``*.json``), each read and checked."""
    out = []
    for given in paths:
        files = sorted(given.rglob("*.json")) if given.is_dir() else [given]
        for path in files:
            try:
                out.append((path, Result.from_json(path.read_bytes())))
            except (OSError, ValueError) as exc:
                raise HistoryError(f"{path}: not a perfsuite Result ({exc})") from exc
    return out
