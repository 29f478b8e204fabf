"""``perfsuite tune``: find the loader settings (and, asked, the batch size) that feed the step, and lock them in.

Modules, one concern each: :mod:`~perfsuite.tools.tune.targets` (what runs: a workload, a job, a perf
test), :mod:`~perfsuite.tools.tune.guard` (the memory guard), :mod:`~perfsuite.tools.tune.search` (the
climbs, each step an interleaved comparison through ab's decision rule),
:mod:`~perfsuite.tools.tune.lockin` (the tune file and the pyproject thresholds),
:mod:`~perfsuite.tools.tune.session` (the whole session and its report). User guide: docs/tune.md.
"""

from __future__ import annotations

from perfsuite.tools.tune.search import TUNE_RULE, SearchConfig
from perfsuite.tools.tune.session import LockIn, TuneReport, format_report, lock_in, tune
from perfsuite.tools.tune.targets import InProcessTarget, PytestTarget, TuneError

__all__ = [
    "TUNE_RULE",
    "InProcessTarget",
    "LockIn",
    "PytestTarget",
    "SearchConfig",
    "TuneError",
    "TuneReport",
    "format_report",
    "lock_in",
    "tune",
]
