"""Watch a torchrun launch from outside: a rank that dies or hangs fails the run, with every rank's stacks.

The ranks (perfsuite.harness.ranks.main) keep their pid and their watchdog
phase, with its deadline, in ``RUN_DIR/rank<k>.json``. Each rank's own
watchdog fails a hung phase from inside (SIGALRM), and torchrun then stops
the other ranks. Two things need a supervisor on top:

* a hang the rank's alarm cannot interrupt (a rank blocked inside a C call:
  a collective whose peer never comes, a native deadlock). When a rank is
  still in a phase ``margin`` seconds past its deadline, the supervisor asks
  every rank for its stacks (SIGUSR1), then stops the launch;
* the cleanup: torchrun is stopped with SIGTERM (it stops its ranks, which
  dump their stacks on the way), then anything of the launch's process tree
  still alive (ranks, their DataLoader workers) is killed, so no process is
  left behind. Ctrl-C in the supervising process does the same.

A failed launch raises RunTimeout (a hung phase, naming the rank and phase)
or RankError (a rank that raised or died), with each rank's stacks.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.core.user_frames import users_traceback_text
from perfsuite.errors import RankError, RunTimeout
from perfsuite.harness.watchdog import WatchdogConfig

POLL_S = 0.2
STOP_GRACE_S = 20.0  # how long torchrun gets to stop its ranks after SIGTERM before everything is killed


@dataclass(frozen=True)
class RankStatus:
    """What a rank last wrote about itself."""

    rank: int
    pid: int
    phase: str
    limit_s: float | None
    since: float
    entered: str | None = None  # the last watchdog phase it entered

    @property
    def where(self) -> str:
        return self.entered or self.phase


def read_status(run_dir: Path, rank: int) -> RankStatus | None:
    try:
        data = json.loads((run_dir / f"rank{rank}.json").read_text(encoding="utf-8"))
        return RankStatus(
            int(data["rank"]),
            int(data["pid"]),
            str(data["phase"]),
            data.get("limit_s"),
            data["since"],
            data.get("entered"),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_progress(run_dir: Path, rank: int) -> tuple[int, int] | None:
    """(DDP forwards, gradient all-reduces) the rank has reached, from its progress file."""
    import struct

    try:
        raw = (run_dir / f"rank{rank}.progress").read_bytes()
        forwards, reduces = struct.unpack("qq", raw[:16])
        return forwards, reduces
    except (OSError, struct.error):
        return None


def behind(progress: dict[int, tuple[int, int]]) -> str:
    """Who the others wait for: the ranks that reached fewer collectives than the rest ('' when all are level)."""
    if len(progress) < 2:
        return ""
    for index, what in ((1, "gradient all-reduces"), (0, "DDP forwards")):
        counts = {k: p[index] for k, p in progress.items()}
        top = max(counts.values())
        late = sorted(k for k, c in counts.items() if c < top)
        if late:
            shown = ", ".join(f"rank {k} {c}" for k, c in sorted(counts.items()))
            who = ", ".join(f"rank {k}" for k in late)
            return f"{who} did not reach the collective the others wait in ({what} reached: {shown})"
    return ""


def margin_for(limit_s: float) -> float:
    """How long past a rank's own deadline the supervisor waits before it steps in (the rank's alarm goes first)."""
    return max(5.0, 0.25 * limit_s)


class Supervisor:
    """Wait for a torchrun launch; stop it (and everything under it) when a rank hangs, dies, or on Ctrl-C."""

    def __init__(self, proc: subprocess.Popen[Any], run_dir: Path, nproc: int, config: WatchdogConfig) -> None:
        self.proc, self.run_dir, self.nproc, self.config = proc, run_dir, nproc, config
        self.started = time.time()
        self._tree: dict[int, Any] = {}  # every process of the launch seen so far, by pid

    def wait(self, log_path: Path | None = None) -> None:
        """Return when the launch succeeded; raise RunTimeout or RankError, with every rank's stacks, if not."""
        try:
            while self.proc.poll() is None:
                self._snapshot()
                late = self._late()
                if late is not None:
                    raise self._hung(*late)
                time.sleep(POLL_S)
        except BaseException:
            self.stop()
            raise
        finally:
            self._reap()
        if self.proc.returncode != 0:
            raise self._failure(log_path)

    # -- the process tree ---------------------------------------------------------------------------------------

    def _snapshot(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.proc.pid)
            for p in [root, *root.children(recursive=True)]:
                self._tree.setdefault(p.pid, p)
        except psutil.Error:
            pass

    def stop(self) -> None:
        """SIGTERM to torchrun (it stops its ranks), then SIGKILL to whatever of the launch is still alive."""
        self._snapshot()
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    self.proc.kill()
                self.proc.wait()
        self._reap()

    def _reap(self) -> list[int]:
        """Kill every process of the launch still alive; the pids that had to be killed."""
        import psutil

        alive = []
        for p in list(self._tree.values()):
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
            except psutil.Error:
                continue
        for p in alive:
            with contextlib.suppress(psutil.Error):
                p.kill()
        psutil.wait_procs(alive, timeout=5)
        return [p.pid for p in alive]

    def leftovers(self) -> list[int]:
        """Pids of the launch still running (none after wait() or stop())."""
        import psutil

        out = []
        for pid, p in self._tree.items():
            with contextlib.suppress(psutil.Error):
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(pid)
        return out

    # -- hangs ----------------------------------------------------------------------------------------------

    def _late(self) -> tuple[list[RankStatus], str, float] | None:
        """(late ranks, phase, limit) when a rank is past its phase deadline plus the margin; else None."""
        now = time.time()
        statuses = [read_status(self.run_dir, k) for k in range(self.nproc)]
        if any(s is None for s in statuses):
            limit = self.config.warmup_s
            if now - self.started > limit + margin_for(limit):
                missing = [k for k, s in enumerate(statuses) if s is None]
                return [], f"start (ranks {missing} never reported)", limit
            return None
        late = []
        for s in statuses:
            assert s is not None
            limit = s.limit_s if s.limit_s is not None else self.config.warmup_s
            if now - s.since > limit + margin_for(limit):
                late.append(s)
        if not late:
            return None
        return late, late[0].phase, late[0].limit_s or self.config.warmup_s

    def _hung(self, late: list[RankStatus], phase: str, limit: float) -> RunTimeout:
        for k in range(self.nproc):
            s = read_status(self.run_dir, k)
            if s is not None and STACK_SIGNAL is not None:
                with contextlib.suppress(OSError):
                    os.kill(s.pid, STACK_SIGNAL)
        time.sleep(max(self.config.grace_s, 0.5))
        stacks = self.stacks()
        names = ", ".join(f"rank {s.rank} (pid {s.pid}) in {s.phase}" for s in late) or phase
        progress = {k: p for k in range(self.nproc) if (p := read_progress(self.run_dir, k)) is not None}
        waits = behind(progress)
        message = (
            f"the {phase} phase passed its deadline of {limit:.1f} s by more than {margin_for(limit):.1f} s on "
            f"{names}, and the rank's own watchdog could not stop it (a hang inside a C call: a collective whose "
            "peer never comes, a native deadlock). "
            + (f"{waits[0].upper()}{waits[1:]}. " if waits else "")
            + "Every rank was stopped.\nPython stacks of each rank:\n"
            + stacks
        )
        return RunTimeout(message, phase, limit, stacks=stacks)

    # -- failures -------------------------------------------------------------------------------------------

    def stacks(self) -> str:
        """Every rank's stacks as dumped so far (SIGUSR1, SIGTERM), rank by rank."""
        parts = []
        for k in range(self.nproc):
            path = self.run_dir / f"rank{k}.stacks"
            text = path.read_text(encoding="utf-8", errors="replace").strip() if path.is_file() else ""
            s = read_status(self.run_dir, k)
            who = f"rank {k} (pid {s.pid}, last phase entered: {s.where})" if s else f"rank {k}"
            parts.append(f"--- Python stacks of {who} ---\n{text or '(none dumped)'}")
        return "\n".join(parts)

    def _others(self, first: int, errors: dict[int, dict[str, Any]]) -> str:
        """Each other rank: the error it failed with after the first (its traceback is its stack), else its stacks."""
        parts = []
        for k in range(self.nproc):
            if k == first:
                continue
            e = errors.get(k)
            if e is not None:
                first_line = str(e["message"]).strip().splitlines()[0] if str(e["message"]).strip() else ""
                parts.append(f"--- rank {k} failed after it, in {e.get('phase')}: {e['type']}: {first_line[:300]}")
            else:
                parts.append(_rank_stacks(self.stacks(), k))
        return "\n".join(parts) or "(no other rank)"

    def errors(self) -> dict[int, dict[str, Any]]:
        out = {}
        for k in range(self.nproc):
            with contextlib.suppress(OSError, ValueError):
                out[k] = json.loads((self.run_dir / f"rank{k}.error").read_text(encoding="utf-8"))
        return out

    def _failure(self, log_path: Path | None) -> Exception:
        errors = self.errors()
        stacks = self.stacks()
        log = _tail(log_path)
        # The first rank to fail is the cause; a rank left waiting for it may time out after it.
        first = min(errors, key=lambda k: (float(errors[k].get("time") or 0.0), k)) if errors else None
        if first is not None and errors[first].get("type") == "RunTimeout":
            k, e = first, errors[first]
            message = f"rank {k}: {e['message']}\nThe other ranks were stopped:\n" + self._others(k, errors)
            return RunTimeout(message, str(e.get("phase") or "?"), float(e.get("deadline_s") or 0.0), stacks=stacks)
        if first is not None:
            k, e = first, errors[first]
            # The user's own frames, if their code raised; none for perfsuite's errors, whose message says it all.
            users = users_traceback_text(str(e.get("traceback") or "")).rstrip()
            message = (
                f"rank {k} failed in {e.get('phase')}: {e['type']}: {e['message']}"
                + (f"\nTraceback (most recent call last):\n{users}" if users else "")
                + "\nThe other ranks were stopped:\n"
                + self._others(k, errors)
            )
            return RankError(message, k, stacks)
        died = _died(log)
        who = f"rank {died[0]} died with {died[1]}" if died else f"torchrun exited with {self.proc.returncode}"
        message = (
            f"{who} without a Python exception (killed, os._exit, a crash in native code); the other ranks were "
            f"stopped.\nPython stacks of each rank:\n{stacks}\nLast lines of torchrun's output:\n{log}"
        )
        return RankError(message, died[0] if died else None, stacks)


