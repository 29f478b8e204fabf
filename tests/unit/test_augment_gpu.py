"""The GPU (batched, sync-free) executor, run on CPU tensors here and on CUDA where there is one."""

from __future__ import annotations

from types import SimpleNamespace

import kornia
import numpy as np
import pytest
import torch

from perfsuite.augment.cpu import CpuAugment, CpuParams
from perfsuite.augment.gpu import GpuAugment
from perfsuite.augment.recipe import OPS, Recipe, Rotation
from perfsuite.errors import AugmentationError
from perfsuite.probes.syncs import SyncProbe

B, H, W = 3, 21, 34  # odd and non-square on purpose
ALWAYS = Recipe().with_p(**{name: 1.0 for name in OPS})


def images(b: int = B, c: int = 3, h: int = H, w: int = W, seed: int = 0) -> torch.Tensor:
    return torch.rand(b, c, h, w, generator=torch.Generator().manual_seed(seed))


def masks(b: int = B, h: int = H, w: int = W, values: tuple[int, ...] = (3, 7, 200)) -> torch.Tensor:
    """Sparse labels in blocks: bilinear resampling between them would invent labels."""
    m = torch.full((b, h, w), values[0], dtype=torch.long)
    m[:, : h // 2, w // 3 :] = values[1]
    m[:, h // 2 :, 2 * w // 3 :] = values[2]
    return m


def labels(t: torch.Tensor) -> set[int]:
    return set(torch.unique(t).tolist())


@pytest.mark.parametrize("op", [*OPS, "all"])
@pytest.mark.parametrize("channels", [3, 1], ids=["rgb", "gray"])
def test_each_op_and_the_full_recipe_keep_shape_dtype_and_range(op, channels):
    torch.manual_seed(0)
    recipe = ALWAYS if op == "all" else ALWAYS.only(op)
    x, m = images(c=channels), masks()
    out, out_mask = GpuAugment(recipe, "mask")(x, m)
    assert out.shape == x.shape and out.dtype == x.dtype
    assert out.min() >= 0.0 and out.max() <= 1.0
    assert out_mask.shape == m.shape and out_mask.dtype == torch.long
    assert labels(out_mask) <= labels(m) | {255}
    if op != "jitter" or channels == 3:  # jitter on gray only scales brightness/contrast, still visible
        assert not torch.equal(out, x)


@pytest.mark.parametrize("size", [(1, 2, 5), (1, 7, 3), (2, 2, 2)], ids=["b1", "b1-tall", "tiny"])
def test_batch_size_one_and_odd_sizes(size):
    b, h, w = size
    out, out_mask = GpuAugment(ALWAYS, "mask")(images(b, 3, h, w), masks(b, h, w))
    assert out.shape == (b, 3, h, w) and out_mask.shape == (b, h, w)


def test_one_pixel_high_images_work_without_blur_and_are_refused_with_it():
    out, _ = GpuAugment(ALWAYS.without("blur"), "none")(images(1, 3, 1, 5), None)
    assert out.shape == (1, 3, 1, 5)
    with pytest.raises(AugmentationError, match="1x5 pixels are too small for blur.kernel_size=3"):
        GpuAugment(ALWAYS, "none")(images(1, 3, 1, 5), None)


@pytest.mark.parametrize("seed", range(4))
def test_mask_labels_out_are_labels_in_or_fill(seed):
    torch.manual_seed(seed)
    m = masks()
    _, out = GpuAugment(ALWAYS, "mask")(images(seed=seed), m)
    assert labels(out) <= labels(m) | {255}


@pytest.mark.parametrize("fill", [255, 250, -100, 0])
def test_area_from_outside_is_filled_with_the_declared_label(fill):
    torch.manual_seed(0)
    recipe = Recipe(rotation=Rotation(degrees=45.0, p=1.0)).only("rotation")
    m = masks()
    aug = GpuAugment(recipe, "mask", fill=fill)
    _, out = aug(images(), m)
    turned = drawn_angles(aug).abs() > 5  # a turn of more than a few degrees brings in the corners
    assert turned.any()
    assert (out[turned, 0, 0] == fill).all()
    assert labels(out) <= labels(m) | {fill}


def test_uint8_masks_stay_uint8_with_their_labels():
    m = masks().to(torch.uint8)
    torch.manual_seed(1)
    _, out = GpuAugment(ALWAYS, "mask")(images(), m)
    assert out.dtype == torch.uint8 and labels(out) <= labels(m) | {255}


def test_photometric_only_recipe_leaves_masks_bit_identical():
    torch.manual_seed(0)
    m = masks()
    x = images()
    out, out_mask = GpuAugment(ALWAYS.photometric_only(), "mask")(x, m)
    assert torch.equal(out_mask, m)
    assert not torch.equal(out, x)


def test_recipe_with_everything_off_is_the_identity():
    x, m = images(), masks()
    out, out_mask = GpuAugment(Recipe().without(*OPS), "mask")(x, m)
    assert torch.equal(out, x) and torch.equal(out_mask, m)


def test_same_torch_seed_same_batch():
    aug = GpuAugment(ALWAYS, "mask")
    torch.manual_seed(42)
    a = aug(images(), masks())
    torch.manual_seed(42)
    b = aug(images(), masks())
    torch.manual_seed(43)
    c = aug(images(), masks())
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


def test_samples_in_a_batch_get_different_draws():
    torch.manual_seed(0)
    x = images(b=4)[:1].expand(4, -1, -1, -1).contiguous()
    out, _ = GpuAugment(ALWAYS, "none")(x, None)
    assert not torch.equal(out[0], out[1])


# -- Keypoints -------------------------------------------------------------------------------------

POINTS = torch.tensor([[[0.0, 0.0], [12.5, 9.0], [33.0, 20.0], [16.0, 10.0]]]).repeat(B, 1, 1)


def drawn_angles(aug: GpuAugment) -> torch.Tensor:
    """The rotation angles drawn on the last call (replayable parameters)."""
    return aug.last_params["angle"]


def test_keypoints_follow_a_pure_flip_exactly():
    out_images, out = GpuAugment(ALWAYS.only("flip"), "keypoints")(images(), POINTS.clone())
    expected = POINTS.clone()
    expected[..., 0] = (W - 1) - POINTS[..., 0]
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(out_images, images().flip(-1))


def test_keypoints_follow_rotation_as_the_cpu_executor_moves_them():
    """Both executors share one convention: the GPU's drawn angles, replayed on CPU, give the same points."""
    torch.manual_seed(3)
    aug = GpuAugment(Recipe(rotation=Rotation(degrees=90.0, p=1.0)).only("rotation"), "keypoints")
    _, out = aug(images(), POINTS.clone())
    cpu = CpuAugment(Recipe(), "keypoints")
    for i, angle in enumerate(drawn_angles(aug).tolist()):
        image = np.zeros((H, W, 3), np.uint8)
        _, expected = cpu.apply(image, POINTS[i].numpy(), CpuParams(angle=angle))
        np.testing.assert_allclose(out[i].numpy(), expected, atol=1e-3)
    assert not torch.allclose(out, POINTS)


def test_mask_region_lands_on_its_keypoint():
    """Image, mask and keypoints share one draw: a labelled block ends centred where its keypoint goes."""
    x, y = 20, 11
    m = torch.zeros(1, H, W, dtype=torch.long)
    m[0, y - 1 : y + 2, x - 1 : x + 2] = 9
    recipe = Recipe(rotation=Rotation(degrees=90.0, p=1.0)).only("flip", "rotation", "scale").with_p(flip=1.0)
    for seed in range(3):
        torch.manual_seed(seed)
        _, out_mask = GpuAugment(recipe, "mask")(images(1), m)
        torch.manual_seed(seed)
        _, kp = GpuAugment(recipe, "keypoints")(images(1), torch.tensor([[[float(x), float(y)]]]))
        hits = torch.nonzero(out_mask[0] == 9).float()
        assert len(hits) >= 4
        centroid_xy = hits.mean(0).flip(0)
        assert (centroid_xy - kp[0, 0]).abs().max() <= 0.75, (seed, centroid_xy, kp)


def test_none_target_passes_through_and_grayscale_works():
    label = torch.tensor([1, 2, 3])
    out, target = GpuAugment(ALWAYS, "none")(images(c=1), label)
    assert target is label and out.shape == (B, 1, H, W)


# -- Errors ----------------------------------------------------------------------------------------


BAD_CALLS = [
    pytest.param("mask", images(), masks().float(), "never a float mask", id="float-mask"),
    pytest.param("mask", images(), masks()[:, :5], f"(B, H, W) = {(B, H, W)}", id="mask-size"),
    pytest.param("mask", images(), None, "needs an integer mask", id="mask-missing"),
    pytest.param("mask", (images() * 255).to(torch.uint8), masks(), "write images.float() / 255", id="uint8-images"),
    pytest.param("none", images(c=4), None, "C = 1 or 3", id="rgba"),
    pytest.param("keypoints", images(), torch.zeros(B, 4), "float keypoints (B, K, 2)", id="kp-shape"),
]


@pytest.mark.parametrize(("kind", "x", "target", "message"), BAD_CALLS)
def test_bad_inputs_are_refused(kind, x, target, message):
    with pytest.raises(AugmentationError) as info:
        GpuAugment(Recipe(), kind)(x, target)
    assert message in str(info.value)


def test_bad_constructor_arguments():
    with pytest.raises(AugmentationError, match="target_kind='boxes' is not a target kind"):
        GpuAugment(Recipe(), "boxes")
    with pytest.raises(AugmentationError, match="fill=2.5 must be an integer label"):
        GpuAugment(Recipe(), "mask", fill=2.5)  # type: ignore[arg-type]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (torch.cuda.is_available() is False)")
def test_runs_on_cuda_tensors_and_keeps_them_there():
    torch.manual_seed(0)
    x, m = images().cuda(), masks().cuda()
    aug = GpuAugment(ALWAYS, "mask")
    out, out_mask = aug(x, m)
    assert out.device == x.device and out_mask.device == m.device
    assert labels(out_mask.cpu()) <= labels(m.cpu()) | {255}
    kp_aug = GpuAugment(ALWAYS, "keypoints")
    _, kp = kp_aug(x, POINTS.cuda())
    assert kp.device == x.device and kp.shape == POINTS.shape


# -- Conventions and host syncs --------------------------------------------------------------------


@pytest.mark.parametrize("angle", [90.0, -90.0, 30.0])
def test_rotation_matches_kornia_rotate(angle):
    """Counter-clockwise angles about ((W-1)/2, (H-1)/2), as kornia.geometry.transform.rotate."""
    x = images(1, 3, 15, 15)
    aug = GpuAugment(Recipe(rotation=Rotation(degrees=180.0, p=1.0)).only("rotation"), "none")
    ours, _ = aug._geometry(
        x, None, {"flip": torch.tensor([False]), "angle": torch.tensor([angle]), "scale": torch.tensor([1.0])}
    )
    expected = kornia.geometry.transform.rotate(x, torch.tensor([angle]))
    inner = (slice(None), slice(None), slice(3, 12), slice(3, 12))  # away from the zero-padded corners
    torch.testing.assert_close(ours[inner], expected[inner], atol=1e-4, rtol=0)


def test_jitter_factors_follow_their_definitions():
    """Brightness scales, contrast blends with the mean, saturation blends with grey, hue keeps luma."""
    x = images(2, 3, 8, 8) * 0.5 + 0.25
    aug = GpuAugment(ALWAYS.only("jitter"), "none")
    one, zero = torch.ones(2), torch.zeros(2)

    def jitter(b=one, c=one, s=one, h=zero):
        return aug._jitter(x, {"brightness": b, "contrast": c, "saturation": s, "hue": h})

    torch.testing.assert_close(jitter(), x)
    torch.testing.assert_close(jitter(b=one * 1.2), x * 1.2)
    mean_luma = (x * torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)).sum(1).mean((1, 2)).view(2, 1, 1, 1)
    torch.testing.assert_close(jitter(c=zero), mean_luma.expand_as(x))
    grey = jitter(s=zero)
    torch.testing.assert_close(grey[:, 0], grey[:, 1])
    turned = jitter(h=one * 0.25)
    luma = lambda t: (t * torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)).sum(1)  # noqa: E731
    torch.testing.assert_close(luma(turned), luma(x))
    assert not torch.allclose(turned, x)


