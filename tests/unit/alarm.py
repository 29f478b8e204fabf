"""An interruption of the main thread at a set time, as the watchdog's deadline (``SIGALRM``) or a Ctrl-C lands."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def raising_after(seconds: float, exc: type[BaseException]) -> Iterator[None]:
    """``exc`` raised in the main thread ``seconds`` from now; the previous handler and timer restored after."""

    def interrupt(signum: int, frame: Any) -> None:
        raise exc

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
