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
    assert "the image shows the ignore index (255) where the mask says 18" in text and "Never clamp masks" in text


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


# -- zero padding is padding, not a clamp (issue 24) ----------------------------------------------


def test_zero_padding_is_padding_not_clamp():
    """Padding the mask with 0 (grid_sample's zeros, albumentations' fill_mask=0) is the commonest padding bug; a
    clamp never turns 255 into 0. Whether 0 was in the input (alignment) or not (valid labels), it reads as padding.
    """
    err = _caught(lambda x, m: shift_down(x, m, 0), "padding")
    text = str(err)
    assert "zero padding" in text or "padded with 0" in text
    assert "Pad masks with the ignore index (fill=255" in text and "clamp" not in text


def test_gpu_executor_padding_with_zeros_is_padding():
    from perfsuite.augment.gpu import GpuAugment
    from perfsuite.augment.recipe import Recipe

    rotate = GpuAugment(Recipe().only("rotation").with_p(rotation=1.0), "mask", fill=0)
    err = _caught(rotate, "padding")
    assert "Pad masks with the ignore index (fill=255" in str(err)


def test_a_clamp_is_told_by_its_direction():
    """-100 clamps to 0 and 255 to 18: a 0 where the image shows the ignore index -100 is a clamp, whether or not 0
    was in the input."""
    err = _caught(lambda x, m: (x, m.clamp(0, NUM_CLASSES - 1)), "clamp", ignore_index=-100)
    assert "the image shows the ignore index (-100) where the mask says 0" in str(err)


def test_unclamped_minus_100_passes():
    check_paired_augmentation(lambda x, m: (x.flip(-1), m.flip(-1)), num_classes=NUM_CLASSES, ignore_index=-100)


# -- an erase into a class the sample already holds -------------------------------------------------


def test_mask_erased_into_a_class_it_holds_is_erase():
    """Cutout with 0 on the mask: 0 is usually in the input, so no label is invented; the box is still an erase."""
    err = _caught(lambda x, m: erase(x, m, 0), "erase")
    text = str(err)
    assert "4x5 rectangle at (y=2, x=3)" in text and "Erase masks with the ignore index (255)" in text


def test_mask_left_behind_is_geometry():
    err = _caught(lambda x, m: (x.flip(-1), m), "geometry")
    assert "not moved by the same geometry" in str(err)


# -- a batch mix nobody declared -------------------------------------------------------------------


def test_undeclared_cutmix_is_mixes_samples():
    from perfsuite.augment.mix import PairedCutMix

    err = _caught(PairedCutMix(p=1.0), "mixes samples", min_batch=2)
    assert "declare mixes_samples=True" in str(err)


def test_images_only_mixup_is_blend():
    from perfsuite.augment.seed_variants import ImagesOnlyMixUp

    err = _caught(ImagesOnlyMixUp(p=1.0), "blend", min_batch=2)
    assert "MixUp on images only" in str(err)


# -- causes that point at the fault (issue 35): erase to a real class, and a mix from the wrong partner ----


def erase_with_noise(x, m):
    """RandomErasing(value='random') on the image, 0 (a real class) on the mask, in the middle ninth of the frame
    (scaled with the frame, as RandomErasing's box is: a fixed box would cover all of a shrunk 9x9 example)."""
    x, m = x.clone(), m.clone()
    h, w = m.shape[-2:]
    box = (..., slice(h // 3, 2 * h // 3), slice(w // 3, 2 * w // 3))
    g = torch.Generator().manual_seed(7)
    x[box] = torch.rand(x[box].shape, generator=g) * 255
    m[box] = 0
    return x, m


@pytest.mark.parametrize("photometric", [True, False])
def test_random_erasing_into_class_zero_is_erase_not_geometry_or_blend(photometric):
    err = _caught(erase_with_noise, "erase", photometric=photometric)
    assert "rectangle at" in str(err) and "the image was overwritten there" in str(err)


def test_black_cutout_into_class_zero_is_erase_under_photometric_checks():
    err = _caught(lambda x, m: erase(x, m, 0), "erase", photometric=True)
    assert "4x5 rectangle at (y=2, x=3)" in str(err) and "Erase masks with the ignore index (255)" in str(err)


def cutmix_from_two_partners(x, m):
    """CutMix whose mask box comes from another partner than the image box (two permutations drawn)."""
    x, m = x.clone(), m.clone()
    b, (h, w) = x.shape[0], m.shape[-2:]
    image_from, mask_from = torch.arange(b).roll(1), torch.arange(b).roll(2 if b > 2 else 0)
    box = (slice(None), slice(h // 4, h // 4 + h // 2), slice(w // 4, w // 4 + w // 2))
    x.permute(1, 0, 2, 3)[box] = x[image_from].permute(1, 0, 2, 3)[box]
    m[box] = m[mask_from][box]
    return x, m


@pytest.mark.parametrize("mixes_samples", [False, True])
def test_cutmix_with_the_mask_from_another_partner_is_mixing_source(mixes_samples):
    err = _caught(cutmix_from_two_partners, "mixing source", min_batch=3, mixes_samples=mixes_samples)
    text = str(err)
    assert "mask is sample" in text and "mask at the same place" in text and "the image there" in text, text
    assert "Draw the partner indices and the box once" in text
