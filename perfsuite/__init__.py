"""perfsuite: performance regression tests for GPU training input pipelines.

The public API. Importing it is cheap: torch, kornia and pynvml are imported
by the modules that use them, when they are used, so ``pytest --help`` and
``perfsuite --help`` stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perfsuite.errors import (
    AugmentationError,
    BaselineError,
    DeviceError,
    FingerprintMismatch,
    KnobError,
    PerfsuiteError,
    PropertyViolation,
    ResultError,
    WorkloadError,
)
from perfsuite.knobs import AugKnobs, Knobs, LoaderKnobs, StepKnobs
from perfsuite.results import Fingerprint, Metric, Result

if TYPE_CHECKING:
    from perfsuite.runner import RunSpec, run
    from perfsuite.workloads.registry import Scale, Workload, get_workload, register_workload, workload_names

__version__ = "0.1.0"

_LAZY = {
    "RunSpec": "perfsuite.runner",
    "run": "perfsuite.runner",
    "Scale": "perfsuite.workloads.registry",
    "Workload": "perfsuite.workloads.registry",
    "get_workload": "perfsuite.workloads.registry",
    "register_workload": "perfsuite.workloads.registry",
    "workload_names": "perfsuite.workloads.registry",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'perfsuite' has no attribute {name!r}")


__all__ = [
    "AugKnobs", "AugmentationError", "BaselineError", "DeviceError", "Fingerprint", "FingerprintMismatch",
    "KnobError", "Knobs", "LoaderKnobs", "Metric", "PerfsuiteError", "PropertyViolation", "Result", "ResultError", "RunSpec",
    "Scale", "StepKnobs", "Workload", "WorkloadError", "get_workload", "register_workload", "run",
    "workload_names",
]
