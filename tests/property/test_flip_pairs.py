"""Declared left/right label swaps: the correct swap passes, a flip without it and a swap without a flip fail."""

from __future__ import annotations

import pytest
import torch

from perfsuite.augment.checks import PropertyViolation, check_paired_augmentation

PAIRS = [(2, 3), (4, 5), (7, 8)]  # brows, eyes, ears, as issue 13 writes them
LUT = torch.arange(19)
for a, b in PAIRS:
    LUT[a], LUT[b] = b, a


def flip_with_swap(x, m, swap=True, flip=True):
    """Per-sample horizontal flip with p=0.5; the mask's paired labels swapped on flipped samples."""
    chosen = torch.rand(x.shape[0]) < 0.5
    x, m = x.clone(), m.clone()
    if flip:
        x[chosen], m[chosen] = x[chosen].flip(-1), m[chosen].flip(-1)
    if swap:
        lut = LUT.to(m.device)
        m[chosen] = torch.where(m[chosen] < 19, lut[m[chosen].clamp(0, 18)], m[chosen])
    return x, m


def test_correct_swap_passes():
    check_paired_augmentation(flip_with_swap, num_classes=19, flip_pairs=PAIRS, photometric=False)


def test_flip_without_swap_is_caught():
    with pytest.raises(PropertyViolation) as info:
        check_paired_augmentation(
            lambda x, m: flip_with_swap(x, m, swap=False), num_classes=19, flip_pairs=PAIRS, photometric=False
        )
    assert info.value.cause == "missing swap" and "forgot the label swap" in str(info.value)
    print(info.value.example, info.value)


def test_swap_without_flip_is_caught():
    with pytest.raises(PropertyViolation) as info:
        check_paired_augmentation(
            lambda x, m: flip_with_swap(x, m, flip=False), num_classes=19, flip_pairs=PAIRS, photometric=False
        )
    assert info.value.cause == "swap without flip" and "without a flip" in str(info.value)


def test_correct_swap_was_refused_before_declaring():
    """Issue 13's report: without flip_pairs, the correct swap reads as an invented label."""
    with pytest.raises(PropertyViolation, match="appeared"):
        check_paired_augmentation(flip_with_swap, num_classes=19, photometric=False)
