"""A watchdog for runs: a phase that hangs fails, naming the phase and the stuck worker, with stacks.

A DataLoader worker, a ``__getitem__`` or a training step that blocks would
otherwise hang the whole session with no output, and a GPU CI job would burn
its time limit without a report. Two limits guard a run:

* the **loader timeout** (``DataLoader(timeout=...)``, set by
  :func:`perfsuite.harness.pipeline.build_loader` when there are workers): a batch
  that takes longer than this from the workers fails;
* the **phase deadline**, kept by :class:`Watchdog` around each phase of a
  run (``warm-up``, ``observe``, ``window``). The warm-up's deadline is fixed
  (``warmup_s``: compilation happens there, and no step time is known yet).
  Later phases get ``max(floor_s, factor * slowest warm-up step * steps)``:
  a phase of ``steps`` steps fails when it takes ``factor`` times longer than
  the slowest warm-up step predicts, and never sooner than ``floor_s``.

On expiry the watchdog dumps the Python stacks of every thread of this process
(:mod:`faulthandler`) and asks the DataLoader workers for theirs (they register
``faulthandler`` on ``SIGUSR1`` in their init function, writing to a file the
watchdog reads back), then raises :class:`~perfsuite.errors.RunTimeout` in the
running thread, naming the phase, the deadline and the worker pid(s). The
caller (the runner, the plugin) fails that test and goes on with the next.

How the timer interrupts the run: in the main thread, ``SIGALRM`` via
``setitimer`` (as pytest-timeout's signal method does), which interrupts
``time.sleep``, queue waits and any Python code; the previous handler and
timer are restored afterwards. Off the main thread, a timer thread raises the
exception with ``PyThreadState_SetAsyncExc``, which lands only when the thread
next runs Python bytecode: a thread blocked inside one C call (a sleep, a lock)
is only interrupted when that call returns. Use the main thread for runs.

Usage (the runner's side)::

    with Watchdog(config, loader=batches) as dog:
        with dog.phase("warm-up"):
            for _ in range(warmup):
                t0 = time.perf_counter(); step(next(batches)); dog.record_step(time.perf_counter() - t0)
        with dog.phase("observe", steps=observe_steps):
            ...
        with dog.phase("window", steps=steps):
            ...
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import faulthandler
import functools
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any

from perfsuite.errors import PerfsuiteError, RunTimeout

DEFAULT_LOADER_TIMEOUT_S = 300.0
DEFAULT_WARMUP_S = 1800.0
DEFAULT_FLOOR_S = 120.0
DEFAULT_FACTOR = 20.0

# The signal workers dump their stacks on. POSIX only; elsewhere workers' stacks are not collected.
STACK_SIGNAL: int | None = getattr(signal, "SIGUSR1", None)

# Told (phase, deadline in seconds) as each phase starts and (phase, None) as it ends, so a process that
# supervises this one from outside (perfsuite.harness.distributed, for ranks) can enforce the same deadline
# when a hang sits in a C call this process's own alarm cannot interrupt.
PHASE_LISTENERS: list[Callable[[str, float | None], None]] = []


@dataclass(frozen=True)
class WatchdogConfig:
    """The limits of one run. ``enabled=False`` (``--perfsuite-no-watchdog``) turns phase deadlines off.

    ``loader_timeout_s`` is ``DataLoader(timeout=...)`` (0 or None: no loader
    timeout); ``warmup_s`` bounds the warm-up phase; later phases get
    ``max(floor_s, factor * slowest warm-up step * steps)`` (see :meth:`deadline`).
    ``grace_s`` is how long to wait for the workers to write their stacks.
    """

    loader_timeout_s: float | None = DEFAULT_LOADER_TIMEOUT_S
    warmup_s: float = DEFAULT_WARMUP_S
    floor_s: float = DEFAULT_FLOOR_S
    factor: float = DEFAULT_FACTOR
    enabled: bool = True
    grace_s: float = 1.0

    def __post_init__(self) -> None:
        for name in ("warmup_s", "floor_s", "factor"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise PerfsuiteError(
                    f"watchdog {name}={value!r} must be a positive number of "
                    f"{'times' if name == 'factor' else 'seconds'}, e.g. {name}=60"
                )
        t = self.loader_timeout_s
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t < float("inf")):
            raise PerfsuiteError(f"loader_timeout_s={t!r} must be a number of seconds >= 0 (0: no loader timeout)")

    def deadline(self, steps: int, slowest_step_s: float | None) -> float:
        """Seconds allowed for a phase of ``steps`` steps, given the slowest warm-up step (None: unknown)."""
        if slowest_step_s is None:
            return self.warmup_s
        return max(self.floor_s, self.factor * slowest_step_s * max(steps, 1))

    def loader_timeout(self) -> float:
        """The value for ``DataLoader(timeout=...)``: 0 means none."""
        return float(self.loader_timeout_s or 0.0)


# ---------------------------------------------------------------------------------------------- worker side


def stack_dir(parent_pid: int | None = None) -> Path:
    """Where the DataLoader workers of process ``parent_pid`` (default: this one) write their stacks."""
    pid = os.getpid() if parent_pid is None else parent_pid
    return Path(tempfile.gettempdir()) / f"perfsuite-stacks-{pid}"


_WORKER_STACK_FILE: IO[str] | None = None  # kept open in the worker: faulthandler writes to its descriptor


def install_worker_stack_dump(directory: str | os.PathLike[str]) -> None:
    """In a DataLoader worker: dump all threads' stacks to ``<directory>/<pid>.txt`` on ``SIGUSR1``.

    Called from the worker init function (see :func:`worker_init`). The file is
    removed when the worker exits normally; a killed worker's file goes with
    the parent's directory at the parent's exit.
    """
    global _WORKER_STACK_FILE
    if STACK_SIGNAL is None:
        return
    path = Path(directory) / f"{os.getpid()}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    _WORKER_STACK_FILE = open(path, "w", encoding="utf-8")  # noqa: SIM115 - must outlive this function
    faulthandler.register(STACK_SIGNAL, file=_WORKER_STACK_FILE, all_threads=True, chain=False)
    from multiprocessing import util

    util.Finalize(None, _remove_worker_file, args=(path,), exitpriority=1)


def _remove_worker_file(path: Path) -> None:
    if STACK_SIGNAL is not None:
        faulthandler.unregister(STACK_SIGNAL)
    if _WORKER_STACK_FILE is not None:
        _WORKER_STACK_FILE.close()
    path.unlink(missing_ok=True)


def worker_init(directory: str, inner: Any, worker_id: int) -> None:
    """A DataLoader ``worker_init_fn``: stack dumps on ``SIGUSR1``, then ``inner(worker_id)``.

    Use as ``functools.partial(worker_init, str(stack_dir()), inner)`` (a
    partial of module-level functions pickles, so it works with ``spawn`` too).
    """
    install_worker_stack_dump(directory)
    if inner is not None:
        inner(worker_id)


def make_worker_init(inner: Any = None) -> functools.partial[None]:
    """The ``worker_init_fn`` for a DataLoader built in this process (see :func:`worker_init`)."""
    directory = stack_dir()
    _cleanup_at_exit(directory)
    return functools.partial(worker_init, str(directory), inner)


@functools.cache
def _cleanup_at_exit(directory: Path) -> None:
    pid = os.getpid()

    def cleanup() -> None:
        if os.getpid() == pid:  # not in forked children, which inherit atexit handlers
            shutil.rmtree(directory, ignore_errors=True)

    atexit.register(cleanup)


# ---------------------------------------------------------------------------------------------- main side


@dataclass(frozen=True)
class WorkerState:
    """A DataLoader worker as the watchdog sees it: its id, pid, and whether the run waits on it."""

    worker_id: int
    pid: int
    waited_on: bool


def loader_workers(source: Any) -> list[WorkerState]:
    """The DataLoader workers behind ``source`` (a multiprocessing loader iterator, a DataLoader with
    persistent workers, or an object holding one in ``_it``), marking the one the next batch waits on.

    With no ``source`` at all, this process's multiprocessing children stand in; a source without
    workers (``num_workers=0``) has none.
    """
    if source is None:
        return [
            WorkerState(i, p.pid, False) for i, p in enumerate(multiprocessing.active_children()) if p.pid is not None
        ]
    it = _find_iterator(source, depth=0)
    if it is None:
        return []
    waited: int | None = None
    info = getattr(it, "_task_info", {}).get(getattr(it, "_rcvd_idx", -1))
    if isinstance(info, tuple) and len(info) == 1:  # (worker_id,): sent to that worker, not yet received
        waited = info[0]
    return [WorkerState(i, w.pid, i == waited) for i, w in enumerate(getattr(it, "_workers", [])) if w.pid is not None]


def _find_iterator(obj: Any, depth: int) -> Any:
    if obj is None or depth > 3:
        return None
    if isinstance(getattr(obj, "_workers", None), list):
        return obj
    for attr in ("_it", "_iterator", "iterator"):
        found = _find_iterator(getattr(obj, attr, None), depth + 1)
        if found is not None:
            return found
    return None


class _Expired(Exception):
    """Raised into a non-main thread by the timer; the phase turns it into RunTimeout."""


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class Watchdog:
    """Deadlines for the phases of one run; see the module docstring for the derivation and usage."""

    def __init__(
        self, config: WatchdogConfig | None = None, loader: Any = None, *, stream: IO[str] | None = None
    ) -> None:
        self.config = config or WatchdogConfig()
        self.loader = loader
        self.stream = stream  # where stacks are also written as they are dumped (default: sys.stderr)
        self.step_times: list[float] = []
        self._active: str | None = None
        self._pending: RunTimeout | None = None

    def __enter__(self) -> Watchdog:
        return self

    def __exit__(self, *exc: object) -> None:
        self._active = None

    def record_step(self, seconds: float) -> None:
        """Record one warm-up step's wall time; later deadlines derive from the slowest."""
        self.step_times.append(float(seconds))

    @property
    def slowest_step_s(self) -> float | None:
        return max(self.step_times) if self.step_times else None

    def deadline(self, steps: int) -> float:
        """The deadline of a phase of ``steps`` steps, from the warm-up steps recorded so far."""
        return self.config.deadline(steps, self.slowest_step_s)

    @contextlib.contextmanager
    def phase(self, name: str, steps: int = 1, deadline_s: float | None = None) -> Iterator[None]:
        """Run the body under a deadline: ``deadline_s``, else :meth:`deadline` of ``steps``.

        Raises RunTimeout when the deadline passes, or when the DataLoader's
        own timeout fires inside the body.
        """
        if self._active is not None:
            raise PerfsuiteError(f"watchdog phase {name!r} started inside phase {self._active!r}; end that first")
        limit = float(deadline_s) if deadline_s is not None else self.deadline(steps)
        self._active, self._pending = name, None
        disarm = self._arm(name, limit) if self.config.enabled else None
        for listener in PHASE_LISTENERS:
            listener(name, limit if self.config.enabled else None)
        try:
            yield
        except _Expired:
            raise (self._pending or self._expired(name, limit, "the deadline")) from None
        except RuntimeError as exc:
            if "DataLoader timed out" not in str(exc):
                raise
            timeout = self.config.loader_timeout()
            raise self._expired(name, timeout, f"the DataLoader timeout ({exc})") from exc
        finally:
            if disarm is not None:
                disarm()
            self._active = None
            for listener in PHASE_LISTENERS:
                listener(name, None)

    # -- arming -------------------------------------------------------------------------------------------

    def _arm(self, name: str, limit: float) -> Any:
        if _main_thread() and hasattr(signal, "setitimer"):
            return self._arm_signal(name, limit)
        return self._arm_thread(name, limit)

    def _arm_signal(self, name: str, limit: float) -> Any:
        def on_alarm(signum: int, frame: FrameType | None) -> None:
            raise self._expired(name, limit, "the deadline")

        old_handler = signal.signal(signal.SIGALRM, on_alarm)
        old_delay, _ = signal.setitimer(signal.ITIMER_REAL, limit)
        started = time.monotonic()

        def disarm() -> None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_handler)
            if old_delay:  # someone else's timer (pytest-timeout): give it back what is left of it
                signal.setitimer(signal.ITIMER_REAL, max(old_delay - (time.monotonic() - started), 1e-3))

        return disarm

    def _arm_thread(self, name: str, limit: float) -> Any:
        target = threading.get_ident()
        done = threading.Event()

        def fire() -> None:
            if done.wait(limit):
                return
            self._pending = self._expired(name, limit, "the deadline")
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), ctypes.py_object(_Expired))

        timer = threading.Thread(target=fire, name=f"perfsuite-watchdog-{name}", daemon=True)
        timer.start()
        return done.set

    # -- expiry -------------------------------------------------------------------------------------------

    def _expired(self, phase: str, limit: float, what: str) -> RunTimeout:
        """Dump every stack, then build the exception that names the phase and the workers."""
        workers = loader_workers(self.loader)
        stuck = [w for w in workers if w.waited_on] or workers
        stacks = [f"--- Python stacks of the main process (pid {os.getpid()}) ---", _own_stacks()]
        stacks += _worker_stacks(stuck, self.config.grace_s)
        text = "\n".join(stacks)
        out = self.stream or sys.stderr
        with contextlib.suppress(Exception):
            out.write(f"\nperfsuite watchdog: {phase} phase passed {what}\n{text}\n")
            out.flush()
        if stuck:
            names = ", ".join(f"worker {w.worker_id} (pid {w.pid})" for w in stuck)
            waiting = (
                f"waiting on DataLoader {names}"
                if any(w.waited_on for w in stuck)
                else (f"DataLoader workers alive: {names}")
            )
        else:
            waiting = "no DataLoader workers: the hang is in this process (__getitem__ with num_workers=0, or the step)"
        how = self._how_derived(phase, limit, what)
        message = (
            f"the {phase} phase passed {what} of {limit:.1f} s: {waiting}. {how}\nPython stacks at expiry:\n{text}"
        )
        return RunTimeout(message, phase, limit, tuple(w.pid for w in stuck), text)

    def _how_derived(self, phase: str, limit: float, what: str) -> str:
        c = self.config
        if what.startswith("the DataLoader timeout"):
            return (
                "A batch took longer than the loader timeout; raise it with --perfsuite-loader-timeout "
                "if the workers are only slow."
            )
        if self.slowest_step_s is None:
            return (
                f"No warm-up step time was known, so the limit is warmup_s={c.warmup_s:g}; raise it with "
                "--perfsuite-deadline-warmup if compilation is slow."
            )
        return (
            f"The limit is max(floor {c.floor_s:g} s, factor {c.factor:g} x slowest warm-up step "
            f"{self.slowest_step_s:.3f} s x steps); raise --perfsuite-deadline-floor or "
            "--perfsuite-deadline-factor if the steps are only slow."
        )


