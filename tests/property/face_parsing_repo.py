"""A face-parsing training transform in the style public face-parsing repositories use, for the flip-pair tests.

Dict in, dict out (``{"im": PIL RGB, "lb": PIL L}``, the ``layout="dict"``
adapter): colour jitter with PIL's enhancers (brightness, contrast, saturation
factors drawn from ``[1 - x, 1 + x]``), a horizontal flip at p=0.5 that swaps
the left/right classes, a random rescale (image bilinear, label nearest) and a
random crop to a fixed size. Randomness comes from Python's ``random``, which
the adapter seeds. ``swap=False`` is the bug issue 24 found upstream
(zllrunning/face-parsing.PyTorch): the flip builds the swapped label map and
then returns the unswapped one. Written for these tests; no code is copied.
"""

from __future__ import annotations

import random

import numpy as np
from PIL import Image, ImageEnhance

# CelebAMask-HQ as that repository numbers it: brows 2/3, eyes 4/5, ears 7/8
PAIRS = [(2, 3), (4, 5), (7, 8)]
NUM_CLASSES = 19


def _swap(lb: Image.Image) -> Image.Image:
    arr = np.asarray(lb)
    out = arr.copy()
    for a, b in PAIRS:
        out[arr == a], out[arr == b] = b, a
    return Image.fromarray(out)


class FaceParsingTrain:
    """ColorJitter -> HorizontalFlip (+ swap) -> RandomScale -> RandomCrop(crop)."""

    def __init__(self, crop: int = 24, jitter: float = 0.5, scales=(1.0,), swap: bool = True):
        self.crop, self.jitter, self.scales, self.swap = crop, jitter, scales, swap

    def __call__(self, sample: dict) -> dict:
        im, lb = sample["im"], sample["lb"]
        lo, hi = max(0.0, 1 - self.jitter), 1 + self.jitter
        for enhancer in (ImageEnhance.Brightness, ImageEnhance.Contrast, ImageEnhance.Color):
            im = enhancer(im).enhance(random.uniform(lo, hi))
        if random.random() < 0.5:
            im = im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
            lb = lb.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
            if self.swap:
                lb = _swap(lb)
        scale = random.choice(self.scales)
        w, h = im.size
        size = (max(self.crop, int(w * scale)), max(self.crop, int(h * scale)))
        im, lb = im.resize(size, Image.Resampling.BILINEAR), lb.resize(size, Image.Resampling.NEAREST)
        x0, y0 = int(random.random() * (size[0] - self.crop)), int(random.random() * (size[1] - self.crop))
        box = (x0, y0, x0 + self.crop, y0 + self.crop)
        return {"im": im.crop(box), "lb": lb.crop(box)}
