"""Ctrl-C that is never lost: a SIGINT handler that remembers, and checks at safe points.

Python delivers SIGINT as a KeyboardInterrupt raised wherever the main thread
happens to be. Landing in a ``__del__`` (a DataLoader iterator collected
mid-run) or in an ``os.register_at_fork`` hook (a worker being forked), the
exception is printed as "unraisable" and dropped: the session then ran to the
end and exited 0 (2 of 4 tries in issue 26). The guard's handler still raises
KeyboardInterrupt at once, as Python's own does, but also records it; the
runner and the plugin call :func:`check` at safe points (after each step,
after each test), which raises it again if it was swallowed.

Inside :func:`shielded` (shutting workers down, writing a file) a Ctrl-C is
only recorded, so the cleanup finishes; the KeyboardInterrupt follows at the
end of the block. The guard is installed from the main thread only (signal
handlers can be set nowhere else) and restores the previous handler.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any


class Terminated(BaseException):
    """SIGTERM (a CI job's timeout, ``kill``) in the main thread: the run unwinds through its ``finally`` blocks
    (workers shut down) and the CLI exits 143, so the process's exit handlers run and remove what it made in
    TMPDIR (``perfsuite-stacks-<pid>/``), which the default action, ending the process at once, would leave."""


class InterruptGuard:
    """See the module docstring. ``pending`` counts Ctrl-Cs not yet seen to stop anything."""

    def __init__(self) -> None:
        self.pending = 0
        self.received = 0  # every Ctrl-C since install, for "was this session interrupted"
        self._depth = 0
        self._shield = 0
        self.terminate = False  # a SIGTERM that arrived in a shielded block: raised as Terminated when it ends
        self._previous: Any = None

    @property
    def installed(self) -> bool:
        return self._depth > 0

    def install(self) -> bool:
        """Install the handler (nesting counts); False off the main thread, where it cannot be."""
        if threading.current_thread() is not threading.main_thread():
            return False
        if self._depth == 0:
            self._previous = signal.signal(signal.SIGINT, self._handler)
            self.received = 0
            self.pending = 0
        self._depth += 1
        return True

    def uninstall(self) -> None:
        if self._depth == 0:
            return
        self._depth -= 1
        if self._depth == 0 and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, self._previous if self._previous is not None else signal.default_int_handler)
            self._previous = None

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        self.pending += 1
        self.received += 1
        if self._shield:
            return  # raised by check() when the shielded block ends
        raise KeyboardInterrupt

    def delivered(self) -> None:
        """A KeyboardInterrupt reached code that acts on it: nothing is pending any more."""
        self.pending = 0

    def check(self) -> None:
        """Raise KeyboardInterrupt if a Ctrl-C arrived and was swallowed (or deferred by a shield); Terminated for a
        SIGTERM a shield deferred."""
        if self.terminate and not self._shield:
            self.terminate = False
            raise Terminated
        if self.pending and not self._shield:
            self.pending = 0
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """Like :meth:`shielded`, but leave a Ctrl-C pending for the caller to act on (no raise)."""
        self._shield += 1
        try:
            yield
        finally:
            self._shield -= 1

    @contextlib.contextmanager
    def shielded(self) -> Iterator[None]:
        """Let the body finish through a Ctrl-C; raise it afterwards."""
        self._shield += 1
        try:
            yield
        finally:
            self._shield -= 1
        self.check()


GUARD = InterruptGuard()


def check() -> None:
    """:meth:`InterruptGuard.check` of the process's guard."""
    GUARD.check()


def shielded() -> contextlib.AbstractContextManager[None]:
    return GUARD.shielded()


@contextlib.contextmanager
def guarded() -> Iterator[InterruptGuard]:
    """The guard installed for the body (a no-op off the main thread), restored afterwards."""
    installed = GUARD.install()
    try:
        yield GUARD
    finally:
        if installed:
            GUARD.uninstall()


class SigtermSeen:
    """The main process's own SIGTERM, as :func:`terminate_unwinds` saw it: ``at`` (monotonic seconds; None: not
    received), ``raised`` (a Terminated is on its way: a second SIGTERM, such as ``timeout`` sends to the process and
    then to its group, is only recorded) and ``quiet`` (the CLI is reporting how the run ended: record only)."""

    def __init__(self) -> None:
        self.at: float | None = None
        self.raised = False
        self.quiet = False

    def reset(self) -> None:
        self.at, self.raised, self.quiet = None, False, False


SIGTERM_SEEN = SigtermSeen()


@contextlib.contextmanager
def terminate_unwinds() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` while the body runs (main thread only; the previous handler after).

    Inside a shielded block (workers shutting down) it waits for the block's end, as a Ctrl-C does. One raised
    where Python drops exceptions as "unraisable" (an at-fork hook while a DataLoader forks its workers, a
    ``__del__``) is sent again shortly after, so it is not lost. A forked child inherits the handler: there
    SIGTERM ends the process as by default.

    DataLoader workers share the main process's socket folder (``$TMPDIR/pymp-*``): torch's workers die of a
    SIGTERM sent to the whole process group (a CI time limit) without their exit handlers, which would leave a
    folder of their own; the main process removes its folder as it exits. After a SIGTERM the process is ending:
    an object the signal interrupted half-built (a DataLoader iterator) that fails in its ``__del__`` is not shown.
    """
    import os
    import sys
    import time

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pid = os.getpid()
    seen = SIGTERM_SEEN
    seen.reset()

    def terminated(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != pid:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        if seen.at is None:
            seen.at = time.monotonic()
        if seen.quiet or seen.raised:
            return
        if GUARD._shield:
            GUARD.terminate = True  # raised by check() when the shielded block ends
            return
        seen.raised = True
        raise Terminated

    hook = sys.unraisablehook

    body = [True]

    def dropped(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, Terminated) and os.getpid() == pid:
            if body[0]:
                seen.raised = False
                again = threading.Timer(RESEND_S, os.kill, (pid, signal.SIGTERM))  # somewhere it is not lost
                again.daemon = True
                again.start()
            return
        if seen.at is not None and os.getpid() == pid and getattr(unraisable.object, "__name__", "") == "__del__":
            return  # half-built by the interrupted run; the process is ending
        hook(unraisable)

    from perfsuite.harness.socket_folder import share_socket_folder

    share_socket_folder()  # made now, so the DataLoader workers forked later put their sockets in it (see above)
    previous = signal.signal(signal.SIGTERM, terminated)
    sys.unraisablehook = dropped
    try:
        yield
    finally:
        body[0] = False
        if seen.at is None:  # else what the SIGTERM left half-built may still be collected, silently, as it ends
            sys.unraisablehook = hook
        signal.signal(signal.SIGTERM, previous)


RESEND_S = 0.2  # after a dropped Terminated, when the SIGTERM that replaces it is sent
GROUP_SIGTERM_S = 1.0  # after a worker's death by SIGTERM, how long the main process's own (the group's) may take


def ended_by_sigterm(exc: BaseException) -> bool:
    """Whether the process's SIGTERM (a CI job's time limit, ``timeout``: sent to the whole process group) ended the
    run that raised ``exc``, rather than a fault of its own.

    True when the main process got SIGTERM, or ``exc`` (or what it was raised from) is a DataLoader worker's death by
    SIGTERM, or by a signal torch lost, and the main process's own SIGTERM follows within :data:`GROUP_SIGTERM_S`:
    the group's signal reached the worker first. A worker killed alone stays a worker's death. From this call on a
    SIGTERM is only recorded, so the caller can say how the run ended.
    """
    import time

    from perfsuite.harness.worker_death import death_in_chain, exception_chain

    seen = SIGTERM_SEEN
    seen.quiet = True
    if seen.at is not None or any(isinstance(link, Terminated) for link in exception_chain(exc)):
        return True
    death = death_in_chain(exc)
    if death is None or not (death.signal is None or death.signal.startswith("SIGTERM")):
        return False
    deadline = time.monotonic() + GROUP_SIGTERM_S
    while seen.at is None and time.monotonic() < deadline:
        time.sleep(0.02)  # the handler records it here
    return seen.at is not None
