"""The watchdog: a hung worker, __getitem__ or step fails within its deadline, naming the phase and
the worker, with the Python stacks; and it leaves the process's signal handling as it found it.

Each test is guarded by faulthandler.dump_traceback_later(exit=True): should the watchdog itself
fail, the process dies with the stacks instead of hanging the suite. No timing assertions.
"""

from __future__ import annotations

import faulthandler
import io
import signal
import threading
import time
from collections.abc import Iterator

import pytest
import torch

from perfsuite.core.knobs import Knobs
from perfsuite.errors import PerfsuiteError, RunTimeout
from perfsuite.harness.pipeline import build_loader
from perfsuite.harness.watchdog import Watchdog, WatchdogConfig, loader_workers

OUTER_GUARD_S = 120


@pytest.fixture(autouse=True)
def _outer_guard() -> Iterator[None]:
    faulthandler.dump_traceback_later(OUTER_GUARD_S, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


class HangingDataset(torch.utils.data.Dataset[torch.Tensor]):
    """Item 0 is served; every later item blocks forever, as a stuck file read would."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> torch.Tensor:
        if index > 0:
            block_forever_in_getitem()
        return torch.zeros(2)


def block_forever_in_getitem() -> None:
    while True:
        time.sleep(3600)


def sleeping_step() -> None:
    time.sleep(3600)


def quiet() -> io.StringIO:
    return io.StringIO()


def test_hung_worker_fails_on_the_loader_timeout_naming_the_worker_with_its_stacks() -> None:
    loader = build_loader(
        HangingDataset(), Knobs.from_flat(num_workers=1, device="cpu"), batch_size=1, seed=0, shuffle=False, timeout_s=2
    )
    assert loader.timeout == 2
    it = iter(loader)
    out = quiet()
    dog = Watchdog(WatchdogConfig(loader_timeout_s=2, grace_s=5), loader=it, stream=out)
    with pytest.raises(RunTimeout) as info, dog.phase("window", deadline_s=60):
        for _ in range(3):
            next(it)
    err = info.value
    pid = it._workers[0].pid
    assert err.phase == "window" and err.workers == (pid,)
    assert f"worker 0 (pid {pid})" in str(err) and "DataLoader timeout" in str(err)
    assert "block_forever_in_getitem" in err.stacks and "__getitem__" in err.stacks  # the worker's own stack
    assert "block_forever_in_getitem" in out.getvalue()  # also written out as it fired
    it._workers[0].terminate()  # it never returns; shutting down would wait 5 s for it
    it._shutdown_workers()


def test_hung_getitem_without_workers_fails_on_the_phase_deadline() -> None:
    loader = build_loader(
        HangingDataset(), Knobs.from_flat(num_workers=0, device="cpu"), batch_size=1, seed=0, shuffle=False
    )
    it = iter(loader)
    with pytest.raises(RunTimeout) as info, Watchdog(loader=it, stream=quiet()).phase("warm-up", deadline_s=1):
        for _ in range(3):
            next(it)
    err = info.value
    assert err.phase == "warm-up" and err.workers == ()
    assert "the warm-up phase passed the deadline of 1.0 s" in str(err)
    assert "the hang is in the main thread, in the dataset (num_workers=0" in str(err) and err.where == "main thread"
    assert "block_forever_in_getitem" in err.site
    assert "block_forever_in_getitem" in err.stacks


def test_hung_step_fails_on_a_deadline_derived_from_the_warmup_steps() -> None:
    dog = Watchdog(WatchdogConfig(floor_s=0.5, factor=2.0), stream=quiet())
    dog.record_step(0.05)
    dog.record_step(0.2)
    assert dog.deadline(3) == pytest.approx(1.2)  # 2 x 0.2 s x 3 steps, above the 0.5 s floor
    with pytest.raises(RunTimeout) as info, dog.phase("observe", steps=3):
        sleeping_step()
    assert info.value.phase == "observe" and info.value.deadline_s == pytest.approx(1.2)
    assert "sleeping_step" in info.value.stacks and "slowest warm-up step 0.200 s" in str(info.value)


def test_deadline_derivation_and_its_floor() -> None:
    config = WatchdogConfig(warmup_s=600, floor_s=30, factor=10)
    assert config.deadline(5, None) == 600  # nothing measured yet: the warm-up limit
    assert config.deadline(5, 0.1) == 30  # 10 x 0.1 x 5 = 5 s is under the floor
    assert config.deadline(100, 0.1) == 100


@pytest.mark.parametrize(
    "bad", [{"floor_s": 0}, {"factor": -1}, {"warmup_s": float("inf")}, {"loader_timeout_s": -1}, {"floor_s": True}]
)
def test_bad_config_is_refused_with_the_fix(bad: dict[str, float]) -> None:
    with pytest.raises(PerfsuiteError, match="must be"):
        WatchdogConfig(**bad)  # type: ignore[arg-type]


def test_a_phase_that_ends_in_time_restores_the_previous_alarm_handler() -> None:
    def previous(signum: int, frame: object) -> None:
        raise AssertionError("the old handler must not fire")

    old = signal.signal(signal.SIGALRM, previous)
    try:
        with Watchdog().phase("window", deadline_s=30):
            pass
        assert signal.getsignal(signal.SIGALRM) is previous
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        signal.signal(signal.SIGALRM, old)


def test_a_phase_that_fails_before_its_body_leaves_no_timer_armed() -> None:
    """A phase listener that raises after the timer is set (as a Ctrl-C landing there would): the timer and
    handler are put back all the same. Before, they stayed armed, and fired 120 s on in a later test on CI."""
    from perfsuite.harness import watchdog

    def previous(signum: int, frame: object) -> None:
        raise AssertionError("the old handler must not fire")

    def failing(name: str, limit: float | None) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, previous)
    watchdog.PHASE_LISTENERS.append(failing)
    try:
        with pytest.raises(KeyboardInterrupt), Watchdog().phase("window", deadline_s=30):
            raise AssertionError("the body must not run")
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
        assert signal.getsignal(signal.SIGALRM) is previous
    finally:
        watchdog.PHASE_LISTENERS.remove(failing)
        signal.signal(signal.SIGALRM, old)


def test_a_timer_left_behind_by_an_ended_phase_passes_the_alarm_on_and_fails_nothing() -> None:
    """A Ctrl-C between the steps of arming can leave the timer set: when it fires after the phase, the handler it
    finds passes the signal to the one it replaced instead of raising RunTimeout in whatever runs then."""
    fired: list[int] = []
    old = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    try:
        dog = Watchdog()
        with dog.phase("window", deadline_s=30):
            stale = signal.getsignal(signal.SIGALRM)
        assert callable(stale)
        stale(signal.SIGALRM, None)  # the handler as a leaked timer would find it, after the phase ended
        assert fired == [signal.SIGALRM]
    finally:
        signal.signal(signal.SIGALRM, old)


def test_release_disarms_a_phase_left_outside_its_exitstack_and_its_late_close_undoes_nothing() -> None:
    """An exception landing as a phase is entered leaves it outside the ExitStack that would close it: the run's
    release() disarms it, and the generator closed later (by the collector) leaves a newer timer alone."""
    fired: list[int] = []
    old = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    try:
        dog = Watchdog()
        entered = dog.phase("window", deadline_s=30)
        entered.__enter__()
        dog.release()
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
        signal.setitimer(signal.ITIMER_REAL, 50)  # someone else's, set after the run
        entered.__exit__(None, None, None)
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < remaining <= 50 and not fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_someone_elses_timer_keeps_running_after_a_phase() -> None:
    fired: list[int] = []
    old = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    signal.setitimer(signal.ITIMER_REAL, 50)
    try:
        with Watchdog().phase("window", deadline_s=30):
            pass
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < remaining <= 50 and not fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_off_the_main_thread_the_watchdog_interrupts_python_code() -> None:
    caught: list[BaseException] = []

    def body() -> None:
        try:
            with Watchdog(stream=quiet()).phase("window", deadline_s=0.5):
                while True:  # Python bytecode between short sleeps: the async exception lands
                    time.sleep(0.01)
        except RunTimeout as exc:
            caught.append(exc)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(OUTER_GUARD_S / 2)
    assert not thread.is_alive()
    assert len(caught) == 1 and caught[0].args and "window" in str(caught[0])


def test_nested_phases_are_refused() -> None:
    dog = Watchdog()
    with (
        dog.phase("warm-up", deadline_s=30),
        pytest.raises(PerfsuiteError, match="inside phase 'warm-up'"),
        dog.phase("window", deadline_s=30),
    ):
        pass


def test_a_loader_without_workers_has_none() -> None:
    loader = build_loader(HangingDataset(), Knobs.from_flat(num_workers=0, device="cpu"), batch_size=1, seed=0)
    assert loader_workers(iter(loader)) == []


def test_a_phase_of_a_trillion_steps_has_a_deadline_a_timer_can_hold():
    """--steps 10**12 once overflowed the thread timer's wait (OverflowError: timestamp out of range for platform
    time_t) after the warm-up; the deadline is now capped, the steps refused before any work (MAX_STEPS)."""
    import threading

    from perfsuite.harness.watchdog import MAX_DEADLINE_S, Watchdog

    dog = Watchdog()
    dog.step_times.append(0.5)
    assert dog.deadline(10**12) == MAX_DEADLINE_S
    errors: list[BaseException] = []

    def window() -> None:
        try:
            with dog.phase("window", steps=10**12):
                pass
        except BaseException as exc:  # noqa: BLE001 - the assertion below shows it
            errors.append(exc)

    window()  # the main thread's timer (setitimer)
    thread = threading.Thread(target=window)  # another thread's (a timer thread's wait)
    thread.start()
    thread.join()
    assert errors == []
