"""Each segmentation workload's generated masks are valid, and its own recipe keeps them aligned.

The masks here are the workload's (real face layouts with thin necklaces,
glasses outlines and ignore-index occluders), not the strategies' blocks;
the images are repainted from them so alignment can be decoded.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfsuite.augment.checks import Declared, NumpyPerSample, PropertyViolation, TorchBatched, check_example
from perfsuite.augment.cpu import CpuAugment
from perfsuite.augment.gpu import GpuAugment
from perfsuite.augment.labels import LabelSpace
from perfsuite.augment.recipe import Flip
from perfsuite.augment.strategies import seeds
from perfsuite.jobs.registry import get_workload, workload_names

MASK_WORKLOADS = [n for n in workload_names() if get_workload(n).target_kind == "mask"]
BATCH = 4


def _batch(workload, first: int, side: int = 32) -> np.ndarray:
    scale = workload.scale("smoke")
    scale = type(scale)(scale.name, (side, side + 3), scale.num_samples, scale.batch_size, scale.model)
    masks = [workload.generate(i, np.random.default_rng(i), scale).target for i in range(first, first + BATCH)]
    return np.stack(masks)


def test_there_is_a_segmentation_workload():
    assert MASK_WORKLOADS, "no workload has target_kind='mask': the checks below would test nothing"


@pytest.mark.parametrize("name", MASK_WORKLOADS)
def test_generated_masks_are_valid(name):
    w = get_workload(name)
    scale = w.scale("smoke")
    for i in range(8):
        sample = w.generate(i, np.random.default_rng(i), scale)
        mask, image = sample.target, sample.image
        assert mask.dtype == np.uint8 and mask.shape == image.shape[:2] == scale.image_size
        labels = set(np.unique(mask).tolist())
        assert labels <= set(range(w.num_classes)) | {w.ignore_index}, f"sample {i}: labels {sorted(labels)}"
        assert len(labels - {w.ignore_index}) >= 2, f"sample {i} has one class: nothing to align"


def _paired(executor: str, recipe, fill: int):
    if executor == "cpu":
        return NumpyPerSample(lambda s: CpuAugment(recipe, "mask", fill=fill, seed=s), factory=True)
    return TorchBatched(GpuAugment(recipe, "mask", fill=fill))


@pytest.mark.parametrize("executor", ["cpu", "gpu"])
@pytest.mark.parametrize("name", MASK_WORKLOADS)
@settings(settings.default, max_examples=max(10, settings.default.max_examples // 3))  # real-size masks: slower
@given(first=st.integers(0, 40), seed=seeds())
def test_workload_recipe_keeps_masks_aligned_and_valid(name, executor, first, seed):
    """The full recipe (consistency decode), then its geometry alone (exact decode, image-side pairing); the
    workload's left/right pairs declared, so a flip must swap them."""
    w = get_workload(name)
    masks = _batch(w, first)
    full = _paired(executor, w.recipe(), w.ignore_index)
    check_example(full, masks, seed, _declared(w, photometric=True))
    geometry = _paired(executor, w.recipe().geometric_only(), w.ignore_index)
    check_example(geometry, masks, seed, _declared(w, photometric=False))


def _declared(w, photometric: bool) -> Declared:
    space = LabelSpace.declare(w.num_classes, w.ignore_index, mask_dtype="int64", flip_pairs=w.flip_pairs or None)
    return Declared(w.num_classes, w.ignore_index, photometric=photometric, flip_map=space.flip_map)


def test_face_parsing_declares_its_left_right_pairs():
    from perfsuite.jobs.workloads.face_parsing import LABELS

    w = get_workload("face_parsing")
    named = {(LABELS[a], LABELS[b]) for a, b in w.flip_pairs}
    assert named == {("l_eye", "r_eye"), ("l_brow", "r_brow"), ("l_ear", "r_ear")}
    assert w.recipe().flip.pairs == w.flip_pairs


@pytest.mark.parametrize("executor", ["cpu", "gpu"])
@pytest.mark.parametrize("photometric", [False, True], ids=["geometry", "full-recipe"])
def test_face_recipe_swaps_pairs_and_a_flip_without_the_swap_is_caught(executor, photometric):
    """Every sample flipped: the recipe as shipped passes; the same recipe with its pairs removed (seed 000's
    np.fliplr on image and mask) is caught as a missing swap, colour jitter or not."""
    w = get_workload("face_parsing")
    recipe = w.recipe() if photometric else w.recipe().geometric_only()
    flips = recipe.with_p(flip=1.0)
    forgot = dataclasses.replace(flips, flip=Flip(p=1.0))
    masks = _batch(w, 0, side=64)
    check_example(_paired(executor, flips, w.ignore_index), masks, 0, _declared(w, photometric))
    with pytest.raises(PropertyViolation) as info:
        check_example(_paired(executor, forgot, w.ignore_index), masks, 0, _declared(w, photometric))
    assert info.value.cause == "missing swap", info.value
