"""One augmentation recipe and its two executors (CPU per-sample, GPU batched), plus batch mixes.

Importing this package stays cheap: the recipe is plain data, and the
executors (which pull in PIL, torch and Kornia) load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from perfsuite.augment.recipe import (
    GEOMETRIC,
    OPS,
    PHOTOMETRIC,
    TARGET_KINDS,
    Blur,
    Flip,
    Jitter,
    Noise,
    Recipe,
    Rotation,
    Scale,
    check_target_kind,
    is_geometric,
)

_LAZY = {
    "CpuAugment": "perfsuite.augment.cpu",
    "CpuParams": "perfsuite.augment.cpu",
    "JitterParams": "perfsuite.augment.cpu",
    "affine_matrix": "perfsuite.augment.cpu",
    "GpuAugment": "perfsuite.augment.gpu",
    "PairedCutMix": "perfsuite.augment.mix",
    "CutMixParams": "perfsuite.augment.mix",
    "mixup": "perfsuite.augment.mix",
    "mixup_labels": "perfsuite.augment.mix",
    "check_mixes": "perfsuite.augment.mix",
}

__all__ = [
    "GEOMETRIC",
    "OPS",
    "PHOTOMETRIC",
    "TARGET_KINDS",
    "Blur",
    "Flip",
    "Jitter",
    "Noise",
    "Recipe",
    "Rotation",
    "Scale",
    "check_target_kind",
    "is_geometric",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'perfsuite.augment' has no attribute {name!r}")
