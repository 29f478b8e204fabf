"""Batch mixes that keep targets honest: paired CutMix, and MixUp only where labels can blend.

Seed 000's GPUAugmentationAdvanced ran Kornia's MixUp and CutMix on the
images alone and returned the masks untouched, so every mixed pixel was
trained against the wrong label. CutMix can be done right for masks (paste
the same box from the same partner into both); MixUp cannot, because a
blended pixel has no single class. So :class:`PairedCutMix` pastes into
image and mask together, and :func:`mixup` on masks is refused.

Example:
    >>> import torch
    >>> images, masks = torch.rand(4, 3, 16, 16), torch.randint(0, 19, (4, 16, 16))
    >>> images, masks = PairedCutMix(p=1.0)(images, masks)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from perfsuite.augment.recipe import check_target_kind
from perfsuite.errors import AugmentationError

_MIXUP_ON_MASKS = (
    "MixUp on segmentation masks is refused: blending two images while leaving the masks alone "
    "trains every pixel against a label that is only partly true, and masks cannot "
    "be blended into hard labels. Write PairedCutMix(p=...) instead, which pastes the same box into image "
    "and mask; use MixUp only for classification, with soft labels: mixup_labels(images, one_hot_labels)."
)


@dataclass(frozen=True)
class CutMixParams:
    """One batch's draw: whether to mix, each sample's partner, and its box (x0, y0, x1, y1), end exclusive."""

    applied: bool
    partner: torch.Tensor
    boxes: torch.Tensor


class PairedCutMix(nn.Module):
    """CutMix for segmentation: the box from a permuted partner goes into image AND mask.

    Args:
        p: probability that a batch is mixed (per batch, as ``AugKnobs.cutmix``).
        cut_size: range of the box side as a fraction of the image side; the
            box covers ``r*H`` by ``r*W`` pixels with r drawn per sample.
        target_kind: only ``"mask"``. Keypoint targets are refused (a keypoint
            inside a pasted box would point at the partner's content), and
            so are image-only ("none") targets, whose class labels would need
            mixing by area (not provided).

    Shape:
        images: (B, C, H, W), masks: (B, H, W) integer -> the same.

    Randomness: drawn on the CPU (``generator`` if given, else torch's
    global one), so drawing never synchronises with the device.
    """

    def __init__(self, p: float, cut_size: tuple[float, float] = (0.2, 0.8), target_kind: str = "mask") -> None:
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise AugmentationError(f"PairedCutMix p={p!r} must be a probability between 0.0 and 1.0")
        ok = (
            isinstance(cut_size, tuple)
            and len(cut_size) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in cut_size)
            and 0.0 < cut_size[0] <= cut_size[1] <= 1.0
        )
        if not ok:
            raise AugmentationError(
                f"cut_size={cut_size!r} must be (low, high) with 0 < low <= high <= 1; write cut_size=(0.2, 0.8)"
            )
        check_target_kind(target_kind)
        if target_kind != "mask":
            why = (
                "a keypoint inside a pasted box would point at the partner's content"
                if target_kind == "keypoints"
                else "image-only labels would need mixing by pasted area, which this class does not do"
            )
            raise AugmentationError(
                f"PairedCutMix is for segmentation masks, not target_kind={target_kind!r}: {why}; "
                "write cutmix=0.0 for this workload"
            )
        self.p = float(p)
        self.cut_size = cut_size

    def extra_repr(self) -> str:
        return f"p={self.p}, cut_size={self.cut_size}"

    def sample(self, batch: int, height: int, width: int, generator: torch.Generator | None = None) -> CutMixParams:
        """Draw partners and boxes for a batch (on the CPU)."""
        applied = bool(torch.rand((), generator=generator) < self.p)
        partner = torch.randperm(batch, generator=generator)
        low, high = self.cut_size
        r = low + (high - low) * torch.rand(batch, generator=generator, dtype=torch.float64)
        h = (r * height).round().clamp(1, height).long()
        w = (r * width).round().clamp(1, width).long()
        y0 = (torch.rand(batch, generator=generator, dtype=torch.float64) * (height - h + 1)).floor().long()
        x0 = (torch.rand(batch, generator=generator, dtype=torch.float64) * (width - w + 1)).floor().long()
        boxes = torch.stack([x0, y0, x0 + w, y0 + h], dim=1)
        return CutMixParams(applied, partner, boxes)

    def apply(  # type: ignore[override]  # Kornia's draw/apply split; nn.Module.apply(fn) is not used on a mix
        self, images: torch.Tensor, masks: torch.Tensor, params: CutMixParams
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Paste each sample's box from its partner, into images and masks alike."""
        if not params.applied:
            return images, masks
        device = images.device
        partner = params.partner.to(device, non_blocking=True)
        boxes = params.boxes.to(device, non_blocking=True)
        height, width = images.shape[-2:]
        ys = torch.arange(height, device=device).view(1, height, 1)
        xs = torch.arange(width, device=device).view(1, 1, width)
        x0, y0, x1, y1 = (boxes[:, i].view(-1, 1, 1) for i in range(4))
        inside = (ys >= y0) & (ys < y1) & (xs >= x0) & (xs < x1)
        images = torch.where(inside.unsqueeze(1), images[partner], images)
        masks = torch.where(inside, masks[partner], masks)
        return images, masks

    def forward(
        self, images: torch.Tensor, masks: Any, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        _check_masks(images, masks)
        params = self.sample(images.shape[0], images.shape[-2], images.shape[-1], generator)
        return self.apply(images, masks, params)


def _check_masks(images: Any, masks: Any) -> None:
    if not (isinstance(images, torch.Tensor) and images.ndim == 4):
        raise AugmentationError(f"images must be a (B, C, H, W) tensor, got {tuple(getattr(images, 'shape', ()))}")
    b, _, h, w = images.shape
    ok = (
        isinstance(masks, torch.Tensor)
        and not masks.is_floating_point()
        and masks.dtype != torch.bool
        and tuple(masks.shape) == (b, h, w)
    )
    if not ok:
        what = f"{getattr(masks, 'dtype', type(masks).__name__)} {tuple(getattr(masks, 'shape', ()))}"
        raise AugmentationError(
            f"PairedCutMix needs integer masks (B, H, W) = {(b, h, w)} to paste along with the images, got "
            f"{what}; write masks.long(). Without masks to move, write cutmix=0.0."
        )


def mixup(images: torch.Tensor, masks: Any, alpha: float = 0.2) -> tuple[torch.Tensor, torch.Tensor]:
    """Refused for masks, always: see the message. Exists so the refusal has a name and a reason."""
    if masks is not None:
        raise AugmentationError(_MIXUP_ON_MASKS)
    raise AugmentationError(
        "mixup() without targets would blend images and leave their labels behind; for classification "
        "write mixup_labels(images, one_hot_labels, alpha), which blends the labels with the same weight."
    )


def mixup_labels(
    images: torch.Tensor, one_hot_labels: torch.Tensor, alpha: float = 0.2
) -> tuple[torch.Tensor, torch.Tensor]:
    """MixUp for classification: images and soft labels blended with one weight from Beta(alpha, alpha).

    Shape: images (B, ...) float, one_hot_labels (B, num_classes) float -> the same.
    """
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or alpha <= 0:
        raise AugmentationError(f"mixup alpha={alpha!r} must be a number > 0; write alpha=0.2")
    labels = one_hot_labels
    if not (isinstance(labels, torch.Tensor) and labels.is_floating_point() and labels.ndim == 2):
        what = f"{getattr(labels, 'dtype', type(labels).__name__)} {tuple(getattr(labels, 'shape', ()))}"
        raise AugmentationError(
            f"mixup_labels needs float one-hot labels (B, num_classes), got {what}; write "
            "torch.nn.functional.one_hot(labels, num_classes).float(). Masks are refused: " + _MIXUP_ON_MASKS
        )
    if one_hot_labels.shape[0] != images.shape[0]:
        raise AugmentationError(
            f"mixup_labels got {images.shape[0]} images but {one_hot_labels.shape[0]} labels; pass one row per image"
        )
    lam = float(torch.distributions.Beta(float(alpha), float(alpha)).sample())
    partner = torch.randperm(images.shape[0]).to(images.device, non_blocking=True)
    mixed = images * lam + images[partner] * (1.0 - lam)
    labels = one_hot_labels * lam + one_hot_labels[partner] * (1.0 - lam)
    return mixed, labels


def check_mixes(target_kind: str, *, cutmix: float = 0.0, mixup: float = 0.0) -> None:
    """Refuse, before a run starts, batch mixes that the target kind cannot follow."""
    check_target_kind(target_kind)
    if mixup > 0 and target_kind == "mask":
        raise AugmentationError(f"mixup={mixup} with masks: " + _MIXUP_ON_MASKS)
    if mixup > 0 and target_kind == "keypoints":
        raise AugmentationError(
            f"mixup={mixup} with keypoints: a blend of two images has two sets of keypoints and the target "
            "keeps one; write mixup=0.0"
        )
    if cutmix > 0 and target_kind != "mask":
        PairedCutMix(cutmix, target_kind=target_kind)  # raises with the reason
