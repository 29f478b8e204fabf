"""``perfsuite accept HEAD BASE``: make a judged run the baseline, the one way for a Job, a perf test and a script.

``compare`` fails on a setting changed on purpose (``changed (setting)``), or on a setting regression that
is meant. Accepting it is the same command whatever produced the runs: HEAD and BASE are what ``compare``
was given, two Result or baseline files (``perfsuite exec --out``, ``perfsuite run --json``), or two
directories of them matched by test id (``pytest --perfsuite-save --perfsuite-baselines results``
against ``baselines/``). Each of BASE's runs matched in HEAD is replaced by HEAD's, in BASE's own format
(a baseline file stays a baseline file; its earlier runs go, since they were recorded before the change),
atomically. Only matched runs are replaced: a test only HEAD has is named, not added. Runs from another
machine (fingerprint) are refused unless ``--force``, as ``compare`` refuses to judge them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from perfsuite.errors import PerfsuiteError

HELP = "make HEAD the new baseline where it differs on purpose (the same for a Job, a perf test and a script)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("head", type=Path, help="the run(s) to accept: a Result/baseline file or a directory")
    parser.add_argument("base", type=Path, help="the baseline to replace: same kind as HEAD")
    parser.add_argument("--force", action="store_true", help="accept runs recorded on another machine (fingerprint)")


def _files(path: Path) -> dict[str, Path]:
    """Test id -> file, as compare matches them (a bare Result file: its stem)."""
    from perfsuite.report.compare import load_file, result_like

    if path.is_file():
        return {load_file(path)[0]: path}
    found = {}
    for file in sorted(p for p in path.rglob("*.json") if not p.name.startswith(".")):
        with file.open(encoding="utf-8") as fh:
            try:
                data = json.load(fh)
            except ValueError:
                continue
        if result_like(data):
            found[load_file(file)[0]] = file
    return found


def accept(head: Path, base: Path, force: bool = False) -> tuple[list[str], list[str]]:
    """(lines saying what was replaced, test ids only HEAD has); PerfsuiteError on bad input."""
    from perfsuite.core.results import read_json_file
    from perfsuite.core.schema import input_problem
    from perfsuite.core.tmpfiles import write_text_atomic
    from perfsuite.report.compare import load_file

    for what, path in (("HEAD", head), ("BASE", base)):
        problem = input_problem(path, directory_ok=True)
        if problem:
            raise PerfsuiteError(f"{what} {path} {problem}; pass what `perfsuite compare BASE HEAD` was given")
    if head.is_dir() != base.is_dir():
        raise PerfsuiteError(f"accept a file for a file or a directory for a directory; got {head} and {base}")
    heads, bases = _files(head), _files(base)
    if head.is_file():  # two files: the user paired them, whatever their test ids
        heads = {next(iter(bases)): head}
    replaced, only_head = [], sorted(set(heads) - set(bases))
    for test_id in sorted(set(heads) & set(bases)):
        _, run = load_file(heads[test_id])
        _, was = load_file(bases[test_id])
        if run.fingerprint.key() != was.fingerprint.key() and not force:
            raise PerfsuiteError(
                f"{test_id}: HEAD was recorded on {run.fingerprint.key()!r}, BASE on {was.fingerprint.key()!r}; a "
                "baseline holds this machine's runs: record HEAD here, or pass --force"
            )
        data: Any = read_json_file(bases[test_id], "file")
        if isinstance(data, dict) and "test_id" in data and "result" in data:  # a baseline file stays one
            payload = {"schema_version": data.get("schema_version"), "test_id": data["test_id"]}
            payload["result"] = run.to_dict()
            text = json.dumps(payload, indent=2, allow_nan=False) + "\n"
        else:
            text = run.to_json() + "\n"
        write_text_atomic(bases[test_id], text)
        replaced.append(f"accepted {test_id}: {bases[test_id]} now holds {heads[test_id]}'s run")
    return replaced, only_head


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """0 when something was accepted, 2 on bad input or when HEAD and BASE share no test."""
    out, err = out or sys.stdout, err or sys.stderr
    replaced, only_head = accept(args.head, args.base, args.force)
    for line in replaced:
        print(f"perfsuite accept: {line}", file=out)
    for test_id in only_head:
        print(
            f"perfsuite accept: note: {test_id} is not in {args.base}: record it there (pytest --perfsuite-save)",
            file=err,
        )
    if not replaced:
        raise PerfsuiteError(f"{args.head} and {args.base} share no test id: nothing to accept")
    return 0
