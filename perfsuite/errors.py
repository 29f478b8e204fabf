"""All of perfsuite's exceptions, in one place.

Every message says what was wrong and what to write instead, because the
people reading them are fixing a CI run, not reading our source.
"""

from __future__ import annotations


class PerfsuiteError(Exception):
    """Base class: catch this to handle any perfsuite failure."""


class KnobError(PerfsuiteError, ValueError):
    """A knob has a value perfsuite refuses (e.g. ``amp=True``)."""


class DeviceError(PerfsuiteError):
    """A knob or run asks for something the device cannot do."""


class WorkloadError(PerfsuiteError, KeyError):
    """An unknown workload or scale, or a workload that breaks its contract."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DatasetError(PerfsuiteError):
    """A generated dataset in the cache that cannot be read or put in place; the message names the file."""


class JobError(PerfsuiteError, ValueError):
    """A user's training job (perfsuite.Job) that breaks the contract: a step that returns no loss
    tensor, a loader that yields nothing, a model on another device, a knob its loader contradicts."""


class AugmentationError(PerfsuiteError, ValueError):
    """An augmentation that would corrupt targets (e.g. MixUp on masks)."""


class PropertyViolation(AugmentationError, AssertionError):
    """A paired augmentation broke a property (perfsuite.augment.checks).

    ``prop`` and ``sample`` say which property and sample; ``example`` and
    ``seed`` hold the (shrunk) input that shows it, for the report.
    """

    cause: str | None = None  # the classified cause (perfsuite.augment.hints), when one was found
    where: str | None = None  # the fix in the user's terms, at the line of the transform that did it

    def __init__(self, prop: str, message: str, sample: int | None = None) -> None:
        where = f" in sample {sample}" if sample is not None else ""
        super().__init__(f"{prop}{where}: {message}")
        self.prop = prop
        self.sample = sample
        self.example: object = None
        self.seed: int | None = None
        self.shrink: object = None  # the search's ShrinkBudget: how many shrink calls ran (perfsuite.augment.shrinking)


class ResultError(PerfsuiteError, ValueError):
    """A Result or metric payload that cannot be read back."""


class BaselineError(PerfsuiteError):
    """A baseline that is corrupt, missing where required, or from another machine."""


class FingerprintMismatch(BaselineError):
    """Comparing results from different machines without being asked to."""


class WorkloadMismatch(BaselineError):
    """Comparing the Results of different workloads (or a script with a job) without being asked to."""


class RunTimeout(PerfsuiteError):
    """A run phase (warm-up, observe, window) passed its deadline: a worker, ``__getitem__`` or step hangs.

    ``phase`` names the phase, ``deadline_s`` the limit it passed, ``workers``
    the pids of the DataLoader workers it was waiting on (empty without
    workers), ``stacks`` the Python stacks dumped when it fired, ``where``
    the place of the hang and ``site`` the job's own frame there.
    """

    def __init__(
        self,
        message: str,
        phase: str,
        deadline_s: float,
        workers: tuple[int, ...] = (),
        stacks: str = "",
        where: str = "",
        site: str = "",
    ) -> None:
        super().__init__(message)
        self.phase = phase
        self.deadline_s = deadline_s
        self.workers = workers
        self.stacks = stacks
        self.where = where  # "step", "worker" or "main thread"
        self.site = site  # the innermost frame of the job's own code, "file:line in function"


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run, with where it landed (``phase``, ``step`` of ``steps``).

    A KeyboardInterrupt, so pytest and every ``except KeyboardInterrupt`` treat it as the interrupt it is.
    """

    def __init__(self, phase: str, step: int | None = None, steps: int | None = None) -> None:
        at = f", step {step} of {steps}" if step is not None and steps else ""
        super().__init__(f"interrupted (Ctrl-C) in the {phase} phase{at}; no Result was produced")
        self.phase = phase
        self.step = step
        self.steps = steps


class PropertyArgumentError(AugmentationError):
    """``check_paired_augmentation`` (or a strategy) got arguments it cannot check with.

    The message names the parameter as the caller wrote it and a value that works.
    """


class ScriptError(JobError):
    """A user's training script under ``perfsuite exec`` (or ``perf_run(Script(...))``) that cannot be measured:
    it raised, exited with a failure status, ended before the run's steps, or never iterated a DataLoader.

    ``script_traceback`` holds the script's own traceback (perfsuite's frames left out) when it raised.
    """

    def __init__(self, message: str, script_traceback: str = "") -> None:
        super().__init__(message)
        self.script_traceback = script_traceback
        self.worker_death: object = None  # a DataLoader worker's death (harness.worker_death.WorkerDeath) it reports


class RankError(PerfsuiteError):
    """A rank of a run on several ranks failed or died (perfsuite.harness.ranks.launch).

    ``rank`` names the first rank that failed (None when it cannot be told) and
    ``stacks`` holds each rank's Python stacks as dumped when the run was stopped.
    """

    def __init__(self, message: str, rank: int | None = None, stacks: str = "") -> None:
        super().__init__(message)
        self.rank = rank
        self.stacks = stacks
