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


class AugmentationError(PerfsuiteError, ValueError):
    """An augmentation that would corrupt targets (e.g. MixUp on masks)."""


class PropertyViolation(AugmentationError, AssertionError):
    """A paired augmentation broke a property (perfsuite.augment.checks).

    ``prop`` and ``sample`` say which property and sample; ``example`` and
    ``seed`` hold the (shrunk) input that shows it, for the report.
    """

    def __init__(self, prop: str, message: str, sample: int | None = None) -> None:
        where = f" in sample {sample}" if sample is not None else ""
        super().__init__(f"{prop}{where}: {message}")
        self.prop = prop
        self.sample = sample
        self.example: object = None
        self.seed: int | None = None


class ResultError(PerfsuiteError, ValueError):
    """A Result or metric payload that cannot be read back."""


class BaselineError(PerfsuiteError):
    """A baseline that is corrupt, missing where required, or from another machine."""


class FingerprintMismatch(BaselineError):
    """Comparing results from different machines without being asked to."""


class PropertyArgumentError(AugmentationError):
    """``check_paired_augmentation`` (or a strategy) got arguments it cannot check with.

    The message names the parameter as the caller wrote it and a value that works.
    """
