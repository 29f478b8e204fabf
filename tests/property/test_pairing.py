"""Pairing: after batching, sample i's mask still belongs to sample i's image; CutMix moves both together."""

from __future__ import annotations

import numpy as np
import pytest

from perfsuite.augment.checks import PropertyViolation, assert_paired, check_paired_augmentation, encode, palette_for
from perfsuite.augment.gpu import GpuAugment
from perfsuite.augment.mix import PairedCutMix
from perfsuite.augment.recipe import Recipe

NUM_CLASSES = 19

GEOMETRY = Recipe().geometric_only()


def test_executors_keep_samples_paired(check_executor):
    """Per-sample label sets are disjoint, so any swap within the batch shows as a foreign label."""
    check_executor(GEOMETRY, photometric=False, min_batch=2)


def test_paired_cutmix_moves_mask_with_image():
    check_paired_augmentation(
        PairedCutMix(p=1.0), num_classes=NUM_CLASSES, photometric=False, mixes_samples=True, min_batch=2
    )


def test_gpu_executor_then_paired_cutmix():
    geometry, cutmix = GpuAugment(GEOMETRY, "mask"), PairedCutMix(p=0.5)
    check_paired_augmentation(
        lambda x, m: cutmix(*geometry(x, m)),
        num_classes=NUM_CLASSES,
        photometric=False,
        mixes_samples=True,
        min_batch=2,
    )


def test_reordered_images_are_caught():
    masks = np.stack([np.full((9, 9), i, np.uint8) for i in range(3)])
    palette = palette_for(masks)
    images = encode(np.roll(masks, 1, axis=0), palette).astype(float)
    with pytest.raises(PropertyViolation, match=r"pairing in sample 0: the image shows label 2"):
        assert_paired(masks, images, palette)
