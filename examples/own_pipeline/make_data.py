"""Write a small face-parsing dataset: JPEG photos of drawn "faces" and PNG masks of their parts.

python make_data.py OUT_DIR [--count 12] [--size 64]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

PARTS = [
    (1, (0.2, 0.15, 0.8, 0.9), (224, 180, 150)),  # skin
    (6, (0.15, 0.05, 0.85, 0.3), (60, 40, 20)),  # hair
    (3, (0.3, 0.4, 0.42, 0.48), (250, 250, 250)),  # left eye
    (4, (0.58, 0.4, 0.7, 0.48), (250, 250, 250)),  # right eye
    (5, (0.45, 0.5, 0.55, 0.65), (200, 150, 120)),  # nose
    (7, (0.38, 0.7, 0.62, 0.78), (180, 60, 70)),
]  # lips


def write_dataset(out, count=12, size=64, seed=0):
    out = Path(out)
    (out / "images").mkdir(parents=True, exist_ok=True)
    (out / "masks").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(count):
        image = Image.new("RGB", (size, size), tuple(int(v) for v in rng.integers(0, 255, 3)))
        mask = Image.new("L", (size, size), 0)
        dx, dy = rng.uniform(-0.08, 0.08, 2)
        for label, (x0, y0, x1, y1), colour in PARTS:
            box = [(x0 + dx) * size, (y0 + dy) * size, (x1 + dx) * size, (y1 + dy) * size]
            ImageDraw.Draw(image).ellipse(box, fill=colour)
            ImageDraw.Draw(mask).ellipse(box, fill=label)
        noisy = np.clip(np.asarray(image, np.int16) + rng.integers(-12, 12, (size, size, 3)), 0, 255)
        Image.fromarray(noisy.astype(np.uint8)).save(out / "images" / f"{i:04d}.jpg", quality=90)
        mask.save(out / "masks" / f"{i:04d}.png")
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--count", type=int, default=12)
    parser.add_argument("--size", type=int, default=64)
    args = parser.parse_args()
    print(write_dataset(args.out, args.count, args.size))
