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


def _worker_temp_dir(out) -> None:  # a forked child: where multiprocessing puts its sockets (torch's workers' pymp-*)
    from multiprocessing import util

    out.put(util.get_temp_dir())


def test_forked_workers_share_the_main_process_socket_folder():
    """torch's workers die of the group's SIGTERM without their exit handlers: a folder of their own would stay."""
    import multiprocessing
    from multiprocessing import util

    with terminate_unwinds():
        out = multiprocessing.get_context("fork").SimpleQueue()
        child = multiprocessing.get_context("fork").Process(target=_worker_temp_dir, args=(out,))
        child.start()
        child.join(30)
        assert out.get() == util.get_temp_dir()


class _WorkerGone(RuntimeError):
    pass


@pytest.mark.parametrize(
    ("text", "main_gets_sigterm", "ended"),
    [
        ("DataLoader worker (pid 7) is killed by signal: Terminated. ", True, True),
        ("DataLoader worker (pid(s) 7) exited unexpectedly", True, True),  # torch lost the signal
        ("DataLoader worker (pid 7) is killed by signal: Terminated. ", False, False),  # that worker alone: its death
        ("DataLoader worker (pid 7) is killed by signal: Segmentation fault. ", False, False),  # its crash
    ],
)
def test_a_worker_killed_by_the_groups_sigterm_is_the_termination_not_a_crash(
    monkeypatch, text, main_gets_sigterm, ended
):
    """The group's SIGTERM reaches a worker before the main process's own arrives: the main one follows."""
    import threading

    monkeypatch.setattr(interrupts, "GROUP_SIGTERM_S", 5.0)
    with terminate_unwinds():
        if main_gets_sigterm:
            threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGTERM)).start()
        else:
            monkeypatch.setattr(interrupts, "GROUP_SIGTERM_S", 0.2)
        assert interrupts.ended_by_sigterm(_WorkerGone(text)) is ended


def test_a_batch_handover_reset_by_a_dying_worker_is_a_worker_death():
    """Under load torch may read the death as the worker's socket reset mid hand-over (ConnectionResetError)."""
    from perfsuite.harness import worker_death

    def receive() -> None:  # what multiprocessing's resource_sharer frame raises
        raise ConnectionResetError(104, "Connection reset by peer")

    receive.__code__ = receive.__code__.replace(co_filename="/usr/lib/python3.11/multiprocessing/resource_sharer.py")
    with pytest.raises(ConnectionResetError) as caught:
        receive()
    death = worker_death.worker_death(caught.value)
    assert death is not None and death.what().startswith("a DataLoader worker died while handing over a batch")
    assert worker_death.worker_death(ConnectionResetError(104, "elsewhere")) is None
