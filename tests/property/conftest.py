"""The property suite runs under perfsuite's shipped ``ci`` profile unless told otherwise.

The profiles (``ci``, ``dev``, ``nightly``) are registered by perfsuite's pytest
plugin (perfsuite/augment/profiles.py), so users get them too;
``PERFSUITE_HYPOTHESIS_PROFILE`` or ``--hypothesis-profile`` picks one. This
suite defaults to ``ci`` even outside CI, as it always has.
"""

from __future__ import annotations

import os

import pytest

from perfsuite.augment import profiles as hypothesis_profiles


def pytest_configure(config) -> None:
    """Default this suite to ``ci`` when neither ``--hypothesis-profile`` nor the variable chose."""
    if config.getoption("hypothesis_profile", None) or os.environ.get(hypothesis_profiles.ENV):
        return
    hypothesis_profiles.load("ci")


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
