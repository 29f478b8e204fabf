"""SIGTERM unwinds a run (perfsuite.harness.interrupts.terminate_unwinds), even where the first is dropped."""

from __future__ import annotations

import os
import signal
import time

import pytest

from perfsuite.harness import interrupts
from perfsuite.harness.interrupts import Terminated, terminate_unwinds


class _KillsInDel:
    """Where a DataLoader forks its workers, an at-fork hook runs; an exception raised there is dropped as
    "unraisable", as one raised in a ``__del__`` is."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        sum(range(1000))  # the handler runs here, inside __del__


def test_a_sigterm_dropped_where_it_landed_is_sent_again_and_unwinds_the_body():
    before = signal.getsignal(signal.SIGTERM)
    reached = []
    with pytest.raises(Terminated), terminate_unwinds():
        victim = _KillsInDel()
        del victim  # the first Terminated is dropped here
        reached.append("after the drop")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the run goes on: the SIGTERM sent again lands here
            time.sleep(0.01)
        reached.append("never")
    assert reached == ["after the drop"]
    assert signal.getsignal(signal.SIGTERM) is before  # the previous handler is back


def test_a_sigterm_in_a_shielded_block_waits_for_its_end():
    done = []
    with pytest.raises(Terminated), terminate_unwinds(), interrupts.shielded():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        done.append("the cleanup finished")
    assert done == ["the cleanup finished"] and not interrupts.GUARD.terminate
