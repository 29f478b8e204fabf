"""Progress for `perfsuite run` on a terminal: one line per phase, drawn with rich; nothing under CI or piped.

The runner calls the callback at each phase's start and end and per step outside
the measured window (``RunSpec.progress``), never between the window's steps.
The display is redrawn only from those calls (``auto_refresh=False``: no
refresh thread), so nothing of perfsuite's runs while the window is measured.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

Show = Callable[[str, int, int], None]

PHASE_TEXT = {
    "first batch": "waiting for the first batch (workers starting)",
    "warm-up": "warm-up (excluded from every figure)",
    "window": "measured window (not redrawn while measuring)",
    "speed of light": "speed of light (one batch kept on the device)",
    "observe": "observed steps (probes counting)",
}


def enabled(stream: Any = None) -> bool:
    """On a terminal and not under CI (the same rule as dataset generation's progress)."""
    from perfsuite.jobs.workloads.data import show_progress

    return show_progress() if stream is None else bool(stream.isatty()) and show_progress()


@contextlib.contextmanager
def phase_progress(label: str, stream: Any = None, force: bool | None = None) -> Iterator[Show | None]:
    """A ``progress(phase, done, total)`` callback that draws on ``stream`` (stderr), or None when quiet."""
    on = enabled(stream) if force is None else force
    if not on:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(file=stream or sys.stderr, force_terminal=True if force else None)
    bar = Progress(
        TextColumn("[bold]{task.fields[label]}[/bold] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        auto_refresh=False,
        transient=True,
    )
    task = bar.add_task("starting", total=1, label=label)

    def show(phase: str, done: int, total: int) -> None:
        bar.update(task, description=PHASE_TEXT.get(phase, phase), completed=done, total=max(total, 1))
        bar.refresh()

    with bar:
        yield show
