"""The alignment checker forgives a bilinear blend with the pixel's own label, and nothing else.

Found on real face masks: a 1-px glasses outline that nearest sampling drops
tints the bilinear image; the tint can sit near a third label's colour. Such a
pixel is a blend in which the mask's label weighs >= 1/4, with a label of the
same sample. MixUp blends with another sample's labels and stays an error.
"""

from __future__ import annotations

import numpy as np
import pytest

from perfsuite.augment.checks import assert_aligned, encode, palette_for
from perfsuite.errors import PropertyViolation


def _case(blend_with: int, own_weight: float):
    masks_in = np.zeros((2, 9, 9), dtype=np.int64)
    masks_in[0, :, 6:] = 3  # sample 0 holds labels {0, 3}
    masks_in[1] = 7  # sample 1 holds label 7 only
    palette = palette_for(masks_in)
    images = encode(masks_in, palette).astype(np.float64)
    masks_out = masks_in.copy()
    mixed = own_weight * palette[0] + (1 - own_weight) * palette[blend_with]
    images[0, 2:5, 1:4] = mixed  # a 3x3 block inside label 0's region: the checker compares its centre
    return images, masks_out, palette, masks_in


def test_blend_with_an_own_label_is_forgiven() -> None:
    images, masks_out, palette, masks_in = _case(blend_with=3, own_weight=0.5)
    assert_aligned(images, masks_out, palette, ignore_index=255, masks_in=masks_in)


def test_the_same_blend_fails_without_knowing_the_input_labels() -> None:
    images, masks_out, palette, _ = _case(blend_with=3, own_weight=0.5)
    with pytest.raises(PropertyViolation, match="alignment in sample 0"):
        assert_aligned(images, masks_out, palette, ignore_index=255)


def test_blend_with_another_samples_label_is_an_error() -> None:
    images, masks_out, palette, masks_in = _case(blend_with=7, own_weight=0.5)
    with pytest.raises(PropertyViolation, match="alignment in sample 0"):
        assert_aligned(images, masks_out, palette, ignore_index=255, masks_in=masks_in)


def test_a_blend_where_the_own_label_barely_weighs_is_an_error() -> None:
    images, masks_out, palette, masks_in = _case(blend_with=3, own_weight=0.1)
    with pytest.raises(PropertyViolation, match="alignment in sample 0"):
        assert_aligned(images, masks_out, palette, ignore_index=255, masks_in=masks_in)
