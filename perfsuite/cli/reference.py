"""The command-line reference, generated from the argparse definitions so that it cannot drift.

``python -m perfsuite.cli.reference`` prints it; ``--write docs/cli.md`` splices it between the page's
markers, and ``--check docs/cli.md`` exits 1 when the page is stale (a test runs the check).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from perfsuite.cli.main import COMMANDS, build_parser

START, END = "<!-- cli-reference:start -->", "<!-- cli-reference:end -->"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _flags(action: argparse.Action) -> str:
    if not action.option_strings:
        name = action.metavar or action.dest
        return f"`{name.upper() if isinstance(name, str) else name}`"
    flags = ", ".join(f"`{flag}`" for flag in action.option_strings)
    if action.nargs == 0:
        return flags
    if action.choices is not None:
        return f"{flags} `{{{','.join(map(str, action.choices))}}}`"
    metavar = action.metavar or action.dest.upper()
    return f"{flags} `{metavar}`" + (" (optional value)" if action.nargs == "?" else "")


def _default(action: argparse.Action) -> str:
    if action.default in (None, argparse.SUPPRESS, [], False) or not action.option_strings:
        return ""
    return f"`{action.default}`"


def _table(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| argument | default | meaning |", "|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        rows.append(f"| {_flags(action)} | {_default(action)} | {_cell(action.help or '')} |")
    return rows


def render() -> str:
    """The reference as markdown: one section per command, in the order of ``perfsuite --help``."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    lines = [
        "Generated from the argparse definitions by `python -m perfsuite.cli.reference --write docs/cli.md`;",
        "`tests/unit/test_cli_reference.py` fails when it is stale. Do not edit by hand.",
        "",
    ]
    for name in COMMANDS:
        command = sub.choices[name]
        usage = " ".join(command.format_usage().split())
        lines += [f"## `perfsuite {name}`", "", _cell(command.description or ""), "", "```text", usage, "```", ""]
        lines += [*_table(command), ""]
    return "\n".join(lines)


def splice(page: str, text: str) -> str:
    if START not in page or END not in page:
        raise SystemExit(f"the page has no {START} ... {END} markers")
    head, rest = page.split(START, 1)
    return f"{head}{START}\n{text}{END}{rest.split(END, 1)[1]}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perfsuite.cli.reference", description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", type=Path, metavar="PAGE", help="splice the reference into PAGE between its markers")
    group.add_argument("--check", type=Path, metavar="PAGE", help="exit 1 if PAGE's reference is not the generated one")
    args = parser.parse_args(argv)
    text = render()
    if args.write or args.check:
        path = args.write or args.check
        page = path.read_text(encoding="utf-8")
        updated = splice(page, text)
        if args.check:
            if updated != page:
                print(f"{path} is stale: run `python -m perfsuite.cli.reference --write {path}`", file=sys.stderr)
                return 1
            return 0
        path.write_text(updated, encoding="utf-8")
        return 0
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
