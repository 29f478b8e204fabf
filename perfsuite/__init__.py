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
    JobError,
    KnobError,
    PerfsuiteError,
    PropertyViolation,
    ResultError,
    WorkloadError,
)
from perfsuite.knobs import AugKnobs, Knobs, LoaderKnobs, StepKnobs
from perfsuite.results import Fingerprint, Metric, Result

if TYPE_CHECKING:
    from perfsuite.augment.checks import Declared, check_example, check_paired_augmentation
    from perfsuite.augment.cpu import CpuAugment
    from perfsuite.augment.gpu import GpuAugment
    from perfsuite.augment.mix import PairedCutMix
    from perfsuite.augment.recipe import Recipe
    from perfsuite.baselines import BaselineStore
    from perfsuite.faults import FAULTS, get_fault
    from perfsuite.job import Job, LossHook, job_names, register_job
    from perfsuite.metrics import MetricSpec
    from perfsuite.metrics import names as metric_names
    from perfsuite.metrics import register as register_metric
    from perfsuite.probes import all_probes
    from perfsuite.probes.base import Probe, RunContext, WindowTimings
    from perfsuite.runner import RunSpec, run
    from perfsuite.verdicts import compare_results, compare_timing
    from perfsuite.workloads.registry import Sample, Scale, Workload, get_workload, register_workload, workload_names

__version__ = "0.1.0"

# Everything the docs use, importable as ``perfsuite.NAME``; loaded on first use.
_LAZY = {
    "Job": "perfsuite.job",
    "LossHook": "perfsuite.job",
    "register_job": "perfsuite.job",
    "job_names": "perfsuite.job",
    "Probe": "perfsuite.probes.base",
    "RunContext": "perfsuite.probes.base",
    "WindowTimings": "perfsuite.probes.base",
    "all_probes": "perfsuite.probes",
    "Recipe": "perfsuite.augment.recipe",
    "CpuAugment": "perfsuite.augment.cpu",
    "GpuAugment": "perfsuite.augment.gpu",
    "PairedCutMix": "perfsuite.augment.mix",
    "check_paired_augmentation": "perfsuite.augment.checks",
    "check_example": "perfsuite.augment.checks",
    "Declared": "perfsuite.augment.checks",
    "FAULTS": "perfsuite.faults",
    "get_fault": "perfsuite.faults",
    "Sample": "perfsuite.workloads.registry",
    "MetricSpec": "perfsuite.metrics",
    "metric_names": "perfsuite.metrics:names",
    "register_metric": "perfsuite.metrics:register",
    "BaselineStore": "perfsuite.baselines",
    "compare_results": "perfsuite.verdicts",
    "compare_timing": "perfsuite.verdicts",
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

        module, _, attr = _LAZY[name].partition(":")
        return getattr(importlib.import_module(module), attr or name)
    raise AttributeError(f"module 'perfsuite' has no attribute {name!r}")


__all__ = [
    "AugKnobs",
    "AugmentationError",
    "BaselineError",
    "DeviceError",
    "Fingerprint",
    "FingerprintMismatch",
    "JobError",
    "KnobError",
    "Knobs",
    "LoaderKnobs",
    "Metric",
    "PerfsuiteError",
    "PropertyViolation",
    "Result",
    "ResultError",
    "StepKnobs",
    "WorkloadError",
    *_LAZY,
]
