"""Hypothesis profiles for the property suite, picked by ``PERFSUITE_HYPOTHESIS_PROFILE`` (default ``ci``).

``pytest --hypothesis-profile=nightly`` overrides the variable (Hypothesis'
own pytest plugin loads it after this file registers it).

* ``ci``: derandomized, so a red CI run is reproducible and a green one is
  not luck; bounded examples so the suite stays well under a minute on 2 cores.
* ``dev``: random, a few more examples, failures remembered in the local database.
* ``nightly``: many examples, to find what ``ci`` never draws.

No deadlines anywhere: Kornia's first call and shared CI cores make
per-example timings noise, and timings are not what these tests check.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, Phase, settings

_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# No explain phase in ci: it reruns the shrunk failure with each part varied, and on the negative
# controls that is most of the suite's time; the shrunk example and message say enough.
_NO_EXPLAIN = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink]
settings.register_profile(
    "ci", max_examples=30, derandomize=True, database=None, print_blob=True, phases=_NO_EXPLAIN, **_COMMON
)
settings.register_profile("dev", max_examples=50, **_COMMON)
settings.register_profile("nightly", max_examples=1000, **_COMMON)


def pytest_configure(config) -> None:
    """Load the profile unless ``--hypothesis-profile`` already did (this conftest loads after that option)."""
    if config.getoption("hypothesis_profile", None):
        return
    name = os.environ.get("PERFSUITE_HYPOTHESIS_PROFILE", "ci")
    if name not in ("ci", "dev", "nightly"):
        raise pytest.UsageError(f"PERFSUITE_HYPOTHESIS_PROFILE={name!r} is not a profile; write ci, dev or nightly")
    settings.load_profile(name)


NUM_CLASSES = 19  # seed 000's face parsing


@pytest.fixture(params=["cpu", "gpu"])
def executor(request) -> str:
    """Which of perfsuite's executors a test checks: per-sample NumPy/PIL or batched Kornia (CPU tensors here)."""
    return request.param


@pytest.fixture
def check_executor(executor):
    """``check(recipe, **declared)``: the property search on ``executor`` running ``recipe`` on masks."""
    from perfsuite.augment.checks import check_paired_augmentation
    from perfsuite.augment.cpu import CpuAugment
    from perfsuite.augment.gpu import GpuAugment

    def check(recipe, fill: int = 255, fill_declared: bool = True, **declared) -> None:
        if fill_declared:
            declared["fill"] = fill
        if executor == "cpu":
            fn = lambda seed: CpuAugment(recipe, "mask", fill=fill, seed=seed)  # noqa: E731 - a generator per example
            check_paired_augmentation(fn, num_classes=NUM_CLASSES, layout="numpy", factory=True, **declared)
        else:
            check_paired_augmentation(GpuAugment(recipe, "mask", fill=fill), num_classes=NUM_CLASSES, **declared)

    return check
