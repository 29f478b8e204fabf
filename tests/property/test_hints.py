"""The classified advice of a valid-labels failure: each cause has a negative control that is caught with that
cause and its advice, and a correct control of the same shape that passes.

The causes are tried most specific first (perfsuite/augment/hints.py); dtype
loss and the missing label swap are asserted in test_label_spaces.py and
test_flip_pairs.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from perfsuite.augment.checks import PropertyViolation, check_paired_augmentation

NUM_CLASSES = 19
MAX_SIDE = 24  # a shrunk example stays near the strategies' minimum side (9)


def _caught(fn, cause: str, **declared) -> PropertyViolation:
    declared.setdefault("photometric", False)
    with pytest.raises(PropertyViolation) as info:
        check_paired_augmentation(fn, num_classes=NUM_CLASSES, **declared)
    err = info.value
    b, h, w = err.example.masks.shape
    print(f"{err.example} seed={err.seed}: {err}")
    assert err.cause == cause, f"cause {err.cause!r}, expected {cause!r}: {err}"
    assert b <= 4 and max(h, w) <= MAX_SIDE, f"shrunk only to B={b}, {h}x{w}"
    return err


# -- pairing: a permutation applied to the masks alone -------------------------------------------


def masks_rolled(x, m):
    return x, m.roll(1, dims=0)


def flip_some(x, m):
    """Flip a random subset of samples, images and masks indexed with the same indices."""
    idx = torch.randperm(x.shape[0])[: x.shape[0] // 2 + 1]
    x, m = x.clone(), m.clone()
    x[idx], m[idx] = x[idx].flip(-1), m[idx].flip(-1)
    return x, m


def test_masks_reordered_alone_is_pairing():
    err = _caught(masks_rolled, "pairing", min_batch=2)
    assert "Index images and masks with the same permutation" in str(err)
    assert err.example.masks.shape[0] >= 2


def test_images_and_masks_indexed_together_pass():
    check_paired_augmentation(flip_some, num_classes=NUM_CLASSES, photometric=False, min_batch=2)


# -- padding: geometry brings in outside pixels, the mask is padded with a class --------------------


def shift_down(x, m, mask_fill):
    """Translate by 2 rows; the image's new rows are black (outside), the mask's are ``mask_fill``."""
    xo = torch.zeros_like(x)
    xo[..., 2:, :] = x[..., :-2, :]
    mo = torch.full_like(m, mask_fill)
    mo[..., 2:, :] = m[..., :-2, :]
    return xo, mo


def test_mask_padded_with_a_class_is_padding_and_suggests_fill():
    """Padded with class 5 (zero padding, as in many repos, is the same with 0; 5 is seldom in the input, so the
    label is invented and the search does not shrink to a one-label mask, where padding and a mask that never
    moved look alike and the advice stays on geometry)."""
    err = _caught(lambda x, m: shift_down(x, m, 5), "padding")
    text = str(err)
    assert "Pad masks with the ignore index (fill=255" in text and "declare fill=5" in text


def test_mask_padded_with_ignore_index_passes():
    check_paired_augmentation(lambda x, m: shift_down(x, m, 255), num_classes=NUM_CLASSES, photometric=False)


def test_declared_fill_passes():
    """The advice's alternative: padding with 0 is fine once 0 is declared as the fill."""
    check_paired_augmentation(lambda x, m: shift_down(x, m, 18), num_classes=NUM_CLASSES, fill=18, photometric=False)


# -- erase into a real class ----------------------------------------------------------------------


def erase(x, m, value):
    """Cutout of a 4x5 box at (2, 3) on image and mask (image to black, mask to ``value``)."""
    x, m = x.clone(), m.clone()
    x[..., 2:6, 3:8] = 0
    m[..., 2:6, 3:8] = value
    return x, m


def test_mask_erased_into_a_class_is_erase():
    err = _caught(lambda x, m: erase(x, m, 17), "erase")
    text = str(err)
    assert "4x5 rectangle at (y=2, x=3)" in text and "Erase masks with the ignore index (255)" in text


def test_mask_erased_with_ignore_index_passes():
    check_paired_augmentation(lambda x, m: erase(x, m, 255), num_classes=NUM_CLASSES, photometric=False)


# -- resampling: masks interpolated bilinearly ------------------------------------------------------


def rescale(x, m, mask_mode):
    h, w = x.shape[-2:]
    size = (h * 3 // 2, w * 3 // 2)
    xo = F.interpolate(x, size=size, mode="bilinear", align_corners=False)
    if mask_mode == "bilinear":
        mo = F.interpolate(m[:, None].float(), size=size, mode="bilinear", align_corners=False).round()
    else:
        mo = F.interpolate(m[:, None].float(), size=size, mode="nearest-exact")
    return xo, mo[:, 0].to(m.dtype)


def test_bilinear_mask_resize_is_resampling():
    err = _caught(lambda x, m: rescale(x, m, "bilinear"), "resampling", same_size=False, with_ignore=False)
    assert "Resample masks with nearest interpolation, never bilinear" in str(err)
    assert "an interpolated value" in str(err)


def test_nearest_mask_resize_passes():
    check_paired_augmentation(
        lambda x, m: rescale(x, m, "nearest-exact"), num_classes=NUM_CLASSES, photometric=False, same_size=False
    )


# -- clamp: the ignore index clamped into the class range -----------------------------------------


def clamped(x, m, clamp):
    m = m.clamp(0, NUM_CLASSES - 1) if clamp else m
    return x.flip(-1), m.flip(-1)


def test_clamped_ignore_index_is_clamp():
    err = _caught(lambda x, m: clamped(x, m, True), "clamp")
    text = str(err)
    assert "the image shows the ignore index where the mask says 18" in text and "Never clamp masks" in text


def test_unclamped_passes():
    check_paired_augmentation(lambda x, m: clamped(x, m, False), num_classes=NUM_CLASSES, photometric=False)


def test_classification_order_needs_the_image():
    """Without what the image shows, a clamped ignore index reads as resampling (the generic cause)."""
    from perfsuite.augment.hints import invented_label
    from perfsuite.augment.labels import LabelSpace

    masks_in = np.full((1, 9, 9), 3, np.int64)
    masks_in[0, :4] = 255
    out = masks_in[0].clip(0, 18)
    space = LabelSpace(19, 255)
    assert invented_label(18, 0, masks_in, out, space).cause == "resampling"
    assert invented_label(18, 0, masks_in, out, space, shown_out=masks_in[0], outside=-1).cause == "clamp"
