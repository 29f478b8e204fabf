"""The after-window work on a host's spare cores: a call run in a forked child, its picklable result sent back.

After the window a GPU runner's host sits nearly idle (16 cores on the H200's, the loader's workers asleep) while
the loader ledger replays the loader's stages and the loader count counts them, one after the other, in the
training process: 35 s of a 68 s full-scale run, with the GPU waiting (docs/phases.md). Both are CPU work on a
copy of the Dataset, as a DataLoader worker's is, so a forked child can do it the way a worker does: the same
memory, the same imports, its own core. The count's figures are exact (calls, bytes, pixels) and the replay's
are thread CPU time beside a calibration kernel timed in the same process, so neither depends on which process
ran it; what the children change is only how long the GPU waits.

Where the host has few cores (fewer than :data:`MIN_CORES` usable), the children would share cores with each
other and with the training process, and the replay's CPU figures would then measure that sharing: the replay
stays in this process and the count runs in one child after it, one thing at a time, as before. (The count runs
in a fresh child everywhere fork is safe, so a generator keyed on the process starts from its seed on every
machine: :class:`perfsuite.probes.loadercount.LoaderCountProbe`.) ``$PERFSUITE_AFTER_WINDOW_PROCESSES`` sets
the count of processes the after-window work may use (``1``: one at a time), for a machine the default misjudges
and for tests.

A child that fails (a Dataset that uses CUDA in ``__getitem__`` cannot run in a forked child, as it cannot in a
DataLoader worker) raises :class:`ChildFailed` in the parent, which then does the work itself.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")

ENV = "PERFSUITE_AFTER_WINDOW_PROCESSES"
MIN_CORES = 4  # usable cores below which the after-window work stays in the training process


class ChildFailed(RuntimeError):
    """The forked child raised, died, or could not send its result: the parent does the work itself."""


# Processes that share this host's cores with this one, each doing its own after-window work: the ranks of a
# torchrun job on this node, a pytest-xdist session's workers.
SHARERS = ("LOCAL_WORLD_SIZE", "PYTEST_XDIST_WORKER_COUNT")


def available() -> bool:
    """Whether this platform forks as a DataLoader worker does (Linux: macOS's fork is unsafe with threads)."""
    return hasattr(os, "fork") and sys.platform.startswith("linux")


def processes(usable: int | None = None) -> int:
    """How many processes the after-window work may use, this one included: its share of the usable cores (split
    among the node's ranks or pytest-xdist's workers) where that share is at least :data:`MIN_CORES`, else 1;
    ``$PERFSUITE_AFTER_WINDOW_PROCESSES`` overrides (bad input: 1)."""
    raw = os.environ.get(ENV, "").strip()
    if raw:
        try:
            return max(1, int(raw))
        except ValueError:
            return 1
    if not available():
        return 1
    if usable is None:
        from perfsuite.core.cores import usable_cores

        usable = usable_cores().usable
    share = usable // max([1, *(_int(os.environ.get(name)) for name in SHARERS)])
    return share if share >= MIN_CORES else 1


def _int(raw: str | None) -> int:
    try:
        return int(raw or 1)
    except ValueError:
        return 1


class Forked(Generic[T]):
    """``fn(*args)`` running in a forked child; :meth:`result` waits for its value."""

    def __init__(self, fn: Callable[..., T], *args: Any) -> None:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: run, send, leave without the parent's exit handlers or buffered output
            os.close(read)
            code = 0
            try:
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the parent's to handle
                try:
                    payload = pickle.dumps((True, fn(*args)), protocol=pickle.HIGHEST_PROTOCOL)
                except BaseException as exc:  # noqa: BLE001 - any failure goes back to the parent as text
                    why = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
                    payload = pickle.dumps((False, why))
                with os.fdopen(write, "wb") as out:
                    out.write(payload)
            except BaseException:  # noqa: BLE001 - even the pipe failed: the parent sees no result
                code = 1
            finally:
                os._exit(code)
        os.close(write)
        self.pid, self._read = pid, read
        self._done: tuple[bool, Any] | None = None

    def result(self) -> T:
        """The child's return value; :class:`ChildFailed` with why where it raised or died."""
        if self._done is None:
            try:
                with os.fdopen(self._read, "rb") as pipe:
                    data = pipe.read()
            except BaseException:  # the watchdog's deadline or a Ctrl-C while waiting: stop the child, then go on
                self.cancel()
                raise
            _, status = os.waitpid(self.pid, 0)
            if not data:
                raise ChildFailed(f"the child process ended without a result (wait status {status})")
            self._done = pickle.loads(data)
        ok, value = self._done
        if not ok:
            raise ChildFailed(str(value))
        return value

    def cancel(self) -> None:
        """Stop the child (the run is ending early); safe to call after :meth:`result`."""
        if self._done is not None:
            return
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(self.pid, 0)
        with contextlib.suppress(OSError):
            os.close(self._read)
        self._done = (False, "cancelled")
