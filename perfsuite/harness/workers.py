"""A run's DataLoader workers, whoever built the loader: hang diagnosis, a loader timeout, a deterministic
shutdown, and worker errors shown as perfsuite's message.

**Any loader, not just perfsuite's.** :func:`lease` prepares a user's torch
DataLoader for the run and restores it afterwards:

* its ``worker_init_fn`` is chained (:func:`perfsuite.harness.watchdog.make_worker_init`):
  each worker first registers a stack dump on SIGUSR1, then calls the
  user's own function, so the watchdog can ask for stacks without killing
  anyone. Registering a signal handler changes nothing the worker computes;
* its ``timeout`` is set to the loader timeout when the user left it at 0.
  ``DataLoader(timeout=t)`` only changes how long the main process waits
  on the result queue before raising "DataLoader timed out" (0 waits in 5 s
  polls forever): the batches, their order and the workers' work are the
  same, so the measured window runs what it ran. A user's own non-zero
  timeout is kept;
* both are recorded as notes in the Result. A loader that is not a torch
  DataLoader gets neither, and the note says so: its hangs are caught by
  the phase deadlines.

**Shutdown** is explicit (:func:`shutdown_iterator`, :func:`shutdown_loader`),
never left to garbage collection: a failed test's traceback keeps the
iterator alive, and its workers (hundreds of MB each, hung ones still
sleeping) would outlive the test.

**Worker errors.** torch re-raises an exception from a worker as
"Caught DatasetError in DataLoader worker process 0. Original Traceback ...";
:func:`unwrapped` puts perfsuite's own message first.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from perfsuite.errors import PerfsuiteError
from perfsuite.harness import interrupts
from perfsuite.harness.watchdog import installs_stack_dump, make_worker_init


@dataclass
class Lease:
    """What :func:`lease` changed on a loader, to be put back; ``notes`` go into the Result."""

    loader: Any
    notes: list[str] = field(default_factory=list)
    _restore: dict[str, Any] = field(default_factory=dict)

    def restore(self) -> None:
        for name, value in self._restore.items():
            with contextlib.suppress(Exception):
                setattr(self.loader, name, value)
        self._restore.clear()


def _is_torch_loader(loader: Any) -> bool:
    try:
        from torch.utils.data import DataLoader
    except ImportError:  # pragma: no cover - torch is a dependency
        return False
    return isinstance(loader, DataLoader)


@contextlib.contextmanager
def lease(loader: Any, timeout_s: float, built_by_perfsuite: bool = False) -> Iterator[Lease]:
    """Prepare ``loader`` for a run (stack dumps, loader timeout) and restore it afterwards; see the module."""
    out = Lease(loader)
    try:
        if not built_by_perfsuite:
            _prepare_users_loader(loader, timeout_s, out)
        yield out
    finally:
        out.restore()


def _prepare_users_loader(loader: Any, timeout_s: float, out: Lease) -> None:
    if not _is_torch_loader(loader):
        out.notes.append(
            f"loader timeout not applied: the loader is a {type(loader).__name__}, not a torch DataLoader; a hang "
            "in it is caught by the phase deadlines (--perfsuite-deadline-*)"
        )
        return
    if loader.num_workers == 0:
        return  # the dataset runs in this process: the phase deadlines and this process's stacks cover it
    if getattr(loader, "_iterator", None) is not None:
        out.notes.append(
            "the loader's persistent workers were already running, so their stacks cannot be dumped on a hang "
            "(perfsuite reads them with py-spy or /proc instead)"
        )
    elif not installs_stack_dump(loader.worker_init_fn):
        out._restore["worker_init_fn"] = loader.worker_init_fn
        loader.worker_init_fn = make_worker_init(loader.worker_init_fn)
    if timeout_s > 0 and not loader.timeout:
        out._restore["timeout"] = loader.timeout
        loader.timeout = float(timeout_s)
        out.notes.append(
            f"perfsuite set DataLoader(timeout={timeout_s:g}) on the job's loader for this run (a batch that takes "
            "longer fails the run, naming the worker; --perfsuite-loader-timeout 0 turns it off)"
        )


def shutdown_iterator(iterator: Any) -> None:
    """Stop a DataLoader iterator's workers now (torch joins them, then terminates any that hang)."""
    stop = getattr(iterator, "_shutdown_workers", None)
    if stop is None:
        return
    with interrupts.shielded():  # a Ctrl-C here must not leave half the workers running
        stop()


def shutdown_loader(loader: Any) -> None:
    """Stop the persistent workers a DataLoader keeps between epochs (``persistent_workers=True``)."""
    iterator = getattr(loader, "_iterator", None)
    if iterator is not None:
        shutdown_iterator(iterator)
        with contextlib.suppress(Exception):
            loader._iterator = None


_WORKER = re.compile(r"in DataLoader worker process (\d+)")


def unwrapped(exc: BaseException) -> BaseException | None:
    """perfsuite's own error for one torch re-raised from a worker, its message first; None if not one."""
    if not isinstance(exc, PerfsuiteError):
        return None
    text = str(exc)
    found = _WORKER.search(text.split("\n", 1)[0])
    if not text.startswith("Caught ") or found is None:
        return None
    cls = type(exc)
    marker = f"{cls.__module__}.{cls.__qualname__}: "
    start = text.rfind(marker)
    if start < 0:
        return None
    original = text[start + len(marker) :].strip()
    try:
        new = cls(f"{original} (raised in DataLoader worker process {found.group(1)})")
    except Exception:  # noqa: BLE001 - an exception class with another constructor: keep torch's
        return None
    new.worker_traceback = text  # type: ignore[attr-defined]
    return new
