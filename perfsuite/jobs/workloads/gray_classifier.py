"""128x128 grayscale classification (seed 002): ten shape classes on noisy backgrounds.

Seed 002's fix was num_workers 0 -> 8, batch 64 -> 128 and evaluating every 5
epochs instead of every epoch; at full scale this workload uses batch 128.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from perfsuite.jobs.workload import Sample, Scale, Workload
from perfsuite.jobs.workloads.models import SmallClassifier

SHAPES = ("disc", "square", "triangle", "cross", "ring", "hbars", "vbars", "diagonal", "two_dots", "frame")


def draw_shape(rng: np.random.Generator, label: int, size: int) -> np.ndarray:
    from PIL import Image, ImageDraw

    background = int(rng.integers(0, 90))
    img = Image.new("L", (size, size), background)
    d = ImageDraw.Draw(img)
    ink = int(rng.integers(150, 256))
    r = size * rng.uniform(0.18, 0.32)
    cx, cy = rng.uniform(r, size - r, size=2)
    box = [cx - r, cy - r, cx + r, cy + r]
    stroke = max(1, int(size * 0.04))
    name = SHAPES[label]
    if name == "disc":
        d.ellipse(box, fill=ink)
    elif name == "square":
        d.rectangle(box, fill=ink)
    elif name == "triangle":
        d.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=ink)
    elif name == "cross":
        d.line([cx - r, cy, cx + r, cy], fill=ink, width=stroke * 2)
        d.line([cx, cy - r, cx, cy + r], fill=ink, width=stroke * 2)
    elif name == "ring":
        d.ellipse(box, outline=ink, width=stroke)
    elif name == "hbars":
        for k in range(3):
            y = cy - r + k * r
            d.rectangle([cx - r, y, cx + r, y + stroke], fill=ink)
    elif name == "vbars":
        for k in range(3):
            x = cx - r + k * r
            d.rectangle([x, cy - r, x + stroke, cy + r], fill=ink)
    elif name == "diagonal":
        d.line([cx - r, cy - r, cx + r, cy + r], fill=ink, width=stroke * 2)
    elif name == "two_dots":
        d.ellipse([cx - r, cy - r / 3, cx - r / 3, cy + r / 3], fill=ink)
        d.ellipse([cx + r / 3, cy - r / 3, cx + r, cy + r / 3], fill=ink)
    else:
        d.rectangle(box, outline=ink, width=stroke)
    noisy = np.asarray(img, np.float32) + rng.normal(0, 12, size=(size, size))
    return np.clip(noisy, 0, 255).astype(np.uint8)


class GrayClassifier(Workload):
    name = "gray_classifier"
    summary = "128x128 grayscale 10-class classification, small CNN"
    seed_doc = "002"
    target_kind = "label"
    channels = 1
    image_format = "png"
    num_classes = len(SHAPES)
    scales = {
        "smoke": Scale("smoke", (64, 64), num_samples=96, batch_size=32, model={"widths": (8, 16, 32)}),
        "full": Scale("full", (128, 128), num_samples=4096, batch_size=128, model={"widths": (32, 64, 128, 256)}),
    }

    def generate(self, index: int, rng: np.random.Generator, scale: Scale) -> Sample:
        label = index % len(SHAPES)
        return Sample(image=draw_shape(rng, label, scale.image_size[0]), target=label)

    def build_model(self, scale: Scale) -> SmallClassifier:
        return SmallClassifier(self.channels, self.num_classes, tuple(scale.model["widths"]))

    def loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(output, target)
