"""The sub-pixel check (``subpixel=True``): an align_corners mismatch and a one-pixel shift are caught, correct
resizes and perfsuite's executors pass. Its false-alarm rate on real face masks is measured by
``scripts/subpixel_scan.py`` (docs/properties.md), not here.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from perfsuite.augment.alignment import assert_subpixel_aligned
from perfsuite.augment.checks import PropertyViolation, TorchBatched, check_paired_augmentation, encode, palette_for
from perfsuite.errors import PropertyArgumentError

NUM_CLASSES = 19
SIDES = dict(min_side=32, max_side=40)


def resize(x, m, factor=2.0, image_align_corners=False, mask_shift=0):
    h, w = x.shape[-2:]
    size = (round(h * factor), round(w * factor))
    xo = F.interpolate(x, size=size, mode="bilinear", align_corners=image_align_corners)
    mo = F.interpolate(m[:, None].float(), size=size, mode="nearest-exact")[:, 0].to(m.dtype)
    return xo, mo.roll(mask_shift, dims=-1)


def _check(fn, **kw):
    check_paired_augmentation(
        fn, num_classes=NUM_CLASSES, photometric=False, same_size=False, subpixel=True, **SIDES, **kw
    )


def test_align_corners_mismatch_is_caught():
    """x3 (1 px at the frame border). The half-pixel x2 case needs more regions than the strategies' blob masks
    hold (a few per sample, the palette allows 26 labels a batch): it is tested on real face masks below."""
    with pytest.raises(PropertyViolation) as info:
        _check(lambda x, m: resize(x, m, 3.0, image_align_corners=True))
    err = info.value
    print(err.example, err)
    assert err.cause == "subpixel" and err.prop == "sub-pixel alignment"
    assert "align_corners" in str(err) and "scale/rotation difference" in str(err)
    b, h, w = err.example.masks.shape
    assert b <= 2 and max(h, w) <= 40


def test_align_corners_mismatch_passes_the_pixel_level_checks():
    """Why the sub-pixel check exists: the same mismatch is invisible at pixel level."""
    check_paired_augmentation(
        lambda x, m: resize(x, m, image_align_corners=True),
        num_classes=NUM_CLASSES,
        photometric=False,
        same_size=False,
        blobs=True,
        **SIDES,
    )


def test_correct_resize_passes():
    _check(resize)


@pytest.mark.slow
@pytest.mark.parametrize("factor", [0.75, 1.5, 3.0])
def test_correct_resizes_at_other_factors_pass(factor):
    _check(lambda x, m: resize(x, m, factor))


def test_executors_pass(check_executor):
    from perfsuite.augment.recipe import Recipe

    check_executor(Recipe().geometric_only(), photometric=False, subpixel=True, **SIDES)


def test_real_face_masks():
    """On face_parsing's 96-px masks, x2: the half-pixel mismatch and a one-pixel shift are caught in each of four
    batches; the correct resize passes."""
    from perfsuite.jobs.registry import get_workload

    w = get_workload("face_parsing")
    scale = w.scale("smoke")
    scale = type(scale)(scale.name, (96, 96), scale.num_samples, scale.batch_size, scale.model)
    for first in (0, 100, 200, 300):
        masks = np.stack([w.generate(i, np.random.default_rng(i), scale).target for i in range(first, first + 4)])
        palette = palette_for(masks)
        images = encode(masks, palette)
        good = TorchBatched(resize)(images, masks, 0)
        assert_subpixel_aligned(good.images, good.masks, palette, skip={w.ignore_index})
        bad = TorchBatched(lambda x, m: resize(x, m, image_align_corners=True))(images, masks, 0)
        with pytest.raises(PropertyViolation, match="sub-pixel alignment"):
            assert_subpixel_aligned(bad.images, bad.masks, palette, skip={w.ignore_index})
        # a mask one pixel off: no 3x3-uniform pixel disagrees, the centroids do
        shifted = TorchBatched(lambda x, m: resize(x, m, mask_shift=1))(images, masks, 0)
        with pytest.raises(PropertyViolation, match="translation of"):
            assert_subpixel_aligned(shifted.images, shifted.masks, palette, skip={w.ignore_index})


def test_tolerance_argument():
    torch.manual_seed(0)
    with pytest.raises(Exception, match="subpixel_tol"):
        check_paired_augmentation(resize, num_classes=NUM_CLASSES, photometric=False, subpixel=True, subpixel_tol=0)


def test_subpixel_needs_photometric_false():
    with pytest.raises(PropertyArgumentError, match=r"subpixel=True, photometric=True.*pass photometric=False"):
        check_paired_augmentation(resize, num_classes=NUM_CLASSES, subpixel=True)
