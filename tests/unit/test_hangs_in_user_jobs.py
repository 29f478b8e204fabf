"""Hangs in a user's own job: the diagnosis never kills a worker, names where the hang is, and a hung first
batch fails on the loader timeout (applied to the user's loader for the run, then put back).

No timing assertions: deadlines here are seconds, and each test is guarded by faulthandler so a
watchdog failure dies with stacks instead of hanging the suite.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

import perfsuite
from perfsuite.errors import RunTimeout
from perfsuite.harness import watchdog
from perfsuite.harness.runner import RunSpec, run
from perfsuite.harness.watchdog import WatchdogConfig, WorkerState

OUTER_GUARD_S = 150


@pytest.fixture(autouse=True)
def _outer_guard() -> Iterator[None]:
    faulthandler.dump_traceback_later(OUTER_GUARD_S, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


class Squares(Dataset):
    """8 tiny samples; ``hang_from`` makes every later index block forever, as a stuck read would."""

    def __init__(self, hang_from: int | None = None) -> None:
        self.hang_from = hang_from

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.hang_from is not None and index >= self.hang_from:
            users_read_that_never_returns()
        return torch.full((4,), float(index)), torch.tensor(index % 2)


def users_read_that_never_returns() -> None:
    while True:
        time.sleep(3600)


def users_step_that_hangs() -> None:
    while True:
        time.sleep(3600)


class MarkWorkers:
    """The user's own worker_init_fn: leaves a file per worker, so the test can see it still ran."""

    def __init__(self, directory: Path) -> None:
        self.directory = str(directory)

    def __call__(self, worker_id: int) -> None:
        Path(self.directory, f"init-{worker_id}").write_text(str(os.getpid()))


def user_job(loader: DataLoader, hang_step_at: int | None = None) -> perfsuite.Job:
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    calls = [0]

    def step(batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        calls[0] += 1
        if hang_step_at is not None and calls[0] >= hang_step_at:
            users_step_that_hangs()
        x, y = batch
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return perfsuite.Job(step=step, model=model, optimizer=optimizer, loader=loader, name="hang_test")


def spec(job: perfsuite.Job, config: WatchdogConfig) -> RunSpec:
    return RunSpec(job, steps=2, warmup=2, observe_steps=1, sol_steps=0, watchdog=config)


def children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def test_a_users_hung_step_is_named_as_the_step_and_its_healthy_workers_are_not_harmed(tmp_path: Path) -> None:
    """Before: every worker got SIGUSR1 without a handler and died; torch's "killed by signal" replaced the message."""
    before = children()
    loader = DataLoader(Squares(), batch_size=2, num_workers=2, worker_init_fn=MarkWorkers(tmp_path))
    config = WatchdogConfig(loader_timeout_s=0, warmup_s=3, grace_s=2)
    with pytest.raises(RunTimeout) as info:
        run(spec(user_job(loader, hang_step_at=2), config), probes=[])
    err = info.value
    assert err.phase == "warm-up" and err.where == "step" and err.workers == ()
    assert "the hang is in the step, at " in str(err) and "users_step_that_hangs" in err.site
    assert "test_hangs_in_user_jobs.py" in err.site
    assert "are alive and not waited on" in str(err)
    assert "killed by signal" not in str(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["init-0", "init-1"]  # the user's init still ran
    assert loader.worker_init_fn.__class__ is MarkWorkers and loader.timeout == 0  # put back after the run
    assert children() == before  # and its workers stopped when the run failed, not at garbage collection


def test_a_hung_first_batch_of_a_users_loader_fails_on_the_loader_timeout_with_the_workers_stacks(
    tmp_path: Path,
) -> None:
    """Before: the loader timeout applied only to perfsuite's loaders; this failed at the 1800 s warm-up deadline."""
    before = children()
    loader = DataLoader(Squares(hang_from=0), batch_size=2, num_workers=1, worker_init_fn=MarkWorkers(tmp_path))
    config = WatchdogConfig(loader_timeout_s=2, warmup_s=600, grace_s=5)
    with pytest.raises(RunTimeout) as info:
        run(spec(user_job(loader), config), probes=[])
    err = info.value
    assert err.phase == "first batch" and err.where == "worker" and len(err.workers) == 1
    assert f"the hang is in DataLoader worker 0 (pid {err.workers[0]})" in str(err)
    assert err.deadline_s == 2  # the loader timeout, whichever of it and the phase deadline fired first
    assert "users_read_that_never_returns" in err.stacks  # the worker's own stack, through the chained init
    assert (tmp_path / "init-0").exists()
    assert loader.timeout == 0 and isinstance(loader.worker_init_fn, MarkWorkers)
    assert children() == before


def _sleeper() -> None:
    users_read_that_never_returns()


def test_a_worker_without_the_handler_is_read_from_outside_and_never_signalled() -> None:
    """A worker that cannot handle SIGUSR1 would die of it: its stacks come from py-spy or /proc instead."""
    child = multiprocessing.get_context("fork").Process(target=_sleeper, daemon=True)
    child.start()
    try:
        assert child.pid is not None
        time.sleep(0.5)
        [text] = watchdog._worker_stacks([WorkerState(0, child.pid, True)], grace_s=0.5)[1:]
        assert child.is_alive()  # never killed to be diagnosed
        assert "read with py-spy" in text or "/proc says" in text
        if "read with py-spy" in text:
            assert "users_read_that_never_returns" in text
    finally:
        child.terminate()
        child.join(5)


def test_locate_reads_the_place_from_the_stack_without_touching_the_run() -> None:
    import sys

    place = watchdog.locate(sys._getframe())
    assert place.kind == "main thread" and not place.waiting
    assert "test_locate_reads_the_place_from_the_stack" in place.site


def test_stack_folders_of_dead_processes_are_swept(tmp_path: Path) -> None:
    dead = multiprocessing.get_context("fork").Process(target=int)
    dead.start()
    dead.join()
    gone = tmp_path / f"perfsuite-stacks-{dead.pid}"
    live = tmp_path / f"perfsuite-stacks-{os.getpid()}"
    for d in (gone, live):
        d.mkdir()
        (d / "1.txt").write_text("x")
    assert watchdog.sweep_stack_dirs(tmp_path) == [gone]
    assert live.exists() and not gone.exists()


def test_a_loader_that_is_not_a_torch_dataloader_says_why_no_timeout_was_applied() -> None:
    from perfsuite.harness import workers

    with workers.lease([1, 2, 3], timeout_s=5) as lease:
        assert lease.notes and "not a torch DataLoader" in lease.notes[0]
    loader = DataLoader(Squares(), batch_size=2, num_workers=1, timeout=7)
    with workers.lease(loader, timeout_s=5) as lease:
        assert loader.timeout == 7 and not lease.notes  # the user's own timeout is kept
        assert watchdog.installs_stack_dump(loader.worker_init_fn)
    assert loader.worker_init_fn is None
