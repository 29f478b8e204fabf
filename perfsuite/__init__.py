"""perfsuite: performance regression tests for GPU training input pipelines.

The public API. Importing it is cheap: torch, kornia and pynvml are imported
by the modules that use them, when they are used, so ``pytest --help`` and
``perfsuite --help`` stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perfsuite.core.knobs import AugKnobs, Knobs, LoaderKnobs, StepKnobs
from perfsuite.core.results import Fingerprint, Metric, RankResult, Result
from perfsuite.errors import (
    AugmentationError,
    BaselineError,
    DeviceError,
    FingerprintMismatch,
    JobError,
    KnobError,
    PerfsuiteError,
    PropertyViolation,
    RankError,
    ResultError,
    RunTimeout,
    ScriptError,
    WorkloadError,
    WorkloadMismatch,
)

if TYPE_CHECKING:
    from perfsuite.augment.checks import Declared, check_example, check_paired_augmentation
    from perfsuite.augment.cpu import CpuAugment
    from perfsuite.augment.gpu import GpuAugment
    from perfsuite.augment.mix import PairedCutMix
    from perfsuite.augment.recipe import Recipe
    from perfsuite.core.metrics import MetricSpec
    from perfsuite.core.metrics import names as metric_names
    from perfsuite.core.metrics import register as register_metric
    from perfsuite.harness.faults.catalog import FAULTS, get_fault
    from perfsuite.harness.ranks.launch import run_distributed
    from perfsuite.harness.runner import RunSpec, run
    from perfsuite.jobs.contract import Job, LossHook
    from perfsuite.jobs.registry import get_workload, job_names, register_job, register_workload, workload_names
    from perfsuite.jobs.script import Script
    from perfsuite.jobs.workload import Sample, Scale, Workload
    from perfsuite.judge.baselines import BaselineStore
    from perfsuite.judge.engine import compare_results
    from perfsuite.judge.timing import compare_timing
    from perfsuite.probes import all_probes
    from perfsuite.probes.base import Probe, RunContext, WindowTimings

__version__ = "0.1.0"

# Everything the docs use, importable as ``perfsuite.NAME``; loaded on first use.
_LAZY = {
    "Job": "perfsuite.jobs.contract",
    "LossHook": "perfsuite.jobs.contract",
    "Script": "perfsuite.jobs.script",
    "register_job": "perfsuite.jobs.registry",
    "job_names": "perfsuite.jobs.registry",
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
    "FAULTS": "perfsuite.harness.faults.catalog",
    "get_fault": "perfsuite.harness.faults.catalog",
    "Sample": "perfsuite.jobs.workload",
    "MetricSpec": "perfsuite.core.metrics",
    "metric_names": "perfsuite.core.metrics:names",
    "register_metric": "perfsuite.core.metrics:register",
    "BaselineStore": "perfsuite.judge.baselines",
    "compare_results": "perfsuite.judge.engine",
    "compare_timing": "perfsuite.judge.timing",
    "RunSpec": "perfsuite.harness.runner",
    "run_distributed": "perfsuite.harness.ranks.launch",
    "run": "perfsuite.harness.runner",
    "Scale": "perfsuite.jobs.workload",
    "Workload": "perfsuite.jobs.workload",
    "get_workload": "perfsuite.jobs.registry",
    "register_workload": "perfsuite.jobs.registry",
    "workload_names": "perfsuite.jobs.registry",
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
    "WorkloadMismatch",
    "JobError",
    "KnobError",
    "Knobs",
    "LoaderKnobs",
    "Metric",
    "PerfsuiteError",
    "PropertyViolation",
    "RankError",
    "RankResult",
    "Result",
    "ResultError",
    "RunTimeout",
    "ScriptError",
    "StepKnobs",
    "WorkloadError",
    *_LAZY,
]

# Each DataLoader built from now on notes the line that builds it, so a ready-made Job's settings findings name
# it (perfsuite.probes.sites.note_built_loaders; torch is not imported for it).
from perfsuite.probes.sites import note_built_loaders as _note_built_loaders  # noqa: E402

_note_built_loaders()
