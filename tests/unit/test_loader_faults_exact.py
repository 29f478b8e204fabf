"""Planted loader faults, each caught by an exact loader counter naming its stage and callable; A/A: none.

Every fault changes the work of one stage (a 4x decode, an extra resize, a transform applied twice, a mask
decoded as RGB, a heavier collate, float64 samples, a sleeping collate, an extra colour conversion, a file
read twice). The counting replay (perfsuite.probes.loadercount) runs on the built pipeline in this process,
and the verdicts come from the one engine, as `perfsuite compare` would give them.
"""

from __future__ import annotations

from typing import Any

import pytest
from fixed_fingerprint import FP

from perfsuite.core import metrics as registry
from perfsuite.core.knobs import Knobs
from perfsuite.core.results import Result
from perfsuite.harness.faults.loader import EXACT_FAULTS
from perfsuite.harness.pipeline import build_pipeline
from perfsuite.jobs.registry import get_workload
from perfsuite.judge.engine import compare_results
from perfsuite.probes.loadercount import count, library_versions, to_metrics

WORKLOAD = {"mask_as_rgb": "face_parsing"}
AUG = {"transform_twice": "cpu"}


def counted(workload: str, aug: str, mutation: Any = None) -> Result:
    w = get_workload(workload)
    pipeline = build_pipeline(w, w.scale("smoke"), Knobs.from_flat(aug=aug, num_workers=0, device="cpu"), seed=0)
    if mutation is not None:
        mutation(pipeline)
    c = count(pipeline.loader, 0, batches=1)
    assert not isinstance(c, str), c
    metrics = {m.name: m for m in to_metrics(c, library_versions())}
    return Result(workload, "smoke", {"aug": aug}, metrics, {}, FP, c.samples, 1, 0)


def exact_failures(base: Result, head: Result) -> dict[str, str]:
    verdicts = compare_results(base, head, "t", only=lambda s: s.exact)
    return {v.metric: v.message for v in verdicts if v.failed}


@pytest.fixture(scope="module")
def bases() -> dict[tuple[str, str], Result]:
    return {}


def base_for(bases: dict[tuple[str, str], Result], workload: str, aug: str) -> Result:
    if (workload, aug) not in bases:
        bases[(workload, aug)] = counted(workload, aug)
    return bases[(workload, aug)]


@pytest.mark.slow
@pytest.mark.parametrize(("workload", "aug"), [("gray_classifier", "none"), ("face_parsing", "cpu")])
def test_an_unchanged_loader_counted_again_fails_nothing(bases, workload, aug) -> None:
    assert exact_failures(base_for(bases, workload, aug), counted(workload, aug)) == {}


@pytest.mark.slow
@pytest.mark.parametrize("fault", sorted(EXACT_FAULTS))
def test_each_planted_fault_is_caught_exactly_with_its_stage_and_callable(bases, fault) -> None:
    mutation, stage, callable_, metric = EXACT_FAULTS[fault]
    workload, aug = WORKLOAD.get(fault, "gray_classifier"), AUG.get(fault, "none")
    failed = exact_failures(base_for(bases, workload, aug), counted(workload, aug, mutation))
    assert metric in failed, failed
    assert registry.get(metric).exact
    assert stage in failed[metric], failed[metric]
    if callable_ is not None:
        assert f"{stage}: {callable_}" in " ".join(failed.values()), failed
