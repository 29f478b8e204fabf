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
import importlib.util
import multiprocessing
import os
import shutil
import signal
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any

import psutil

from perfsuite.errors import PerfsuiteError, RunTimeout

DEFAULT_LOADER_TIMEOUT_S = 300.0
DEFAULT_WARMUP_S = 1800.0
DEFAULT_FLOOR_S = 120.0
DEFAULT_FACTOR = 20.0
# No deadline is longer (30 days): a phase of 10**12 steps would ask for one past what a timer can hold (the
# thread's wait overflows the platform's time_t); the steps themselves are bounded before any work (MAX_STEPS).
MAX_DEADLINE_S = 30 * 24 * 3600.0

# The signal workers dump their stacks on. POSIX only; elsewhere workers' stacks are not collected.
STACK_SIGNAL: int | None = getattr(signal, "SIGUSR1", None)

# Told (phase, deadline in seconds) as each phase starts and (phase, None) as it ends, so a process that
# supervises this one from outside (perfsuite.harness.ranks.launch, for ranks) can enforce the same deadline
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
            return min(self.warmup_s, MAX_DEADLINE_S)
        return min(max(self.floor_s, self.factor * slowest_step_s * max(steps, 1)), MAX_DEADLINE_S)

    def loader_timeout(self) -> float:
        """The value for ``DataLoader(timeout=...)``: 0 means none."""
        return float(self.loader_timeout_s or 0.0)

    def first_batch_deadline(self) -> float:
        """The first batch's own limit: the loader timeout (workers start and fetch it), else the warm-up's."""
        return min(self.loader_timeout(), self.warmup_s) if self.loader_timeout() > 0 else self.warmup_s


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
    """The ``worker_init_fn`` for a DataLoader run in this process: stack dumps, then ``inner`` (the user's own
    ``worker_init_fn``, or perfsuite's seeding), see :func:`worker_init`."""
    directory = stack_dir()
    _cleanup_at_exit(directory)
    return functools.partial(worker_init, str(directory), inner)


def installs_stack_dump(worker_init_fn: Any) -> bool:
    """Whether ``worker_init_fn`` already registers the stack dump (made by :func:`make_worker_init`)."""
    return isinstance(worker_init_fn, functools.partial) and worker_init_fn.func is worker_init


@functools.cache
def _cleanup_at_exit(directory: Path) -> None:
    pid = os.getpid()
    sweep_stack_dirs()

    def cleanup() -> None:
        if os.getpid() == pid:  # not in forked children, which inherit atexit handlers
            shutil.rmtree(directory, ignore_errors=True)

    atexit.register(cleanup)


