"""Transforms whose output size is not the input's: per-sample random crops, and fixed output sizes."""

from __future__ import annotations

import numpy as np
import pytest
import torch.nn.functional as F

from perfsuite.augment.checks import PropertyViolation, check_paired_augmentation, make_adapter, probe_output_size
from perfsuite.augment.labels import LabelSpace

NUM_CLASSES = 19


# -- per_sample_sizes: each sample cropped to its own random size ---------------------------------


def random_crop(image, mask, mask_offset=0):
    """A crop of random size and place (NumPy's global generator, which the adapter seeds)."""
    h, w = mask.shape
    ch, cw = np.random.randint(max(4, h // 2), h + 1), np.random.randint(max(4, w // 2), w + 1)
    y0, x0 = np.random.randint(0, h - ch + 1), np.random.randint(0, w - cw + 1)
    ym = min(y0 + mask_offset, h - ch)
    return image[y0 : y0 + ch, x0 : x0 + cw], mask[ym : ym + ch, x0 : x0 + cw]


def test_random_crop_per_sample_passes():
    check_paired_augmentation(
        random_crop, num_classes=NUM_CLASSES, layout="numpy", per_sample_sizes=True, same_size=False, photometric=False
    )


def test_random_crop_with_shifted_mask_window_is_caught():
    with pytest.raises(PropertyViolation) as info:
        check_paired_augmentation(
            lambda x, m: random_crop(x, m, mask_offset=2),
            num_classes=NUM_CLASSES,
            layout="numpy",
            per_sample_sizes=True,
            same_size=False,
            photometric=False,
        )
    err = info.value
    print(err.example, err)
    assert err.prop in ("alignment", "valid labels", "pairing")
    # the crop's size is drawn from the side, so shrinking a side changes the crop: one side stays near the
    # minimum (9), the other may not (seen: B=1, 9x31, two labels)
    b, h, w = err.example.masks.shape
    assert b <= 4 and min(h, w) <= 12 and max(h, w) <= 40


def test_ragged_outputs_without_per_sample_sizes_say_what_to_pass():
    with pytest.raises(PropertyViolation, match="pass per_sample_sizes=True"):
        check_paired_augmentation(
            random_crop, num_classes=NUM_CLASSES, layout="numpy", same_size=False, photometric=False, min_batch=2
        )


# -- output_size: a fixed-size crop or resize ---------------------------------------------------------

SEEN: list[tuple[int, int]] = []


def resize_to(x, m, size=(32, 32)):
    SEEN.append(tuple(m.shape[-2:]))
    xo = F.interpolate(x, size=size, mode="bilinear", align_corners=False)
    mo = F.interpolate(m[:, None].float(), size=size, mode="nearest-exact")[:, 0].to(m.dtype)
    return xo, mo


def centre_crop(x, m, size=16, mask_shift=0):
    h, w = m.shape[-2:]
    if h < size or w < size:
        raise ValueError(f"crop {size} of a {h}x{w} image")  # as real crop transforms refuse
    y0, x0 = (h - size) // 2, (w - size) // 2
    ym = min(y0 + mask_shift, h - size)
    return x[..., y0 : y0 + size, x0 : x0 + size], m[..., ym : ym + size, x0 : x0 + size]


def test_probe_finds_a_fixed_output_size():
    space = LabelSpace.declare(NUM_CLASSES, 255, mask_dtype="int64")
    assert probe_output_size(make_adapter(resize_to, "torch"), space) == (32, 32)
    assert probe_output_size(make_adapter(lambda x, m: (x.flip(-1), m.flip(-1)), "torch"), space) is None


def test_fixed_resize_sees_inputs_from_its_output_size_up():
    SEEN.clear()
    check_paired_augmentation(resize_to, num_classes=NUM_CLASSES, output_size="auto", photometric=False)
    drawn = SEEN[4:]  # the first four are the probes': reproducibility (40x52, twice), output size (two sizes)
    assert drawn and min(min(s) for s in drawn) >= 32 and max(max(s) for s in drawn) <= 48, sorted(set(drawn))


def test_fixed_crop_needs_output_size():
    with pytest.raises(ValueError, match="crop 16"):  # the strategies' 9-px masks are too small for it
        check_paired_augmentation(centre_crop, num_classes=NUM_CLASSES, photometric=False, same_size=False)
    check_paired_augmentation(centre_crop, num_classes=NUM_CLASSES, photometric=False, output_size=(16, 16))
    check_paired_augmentation(centre_crop, num_classes=NUM_CLASSES, photometric=False, output_size="auto")


def test_fixed_crop_with_shifted_mask_is_caught():
    with pytest.raises(PropertyViolation) as info:
        check_paired_augmentation(
            lambda x, m: centre_crop(x, m, mask_shift=2), num_classes=NUM_CLASSES, photometric=False, output_size="auto"
        )
    err = info.value
    print(err.example, err)
    assert err.prop in ("alignment", "valid labels")
    assert max(err.example.masks.shape[1:]) <= 24  # drawn from 16..24 and shrunk


@pytest.mark.parametrize("bad", [(0, 16), "fixed", (16,)])
def test_output_size_argument_errors(bad):
    from perfsuite.errors import PropertyArgumentError

    with pytest.raises(PropertyArgumentError, match="output_size="):
        check_paired_augmentation(centre_crop, num_classes=NUM_CLASSES, output_size=bad)


def jittered_crop(x, m, mask_shift=0):
    xo, mo = centre_crop(x, m, mask_shift=mask_shift)
    return xo * 0.8, mo  # brightness x0.8: one colour per label still, none of them the palette's


@pytest.mark.slow
def test_crop_one_pixel_off_is_caught_where_the_advice_leads():
    """Issue 24: the size-change message must lead to a configuration that catches a mask window one pixel off,
    with the default photometric=True and under jitter (an exact copy is compared at every pixel)."""
    with pytest.raises(PropertyViolation, match="output_size='auto'") as first:
        check_paired_augmentation(lambda x, m: jittered_crop(x, m, 1), num_classes=NUM_CLASSES, min_side=16)
    assert first.value.prop == "mask format"
    for advised in (dict(output_size="auto"), dict(same_size=False, min_side=16)):
        with pytest.raises(PropertyViolation) as info:
            check_paired_augmentation(lambda x, m: jittered_crop(x, m, 1), num_classes=NUM_CLASSES, **advised)
        assert info.value.prop == "alignment" and info.value.cause == "geometry", info.value


def test_exact_crop_under_jitter_passes():
    check_paired_augmentation(jittered_crop, num_classes=NUM_CLASSES, output_size="auto")
    check_paired_augmentation(jittered_crop, num_classes=NUM_CLASSES, same_size=False, min_side=16)
