"""Reference workloads: one per seed document, each at ``smoke`` and ``full`` scale."""

from perfsuite.jobs.registry import (
    SCALES,
    Sample,
    Scale,
    Workload,
    get_workload,
    register_workload,
    workload_names,
)

__all__ = ["SCALES", "Sample", "Scale", "Workload", "get_workload", "register_workload", "workload_names"]