def sweep_stack_dirs(parent: Path | None = None) -> list[Path]:
    """Remove the stack-dump folders of processes that are gone (killed with -9: their atexit never ran)."""
    removed: list[Path] = []
    base = Path(tempfile.gettempdir()) if parent is None else parent
    try:
        candidates = list(base.glob("perfsuite-stacks-*"))
    except OSError:
        return removed
    for path in candidates:
        pid = path.name.rsplit("-", 1)[-1]
        if not pid.isdigit() or int(pid) == os.getpid() or psutil.pid_exists(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            removed.append(path)
    return removed


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
        self._token: object | None = None  # the armed phase's, which its SIGALRM handler checks
        self._undo: Callable[[], None] | None = None  # the armed phase's disarm, set before its timer is

    def __enter__(self) -> Watchdog:
        return self

    def __exit__(self, *exc: object) -> None:
        self._active = None

    def release(self) -> None:
        """Disarm whatever phase is still armed: the run's last word, however it ended. An exception landing in
        the instant a phase was entered (torch's SIGCHLD handler raising a worker's death) can leave the phase
        outside the ExitStack that would have closed it; its timer then fired in a later test (CI)."""
        undo, self._undo = self._undo, None
        if undo is not None:
            undo()

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
        limit = min(float(deadline_s), MAX_DEADLINE_S) if deadline_s is not None else self.deadline(steps)
        self._active, self._pending = name, None
        disarm: Any = None
        self._undo = None
        try:  # armed inside: whatever raises before the body (a listener, a Ctrl-C) still disarms
            if self.config.enabled:
                disarm = self._arm(name, limit)
            for listener in PHASE_LISTENERS:
                listener(name, limit if self.config.enabled else None)
            yield
        except _Expired:
            raise (self._pending or self._expired(name, limit, "the deadline")) from None
        except RuntimeError as exc:
            if "DataLoader timed out" not in str(exc):
                raise
            timeout = self.config.loader_timeout()
            raise self._expired(name, timeout, f"the DataLoader timeout ({exc})") from exc
        finally:
            disarm = disarm or self._undo  # registered before the timer was set, should _arm not have returned
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
        """The handler and timer set, and the function that puts back what was there.

        The handler fails this phase only while it is armed (its token): a timer left behind (a Ctrl-C landing
        between a step of arming and the next) then fires into a handler that passes the signal on to the one
        it replaced, never a RunTimeout in whatever runs later. On CI one fired 120 s on, in another test."""
        token = object()
        self._token = token
        done: dict[str, Any] = {}

        def on_alarm(signum: int, frame: FrameType | None) -> None:
            if self._token is token:
                raise self._expired(name, limit, "the deadline", frame)
            previous = done.get("handler")
            if callable(previous):  # a phase that has ended: the alarm is someone else's
                previous(signum, frame)

        def disarm() -> None:
            if done.get("undone"):  # once: a phase generator closed late (by the collector) must not undo another's
                return
            done["undone"] = True
            self._token = None
            if "delay" in done:
                signal.setitimer(signal.ITIMER_REAL, 0)
            if "handler" in done:
                signal.signal(signal.SIGALRM, done["handler"])
            if done.get("delay"):  # someone else's timer (pytest-timeout): give it back what is left of it
                signal.setitimer(signal.ITIMER_REAL, max(done["delay"] - (time.monotonic() - done["started"]), 1e-3))

        self._undo = disarm
        done["handler"] = signal.signal(signal.SIGALRM, on_alarm)
        done["started"] = time.monotonic()
        done["delay"], _ = signal.setitimer(signal.ITIMER_REAL, limit)
        return disarm

    def _arm_thread(self, name: str, limit: float) -> Any:
        target = threading.get_ident()
        done = threading.Event()

        def fire() -> None:
            if done.wait(limit):
                return
            self._pending = self._expired(name, limit, "the deadline", sys._current_frames().get(target))
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), ctypes.py_object(_Expired))

        timer = threading.Thread(target=fire, name=f"perfsuite-watchdog-{name}", daemon=True)
        timer.start()
        return done.set

    # -- expiry -------------------------------------------------------------------------------------------

    def _expired(self, phase: str, limit: float, what: str, frame: FrameType | None = None) -> RunTimeout:
        """Say where the hang is (the step, a worker, the main thread), collect the stacks that can be had
        without harming anyone, and build the exception that names it all."""
        workers = loader_workers(self.loader)
        place = Place("worker", "", waiting=True) if what.startswith("the DataLoader timeout") else locate(frame)
        waited = [w for w in workers if w.waited_on]
        stacks = [f"--- Python stacks of the main process (pid {os.getpid()}) ---", _own_stacks()]
        if place.waiting and workers:
            stuck = waited or workers
            stacks += _worker_stacks(stuck, self.config.grace_s)
            names = ", ".join(f"worker {w.worker_id} (pid {w.pid})" for w in stuck)
            where = "worker"
            waiting = f"the hang is in DataLoader {names}: the main thread waits for its batch"
            if not waited:
                waiting = f"the main thread waits on the DataLoader; its workers are {names}"
        elif place.waiting:
            stuck, where = [], "main thread"
            waiting = "the hang is in the main thread, in the dataset (num_workers=0: __getitem__ runs here)" + (
                f", at {place.site}" if place.site else ""
            )
        else:
            stuck, where = [], place.kind
            alive = ", ".join(f"worker {w.worker_id} (pid {w.pid})" for w in workers)
            waiting = f"the hang is in {'the step' if place.kind == 'step' else 'the main thread'}" + (
                f", at {place.site}" if place.site else ""
            )
            waiting += f" (pid {os.getpid()})" + (
                f"; DataLoader {alive} are alive and not waited on" if workers else ""
            )
        text = "\n".join(stacks)
        out = self.stream or sys.stderr
        with contextlib.suppress(Exception):
            out.write(f"\nperfsuite watchdog: {phase} phase passed {what}\n{text}\n")
            out.flush()
        how = self._how_derived(phase, limit, what)
        message = (
            f"the {phase} phase passed {what} of {limit:.1f} s: {waiting}. {how}\nPython stacks at expiry:\n{text}"
        )
        return RunTimeout(message, phase, limit, tuple(w.pid for w in stuck), text, where=where, site=place.site)

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


def _torch_dir() -> str:
    """torch's folder, found without importing it (this module loads before a job imports torch)."""
    spec = importlib.util.find_spec("torch")
    return os.path.dirname(os.path.abspath(spec.origin)) if spec is not None and spec.origin else "<no torch>"


@dataclass(frozen=True)
class Place:
    """Where the main thread was when a phase expired: ``step``, ``main thread`` or (waiting on the loader)
    ``worker``; ``site`` is the innermost frame of the job's own code, ``file:line in function``."""

    kind: str
    site: str
    waiting: bool = False


