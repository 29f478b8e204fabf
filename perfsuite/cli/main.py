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
from typing import Any, NoReturn

from perfsuite.errors import PerfsuiteError, RunTimeout

# The subcommands, in the order --help lists them: each names its module in perfsuite.cli.
COMMANDS = (
    "list",
    "run",
    "exec",
    "check",
    "compare",
    "accept",
    "ab",
    "doctor",
    "tune",
    "monitor",
    "history",
    "bisect",
    "demand",
)


def version() -> str:
    """The installed perfsuite's version (from its package metadata)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("perfsuite")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed: pip install -e .)"


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line (what was wrong, where the help is) and exit 2, no usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}; see `{self.prog} --help`\n")


def build_parser() -> argparse.ArgumentParser:
    from perfsuite.cli.validate import add_shared_arguments

    parser = OneLineParser(
        prog="perfsuite", description="Performance regression tests for GPU training input pipelines."
    )
    parser.add_argument("--version", action="version", version=f"perfsuite {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"perfsuite.cli.{name}")
        p = sub.add_parser(name, help=module.HELP, description=getattr(module, "DESCRIPTION", module.HELP))
        module.add_arguments(p)
        add_shared_arguments(name, p)
        p.set_defaults(func=module.run, subcommand=name)  # not args.command: exec's own positional takes that name
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command. Bad input and OS errors (a path that cannot be written) print one line and exit 2;
    Ctrl-C prints one line and exits 130, as a shell reports SIGINT; nothing half-written is left."""
    from perfsuite.cli.validate import check, written_files
    from perfsuite.core.outlock import out_locks

    parser = build_parser()
    args = parse(parser, argv)
    from perfsuite.harness.interrupts import Terminated, ended_by_sigterm, terminate_unwinds

    with terminate_unwinds():  # SIGTERM: the run unwinds, exit handlers clean TMPDIR, exit 143
        try:
            check(args)  # every argument, name and output path, before any work
            words = sys.argv[1:] if argv is None else list(argv)
            stdout, sys.stdout = sys.stdout, NamedStdout(sys.stdout)
            try:
                with out_locks(written_files(args), holder=" ".join(["perfsuite", *words])):  # one writer per file
                    status = int(args.func(args))
                    sys.stdout.flush()  # stdout on a full disk fails here, where its path can still be named
                    return status
            finally:
                sys.stdout = stdout
        except (Exception, Terminated, KeyboardInterrupt) as exc:  # noqa: BLE001 - _failed raises perfsuite's own
            # A CI job's time limit sends SIGTERM to the whole process group: a worker it killed is no crash.
            if isinstance(exc, Terminated) or ended_by_sigterm(exc):
                print(
                    f"perfsuite: terminated (SIGTERM) in perfsuite {args.subcommand}; no result was written",
                    file=sys.stderr,
                )
                return 143
            return _failed(exc, args)


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, but a command's ``LATE_POSITIONALS`` list also takes the words after its options."""
    args, extra = parser.parse_known_args(argv)
    late = getattr(importlib.import_module(f"perfsuite.cli.{args.subcommand}"), "LATE_POSITIONALS", None)
    if extra and late is not None and not any(word.startswith("-") for word in extra):
        setattr(args, late, [*getattr(args, late), *extra])
        extra = []
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _failed(exc: BaseException, args: argparse.Namespace) -> int:
    """The one line (and the user's own traceback) for what ended the command, and its exit status."""
    from perfsuite.cli.hints import for_command
    from perfsuite.harness.worker_death import handover_broken

    if isinstance(exc, RunTimeout):  # its stacks went to stderr as it fired: the message's first line is enough here
        print(f"perfsuite: error: {for_command(str(exc).splitlines()[0], args)}", file=sys.stderr)
        return 2
    if isinstance(exc, PerfsuiteError):
        print(f"perfsuite: error: {for_command(str(exc), args)}", file=sys.stderr)
        return 2
    if isinstance(exc, OSError) and not handover_broken(exc):  # else: a DataLoader worker died, told below
        print(f"perfsuite: error: {os_error_text(exc)}", file=sys.stderr)
        return 2
    if isinstance(exc, KeyboardInterrupt):
        what = str(exc) or "interrupted (Ctrl-C); no result was written"
        print(f"perfsuite: {what}", file=sys.stderr)
        return 130
    from perfsuite.cli.user_errors import describe  # the user's step, Dataset or factory: their error, their terms

    told = describe(exc, str(getattr(args, "workload", None) or _script_command(args) or args.subcommand))
    if told is None:
        raise exc  # perfsuite's own bug: its whole traceback
    print(f"perfsuite: error: {told.line}", file=sys.stderr)
    print(told.traceback, end="", file=sys.stderr)
    return 2


def _script_command(args: argparse.Namespace) -> str:
    """``perfsuite exec``'s script, as the one line names it (``python train.py``)."""
    command = [str(word) for word in getattr(args, "command", None) or () if isinstance(word, str)]
    return " ".join(command[1:] if command[:1] == ["--"] else command)


class NamedStdout:
    """``sys.stdout`` while a command runs: a write that fails (a full disk under ``> out.txt``) names stdout and
    where it was redirected, which the OSError alone does not."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def _named(self, exc: OSError) -> OSError:
        if exc.filename is None:
            exc.filename = f"stdout ({_stdout_path(self._stream)})"
        return exc

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except OSError as exc:
            raise self._named(exc) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise self._named(exc) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _stdout_path(stream: Any) -> str:
    """Where stdout goes (``/dev/full``, ``out.txt``), as the user redirected it."""
    import os

    try:
        return os.readlink(f"/proc/self/fd/{stream.fileno()}")
    except (OSError, ValueError, AttributeError):
        return "where it was redirected"


def os_error_text(exc: OSError) -> str:
    """``PATH: No space left on device; check ...``: the user's path (never a temporary) once, one colon."""
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{exc.strerror or exc}; check the path, its free space and permissions"


if __name__ == "__main__":
    sys.exit(main())
