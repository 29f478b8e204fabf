"""A rank that dies or hangs fails the run within the watchdog's deadline, with each rank's stacks, and the
launch leaves no process behind (ranks, their DataLoader workers, torchrun itself).

Each test is one real two-rank launch of a user's job (tests/faults/ddp_jobs.py) with short deadlines.
"""

from __future__ import annotations

import time

import psutil
import pytest

from perfsuite.errors import RankError, RunTimeout
from perfsuite.harness.ranks.launch import launch, rank_run
from perfsuite.harness.runner import RunSpec
from perfsuite.harness.watchdog import WatchdogConfig

pytestmark = pytest.mark.slow

SHORT = WatchdogConfig(loader_timeout_s=10.0, warmup_s=60.0, floor_s=3.0, factor=3.0, grace_s=0.5)


def _launch(factory) -> None:
    spec = RunSpec(factory, steps=6, warmup=1, observe_steps=0, sol_steps=0, watchdog=SHORT)
    launch([rank_run(spec)], 2)


def _descendants() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def test_a_rank_that_raises_fails_the_run_naming_it_and_nothing_is_left() -> None:
    from ddp_jobs import dying_job

    before = _descendants()
    with pytest.raises(RankError) as info:
        _launch(dying_job)
    message = str(info.value)
    assert info.value.rank == 1 and "rank 1 failed in window: RuntimeError: rank 1 broke on purpose" in message
    # The rank left waiting in the all-reduce: gloo tells it its peer is gone (or torchrun stops it, and it dumps
    # its stacks on the way); either way the report says where it was.
    assert "--- rank 0 failed after it, in window" in message or "--- Python stacks of rank 0" in message
    assert _descendants() <= before


def test_a_rank_stuck_where_its_own_alarm_cannot_reach_is_stopped_by_the_supervisor() -> None:
    from ddp_jobs import stuck_job

    before = _descendants()
    started = time.monotonic()
    with pytest.raises(RunTimeout) as info:
        _launch(stuck_job)
    message = str(info.value)
    assert info.value.phase == "window" and "could not stop it" in message
    # Its progress counters say who the others wait for; the stacks say where each rank is.
    assert "Rank 1 did not reach the collective the others wait in" in message
    assert "--- Python stacks of rank 0" in message and "--- Python stacks of rank 1" in message
    assert "ddp_jobs.py" in info.value.stacks  # rank 1's stack shows where it is stuck
    assert _descendants() <= before
    assert time.monotonic() - started < 600  # an outer bound only: never a hang of the test session


def test_a_job_without_ddp_is_refused_on_two_ranks() -> None:
    from ddp_jobs import plain_model_job

    with pytest.raises(RankError, match="JobError: .* not a DistributedDataParallel module: each rank would train"):
        _launch(plain_model_job)