def _syncs(fn, module=None) -> float:  # type: ignore[no-untyped-def]
    """``fn``'s syncs in one observed step; ``module``: the GPU augmentation, on the device as a pipeline's is."""
    probe = SyncProbe()
    pipeline = SimpleNamespace(model=None, gpu_augment=module, batch_mix=None)
    probe.setup(SimpleNamespace(device="cpu", observe_steps=1, pipeline=pipeline))
    with probe.observe():
        fn()
    probe.stop()
    metric = probe.metrics(None)[0]
    assert metric.value == 0.0, metric.detail["sites"]
    return metric.value


@pytest.mark.parametrize("kind", ["mask", "keypoints", "none"])
@pytest.mark.parametrize("channels", [3, 1], ids=["rgb", "gray"])
def test_forward_forces_no_host_sync(kind, channels):
    """Every op on, half the samples each, the flip swapping face parsing's pairs: not one
    .item()/bool()/tolist()/boolean index."""
    from perfsuite.augment.recipe import Flip

    recipe = Recipe(flip=Flip(pairs=((4, 5), (6, 7), (8, 9)))).with_p(**{name: 0.5 for name in OPS})
    aug = GpuAugment(recipe, kind)
    target = {"mask": masks(), "keypoints": POINTS.clone(), "none": None}[kind]
    _syncs(lambda: aug(images(c=channels), target), module=aug)


