"""The recipe, and the CPU (per-sample PIL/NumPy) executor."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from perfsuite.augment.cpu import CpuAugment, CpuParams, JitterParams
from perfsuite.augment.recipe import (
    GEOMETRIC,
    OPS,
    PHOTOMETRIC,
    Blur,
    Flip,
    Jitter,
    Noise,
    Recipe,
    Rotation,
    Scale,
    is_geometric,
)
from perfsuite.errors import AugmentationError

H, W = 37, 53  # odd and non-square on purpose
ALWAYS = Recipe().with_p(**{name: 1.0 for name in OPS})


def rgb(h: int = H, w: int = W, seed: int = 0) -> np.ndarray:
    """A textured image, so every op visibly changes something."""
    rng = np.random.default_rng(seed)
    return rng.integers(20, 236, (h, w, 3), dtype=np.uint8)


def labels_mask(h: int = H, w: int = W, values: tuple[int, ...] = (3, 7, 200)) -> np.ndarray:
    """Sparse labels in blocks: any interpolation between them would invent a label."""
    mask = np.full((h, w), values[0], np.uint8)
    mask[: h // 2, w // 3 :] = values[1]
    mask[h // 2 :, 2 * w // 3 :] = values[2]
    return mask


# -- Recipe ------------------------------------------------------------------------------------


def test_recipe_defaults_are_seed_000s_list():
    r = Recipe()
    assert (r.flip.p, r.rotation.degrees, r.rotation.p) == (0.5, 20.0, 0.6)
    assert (r.scale.scale, r.scale.p) == ((0.8, 1.2), 0.6)
    assert (r.jitter.brightness, r.jitter.contrast, r.jitter.saturation, r.jitter.hue, r.jitter.p) == (
        0.3,
        0.2,
        0.2,
        0.1,
        0.5,
    )
    assert (r.blur.kernel_size, r.blur.sigma, r.blur.p) == (3, (0.1, 2.0), 0.3)
    assert (r.noise.std, r.noise.p) == (0.03, 0.3)
    assert r.active == OPS


def test_recipe_variants_switch_ops_off_without_touching_the_rest():
    r = Recipe().without("blur", "noise")
    assert r.active == ("flip", "rotation", "scale", "jitter")
    assert r.rotation == Recipe().rotation and r.blur.sigma == (0.1, 2.0) and r.blur.p == 0.0
    assert Recipe().only("rotation").active == ("rotation",)
    assert Recipe().geometric_only().active == GEOMETRIC
    assert Recipe().photometric_only().geometric_active == ()
    assert Recipe().photometric_only().photometric_active == PHOTOMETRIC
    assert Recipe().with_p(flip=1.0).flip.p == 1.0
    assert [is_geometric(name) for name in OPS] == [True, True, True, False, False, False]


BAD_RECIPES = [
    pytest.param(lambda: Flip(p=1.5), "flip.p=1.5 must be a probability", id="p-above-1"),
    pytest.param(lambda: Noise(p=-0.1), "noise.p=-0.1 must be a probability", id="p-negative"),
    pytest.param(lambda: Flip(p=True), "flip.p=True must be a probability", id="p-bool"),
    pytest.param(lambda: Flip(pairs=((4, 5), (5, 6))), "a label is in one pair at most", id="pairs-overlap"),
    pytest.param(lambda: Flip(pairs=((4, 4),)), "two different class labels", id="pairs-self"),
    pytest.param(lambda: Flip(pairs=[4, 5]), "write e.g. pairs=((4, 5), (6, 7), (8, 9))", id="pairs-flat"),
    pytest.param(lambda: Rotation(degrees=-5), "rotation.degrees=-5 must be between 0 and 180", id="degrees-negative"),
    pytest.param(lambda: Rotation(degrees=270), "rotation.degrees=270 must be between 0 and 180", id="degrees-270"),
    pytest.param(lambda: Scale(scale=(1.2, 0.8)), "low <= high; write e.g. scale=(0.8, 1.2)", id="scale-reversed"),
    pytest.param(lambda: Scale(scale=(0.0, 1.2)), "0.0 < low", id="scale-zero"),
    pytest.param(lambda: Scale(scale=1.2), "scale.scale=1.2 must be a tuple", id="scale-scalar"),
    pytest.param(lambda: Jitter(hue=0.7), "jitter.hue=0.7 must be between 0 and 0.5", id="hue-too-big"),
    pytest.param(lambda: Jitter(brightness=-0.3), "jitter.brightness=-0.3 must be a number >= 0", id="brightness-neg"),
    pytest.param(lambda: Blur(kernel_size=4), "blur.kernel_size=4 must be 3 or 5", id="kernel-even"),
    pytest.param(lambda: Blur(kernel_size=7), "blur.kernel_size=7 must be 3 or 5", id="kernel-7"),
    pytest.param(lambda: Blur(sigma=(0.0, 2.0)), "blur.sigma=(0.0, 2.0) must be a tuple", id="sigma-zero"),
    pytest.param(lambda: Noise(std=2.0), "noise.std=2.0 must be between 0 and 1.0", id="noise-std-huge"),
    pytest.param(
        lambda: Recipe(flip=0.5), "Recipe.flip=0.5 must be a Flip; write flip=Flip(...)", id="op-not-dataclass"
    ),
    pytest.param(
        lambda: Recipe().without("cutout"), "unknown augmentation op(s) ['cutout']; write one of", id="unknown-op"
    ),
    pytest.param(lambda: Recipe().with_p(blur=2), "blur.p=2 must be a probability", id="with-p-bad"),
]


@pytest.mark.parametrize(("build", "message"), BAD_RECIPES)
def test_bad_recipe_values_are_refused_with_what_to_write(build, message):
    with pytest.raises(AugmentationError) as info:
        build()
    assert message in str(info.value)


def test_recipe_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Recipe().flip = Flip(p=0.0)  # type: ignore[misc]


# -- Executor: shapes, dtypes, each op ---------------------------------------------------------


@pytest.mark.parametrize("op", [*OPS, "all"])
@pytest.mark.parametrize("shape", [(H, W, 3), (H, W), (H, W, 1), (1, 1, 3)], ids=["rgb", "gray", "gray1", "1x1"])
def test_each_op_and_the_full_recipe_keep_shape_and_dtype(op, shape):
    recipe = ALWAYS if op == "all" else ALWAYS.only(op)
    image = np.random.default_rng(1).integers(0, 256, shape, dtype=np.uint8)
    mask = np.full(shape[:2], 4, np.uint8)
    out, out_mask = CpuAugment(recipe, "mask", seed=0)(image, mask)
    assert out.shape == image.shape and out.dtype == np.uint8
    assert out_mask.shape == mask.shape and out_mask.dtype == np.uint8
    assert set(np.unique(out_mask)) <= {4, 255}


@pytest.mark.parametrize("op", OPS)
def test_each_op_changes_a_textured_image(op):
    aug = CpuAugment(ALWAYS.only(op), "none", seed=3)
    image = rgb()
    assert not np.array_equal(aug(image, None)[0], image)


def test_recipe_with_everything_off_is_the_identity():
    image, mask = rgb(), labels_mask()
    out, out_mask = CpuAugment(Recipe().without(*OPS), "mask", seed=0)(image, mask)
    assert np.array_equal(out, image) and np.array_equal(out_mask, mask)


def test_p_zero_ops_draw_nothing():
    params = CpuAugment(Recipe().without(*OPS), "none").sample_params(np.random.default_rng(0))
    assert params == CpuParams()


# -- Masks ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_mask_labels_out_are_labels_in_or_fill(seed):
    mask = labels_mask()
    _, out = CpuAugment(ALWAYS, "mask", seed=seed)(rgb(seed=seed), mask)
    assert set(np.unique(out)) <= set(np.unique(mask)) | {255}


def test_area_from_outside_is_filled_with_the_declared_label_not_zero():
    image, mask = rgb(), labels_mask()
    aug = CpuAugment(Recipe(), "mask", fill=250)
    out_image, out_mask = aug.apply(image, mask, CpuParams(angle=30.0, scale=0.8))
    corner = (0, 0)
    assert out_mask[corner] == 250
    assert out_image[corner].tolist() == [0, 0, 0]
    assert set(np.unique(out_mask)) == {3, 7, 200, 250}


def test_photometric_only_recipe_leaves_masks_bit_identical():
    mask = labels_mask()
    aug = CpuAugment(ALWAYS.photometric_only(), "mask", seed=0)
    for _ in range(5):
        image_out, mask_out = aug(rgb(), mask)
        assert np.array_equal(mask_out, mask)
    assert not np.array_equal(image_out, rgb())


# -- Keypoints follow the geometry ---------------------------------------------------------------


def analytic(points: np.ndarray, *, flip: bool = False, angle: float = 0.0, h: int = H, w: int = W) -> np.ndarray:
    """Flip x -> W-1-x, then rotate counter-clockwise (on screen) about ((W-1)/2, (H-1)/2)."""
    x, y = points[:, 0].astype(np.float64), points[:, 1].astype(np.float64)
    if flip:
        x = (w - 1) - x
    cx, cy, t = (w - 1) / 2, (h - 1) / 2, math.radians(angle)
    dx, dy = x - cx, y - cy
    return np.stack([cx + math.cos(t) * dx + math.sin(t) * dy, cy - math.sin(t) * dx + math.cos(t) * dy], 1)


POINTS = np.array([[0, 0], [12.5, 9], [52, 36], [26, 18]], np.float32)


@pytest.mark.parametrize(
    "params",
    [CpuParams(flip=True), CpuParams(angle=17.0), CpuParams(angle=-90.0), CpuParams(flip=True, angle=33.0)],
    ids=["flip", "rot17", "rot-90", "flip+rot33"],
)
def test_keypoints_follow_flip_and_rotation_exactly(params):
    _, out = CpuAugment(Recipe(), "keypoints").apply(rgb(), POINTS, params)
    assert out.dtype == np.float32 and out.shape == POINTS.shape
    np.testing.assert_allclose(out, analytic(POINTS, flip=params.flip, angle=params.angle), atol=1e-4)


def test_keypoints_scale_about_the_centre():
    _, out = CpuAugment(Recipe(), "keypoints").apply(rgb(), POINTS, CpuParams(scale=1.5))
    centre = np.array([(W - 1) / 2, (H - 1) / 2])
    np.testing.assert_allclose(out, centre + 1.5 * (POINTS - centre), atol=1e-4)


@pytest.mark.parametrize("params", [CpuParams(flip=True), CpuParams(angle=90.0), CpuParams(flip=True, angle=-90.0)])
def test_image_mask_and_keypoint_move_to_the_same_pixel(params):
    """A marked pixel in image and mask lands where its keypoint goes."""
    x, y = 20, 11
    image = np.zeros((H, W, 3), np.uint8)
    image[y, x] = 255
    mask = np.zeros((H, W), np.uint8)
    mask[y, x] = 9
    out_image, out_mask = CpuAugment(Recipe(), "mask").apply(image, mask, params)
    _, (kp,) = CpuAugment(Recipe(), "keypoints").apply(image, np.array([[x, y]], np.float32), params)
    expected = [round(float(kp[1])), round(float(kp[0]))]
    assert np.argwhere(out_mask == 9).tolist() == [expected]
    assert np.unravel_index(out_image[..., 0].argmax(), (H, W)) == tuple(expected)


# -- Targets, grayscale, errors ------------------------------------------------------------------


def test_none_target_passes_through_untouched():
    label = {"class": 3}
    out, target = CpuAugment(ALWAYS, "none", seed=0)(rgb(), label)
    assert target is label and out.shape == (H, W, 3)


def test_grayscale_jitter_skips_saturation_and_hue():
    image = rgb()[..., 0].copy()
    jitter = JitterParams(brightness=1.0, contrast=1.0, saturation=0.1, hue=0.4)
    out, _ = CpuAugment(Recipe(), "none").apply(image, None, CpuParams(jitter=jitter))
    assert np.array_equal(out, image)
    out, _ = CpuAugment(Recipe(), "none").apply(
        image, None, CpuParams(jitter=dataclasses.replace(jitter, brightness=0.5))
    )
    assert not np.array_equal(out, image)


def test_hue_shift_changes_colour_but_not_grey():
    image = rgb()
    image[:5] = 128  # a grey band has no hue to rotate
    out, _ = CpuAugment(Recipe(), "none").apply(image, None, CpuParams(jitter=JitterParams(hue=0.25)))
    assert not np.array_equal(out[5:], image[5:])
    assert np.abs(out[:5].astype(int) - 128).max() <= 1


BAD_CALLS = [
    pytest.param(
        "mask",
        np.zeros((4, 4, 3), np.float32),
        np.zeros((4, 4), np.uint8),
        "uint8 array, got ndarray float32",
        id="float-image",
    ),
    pytest.param("mask", np.zeros((4, 4, 4), np.uint8), np.zeros((4, 4), np.uint8), "HxWx3 uint8", id="rgba"),
    pytest.param(
        "mask", np.zeros((4, 4, 3), np.uint8), np.zeros((4, 5), np.uint8), "size of the image (4, 4)", id="mask-size"
    ),
    pytest.param("mask", np.zeros((4, 4, 3), np.uint8), np.zeros((4, 4), np.int64), "HxW uint8 mask", id="mask-int64"),
    pytest.param("keypoints", np.zeros((4, 4, 3), np.uint8), np.zeros((3,)), "(K, 2) array of (x, y)", id="kp-shape"),
]


@pytest.mark.parametrize(("kind", "image", "target", "message"), BAD_CALLS)
def test_bad_inputs_are_refused(kind, image, target, message):
    with pytest.raises(AugmentationError) as info:
        CpuAugment(Recipe(), kind, seed=0)(image, target)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"target_kind": "boxes"}, "target_kind='boxes' is not a target kind", id="kind"),
        pytest.param({"target_kind": "mask", "fill": 256}, "fill=256 must be an integer label 0..255", id="fill"),
        pytest.param({"target_kind": "mask", "fill": -100}, "fill=-100 must be", id="fill-negative"),
        pytest.param({"target_kind": "mask", "seed": -1}, "seed=-1 must be a non-negative", id="seed"),
    ],
)
def test_bad_constructor_arguments(kwargs, message):
    with pytest.raises(AugmentationError) as info:
        CpuAugment(Recipe(), **kwargs)
    assert message in str(info.value)


# -- Randomness ------------------------------------------------------------------------------------


def run(aug: CpuAugment, n: int = 5) -> list[np.ndarray]:
    return [aug(rgb(), labels_mask())[0] for _ in range(n)]


def test_same_seed_same_augmentations_different_seed_different():
    a, b, c = (
        run(CpuAugment(ALWAYS, "mask", seed=7)),
        run(CpuAugment(ALWAYS, "mask", seed=7)),
        run(CpuAugment(ALWAYS, "mask", seed=8)),
    )
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not any(np.array_equal(x, z) for x, z in zip(a, c))


def test_apply_replays_sampled_params_exactly():
    aug = CpuAugment(ALWAYS, "mask")
    params = aug.sample_params(np.random.default_rng(5))
    first = aug.apply(rgb(), labels_mask(), params)
    second = aug.apply(rgb(), labels_mask(), params)
    assert np.array_equal(first[0], second[0]) and np.array_equal(first[1], second[1])


class _Augmented(Dataset):
    def __init__(self, aug: CpuAugment, n: int) -> None:
        self.aug, self.n = aug, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int):
        from torch.utils.data import get_worker_info

        image, _ = self.aug(rgb(16, 16), labels_mask(16, 16))
        return torch.from_numpy(image), get_worker_info().id


def load(aug: CpuAugment, loader_seed: int) -> tuple[list[torch.Tensor], list[int]]:
    loader = DataLoader(
        _Augmented(aug, 8), batch_size=1, num_workers=2, generator=torch.Generator().manual_seed(loader_seed)
    )
    images, workers = [], []
    for image, worker in loader:
        images.append(image[0])
        workers.append(int(worker))
    return images, workers


def test_dataloader_workers_draw_different_streams_and_runs_repeat():
    aug = CpuAugment(ALWAYS, "mask", seed=1)
    aug(rgb(), labels_mask())  # a stream made in the parent must not be inherited by forked workers
    images, workers = load(aug, loader_seed=0)
    assert set(workers) == {0, 1}
    # Sample i of worker 0 and sample i of worker 1 must not be the same draw.
    by_worker = {w: [im for im, wid in zip(images, workers) if wid == w] for w in (0, 1)}
    assert not any(torch.equal(a, b) for a, b in zip(by_worker[0], by_worker[1]))

    again, _ = load(aug, loader_seed=0)
    assert all(torch.equal(a, b) for a, b in zip(images, again))
    other_seed, _ = load(CpuAugment(ALWAYS, "mask", seed=2), loader_seed=0)
    assert not any(torch.equal(a, b) for a, b in zip(images, other_seed))


def test_a_flipped_mask_trades_the_recipes_left_right_pairs():
    """Face parsing: a mirrored left eye (4) is the right eye (5); other labels and the fill are kept."""
    mask = np.full((8, 10), 1, np.uint8)
    mask[2:4, 1:3], mask[2:4, 7:9], mask[6:, :] = 4, 5, 255
    image = np.zeros((8, 10, 3), np.uint8)
    aug = CpuAugment(Recipe(flip=Flip(pairs=((4, 5), (6, 7)))), "mask")
    _, flipped = aug.apply(image, mask, CpuParams(flip=True))
    assert (flipped == mask).all()  # mirror-symmetric eyes, swapped back: the same mask
    _, turned = aug.apply(image, mask, CpuParams(flip=True, angle=0.5))  # the affine path swaps too
    assert set(np.unique(turned[2:4, 1:3]).tolist()) <= {1, 4} and 5 not in turned[2:4, 1:3]
    _, kept = aug.apply(image, mask, CpuParams(angle=0.5))
    assert 5 in kept[2:4, 7:9] and 4 not in kept[2:4, 7:9]  # not flipped: nothing swaps
