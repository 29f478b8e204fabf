"""The GPU executor: the same recipe as one batched Kornia ``AugmentationSequential``.

Seed 000's GPUAugmentation concatenated the mask to the image as a fourth
channel, so the mask was resampled bilinearly, blurred, jittered and noised,
then clamped to [0, 18]: labels were invented at every boundary and the
clamp hid it. Here the mask is its own data key: Kornia resamples masks
nearest and skips intensity ops for them (both checked by the tests).

Fill: Kornia pads masks with 0 and has no fill argument, and 0 is usually a
real class (background). The mask is therefore shifted by ``-fill`` before
the transform and back after, so padded areas come out as ``fill``
(default 255, the usual ignore index) and no label is clamped.

Everything is batched; there are no per-sample Python loops and no host
syncs, so the executor runs on whatever device the tensors are on.
"""

from __future__ import annotations

from typing import Any

import kornia.augmentation as KA
import torch
from torch import nn

from perfsuite.augment.recipe import Recipe, check_target_kind
from perfsuite.errors import AugmentationError

_DATA_KEYS = {"mask": ["input", "mask"], "keypoints": ["input", "keypoints"], "none": ["input"]}


def _kornia_ops(recipe: Recipe, channels: int) -> list[nn.Module]:
    """The recipe's active ops as Kornia modules, in recipe order (geometric first)."""
    ops: list[nn.Module] = []
    if recipe.flip.p > 0:
        ops.append(KA.RandomHorizontalFlip(p=recipe.flip.p))
    if recipe.rotation.p > 0:
        ops.append(KA.RandomRotation(degrees=recipe.rotation.degrees, p=recipe.rotation.p))
    if recipe.scale.p > 0:
        ops.append(KA.RandomAffine(degrees=0.0, scale=recipe.scale.scale, p=recipe.scale.p))
    j = recipe.jitter
    if j.p > 0:
        # Saturation and hue are undefined on one channel; Kornia would raise.
        sat, hue = (j.saturation, j.hue) if channels == 3 else (0.0, 0.0)
        if any((j.brightness, j.contrast, sat, hue)):
            ops.append(KA.ColorJitter(brightness=j.brightness, contrast=j.contrast, saturation=sat, hue=hue, p=j.p))
    if recipe.blur.p > 0:
        k = recipe.blur.kernel_size
        ops.append(KA.RandomGaussianBlur(kernel_size=(k, k), sigma=recipe.blur.sigma, p=recipe.blur.p))
    if recipe.noise.p > 0:
        ops.append(KA.RandomGaussianNoise(mean=0.0, std=recipe.noise.std, p=recipe.noise.p))
    return ops


class GpuAugment(nn.Module):
    """Batched augmentation of images and their targets with Kornia.

    Args:
        recipe: what to do (:class:`~perfsuite.augment.recipe.Recipe`).
        target_kind: ``"mask"``, ``"keypoints"`` or ``"none"``.
        fill: label for mask areas brought in from outside the image (any
            integer; 255 by default, -100 if you use CrossEntropyLoss's default
            ignore index). Images are filled with 0.

    Shape:
        images: (B, C, H, W) float in [0, 1], C = 1 or 3 -> the same, clamped to [0, 1].
        target: (B, H, W) integer mask -> the same dtype; (B, K, 2) float
        keypoints (x, y) -> the same; ``"none"``: returned untouched.

    Randomness comes from torch's global generator, like every Kornia
    augmentation, so ``torch.manual_seed`` makes a run repeatable.
    """

    def __init__(self, recipe: Recipe, target_kind: str, fill: int = 255) -> None:
        super().__init__()
        if not isinstance(recipe, Recipe):
            raise AugmentationError(f"recipe={recipe!r} must be a Recipe; write GpuAugment(Recipe(), ...)")
        check_target_kind(target_kind)
        if isinstance(fill, bool) or not isinstance(fill, int):
            raise AugmentationError(f"fill={fill!r} must be an integer label; write fill=255")
        self.recipe = recipe
        self.target_kind = target_kind
        self.fill = fill
        keys = _DATA_KEYS[target_kind]
        # One pipeline per channel count (jitter differs); an empty recipe is the identity.
        self.pipelines = nn.ModuleDict()
        for channels in (1, 3):
            ops = _kornia_ops(recipe, channels)
            if ops:
                self.pipelines[str(channels)] = KA.AugmentationSequential(*ops, data_keys=keys)

    def extra_repr(self) -> str:
        return f"target_kind={self.target_kind!r}, fill={self.fill}"

    def forward(self, images: torch.Tensor, target: Any = None) -> tuple[torch.Tensor, Any]:
        self._check(images, target)
        pipeline = self.pipelines[str(images.shape[1])] if str(images.shape[1]) in self.pipelines else None
        if pipeline is None:
            return images, target
        if self.target_kind == "none":
            return pipeline(images).clamp(0.0, 1.0), target
        if self.target_kind == "keypoints":
            out, keypoints = pipeline(images, target)
            return out.clamp(0.0, 1.0), keypoints
        # Integer labels up to 2**24 are exact in float32; nearest resampling only copies them.
        shifted = (target.to(torch.float32) - self.fill).unsqueeze(1)
        out, mask = pipeline(images, shifted)
        labels = (mask.squeeze(1) + self.fill).round_().to(target.dtype)
        return out.clamp(0.0, 1.0), labels

    def _check(self, images: Any, target: Any) -> None:
        if not (
            isinstance(images, torch.Tensor)
            and images.is_floating_point()
            and images.ndim == 4
            and images.shape[1] in (1, 3)
        ):
            what = f"{type(images).__name__} {getattr(images, 'dtype', '')} {tuple(getattr(images, 'shape', ()))}"
            raise AugmentationError(
                f"GpuAugment takes float images (B, C, H, W) in [0, 1] with C = 1 or 3, got {what}; "
                "write images.float() / 255 for uint8 batches"
            )
        b, _, h, w = images.shape
        pad = self.recipe.blur.kernel_size // 2
        if self.recipe.blur.p > 0 and min(h, w) <= pad:
            raise AugmentationError(
                f"images of {h}x{w} pixels are too small for blur.kernel_size={self.recipe.blur.kernel_size} "
                f"(Kornia's reflect padding needs more than {pad} pixel(s) per side); use larger images or "
                "recipe.without('blur')"
            )
        if self.target_kind == "mask":
            ok = (
                isinstance(target, torch.Tensor)
                and not target.is_floating_point()
                and target.dtype != torch.bool
                and tuple(target.shape) == (b, h, w)
            )
            if not ok:
                what = f"{getattr(target, 'dtype', type(target).__name__)} {tuple(getattr(target, 'shape', ()))}"
                raise AugmentationError(
                    f"target_kind='mask' needs an integer mask (B, H, W) = {(b, h, w)}, got {what}; "
                    "write masks.long() (never a float mask: resampling a float mask invents labels)"
                )
        elif self.target_kind == "keypoints":
            ok = (
                isinstance(target, torch.Tensor)
                and target.is_floating_point()
                and target.ndim == 3
                and target.shape[0] == b
                and target.shape[2] == 2
            )
            if not ok:
                what = f"{getattr(target, 'dtype', type(target).__name__)} {tuple(getattr(target, 'shape', ()))}"
                raise AugmentationError(
                    f"target_kind='keypoints' needs float keypoints (B, K, 2) with B = {b}, got {what}; "
                    "write keypoints.float()"
                )