@pytest.mark.slow
def test_gpu_augmentation_adds_no_syncs_to_a_training_step():
    from perfsuite.core.knobs import Knobs
    from perfsuite.harness.runner import RunSpec, run

    def syncs(aug: str):  # type: ignore[no-untyped-def]
        spec = RunSpec(
            "face_parsing", knobs=Knobs.from_flat(aug=aug, num_workers=0), steps=2, warmup=1, observe_steps=2
        )
        return run(spec).metric("syncs_per_step")

    gpu, none = syncs("gpu"), syncs("none")
    assert gpu.value == none.value, (gpu.detail, none.detail)


def test_flipped_samples_trade_the_recipes_left_right_pairs_without_a_sync():
    from perfsuite.augment.recipe import Flip

    m = torch.full((4, 6, 8), 1, dtype=torch.long)
    m[:, 1:3, 1:3], m[:, 1:3, 5:7] = 4, 5  # mirror-symmetric: a flip with its swap gives the same mask
    torch.manual_seed(0)
    aug = GpuAugment(Recipe(flip=Flip(p=0.5, pairs=((4, 5),))).only("flip"), "mask")
    _, out = aug(torch.rand(4, 3, 6, 8), m)
    flipped = aug.last_params["flip"]
    assert flipped.any() and not flipped.all()
    assert torch.equal(out, m)
    no_swap = GpuAugment(Recipe().only("flip"), "mask")
    torch.manual_seed(0)
    _, forgot = no_swap(torch.rand(4, 3, 6, 8), m)
    assert torch.equal(forgot[flipped], m[flipped].flip(-1)) and not torch.equal(forgot[flipped], m[flipped])
