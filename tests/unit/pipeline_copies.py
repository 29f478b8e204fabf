"""Copies of examples/own_pipeline whose training transform carries one planted fault (for perfsuite check).

Each fault is appended to the copy's transforms.py and redefines ``train_transforms``; the script, the Dataset
and the data are the example's own.
"""

from __future__ import annotations

import shutil
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_pipeline"

_SWAPPING_FLIP = '''

class SwappingFlip(RandomHorizontalFlip):
    """The correct flip for paired labels: mirror both, then swap left/right eye (3 <-> 4) in the mask."""

    def __call__(self, sample):
        if random.random() < self.p:
            mask = np.array(sample["mask"].transpose(Image.FLIP_LEFT_RIGHT))
            swapped = mask.copy()
            swapped[mask == 3], swapped[mask == 4] = 4, 3
            return {"image": sample["image"].transpose(Image.FLIP_LEFT_RIGHT), "mask": Image.fromarray(swapped, "L")}
        return sample


def train_transforms(size, ignore_index=255):
    return Compose([Resize(size), RandomScaleCrop(size, ignore_index=ignore_index), SwappingFlip(), ColorJitter(),
                    ToTensor()])
'''

_ERASE_TO_CLASS = '''

class RandomErase:
    """Erases a box of the image with noise, and writes class 0 (background, a real class) into the mask."""

    def __call__(self, sample):
        if random.random() < 0.5:
            image, mask = np.array(sample["image"]), np.array(sample["mask"])
            h, w = mask.shape
            y, x = random.randint(0, h // 2), random.randint(0, w // 2)
            box = (slice(y, y + h // 3), slice(x, x + w // 3))
            image[box] = np.random.randint(0, 256, image[box].shape)
            mask[box] = 0
            return {"image": Image.fromarray(image), "mask": Image.fromarray(mask, "L")}
        return sample


def train_transforms(size, ignore_index=255):
    return Compose([Resize(size), RandomScaleCrop(size, ignore_index=ignore_index), RandomHorizontalFlip(),
                    RandomErase(), ColorJitter(), ToTensor()])
'''

_TORCH_RESIZE = '''

class TorchResize:
    """Resizes on tensors: the image bilinear with align_corners=IMAGE_CORNERS, the mask by a nearest lookup on
    the align_corners=False grid (with IMAGE_CORNERS True: half an input pixel apart at the borders)."""

    def __init__(self, size):
        self.size = size

    def __call__(self, sample):
        import torch.nn.functional as F

        image = torch.from_numpy(np.asarray(sample["image"], dtype=np.float32)).permute(2, 0, 1)[None]
        mask = torch.from_numpy(np.asarray(sample["mask"], dtype=np.float32))[None, None]
        image = F.interpolate(image, size=(self.size, self.size), mode="bilinear", align_corners=IMAGE_CORNERS)
        theta = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
        grid = F.affine_grid(theta, [1, 1, self.size, self.size], align_corners=False)
        mask = F.grid_sample(mask, grid, mode="nearest", align_corners=False)
        image = image[0].permute(1, 2, 0).round().clamp(0, 255).to(torch.uint8).numpy()
        return {"image": Image.fromarray(image), "mask": Image.fromarray(mask[0, 0].to(torch.uint8).numpy(), "L")}


def train_transforms(size, ignore_index=255):
    return Compose([TorchResize(size), RandomHorizontalFlip(), ColorJitter(), ToTensor()])
'''

FAULTS = {
    "swapping_flip": _SWAPPING_FLIP,  # the control for flip pairs: correct
    "erase_to_class": _ERASE_TO_CLASS,
    "torch_resize": _TORCH_RESIZE.replace("IMAGE_CORNERS", "False"),  # the control for resizing: correct
    "align_corners": _TORCH_RESIZE.replace("IMAGE_CORNERS", "True"),
}


# Appended to facedata.py, not transforms.py: the Dataset hands its transform a third image.
THREE_IMAGES = '''

class FaceParsingDataset(FaceParsingDataset):
    """Hands its transform {"image", "mask", "edges"}: two RGB images, which perfsuite does not guess between."""

    def __getitem__(self, index):
        path = self.images[index]
        image = Image.open(path).convert("RGB")
        sample = {"image": image, "edges": image.copy(), "mask": Image.open(self.root / "masks" / f"{path.stem}.png")}
        return self.transform(sample)
'''


def copy_example(
    dest: Path, fault: str | None = None, pyproject: str | None = None, image_size: int | None = None
) -> Path:
    """The example copied into ``dest`` (train.py and its modules), with ``fault``'s transform if named, and
    ``image_size`` as train.py's IMAGE_SIZE if given."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("train.py", "facedata.py", "model.py", "transforms.py", "make_data.py"):
        shutil.copy(EXAMPLE / name, dest / name)
    if fault == "three_images":
        with open(dest / "facedata.py", "a", encoding="utf-8") as f:
            f.write(THREE_IMAGES)
    elif fault is not None:
        with open(dest / "transforms.py", "a", encoding="utf-8") as f:
            f.write(FAULTS[fault])
    if image_size is not None:
        train = (dest / "train.py").read_text(encoding="utf-8")
        assert "IMAGE_SIZE = 64" in train
        (dest / "train.py").write_text(train.replace("IMAGE_SIZE = 64", f"IMAGE_SIZE = {image_size}"), encoding="utf-8")
    if pyproject is not None:
        (dest / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    return dest / "train.py"
