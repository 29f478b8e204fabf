"""Valid labels and formats: augmented masks hold only input labels, ignore and fill, in the input dtype."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import Phase, given, settings

from perfsuite.augment.checks import (
    PropertyViolation,
    assert_mask_format,
    assert_valid_labels,
)
from perfsuite.augment.recipe import PHOTOMETRIC, Recipe
from perfsuite.augment.strategies import MIN_CELL, mask_batches


@pytest.mark.parametrize("op", PHOTOMETRIC)
def test_each_photometric_op_leaves_masks_bit_identical(check_executor, op):
    check_executor(Recipe().only(op).with_p(**{op: 1.0}), photometric_only=True)


def test_photometric_recipe_leaves_masks_bit_identical(check_executor):
    check_executor(Recipe().photometric_only(), photometric_only=True)


def test_declared_fill_is_the_only_new_label(check_executor):
    """With fill 254 (not the ignore index) the executors write 254 outside the image, and nothing else new."""
    recipe = Recipe().geometric_only().with_p(rotation=1.0)
    check_executor(recipe, fill=254, photometric=False)
    no_shrink = settings(settings.default, phases=[Phase.explicit, Phase.reuse, Phase.generate])
    with pytest.raises(PropertyViolation, match=r"label 254 appeared"):
        check_executor(recipe, fill=254, photometric=False, fill_declared=False, settings=no_shrink)


def test_new_label_message_names_sample_label_and_input_set():
    masks_in = np.zeros((2, 9, 9), np.uint8)
    masks_in[0, :3], masks_in[0, 3:6] = 3, 18
    masks_out = masks_in.copy()
    masks_out[0, 4, 4] = 7
    with pytest.raises(PropertyViolation) as info:
        assert_valid_labels(masks_in, masks_out, num_classes=19, ignore_index=255)
    assert "label 7 appeared but the input mask held only {0, 3, 18}" in str(info.value)
    assert info.value.prop == "valid labels" and info.value.sample == 0
    assert "(y=4, x=4)" in str(info.value)


def test_out_of_class_label_says_so():
    masks_in = np.zeros((1, 9, 9), np.uint8)
    with pytest.raises(PropertyViolation, match=r"label 200 .* not a class \(0\.\.18\)"):
        assert_valid_labels(masks_in, masks_in + 200, num_classes=19, ignore_index=255)


def test_mask_dtype_change_is_reported():
    masks = np.zeros((1, 9, 9), np.int64)
    with pytest.raises(PropertyViolation, match="mask dtype changed from torch.int64 to torch.float32"):
        assert_mask_format(masks, masks, np.zeros((1, 9, 9, 3)), dtype_in="torch.int64", dtype_out="torch.float32")


@given(mask_batches())
def test_strategy_draws_valid_structured_masks(batch):
    """The masks under test: uint8, labels in range or ignore, every region at least MIN_CELL px thick."""
    m = batch.masks
    assert m.dtype == np.uint8 and m.shape[0] >= 1 and min(m.shape[1:]) >= 9
    assert set(np.unique(m).tolist()) <= set(range(batch.num_classes)) | {batch.ignore_index}
    for rows in (m, m.transpose(0, 2, 1)):  # runs along x, then along y
        change = np.diff(rows, axis=2) != 0
        for sample in change:
            for line in sample:
                edges = np.flatnonzero(line) + 1
                runs = np.diff(np.concatenate([[0], edges, [line.size + 1]]))
                assert runs.min() >= MIN_CELL