_HARNESS = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = os.path.dirname(_HARNESS)
# torch's and perfsuite's files told by where the packages are, never by a folder's name: a clone named
# perfsuite/ holds torch too (in its .venv/)
_LOADER_FILE = os.path.join(_torch_dir(), "utils", "data", "dataloader.py")
_STEP_FRAMES = (os.path.join(_PACKAGE, "jobs", "contract.py"), os.path.join(_HARNESS, "pipeline.py"))
_LIBRARY_DIRS = tuple(
    os.path.normpath(p)
    for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
)
# perfsuite's own machinery around a step: never "the job's code" in a message
_MACHINERY = tuple(
    os.path.join(_HARNESS, f"{name}.py") for name in ("runner", "watchdog", "workers", "interrupts", "batches")
) + (os.path.join(os.path.dirname(_HARNESS), "jobs", "contract.py"),)


def _frames(frame: FrameType | None) -> list[FrameType]:
    """Innermost first."""
    out = []
    while frame is not None:
        out.append(frame)
        frame = frame.f_back
    return out


def _site(frame: FrameType) -> str:
    return f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"


def _user_frame(frame: FrameType) -> bool:
    """A frame of the job's own code: not the standard library, torch or perfsuite's machinery."""
    name = os.path.normpath(frame.f_code.co_filename)
    if name.startswith("<") or name in _MACHINERY:
        return False
    return not any(name.startswith(d + os.sep) for d in _LIBRARY_DIRS) or name.startswith(_PACKAGE + os.sep)


def locate(frame: FrameType | None) -> Place:
    """Read from the main thread's stack where it is: waiting in ``next(loader)``, in the step, or elsewhere.

    Passive (it only reads frames), so nothing about the run changes.
    """
    frames = _frames(frame)
    in_loader = any(os.path.abspath(f.f_code.co_filename) == _LOADER_FILE for f in frames)
    in_step = any(f.f_code.co_name == "step" and os.path.abspath(f.f_code.co_filename) in _STEP_FRAMES for f in frames)
    own = [f for f in frames if _user_frame(f)]
    site = _site(own[0]) if own else (_site(frames[0]) if frames else "")
    if in_loader:
        fetching = [f for f in frames if f.f_code.co_name == "__getitem__" or f.f_code.co_name == "fetch"]
        return Place("worker", site if fetching else "", waiting=True)
    return Place("step" if in_step else "main thread", site)


def _worker_stacks(workers: list[WorkerState], grace_s: float) -> list[str]:
    """The stacks of ``workers``, by whichever safe way each allows; never a signal a worker cannot handle.

    A worker whose init registered the stack dump (it made its file in :func:`stack_dir`) is asked
    with SIGUSR1. Any other worker would die of that signal, so py-spy reads it from outside if it is
    installed, else /proc says what it is blocked in.
    """
    if not workers:
        return []
    directory = stack_dir()
    files = {w.pid: directory / f"{w.pid}.txt" for w in workers}
    safe = [w for w in workers if STACK_SIGNAL is not None and files[w.pid].exists()]
    for w in safe:
        with contextlib.suppress(OSError):
            os.kill(w.pid, STACK_SIGNAL)  # type: ignore[arg-type]
    deadline = time.monotonic() + grace_s
    texts: dict[int, str] = {}
    while safe and time.monotonic() < deadline and len(texts) < len(safe):
        for w in safe:
            if w.pid not in texts:
                with contextlib.suppress(OSError):
                    if "File " in files[w.pid].read_text(encoding="utf-8", errors="replace"):
                        texts[w.pid] = ""
        time.sleep(0.05)
    for pid in texts:  # read again, now that the dump had time to finish
        with contextlib.suppress(OSError):
            texts[pid] = files[pid].read_text(encoding="utf-8", errors="replace").rstrip()
    out = []
    for w in workers:
        body = texts.get(w.pid) or _outside_stacks(w.pid)
        out += [f"--- Python stacks of DataLoader worker {w.worker_id} (pid {w.pid}) ---", body]
    return out


def _py_spy() -> str | None:
    found = shutil.which("py-spy")
    if found:
        return found
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.is_file() else None


def _outside_stacks(pid: int) -> str:
    """A worker's stacks read from outside it: py-spy (non-blocking), else what /proc says."""
    import subprocess

    spy = _py_spy()
    if spy is not None:
        try:
            done = subprocess.run(
                [spy, "dump", "--pid", str(pid), "--nonblocking"], capture_output=True, text=True, timeout=15
            )
            if done.returncode == 0 and done.stdout.strip():
                return "(read with py-spy)\n" + done.stdout.rstrip()
        except (OSError, subprocess.SubprocessError):
            pass
    proc = Path("/proc") / str(pid)
    try:
        status = (proc / "status").read_text().splitlines()
        state = next((line.split(":", 1)[1].strip() for line in status if line.startswith("State:")), "?")
        wchan = (proc / "wchan").read_text().strip() or "-"
    except OSError:
        return "(no stacks: the worker has no stack dump handler, py-spy is not installed, and /proc cannot be read)"
    return (
        f"(no Python stacks: the worker has no stack dump handler and py-spy is not installed or not permitted; "
        f"/proc says: state {state}, waiting in {wchan})"
    )
