"""Batch mixes: paired CutMix moves mask regions with image regions; MixUp on masks is refused."""

from __future__ import annotations

import pytest
import torch

from perfsuite.augment.mix import PairedCutMix, check_mixes, mixup, mixup_labels
from perfsuite.errors import AugmentationError

B, C, H, W = 6, 3, 19, 26


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Every sample is a constant image and mask carrying its own index, so pasted content is traceable."""
    index = torch.arange(B)
    images = (index.float() / B).view(B, 1, 1, 1).expand(B, C, H, W).contiguous()
    masks = index.view(B, 1, 1).expand(B, H, W).contiguous()
    return images, masks


def test_the_pasted_box_is_the_same_in_image_and_mask_and_comes_from_the_partner():
    images, masks = batch()
    cutmix = PairedCutMix(p=1.0)
    params = cutmix.sample(B, H, W, generator=torch.Generator().manual_seed(0))
    out_images, out_masks = cutmix.apply(images, masks, params)
    for i in range(B):
        x0, y0, x1, y1 = params.boxes[i].tolist()
        partner = int(params.partner[i])
        box = torch.zeros(H, W, dtype=torch.bool)
        box[y0:y1, x0:x1] = True
        assert box.any() and not box.all()
        expected_mask = torch.where(box, torch.tensor(partner), torch.tensor(i))
        assert torch.equal(out_masks[i], expected_mask)
        # The image carries the same labels the mask does, pixel for pixel.
        assert torch.equal((out_images[i, 0] * B).round().long(), out_masks[i])
        assert torch.equal(out_images[i, 1], out_images[i, 0])


def test_box_sizes_follow_cut_size():
    cutmix = PairedCutMix(p=1.0, cut_size=(0.5, 0.5))
    params = cutmix.sample(B, 20, 40, generator=torch.Generator().manual_seed(1))
    sides = params.boxes[:, 2:] - params.boxes[:, :2]
    assert (sides == torch.tensor([20, 10])).all()  # (width, height) = half of each side
    assert (params.boxes[:, :2] >= 0).all() and (params.boxes[:, 2] <= 40).all() and (params.boxes[:, 3] <= 20).all()


def test_forward_keeps_shapes_dtypes_and_labels():
    images, masks = batch()
    out_images, out_masks = PairedCutMix(p=1.0)(images, masks, generator=torch.Generator().manual_seed(2))
    assert out_images.shape == images.shape and out_masks.dtype == torch.long
    assert set(torch.unique(out_masks).tolist()) <= set(range(B))
    assert not torch.equal(out_masks, masks)


def test_p_zero_leaves_the_batch_alone_and_same_generator_repeats():
    images, masks = batch()
    out = PairedCutMix(p=0.0)(images, masks)
    assert out[0] is images and out[1] is masks
    a = PairedCutMix(p=1.0)(images, masks, generator=torch.Generator().manual_seed(3))
    b = PairedCutMix(p=1.0)(images, masks, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"p": 1.5}, "p=1.5 must be a probability", id="p"),
        pytest.param({"p": 0.5, "cut_size": (0.8, 0.2)}, "cut_size=(0.8, 0.2) must be (low, high)", id="cut-reversed"),
        pytest.param({"p": 0.5, "cut_size": (0.0, 0.5)}, "0 < low <= high <= 1", id="cut-zero"),
        pytest.param({"p": 0.5, "target_kind": "keypoints"}, "not target_kind='keypoints'", id="keypoints"),
        pytest.param({"p": 0.5, "target_kind": "none"}, "write cutmix=0.0", id="none"),
    ],
)
def test_bad_cutmix_arguments_are_refused(kwargs, message):
    with pytest.raises(AugmentationError) as info:
        PairedCutMix(**kwargs)
    assert message in str(info.value)


def test_cutmix_refuses_float_or_missing_masks():
    images, masks = batch()
    for bad in (masks.float(), None, masks[:, :5]):
        with pytest.raises(AugmentationError, match="needs integer masks"):
            PairedCutMix(p=1.0)(images, bad)


def test_mixup_on_masks_is_refused_with_what_to_write_instead():
    images, masks = batch()
    with pytest.raises(AugmentationError) as info:
        mixup(images, masks, alpha=0.2)
    message = str(info.value)
    assert "MixUp on segmentation masks is refused" in message
    assert "blending two images while leaving the masks alone trains" in message and "seed" not in message
    assert "PairedCutMix" in message and "mixup_labels" in message


def test_mixup_labels_blends_images_and_soft_labels_with_one_weight():
    torch.manual_seed(0)
    images = torch.rand(4, 3, 8, 8)
    labels = torch.nn.functional.one_hot(torch.tensor([0, 1, 2, 1]), 3).float()
    mixed, soft = mixup_labels(images, labels, alpha=0.4)
    assert mixed.shape == images.shape and soft.shape == labels.shape
    torch.testing.assert_close(soft.sum(1), torch.ones(4))
    assert ((soft >= 0) & (soft <= 1)).all()
    assert mixed.min() >= images.min() and mixed.max() <= images.max()


def test_mixup_labels_refuses_class_indices_and_masks():
    images, masks = batch()
    with pytest.raises(AugmentationError, match="one_hot\\(labels, num_classes\\).float\\(\\)"):
        mixup_labels(images, torch.arange(B))
    with pytest.raises(AugmentationError, match="Masks are refused"):
        mixup_labels(images, masks)


@pytest.mark.parametrize(
    ("kind", "cutmix", "mixup_p", "message"),
    [
        pytest.param("mask", 0.0, 0.3, "mixup=0.3 with masks", id="mixup-mask"),
        pytest.param("keypoints", 0.0, 0.3, "mixup=0.3 with keypoints", id="mixup-keypoints"),
        pytest.param("keypoints", 0.3, 0.0, "not target_kind='keypoints'", id="cutmix-keypoints"),
        pytest.param("boxes", 0.0, 0.0, "target_kind='boxes' is not a target kind", id="kind"),
    ],
)
def test_check_mixes_refuses_before_a_run(kind, cutmix, mixup_p, message):
    with pytest.raises(AugmentationError) as info:
        check_mixes(kind, cutmix=cutmix, mixup=mixup_p)
    assert message in str(info.value)


def test_check_mixes_allows_what_targets_can_follow():
    check_mixes("mask", cutmix=0.5)
    check_mixes("none", mixup=0.5)
    check_mixes("keypoints")
