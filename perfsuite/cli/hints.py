"""Hints in the words of the command that was run: ``perfsuite run --deadline-floor``, not the pytest option.

The runner and the watchdog speak pytest's language (``--perfsuite-deadline-floor``), because the
plugin is where most runs start. ``perfsuite run`` takes the same four watchdog settings as flags
(:func:`add_watchdog_arguments`), and :func:`for_command` rewrites a message's pytest options into the
flags of the command that was run, where it has them.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

# The watchdog's settings the CLI takes, by their name in perfsuite.core.options.
WATCHDOG_OPTIONS = ("loader_timeout", "deadline_warmup", "deadline_floor", "deadline_factor")
_PYTEST_FLAG = re.compile(r"--perfsuite-([a-z][a-z-]*)")
# A setting a hint names in the API's words (RunSpec's, the plugin fixture's): "declare target_samples_per_s".
_DECLARE = re.compile(r"\bdeclare ([a-z][a-z_]*)\b")


def cli_flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_watchdog_arguments(parser: argparse.ArgumentParser) -> None:
    """``--loader-timeout``, ``--deadline-warmup``, ``--deadline-floor``, ``--deadline-factor``: the plugin's
    options of the same names (their help, minimum and defaults)."""
    from perfsuite.core.options import OPTIONS, _checked

    group = parser.add_argument_group("watchdog: the loader timeout and the phase deadlines (the plugin's options)")
    for option in OPTIONS:
        if option.name in WATCHDOG_OPTIONS:
            group.add_argument(
                cli_flag(option.name),
                type=_checked(option),
                default=None,
                metavar=option.metavar,
                help=option.help_text(),
            )


def watchdog_from_args(args: argparse.Namespace, base: Any = None) -> Any:
    """The WatchdogConfig of the flags given over ``base`` (default: the defaults); a flag left out keeps base's."""
    import dataclasses

    from perfsuite.harness.watchdog import WatchdogConfig

    given = {name: getattr(args, name, None) for name in WATCHDOG_OPTIONS}
    fields = {"loader_timeout": "loader_timeout_s", "deadline_warmup": "warmup_s", "deadline_floor": "floor_s"}
    kwargs = {fields.get(name, "factor"): value for name, value in given.items() if value is not None}
    return dataclasses.replace(base if base is not None else WatchdogConfig(), **kwargs)


def for_command(text: str, args: argparse.Namespace) -> str:
    """``text`` with each ``--perfsuite-NAME`` the command also takes as ``--NAME`` written that way, and each
    ``declare NAME`` (a setting in the API's words) as ``pass --NAME R`` where the command takes it."""

    def swap(match: re.Match[str]) -> str:
        name = match.group(1).replace("-", "_")
        return cli_flag(name) if hasattr(args, name) else match.group(0)

    def declare(match: re.Match[str]) -> str:
        name = match.group(1)
        return f"pass {cli_flag(name)} R" if hasattr(args, name) else match.group(0)

    return _DECLARE.sub(declare, _PYTEST_FLAG.sub(swap, text))


# What a hint in pytest's words (the plugin, where most runs start) says for two Results of `perfsuite exec`:
# exec takes --steps and --out; it keeps one run per file, and `perfsuite ab` runs pytest's tests, not scripts.
_RERUN = "both scripts run again, one after the other, on a quiet machine (perfsuite exec --out FILE)"
_AB = r"`perfsuite ab[^`]*`(?: \([^)]*\)| for interleaved runs)?"
_BASE_RUNS = r"several base runs \(--perfsuite-save --perfsuite-baseline-runs \d+\)"
_EXEC_WORDS = (
    (re.compile(rf"a quieter runner, {_BASE_RUNS}, or {_AB}"), _RERUN),
    (re.compile(r"\(--steps (\d+), or --perfsuite-steps \d+\)"), r"(perfsuite exec --steps \1, for both scripts)"),
    (re.compile(r"\(--steps, or --perfsuite-steps\)"), "(perfsuite exec --steps N, for both scripts)"),
    (re.compile(_AB), _RERUN),
    (re.compile(r"\bcompare with perfsuite ab\b"), _RERUN),
    (re.compile(_BASE_RUNS), "the base script run again there (perfsuite exec --out FILE)"),
    (
        re.compile(r"record \d+ more \(nox -s baseline, or perfsuite run --repeat \d+ --out base\.json\)"),
        "a script's Result holds one run, so only a change beyond the run's own spread is decided; " + _RERUN,
    ),
    (
        re.compile(r"re-record the baseline with this perfsuite \(--perfsuite-save\)"),
        "run the base script again with this perfsuite (perfsuite exec --out BASE.json)",
    ),
    (re.compile(r"--perfsuite-steps (\d+)"), r"perfsuite exec --steps \1"),
)


def for_exec_results(text: str | None) -> str | None:
    """``text`` (a verdict's message or reason, or a hint) in the words of ``perfsuite exec``, for two Results
    of it compared: the options it takes, where pytest's were named."""
    if not text:
        return text
    for pattern, words in _EXEC_WORDS:
        text = pattern.sub(words, text)
    return text
