"""A background thread that calls one function at a fixed interval: the samplers' shared clockwork.

Sampling probes (host RSS, NVML telemetry) read in a daemon thread so the
measured step never waits for them. ``stop()`` is idempotent and joins the
thread, so it is safe in a ``finally`` after a run that raised.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Ticker:
    """Call ``tick()`` every ``interval_s`` seconds between ``start()`` and ``stop()``."""

    def __init__(self, tick: Callable[[], None], interval_s: float, name: str) -> None:
        self.tick = tick
        self.interval_s = interval_s
        self.name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.tick()

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> bool:
        """Stop and join; False when it was not running (a second stop, or no start)."""
        if self._thread is None:
            return False
        self._stop.set()
        self._thread.join()
        self._thread = None
        return True
