"""Known-bad paired augmentations: the negative controls for :mod:`perfsuite.augment.checks`.

Each is a faithful, runnable copy of a way real pipelines break masks, with
the same signature as the GPU executor: ``forward(images [B, 3, H, W] float
in [0, 1], masks [B, H, W] long) -> (images, masks)``. A property that lets
any of them through is not testing anything. Randomness comes from torch's
global generator, so ``torch.manual_seed`` replays them.

Seed 000's ``GPUAugmentation`` concatenated the mask as a fourth channel:
bilinear resampling, blur and noise then ran on labels, ``.long()``
truncated them and ``clamp(0, 18)`` turned the ignore index into class 18.
Its ColorJitter also raises on four channels, so the seed never ran as
written; :class:`SeedConcat` leaves it out unless asked.
"""

from __future__ import annotations

import kornia.augmentation as KA
import torch
from torch import nn

IGNORE = 255


def _seed_geometry(resample: str = "bilinear") -> list[nn.Module]:
    """Seed 000's geometric ops and probabilities."""
    return [
        KA.RandomHorizontalFlip(p=0.5),
        KA.RandomRotation(degrees=20, p=0.6, resample=resample),
        KA.RandomAffine(degrees=0, scale=(0.8, 1.2), p=0.6, resample=resample),
    ]


def _seed_photometric(with_color_jitter: bool) -> list[nn.Module]:
    jitter = [KA.ColorJitter(brightness=0.3, contrast=0.2, saturation=0.2, hue=0.1, p=0.5)] if with_color_jitter else []
    return [
        *jitter,
        KA.RandomGaussianBlur(kernel_size=(3, 3), sigma=(0.1, 2.0), p=0.3),
        KA.RandomGaussianNoise(mean=0.0, std=0.03, p=0.3),
    ]


class SeedConcat(nn.Module):
    """Seed 000's ``GPUAugmentation``: mask concatenated as channel 4, ``.long()``, ``clamp(0, num_classes-1)``."""

    def __init__(self, num_classes: int = 19, with_color_jitter: bool = False) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.aug = nn.Sequential(*_seed_geometry(), *_seed_photometric(with_color_jitter))

    def forward(self, images: torch.Tensor, masks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        combined = torch.cat([images, masks.unsqueeze(1).float()], dim=1)
        augmented = self.aug(combined)
        aug_masks = augmented[:, 3:4].squeeze(1).long()
        return augmented[:, :3], torch.clamp(aug_masks, 0, self.num_classes - 1)


def _to_labels(shifted: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return (shifted.squeeze(1) + IGNORE).round().to(dtype)


class IndependentParams(nn.Module):
    """Image and mask each run through their own pipeline, so each draws its own flip/angle/scale.

    The mask side is otherwise right (nearest, padded with the ignore
    index), so alignment is the only thing wrong.
    """

    def __init__(self) -> None:
        super().__init__()
        self.image_aug = nn.Sequential(*_seed_geometry())
        self.mask_aug = nn.Sequential(*_seed_geometry(resample="nearest"))

    def forward(self, images: torch.Tensor, masks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        shifted = masks.unsqueeze(1).float() - IGNORE  # Kornia pads with 0: shift so padding reads as IGNORE
        return self.image_aug(images), _to_labels(self.mask_aug(shifted), masks.dtype)


class BilinearMasks(nn.Module):
    """The same parameters for image and mask, but the mask resampled bilinearly and rounded."""

    def __init__(self) -> None:
        super().__init__()
        self.aug = KA.AugmentationSequential(*_seed_geometry(), data_keys=["input", "input"])  # type: ignore[arg-type]

    def forward(self, images: torch.Tensor, masks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        shifted = masks.unsqueeze(1).float().expand(-1, 3, -1, -1) - IGNORE
        out, mask = self.aug(images, shifted)
        return out, _to_labels(mask[:, :1], masks.dtype)


class ImagesOnlyCutMix(nn.Module):
    """Seed 000's ``GPUAugmentationAdvanced`` CutMix branch: boxes pasted into images, masks left behind."""

    def __init__(self, p: float = 0.3) -> None:
        super().__init__()
        self.p = p
        self.cutmix = KA.RandomCutMixV2(cut_size=(0.2, 0.8), p=p)

    def forward(self, images: torch.Tensor, masks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if torch.rand(1).item() < self.p:
            images = self.cutmix(images)
        return images, masks


class ImagesOnlyMixUp(nn.Module):
    """Seed 000's ``GPUAugmentationAdvanced`` MixUp branch: images blended, masks left as they were."""

    def __init__(self, p: float = 0.3, alpha: float = 0.2) -> None:
        super().__init__()
        self.p = p
        self.mixup = KA.RandomMixUpV2(lambda_val=(alpha, alpha), p=p)

    def forward(self, images: torch.Tensor, masks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if torch.rand(1).item() < self.p:
            images = self.mixup(images)
        return images, masks


class SeedAdvanced(nn.Module):
    """Seed 000's ``GPUAugmentationAdvanced`` whole: :class:`SeedConcat`, then images-only MixUp and CutMix."""

    def __init__(
        self, num_classes: int = 19, with_color_jitter: bool = False, mixup_prob: float = 0.3, cutmix_prob: float = 0.3
    ) -> None:
        super().__init__()
        self.basic_aug = SeedConcat(num_classes, with_color_jitter)
        self.mixup = ImagesOnlyMixUp(mixup_prob)
        self.cutmix = ImagesOnlyCutMix(cutmix_prob)

    def forward(self, images: torch.Tensor, masks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        images, masks = self.basic_aug(images, masks)
        images, masks = self.mixup(images, masks)
        return self.cutmix(images, masks)
