"""Progress for people at a terminal (rich); nothing under CI or when the output is piped.

The search takes minutes. At a terminal, one live line says which step runs and which round, and each
decided step is printed as it is decided. Under CI (``CI`` set) or when stderr is not a terminal,
nothing is printed while it runs: the report at the end says everything, once.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

from perfsuite.tools.tune.records import Trial


def trial_line(trial: Trial) -> str:
    """``num_workers 1 -> 2: gain, samples/s x1.42 [1.30..1.55], 8 pairs``."""
    speed = trial.speedup()
    pairs = trial.decision.pairs if trial.decision else 0
    figures = f", samples/s x{speed[0]:.3f} [{speed[1]:.3f}..{speed[2]:.3f}], {pairs} pairs" if speed else ""
    frm, to = trial.base.get(trial.knob), trial.head.get(trial.knob)
    show = ("default" if frm is None else frm), ("default" if to is None else to)
    return f"{trial.knob} {show[0]} -> {show[1]}: {trial.outcome}{figures}"


class Quiet:
    """No output while the search runs."""

    def update(self, text: str) -> None:
        pass

    def trial_done(self, trial: Trial) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


class Live(Quiet):
    """A rich status line on stderr, and one printed line per decided step."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console

        self.console = Console(file=stream)
        self.status: Any = self.console.status("perfsuite tune: starting")
        self.status.start()

    def update(self, text: str) -> None:
        self.status.update(f"perfsuite tune: {text}")

    def trial_done(self, trial: Trial) -> None:
        self.console.print(f"  {trial_line(trial)}", highlight=False, markup=False)

    def note(self, text: str) -> None:
        self.console.print(f"  {text}", highlight=False, markup=False, style="dim")

    def close(self) -> None:
        self.status.stop()


def for_stream(stream: TextIO | None = None) -> Quiet:
    """Live at an interactive terminal outside CI, else quiet."""
    stream = stream or sys.stderr
    if os.environ.get("CI", "").lower() not in ("", "0", "false") or not stream.isatty():
        return Quiet()
    return Live(stream)
