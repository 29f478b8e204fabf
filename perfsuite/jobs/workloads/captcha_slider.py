"""Slider CAPTCHA: regress the gap and slider centres in 320x160 images (seed 003).

Each image is a textured background with a puzzle-piece gap cut into it and
the matching piece on the left; the target is two keypoints, (gap x, y) and
(slider x, y), in pixels, which geometric augmentation moves with the image.
The full-scale CNN has about 3.5M parameters, as in the seed.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from perfsuite.jobs.workload import Sample, Scale, Workload
from perfsuite.jobs.workloads.models import RegressionCNN


def textured_background(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    image = np.zeros((height, width, 3), np.float32)
    for channel in range(3):
        for _ in range(3):
            fx, fy = rng.uniform(0.5, 6, size=2)
            image[..., channel] += np.sin(xx / width * fx * np.pi + rng.uniform(0, 6)) * np.cos(
                yy / height * fy * np.pi + rng.uniform(0, 6)
            )
    noisy: np.ndarray = 128 + 40 * image + rng.normal(0, 8, size=image.shape)
    return np.clip(noisy, 0, 255)


def piece_mask(size: int) -> np.ndarray:
    """A puzzle piece: a square with a round tab on its right edge."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    body = (xx < size * 0.8) & (yy > size * 0.1) & (yy < size * 0.9)
    tab = (xx - size * 0.8) ** 2 + (yy - size * 0.5) ** 2 < (size * 0.16) ** 2
    return body | tab


class CaptchaSlider(Workload):
    name = "captcha_slider"
    summary = "slider-CAPTCHA gap/slider regression, 320x160 RGB, 3.5M-parameter CNN"
    seed_doc = "003"
    target_kind = "keypoints"
    scales = {
        "smoke": Scale("smoke", (80, 160), num_samples=64, batch_size=16, model={"widths": (8, 16, 32, 48)}),
        "full": Scale(
            "full",
            (160, 320),
            num_samples=2048,
            batch_size=256,  # 3.6M parameters
            model={"widths": (48, 96, 192, 256, 352)},
        ),
    }

    def generate(self, index: int, rng: np.random.Generator, scale: Scale) -> Sample:
        h, w = scale.image_size
        image = textured_background(rng, h, w)
        size = max(8, int(h * rng.uniform(0.25, 0.32)))
        shape = piece_mask(size)
        gx = int(rng.uniform(0.4 * w, w - size - 2))
        gy = int(rng.uniform(2, h - size - 2))
        piece = image[gy : gy + size, gx : gx + size].copy()
        region = image[gy : gy + size, gx : gx + size]
        region[shape] = region[shape] * 0.45  # the dark gap
        sx = int(rng.uniform(2, 0.12 * w))
        target_region = image[gy : gy + size, sx : sx + size]
        target_region[shape] = np.clip(piece[shape] * 1.1 + 12, 0, 255)  # the brighter slider
        centre = size / 2
        keypoints = np.array([[gx + centre, gy + centre], [sx + centre, gy + centre]], np.float32)
        return Sample(image=image.astype(np.uint8), target=keypoints)

    def build_model(self, scale: Scale) -> RegressionCNN:
        return RegressionCNN(self.channels, 4, tuple(scale.model["widths"]))

    def prepare(self, images: torch.Tensor, target: torch.Tensor, scale: Scale) -> tuple[torch.Tensor, torch.Tensor]:
        x, _ = super().prepare(images, None, scale)
        h, w = images.shape[-2:]
        # (x, y) pixels to [0, 1] by Python scalars: torch.tensor([w, h], device=...) would be a blocking
        # host-to-device copy every step
        return x, torch.stack((target[..., 0] / w, target[..., 1] / h), -1).flatten(1)

    def loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.smooth_l1_loss(output.float(), target)
