"""The ``perfsuite`` command: one module per subcommand, each a thin shell over the library.

Each command module under :mod:`perfsuite.cli` gives ``HELP`` (and optionally ``DESCRIPTION``),
``add_arguments(parser)`` and ``run(args) -> exit status``. Importing them stays cheap (torch
loads when a command runs), so ``perfsuite --help`` is fast. Errors print one line that says
what to write instead, and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from perfsuite.errors import PerfsuiteError

# The subcommands, in the order --help lists them: each names its module in perfsuite.cli.
COMMANDS = ("list", "run", "compare", "ab", "tune", "monitor")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="perfsuite", description="Performance regression tests for GPU training input pipelines."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"perfsuite.cli.{name}")
        p = sub.add_parser(name, help=module.HELP, description=getattr(module, "DESCRIPTION", module.HELP))
        module.add_arguments(p)
        p.set_defaults(func=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except PerfsuiteError as exc:
        print(f"perfsuite: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
