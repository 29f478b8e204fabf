"""SIGTERM unwinds a run (perfsuite.harness.interrupts.terminate_unwinds), even where the first is swallowed."""

from __future__ import annotations

import os
import signal
import time

import pytest

from perfsuite.harness import interrupts
from perfsuite.harness.interrupts import Terminated, terminate_unwinds


def test_a_sigterm_swallowed_where_it_landed_is_sent_again_until_the_body_unwinds(monkeypatch):
    monkeypatch.setattr(interrupts, "RESEND_S", 0.1)
    before = signal.getsignal(signal.SIGTERM)
    swallowed = 0
    with pytest.raises(Terminated), terminate_unwinds("perfsuite: terminated"):
        try:  # where a DataLoader forks its workers, an at-fork hook drops the exception as "unraisable"
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        except Terminated:
            swallowed += 1
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # the run goes on: the next SIGTERM lands here
            time.sleep(0.01)
    assert swallowed == 1 and time.monotonic() < deadline
    assert signal.getsignal(signal.SIGTERM) is before  # the previous handler is back
