"""Any label range and ignore index: 300 and 70,000 classes, ignore_index -100 or None; lossy casts caught."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given

from perfsuite.augment.checks import PropertyViolation, check_paired_augmentation
from perfsuite.augment.labels import LabelSpace
from perfsuite.augment.strategies import mask_batches
from perfsuite.errors import PropertyArgumentError


def flip(x, m):  # a correct geometric transform on any label range
    return x.flip(-1), m.flip(-1)


@pytest.mark.parametrize(("num_classes", "ignore_index"), [(300, 300), (300, -100), (19, -100), (70_000, None)])
def test_correct_transform_passes_on_any_label_space(num_classes, ignore_index):
    check_paired_augmentation(flip, num_classes=num_classes, ignore_index=ignore_index, photometric=False)


@given(mask_batches(300, -100))
def test_strategy_draws_from_the_whole_range(batch):
    labels = set(np.unique(batch.masks).tolist())
    assert labels <= set(range(300)) | {-100}
    assert batch.masks.dtype == np.int16


def test_strategy_reaches_high_and_boundary_labels():
    seen: set[int] = set()

    @given(mask_batches(300, -100))
    def collect(batch):
        seen.update(np.unique(batch.masks).tolist())

    collect()
    assert 0 in seen and any(v > 256 for v in seen), sorted(seen)


def bf16_round_trip(x, m):
    return x.flip(-1), m.flip(-1).to(torch.bfloat16).to(m.dtype)


def test_bfloat16_round_trip_of_300_classes_is_caught():
    with pytest.raises(PropertyViolation) as info:
        check_paired_augmentation(bf16_round_trip, num_classes=300, ignore_index=-100, photometric=False)
    assert info.value.cause == "dtype" and "bfloat16" in str(info.value)
    print(info.value.example, info.value)


def test_uint8_cast_of_ignore_minus_100_is_caught():
    with pytest.raises(PropertyViolation) as info:
        check_paired_augmentation(
            lambda x, m: (x, m.to(torch.uint8).to(m.dtype)), num_classes=19, ignore_index=-100, photometric=False
        )
    assert info.value.cause == "dtype" and "uint8" in str(info.value)


def test_float16_round_trip_of_70000_classes_is_caught():
    with pytest.raises(PropertyViolation, match="float16|uint16"):
        check_paired_augmentation(
            lambda x, m: (x, m.half().to(m.dtype)), num_classes=70_000, ignore_index=None, photometric=False
        )


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        (dict(num_classes=300, ignore_index=None, mask_dtype="uint8"), "mask_dtype="),
        (dict(num_classes=19, ignore_index=5), "ignore_index="),
        (dict(num_classes=0), "num_classes="),
        (dict(num_classes=19, flip_pairs=[(2, 3), (3, 4)]), "flip_pairs="),
        (dict(num_classes=19, layout="tf"), "layout="),
        (dict(num_classes=19, max_sidez=3), "max_sidez="),
    ],
)
def test_argument_errors_name_the_parameter(kwargs, names):
    with pytest.raises(PropertyArgumentError, match=f"check_paired_augmentation\\(.*{names}"):
        check_paired_augmentation(flip, **kwargs)


def test_label_space_picks_a_dtype_that_holds_the_labels():
    assert LabelSpace.declare(300, -100).mask_dtype == "int16"
    assert LabelSpace.declare(70_000, None).mask_dtype == "int32"
    assert LabelSpace.declare(19).mask_dtype == "uint8"


@pytest.mark.parametrize(("num_classes", "suggested"), [(19, "(255, -100, 19)"), (300, "(-100, 300)")])
def test_ignore_index_suggestions_are_outside_the_classes(num_classes, suggested):
    with pytest.raises(PropertyArgumentError, match="is a class") as info:
        LabelSpace.declare(num_classes, ignore_index=3)
    assert f"pass an index outside the classes {suggested}" in str(info.value)
