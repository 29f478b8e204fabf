"""``perfsuite compare BASE HEAD``: verdicts for two stored runs or baseline directories, without torch."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from perfsuite.errors import PerfsuiteError
from perfsuite.judge.verdict import DEFAULT_ALPHA, DEFAULT_FACTOR, Verdict
from perfsuite.report.compare import judge_paths
from perfsuite.report.hints import worded

HELP = "compare results or baseline directories: a table at a terminal, markdown for PRs"
DESCRIPTION = (
    "Judge HEAD against BASE: two Result/baseline JSON files, or two directories of them matched by test id "
    "(e.g. baselines/<fingerprint>/ and results/<fingerprint>/ written by `pytest --perfsuite-save "
    "--perfsuite-baselines results`, or files from `perfsuite run ... --json`). Prints a table at a "
    "terminal, markdown for a PR comment when stdout is not a terminal (or --markdown FILE, or --json); "
    "exit 1 when something regressed or changed, 2 on bad input. JSON that is no Result (the committed exact "
    "file) is skipped with a note."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", type=Path, help="baseline: a Result/baseline JSON file or a directory of them")
    parser.add_argument("head", type=Path, help="the run to judge: same kind as BASE")
    parser.add_argument("--json", action="store_true", help="print verdicts as JSON instead of markdown")
    parser.add_argument("--png", type=Path, metavar="FILE", help="also write a chart of the ratios to FILE")
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="also write the PR-comment markdown to FILE")
    parser.add_argument(
        "--factor",
        type=float,
        default=DEFAULT_FACTOR,
        help=f"timing change needed before a verdict moves (default {DEFAULT_FACTOR})",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=DEFAULT_ALPHA,
        help=f"significance level of the timing tests (default {DEFAULT_ALPHA})",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="compare results from different fingerprints (machines) or of different workloads anyway",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="at a terminal, list each figure that was not judged for a reason many share (a busy machine, no "
        "baseline value), instead of one line per reason",
    )


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the compare command; 0 clean, 1 something regressed or failed, 2 bad input."""
    out, err = out or sys.stdout, err or sys.stderr
    notes: list[str] = []
    try:
        verdicts, heads = judge_paths(args.base, args.head, args.factor, args.alpha, args.force, notes)
    except (PerfsuiteError, OSError) as exc:
        return _refused(exc, err)
    wording = _wording(verdicts, heads)
    with worded(wording):
        return _report([_reworded(v, wording) for v in verdicts], heads, notes, args, out, err)


def _wording(verdicts: list, heads: dict) -> Callable[[str | None], str | None]:
    """The words of the hints: exec's flags for two Results of `perfsuite exec`, else pytest's as written."""
    from perfsuite.cli.hints import for_exec_results
    from perfsuite.jobs.script import ran_a_script

    return for_exec_results if heads and all(ran_a_script(r) for r in heads.values()) else (lambda text: text)


def _reworded(verdict: Verdict, wording: Callable[[str | None], str | None]) -> Verdict:
    message = wording(verdict.message) or verdict.message
    return dataclasses.replace(
        verdict, message=message, cause=wording(verdict.cause), unjudged=wording(verdict.unjudged)
    )


def _refused(exc: BaseException, err: TextIO) -> int:
    from perfsuite.cli.main import os_error_text

    told = os_error_text(exc) if isinstance(exc, OSError) else str(exc)
    print(f"perfsuite compare: error: {told}", file=err)
    return 2


def _report(verdicts: list, heads: dict, notes: list[str], args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from perfsuite.report import verdicts as report

    try:
        written = []
        if args.png:
            written.append(f"wrote {report.write_png(verdicts, args.png, heads)} (chart of the ratios)")
        if args.markdown:
            import os

            from perfsuite.core.tmpfiles import write_text_atomic

            try:  # a hard link publishes the file: an existing one is never overwritten
                write_text_atomic(args.markdown, report.format_markdown(verdicts), os.link)
            except FileExistsError:
                raise PerfsuiteError(f"--markdown {args.markdown} exists; remove it or give another file") from None
            written.append(f"wrote {args.markdown} (markdown for a PR comment)")
    except (PerfsuiteError, OSError) as exc:
        return _refused(exc, err)
    from perfsuite.report.terminal import folded_note

    for note in notes:  # folded like the table after it (a contention note was one line of 216-268 characters)
        print(folded_note(f"perfsuite compare: note: {note}", err), file=err)
    if args.json:
        print(report.to_json(verdicts), file=out)
    else:
        from perfsuite.report import terminal

        if terminal.is_terminal(out):
            terminal.print_verdicts(verdicts, terminal.console_for(out), verbose=args.verbose)
        else:
            print(report.format_markdown(verdicts), file=out)
    for line in written:
        print(f"perfsuite compare: {line}", file=err)
    return 1 if any(v.failed for v in verdicts) else 0
