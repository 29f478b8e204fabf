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


class LiveLine:
    """One line redrawn in place on a terminal: ``label: text · 42 s · about 1 min 20 s left``.

    Redrawn only when :meth:`update` is called (no refresh thread) unless ``ticking``, which redraws the elapsed
    time once a second for a wait on other processes (ranks under torchrun), never for work in this process.
    When the text names ``round k/N``, the time left is estimated from the rounds done (from the first round on).
    It writes to a duplicate of the terminal's file descriptor, so pytest's output capture (perfsuite doctor on
    a test id runs the test under pytest in this process) does not swallow it.
    """

    def __init__(self, label: str, stream: Any = None, ticking: bool = False) -> None:
        import os
        import re
        import time

        from rich.console import Console
        from rich.live import Live

        self._time, self._round = time.perf_counter, re.compile(r"\bround (\d+)/(\d+)")
        self.label, self.text, self.start = label, "starting", time.perf_counter()
        self.round_starts: dict[int, float] = {}
        stream = stream or sys.stderr
        try:
            self._file: Any = os.fdopen(os.dup(stream.fileno()), "w", buffering=1, encoding="utf-8")
        except (AttributeError, OSError, ValueError):  # no descriptor (a test's StringIO): write to the stream
            self._file = None
        console = Console(file=self._file or stream, force_terminal=True, highlight=False)
        self._live = Live(self, console=console, auto_refresh=ticking, refresh_per_second=1, transient=True)
        self._live.start(refresh=True)  # drawn at once: "starting", with the elapsed time

    def __rich__(self) -> Any:
        from rich.text import Text

        now = self._time()
        line = Text()
        line.append(f"{self.label}: ", style="bold")
        line.append(self.text)
        line.append(f" · {_clock(now - self.start)}", style="dim")
        left = self.time_left(now)
        if left is not None:
            line.append(f" · about {_clock(left)} left", style="dim")
        return line

    def time_left(self, now: float) -> float | None:
        """From the rounds started so far: (rounds left, this one included) x the mean finished round."""
        found = self._round.search(self.text)
        if not found or len(self.round_starts) < 2:
            return None
        k, n = int(found.group(1)), int(found.group(2))
        first, last = min(self.round_starts), max(self.round_starts)
        per_round = (self.round_starts[last] - self.round_starts[first]) / (last - first)
        return max(0.0, per_round * (n - k + 1) - (now - self.round_starts[last]))

    def update(self, text: str) -> None:
        self.text = text
        found = self._round.search(text)
        if found:
            self.round_starts.setdefault(int(found.group(1)), self._time())
        self._live.refresh()

    def stop(self) -> None:
        if self._live.is_started:
            self._live.stop()
        if self._file is not None:
            self._file.close()
            self._file = None


def _clock(seconds: float) -> str:
    """Whole seconds for a live line (``42 s``, ``3 min 05 s``): tenths would flicker."""
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def live_line(label: str, stream: Any = None, ticking: bool = False, force: bool | None = None) -> LiveLine | None:
    """A :class:`LiveLine` on a terminal (not under CI); None when quiet (piped, CI), so callers print nothing."""
    on = enabled(stream) if force is None else force
    return LiveLine(label, stream, ticking) if on else None


@contextlib.contextmanager
def waiting(label: str, stream: Any = None, force: bool | None = None) -> Iterator[Callable[[str], None]]:
    """A ticking live line for a wait on other processes (a multi-rank launch); ``note(text)`` changes its text."""
    line = live_line(label, stream, ticking=True, force=force)
    if line is not None:
        line.update("starting")
    try:
        yield (line.update if line else lambda text: None)
    finally:
        if line:
            line.stop()
