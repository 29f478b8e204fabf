"""Alignment: perfsuite's own augmentation paths move image and mask with the same geometry."""

from __future__ import annotations

import numpy as np
import pytest

from perfsuite.augment.checks import PropertyViolation, assert_aligned, check_paired_augmentation, encode, palette_for
from perfsuite.augment.gpu import GpuAugment
from perfsuite.augment.recipe import GEOMETRIC, Recipe


@pytest.mark.parametrize("op", GEOMETRIC)
def test_each_geometric_op_alone(check_executor, op):
    check_executor(Recipe().only(op).with_p(**{op: 1.0}), photometric=False)


def test_geometric_recipe(check_executor):
    check_executor(Recipe().geometric_only().with_p(rotation=1.0, scale=1.0), photometric=False)


def test_full_recipe(check_executor):
    """Jitter, blur and noise on: alignment is judged by colour consistency per label."""
    check_executor(Recipe())


def test_gpu_executor_on_cuda(cuda_available):
    if not cuda_available:
        pytest.skip("no CUDA device: the GPU executor is checked on CPU tensors above")
    check_paired_augmentation(GpuAugment(Recipe(), "mask"), num_classes=19, device="cuda")


def _halves() -> np.ndarray:
    mask = np.zeros((1, 12, 12), np.uint8)
    mask[:, :, 6:] = 3
    return mask


def test_flipped_image_with_unflipped_mask_names_pixel_and_labels():
    masks = _halves()
    palette = palette_for(masks)
    images = encode(masks[:, :, ::-1], palette).astype(float)
    expected = r"alignment in sample 0: the mask says label 0 but the image shows label 3"
    with pytest.raises(PropertyViolation, match=expected):
        assert_aligned(images, masks, palette, ignore_index=255)


def test_misalignment_is_caught_by_consistency_too():
    """With photometric=True the colours may change, but label 0 must not show two colours."""
    masks = _halves()
    palette = palette_for(masks)
    images = encode(np.roll(masks, 3, axis=2), palette).astype(float) * 0.7  # darker: jitter
    with pytest.raises(PropertyViolation, match="pixels the mask labels 0 show different colours"):
        assert_aligned(images, masks, palette, ignore_index=255, photometric=True)


def test_boundary_pixels_are_not_compared_where_the_image_was_resampled():
    """A one-pixel disagreement at a label boundary the image blends (bilinear) is resampling, not misalignment."""
    masks = _halves()
    palette = palette_for(masks)
    exact, shifted = (encode(np.roll(masks, k, axis=2), palette).astype(float) for k in (0, 1))
    blended = np.where(exact != shifted, (exact + shifted) / 2, shifted)  # the boundary column is a 50/50 blend
    assert_aligned(blended, masks, palette, ignore_index=255)


def test_an_exact_copy_one_pixel_off_is_caught():
    """Nothing resampled the image (a crop, a flip): there is no boundary to forgive, every pixel is compared."""
    masks = _halves()
    palette = palette_for(masks)
    images = encode(np.roll(masks, 1, axis=2), palette).astype(float)
    with pytest.raises(PropertyViolation, match="the mask says label 0 but the image shows label 3") as info:
        assert_aligned(images, masks, palette, ignore_index=255)
    assert info.value.cause == "geometry"
    photometric = images * 0.8  # the same copy under brightness jitter: still one colour per label, still caught
    with pytest.raises(PropertyViolation, match="pixels the mask labels 0 show different colours"):
        assert_aligned(photometric, masks, palette, ignore_index=255, photometric=True, masks_in=masks)
