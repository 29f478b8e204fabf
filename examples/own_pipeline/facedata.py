"""Face-parsing data: a folder of JPEG photos and PNG label masks with the same stems.

root/images/0001.jpg   root/masks/0001.png   (mask pixel = class id, 255 = ignore)
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image
from torch.utils.data import Dataset


class FaceParsingDataset(Dataset):
    """Reads the files where they are; ``transform`` takes and returns a dict {"image", "mask"}."""

    def __init__(self, root, transform=None):
        self.root = Path(root)
        self.images = sorted((self.root / "images").glob("*.jpg"))
        self.transform = transform
        if not self.images:
            raise FileNotFoundError(f"no images/*.jpg under {self.root}")

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        path = self.images[index]
        sample = {
            "image": Image.open(path).convert("RGB"),
            "mask": Image.open(self.root / "masks" / f"{path.stem}.png"),
        }
        if self.transform is not None:
            sample = self.transform(sample)
        return sample