def _own_stacks() -> str:
    with tempfile.TemporaryFile("w+", encoding="utf-8") as fh:
        faulthandler.dump_traceback(file=fh, all_threads=True)
        fh.seek(0)
        return fh.read().rstrip()


def _worker_stacks(workers: list[WorkerState], grace_s: float) -> list[str]:
    """Signal each worker to dump its stacks, wait up to ``grace_s`` for them, return what they wrote."""
    if STACK_SIGNAL is None or not workers:
        return []
    directory = stack_dir()
    files = {w.pid: directory / f"{w.pid}.txt" for w in workers}
    for w in workers:
        with contextlib.suppress(OSError):
            os.kill(w.pid, STACK_SIGNAL)
    deadline = time.monotonic() + grace_s
    texts: dict[int, str] = {}
    while time.monotonic() < deadline and len(texts) < len(files):
        for pid, path in files.items():
            if pid not in texts:
                with contextlib.suppress(OSError):
                    if "File " in path.read_text(encoding="utf-8", errors="replace"):
                        texts[pid] = ""
        time.sleep(0.05)
    for pid in texts:  # read again, now that the dump had time to finish
        with contextlib.suppress(OSError):
            texts[pid] = files[pid].read_text(encoding="utf-8", errors="replace").rstrip()
    out = []
    for w in workers:
        body = texts.get(w.pid) or (
            "(no stacks: the worker did not answer SIGUSR1; was it built by perfsuite.harness.pipeline.build_loader?)"
        )
        out += [f"--- Python stacks of DataLoader worker {w.worker_id} (pid {w.pid}) ---", body]
    return out
