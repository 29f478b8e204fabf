"""A folder of 16x16 grayscale digit images, ``SPLIT/<index>_<label>.png``, read with PIL."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset


class DigitFolder(Dataset):
    def __init__(self, root, split):
        self.files = sorted((Path(root) / split).glob("*.png"))
        if not self.files:
            raise FileNotFoundError(f"no {split}/*.png under {root}")

    def __len__(self):
        return len(self.files)

    def __getitem__(self, index):
        path = self.files[index]
        image = np.asarray(Image.open(path).convert("L"), dtype=np.float32) / 255.0
        return torch.from_numpy(image)[None], int(path.stem.split("_")[1])


def write_digits(root, train=32, val=8, size=16, seed=0):
    """Blobs whose position encodes the label (so a model can learn it), as PNG files."""
    rng = np.random.default_rng(seed)
    for split, count in (("train", train), ("val", val)):
        (Path(root) / split).mkdir(parents=True, exist_ok=True)
        for i in range(count):
            label = int(rng.integers(0, 4))
            image = rng.integers(0, 40, (size, size)).astype(np.uint8)
            y, x = divmod(label, 2)
            image[y * size // 2 : (y + 1) * size // 2, x * size // 2 : (x + 1) * size // 2] += 150
            Image.fromarray(image).save(Path(root) / split / f"{i:04d}_{label}.png")
    return Path(root)
