"""The user's own errors in the user's terms: which phase of which job raised, then their traceback alone.

A user's step, Dataset or job factory that raises under ``perfsuite run`` or ``perfsuite doctor`` is
their bug, not perfsuite's: :func:`describe` turns it into one line (``job 'faces' raised ValueError in its
Dataset (DataLoader worker 0) during the warm-up: ...``) and the traceback from their first frame on, with
perfsuite's frames left out (and torch's DataLoader plumbing before it). A DataLoader worker killed by a
signal is one line naming the signal, the worker and the phase it died in. Anything else (a frame of
the user's appears nowhere) is perfsuite's own bug and keeps its full traceback.
"""

from __future__ import annotations

import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from perfsuite.core.user_frames import PERFSUITE_DIR, is_users_file, users_traceback_text
from perfsuite.harness.worker_death import death_in_chain

# The runner's names for its phases, in the words the one line uses.
PHASES = {
    "set-up": "while setting up",
    "first batch": "fetching the first batch",
    "warm-up": "during the warm-up",
    "window": "in the measured window",
    "speed of light": "in the speed-of-light steps",
    "loader ledger": "in the loader ledger",
    "observe": "in the observed steps",
}
_WORKER_RAISED = re.compile(
    r"Caught (\w+) in DataLoader worker process (\d+)\.\nOriginal (Traceback[^\n]*\n)(.*)", re.S
)


@dataclass(frozen=True)
class UserError:
    """What the CLI prints for an exception raised by the user's code: ``line`` then ``traceback`` (may be '')."""

    line: str
    traceback: str


def describe(exc: BaseException, target: str) -> UserError | None:
    """The one line and the user's traceback for ``exc`` raised while running ``target``; None if not the user's."""
    phase, steps = _phase(exc.__traceback__)
    where = " " + PHASES.get(phase or "", _before_the_run(exc.__traceback__))
    at = f" ({steps} step(s) done)" if steps else ""
    text = str(exc)
    death = death_in_chain(exc)  # torch raises it wherever the main thread is: a failing cleanup may hide it
    if death is not None and death.signal is not None:
        return UserError(
            f"job {target!r}: {death.what()}{where}{at}; its Dataset or collate crashed (native code, or memory); "
            "run with --workers 0 to see it fail in this process",
            "",
        )
    if death is not None:
        return UserError(
            f"job {target!r}: {death.what()}{where}{at} (torch saw it exit while handing over a batch, so the "
            "signal is not known); its Dataset or collate crashed (native code, or memory); run with --workers 0 "
            "to see it fail in this process",
            "",
        )
    raised = _WORKER_RAISED.search(text)
    collate = _collate(exc, target, f"{where}{at}", raised.group(2) if raised else None)
    if collate is not None:
        return collate
    if raised:
        kind, worker, head, body = raised.groups()
        frames = users_traceback_text(body)
        if not frames:
            return None
        last = frames.rstrip("\n").splitlines()[-1]
        return UserError(
            f"job {target!r} raised {kind} in its Dataset (DataLoader worker {worker}){where}{at}: "
            f"{last.split(': ', 1)[-1]}",
            head + frames,
        )
    summary = traceback.extract_tb(exc.__traceback__)
    first = next((i for i, f in enumerate(summary) if is_users_file(f.filename)), None)
    if first is None:
        return None
    kept = traceback.StackSummary.from_list([f for f in summary[first:] if not f.filename.startswith(PERFSUITE_DIR)])
    part = _part(summary, first)
    body = "Traceback (most recent call last):\n" + "".join(kept.format())
    body += "".join(traceback.format_exception_only(type(exc), exc))
    first_line = text.splitlines()[0] if text.strip() else "(no message)"
    return UserError(f"job {target!r} raised {type(exc).__name__} in {part}{where}{at}: {first_line}", body)


def _collate(exc: BaseException, target: str, when: str, worker: str | None) -> UserError | None:
    """A batch torch's collate could not make, in one line naming the odd sample and the ``__getitem__`` that made
    it (:mod:`perfsuite.cli.bad_sample`); torch's frames and perfsuite's are no help, so no traceback follows."""
    from perfsuite.cli.bad_sample import collate_failure, describe_failure

    found = collate_failure(exc)
    if found is None:
        return None
    last = [line for line in str(exc).strip().splitlines() if line.strip()][-1]
    error = last if worker is not None else f"{type(exc).__name__}: {last}"
    by = f" (DataLoader worker {worker})" if worker is not None else ""
    return UserError(f"job {target!r}{by}{when}: {describe_failure(found, error)}", "")


# The frames whose ``driver`` local holds the run's phase: a job's run, and a script's (perfsuite exec).
# The functions whose frames hold the run's driver, by name and by the file they are in (told by where perfsuite is,
# never by a folder's name): a Job's loop (runner.run_phases) and a script's (script/drive.py's _drive).
_DRIVERS = {
    ("run_phases", str(Path(PERFSUITE_DIR, "harness", "runner.py"))),
    ("_drive", str(Path(PERFSUITE_DIR, "harness", "script", "drive.py"))),
}


def _phase(tb: TracebackType | None) -> tuple[str | None, int | None]:
    """The run's phase and step when ``tb`` passed through :func:`perfsuite.harness.runner.run_phases` (read from its
    driver, or, in a runner of before the driver, from its own locals)."""
    phase, steps = None, None
    while tb is not None:
        code = tb.tb_frame.f_code
        if (code.co_name, _resolved(code.co_filename)) in _DRIVERS:
            local = tb.tb_frame.f_locals
            state = local.get("driver", None)  # the phases' state lives on the driver (perfsuite.harness.driver)
            if state is None or not isinstance(getattr(state, "phase", None), str):
                state = None
            phase = state.phase if state is not None else local.get("phase")
            failed_in = getattr(local.get("source"), "failed_in", None)  # a script's fetch: its phase then (not now)
            phase = failed_in if isinstance(failed_in, str) and failed_in else phase
            phase = phase if isinstance(phase, str) else None
            k = getattr(state, "k", None) if state is not None else local.get("k")
            steps = k if isinstance(k, int) and k > 0 and phase != "set-up" else None
        tb = tb.tb_next
    return phase, steps


def _before_the_run(tb: TracebackType | None) -> str:
    """Where an error outside the runner's phases came from: the job's factory, or a module given to --import."""
    names = set()
    while tb is not None:
        names.add(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    if names & {"call_factory", "resolve", "bind"}:
        return "while building the job"
    if "import_modules" in names:
        return "while importing its module (--import)"
    return "before the run"


# perfsuite's and torch's files told by where the packages are, never by a folder's name (a clone named
# perfsuite/ holds torch too, in its .venv/)
_RUNNER = str(Path(PERFSUITE_DIR, "harness", "runner.py"))


def _resolved(filename: str) -> str:
    try:
        return str(Path(filename).resolve())
    except OSError:
        return filename


def _part(summary: traceback.StackSummary, first: int) -> str:
    """Which of the user's pieces raised: the Dataset (read in this process), the step, or the job's code."""
    torch_file = getattr(sys.modules.get("torch"), "__file__", None)  # a traceback through torch's fetch: imported
    fetch = str(Path(torch_file).resolve().parent / "utils" / "data" / "_utils" / "fetch.py") if torch_file else None
    if fetch and any(_resolved(f.filename) == fetch for f in summary[:first]):
        return "its Dataset"
    names = [f.name for f in summary[:first]]
    if "step" in names:
        return "its step"
    return "its code"
