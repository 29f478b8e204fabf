"""``perfsuite doctor``: one command that names a job's bottleneck in the seeds' terms, with evidence, and the fix.

A package by concern, each a short module (a reader finds each finding's rule in one place):

* :mod:`.model`: the typed figures (dataclasses), *unavailable* with its reason, and :class:`Fix`, the one
  key a counterfactual is stored and read under;
* :mod:`.evidence` and :mod:`.window`: the runs' own records read once (contention, the loader ledger,
  the periodic steps each run left out, the per-step ledger, the cached-batch step, input efficiency);
* :mod:`.arms` and :mod:`.runs` (a Job), :mod:`.script` (a script, each run a fresh process): the runs,
  with the counterfactuals interleaved, within :mod:`.budget`;
* :mod:`.plan`: which counterfactuals run, decided from the first run before any does: those whose mechanism
  can act within the runs and whose predicted effect exceeds the job's own spread, largest first;
* :mod:`.predictions`: the loader's cost model the rules predict by, never above the input's whole share;
* :mod:`.rules`: one module per kind of finding (its condition, finding, prediction and fix) and their registry;
* :mod:`.diagnosis`: gathers the evidence, runs the rules and ranks what they return (measured gain, then the
  bottleneck, then predicted); rendered by
  :mod:`perfsuite.tools.doctor.report`.
"""

from __future__ import annotations

from perfsuite.tools.doctor.arms import Arm, choose_arms, clone_loader, fewer_workers, more_workers, with_workers
from perfsuite.tools.doctor.budget import Budget
from perfsuite.tools.doctor.diagnosis import Diagnosis, assess
from perfsuite.tools.doctor.model import CONFIDENCE, Counterfactuals, Finding, Fix, Measured, Predicted, Unavailable
from perfsuite.tools.doctor.runs import DEFAULT_ROUNDS, diagnose
from perfsuite.tools.doctor.stats import ratio_interval, wait_band

__all__ = [
    "CONFIDENCE",
    "DEFAULT_ROUNDS",
    "Arm",
    "Budget",
    "Counterfactuals",
    "Diagnosis",
    "Finding",
    "Fix",
    "Measured",
    "Predicted",
    "Unavailable",
    "assess",
    "choose_arms",
    "clone_loader",
    "diagnose",
    "fewer_workers",
    "more_workers",
    "ratio_interval",
    "wait_band",
    "with_workers",
]
