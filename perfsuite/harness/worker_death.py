"""A DataLoader worker that died of a signal, read from the error torch raises in the training process.

torch reports the death in one of two texts: ``DataLoader worker (pid 123) is killed by signal: Killed.``
(its SIGCHLD handler or the iterator saw the signal), or ``DataLoader worker (pid(s) 123) exited
unexpectedly`` (it noticed while unpickling a batch's shared memory, and the signal is lost). Both the
``perfsuite run`` error line (:mod:`perfsuite.cli.user_errors`) and a script's
(:mod:`perfsuite.harness.script.drive`) read them here.
"""

from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass

_KILLED = re.compile(r"DataLoader worker \(pids? ?\(?([\d, ]+)\)?\) is killed by signal: ([^.]+)\.")
_EXITED = re.compile(r"DataLoader worker \(pid(?:\(s\)|s)? ?([\d, ]+)\) exited unexpectedly")


@dataclass(frozen=True)
class WorkerDeath:
    """Which worker process died (``pids``: as torch wrote them) and its signal (None: torch did not see it)."""

    pids: str
    signal: str | None

    def what(self) -> str:
        if not self.pids:  # only its broken hand-over was seen (handover_broken)
            return "a DataLoader worker died while handing over a batch (its socket was reset)"
        if self.signal is None:
            return f"DataLoader worker (pid {self.pids}) was killed by signal or crashed"
        return f"DataLoader worker (pid {self.pids}) was killed by signal {self.signal}"

    def fix(self) -> str:
        """What to do about it, by signal: SIGKILL is the kernel's out-of-memory killer's (or someone's kill -9)."""
        if self.signal is not None and self.signal.startswith("SIGKILL"):
            return (
                "SIGKILL is what the kernel's out-of-memory killer sends (see dmesg), or a kill -9: give the "
                "workers less to hold (fewer workers, a smaller prefetch_factor) or more memory"
            )
        return (
            "its Dataset or collate crashed (native code, or memory); run with 0 workers to see it fail in this process"
        )


def worker_death(exc: BaseException) -> WorkerDeath | None:
    """The worker death ``exc`` reports, or None."""
    if handover_broken(exc):
        return WorkerDeath("", None)
    text = str(exc)
    killed = _KILLED.search(text)
    if killed:
        return WorkerDeath(killed.group(1).strip(), signal_name(killed.group(2).strip()))
    exited = _EXITED.search(text)
    if exited:
        return WorkerDeath(exited.group(1).strip(), None)
    return None


# multiprocessing's and torch's code that receive a batch's file descriptors from a worker
_HANDOVER_FILES = ("resource_sharer.py", os.path.join("multiprocessing", "reductions.py"))


def handover_broken(exc: BaseException) -> bool:
    """A batch's hand-over that failed because the worker sending it died: the socket multiprocessing passes its
    file descriptors through was reset or refused while this process read it (``resource_sharer``)."""
    if not isinstance(exc, (ConnectionResetError, ConnectionRefusedError, EOFError)):
        return False
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(
            ("resource_sharer.py", os.path.join("multiprocessing", "reductions.py"))
        ):
            return True
        tb = tb.tb_next
    return False


def signal_name(text: str) -> str:
    """``Segmentation fault`` -> ``SIGSEGV (Segmentation fault)``; an unknown description stays as it is."""
    for sig in signal.Signals:
        if signal.strsignal(sig) == text:
            return f"{sig.name} ({text})"
    return text


def exception_chain(exc: BaseException, limit: int = 16) -> list[BaseException]:
    """``exc`` and what it was raised from or during, outermost first (at most ``limit``)."""
    out: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and len(out) < limit:
        out.append(link)
        link = link.__cause__ or link.__context__
    return out


def death_in_chain(exc: BaseException) -> WorkerDeath | None:
    """The worker death ``exc`` or what it was raised from reports (torch's SIGCHLD handler raises it in whatever
    code runs then: a cleanup that fails after it, joining a thread it kept from starting, hides it), or None.
    A :class:`perfsuite.errors.ScriptError` carries it as ``worker_death``."""
    for link in exception_chain(exc):
        found = getattr(link, "worker_death", None) or worker_death(link)
        if isinstance(found, WorkerDeath):
            return found
    return None
