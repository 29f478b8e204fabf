"""Light super-resolution with seed 004's knobs: base_channels, num_blocks, patch_size.

HR patches are stored as PNG (lossless, as SR data is); the LR input is derived
on the device from the augmented HR patch (bicubic, antialiased, x2), so image
and target can never disagree. The recipe leaves out blur and noise: SR
targets must stay sharp.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from perfsuite.augment.recipe import Recipe
from perfsuite.jobs.workload import Sample, Scale, Workload
from perfsuite.jobs.workloads.models import LightSR

UPSCALE = 2


def textured_patch(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """Edges, stripes, discs and gradients: the detail SR nets are trained to restore."""
    from PIL import Image, ImageDraw

    base = rng.integers(0, 256, size=3)
    img = Image.new("RGB", (width, height), tuple(int(v) for v in base))
    d = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(6, 14))):
        colour = tuple(int(v) for v in rng.integers(0, 256, size=3))
        x0, y0 = rng.uniform(-0.2, 1.0) * width, rng.uniform(-0.2, 1.0) * height
        x1, y1 = x0 + rng.uniform(0.05, 0.6) * width, y0 + rng.uniform(0.05, 0.6) * height
        kind = rng.integers(0, 3)
        if kind == 0:
            d.rectangle([x0, y0, x1, y1], fill=colour)
        elif kind == 1:
            d.ellipse([x0, y0, x1, y1], fill=colour)
        else:
            d.line([x0, y0, x1, y1], fill=colour, width=int(rng.integers(1, 4)))
    arr = np.asarray(img, dtype=np.float32)
    stripes = 12 * np.sin(np.arange(width, dtype=np.float32) * rng.uniform(0.2, 1.2))
    return np.clip(arr + stripes[None, :, None], 0, 255).astype(np.uint8)


class SuperResolution(Workload):
    name = "super_resolution"
    summary = "light x2 super-resolution, base_channels/num_blocks/patch_size knobs"
    seed_doc = "004"
    target_kind = "none"
    image_format = "png"
    scales = {
        "smoke": Scale("smoke", (48, 48), num_samples=48, batch_size=8, model={"base_channels": 16, "num_blocks": 2}),
        "full": Scale("full", (192, 192), num_samples=800, batch_size=32, model={"base_channels": 96, "num_blocks": 8}),
    }

    def generate(self, index: int, rng: np.random.Generator, scale: Scale) -> Sample:
        return Sample(image=textured_patch(rng, *scale.image_size), target=None)

    def recipe(self) -> Recipe:
        return Recipe().without("blur", "noise")

    def build_model(self, scale: Scale) -> LightSR:
        return LightSR(self.channels, upscale=UPSCALE, **scale.model)

    def prepare(self, images: torch.Tensor, target: object, scale: Scale) -> tuple[torch.Tensor, torch.Tensor]:
        lr = F.interpolate(images, scale_factor=1 / UPSCALE, mode="bicubic", antialias=True, align_corners=False)
        return lr.sub(0.5).div_(0.25), images

    def loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.l1_loss(output.float() * 0.25 + 0.5, target)