STACK_SIGNAL: int | None = getattr(signal, "SIGUSR1", None)


def _rank_stacks(stacks: str, rank: int) -> str:
    """One rank's part of :meth:`Supervisor.stacks`."""
    for part in stacks.split("--- Python stacks of ")[1:]:
        if part.startswith((f"rank {rank} ", f"rank {rank}\n")):
            return "--- Python stacks of " + part.rstrip()
    return f"--- Python stacks of rank {rank} ---\n(none dumped)"


def _tail(path: Path | None, lines: int = 40) -> str:
    if path is None or not path.is_file():
        return "(no output captured)"
    return "\n".join(path.read_text(encoding="utf-8", errors="replace").rstrip().splitlines()[-lines:])


def _died(log: str) -> tuple[int, str] | None:
    """(rank, "exit code N" or "signal NAME") of torchrun's first observed failure, from its summary."""
    found = re.findall(r"rank\s*:\s*(\d+)[^\n]*\n\s*exitcode\s*:\s*(-?\d+)", log)
    if not found:
        return None
    rank, code = found[-1]  # the summary ends with the root cause
    value = int(code)
    if value < 0:
        with contextlib.suppress(ValueError):
            return int(rank), f"signal {signal.Signals(-value).name}"
    return int(rank), f"exit code {value}"
