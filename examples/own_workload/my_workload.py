"""A user's own workload: a tiny two-class "defect detector" on 32x32 RGB crops.

This is the whole contract (see perfsuite.jobs.registry.Workload):
draw a sample, build a model, compute a loss, and say what the target is.
The runner writes the samples as real image files once, then decodes and
augments them through a DataLoader exactly as it does for the reference
workloads, so the same probes, thresholds and baselines apply.

Swap ``generate`` for code that reads your own files, ``build_model`` for
your network and ``recipe`` for your augmentation, and keep the rest.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from perfsuite import Recipe, Sample, Scale, Workload, register_workload


@register_workload
class DefectCrops(Workload):
    name = "example_defects"
    summary = "32x32 RGB crops, defect / no defect, a three-layer CNN (a user's own workload)"
    seed_doc = "example"
    target_kind = "label"  # mask | keypoints | label | none: decides how augmentation treats it
    image_format = "png"
    num_classes = 2
    scales = {
        "smoke": Scale("smoke", (32, 32), num_samples=32, batch_size=8, model={"width": 8}),
        "full": Scale("full", (128, 128), num_samples=4096, batch_size=256, model={"width": 64}),
    }

    def generate(self, index: int, rng: np.random.Generator, scale: Scale) -> Sample:
        h, w = scale.image_size
        image = rng.integers(90, 140, size=(h, w, 3), dtype=np.uint8)
        label = index % 2
        if label:  # a dark scratch
            y = int(rng.integers(2, h - 2))
            image[y - 1 : y + 1, w // 4 : 3 * w // 4] = 20
        return Sample(image=image, target=label)

    def recipe(self) -> Recipe:
        # Flips, small rotations and sensor noise: a scratch stays a scratch. (Colour jitter is left
        # out on purpose: Kornia's ColorJiggle reads its parameters back to the host, a sync per step.)
        return Recipe().only("flip", "rotation", "noise")

    def build_model(self, scale: Scale) -> nn.Module:
        w = scale.model["width"]
        return nn.Sequential(
            nn.Conv2d(3, w, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(w, 2 * w, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(2 * w, self.num_classes),
        )

    def loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(output, target)
