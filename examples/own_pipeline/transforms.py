"""Training transforms: dict in, dict out, on PIL images (in the DataLoader workers),
plus a batched GPU version of the random part for when the CPU is the bottleneck."""

from __future__ import annotations

import random

import numpy as np
import torch
from PIL import Image, ImageEnhance
from torch import nn

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, sample):
        for t in self.transforms:
            sample = t(sample)
        return sample


class Resize:
    def __init__(self, size):
        self.size = size

    def __call__(self, sample):
        return {
            "image": sample["image"].resize((self.size, self.size), Image.BILINEAR),
            "mask": sample["mask"].resize((self.size, self.size), Image.NEAREST),
        }


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, sample):
        if random.random() < self.p:
            return {k: v.transpose(Image.FLIP_LEFT_RIGHT) for k, v in sample.items()}
        return sample


class RandomScaleCrop:
    """Scale by a random factor, then crop (or pad with the ignore label) back to ``size``."""

    def __init__(self, size, scales=(0.75, 1.25), ignore_index=255):
        self.size, self.scales, self.ignore_index = size, scales, ignore_index

    def __call__(self, sample):
        image, mask = sample["image"], sample["mask"]
        s = random.uniform(*self.scales)
        w, h = int(image.width * s), int(image.height * s)
        image, mask = image.resize((w, h), Image.BILINEAR), mask.resize((w, h), Image.NEAREST)
        canvas_i = Image.new("RGB", (max(w, self.size), max(h, self.size)))
        canvas_m = Image.new("L", canvas_i.size, self.ignore_index)
        canvas_i.paste(image)
        canvas_m.paste(mask)
        x = random.randint(0, canvas_i.width - self.size)
        y = random.randint(0, canvas_i.height - self.size)
        box = (x, y, x + self.size, y + self.size)
        return {"image": canvas_i.crop(box), "mask": canvas_m.crop(box)}


class ColorJitter:
    def __init__(self, brightness=0.3, contrast=0.3):
        self.brightness, self.contrast = brightness, contrast

    def __call__(self, sample):
        image = ImageEnhance.Brightness(sample["image"]).enhance(
            random.uniform(1 - self.brightness, 1 + self.brightness)
        )
        image = ImageEnhance.Contrast(image).enhance(random.uniform(1 - self.contrast, 1 + self.contrast))
        return {"image": image, "mask": sample["mask"]}


class ToTensor:
    """uint8 PIL -> normalised float CHW image and int64 HW mask."""

    def __call__(self, sample):
        image = torch.from_numpy(np.asarray(sample["image"], dtype=np.float32) / 255.0).permute(2, 0, 1)
        image = (image - torch.tensor(MEAN).view(3, 1, 1)) / torch.tensor(STD).view(3, 1, 1)
        return {"image": image, "mask": torch.from_numpy(np.array(sample["mask"], dtype=np.int64))}


def train_transforms(size, ignore_index=255):
    return Compose(
        [
            Resize(size),
            RandomScaleCrop(size, ignore_index=ignore_index),
            RandomHorizontalFlip(),
            ColorJitter(),
            ToTensor(),
        ]
    )


def eval_transforms(size):
    return Compose([Resize(size), ToTensor()])


class BatchFlipJitter(nn.Module):
    """The random part of train_transforms on a whole batch on the GPU: flip and brightness jitter.

    ``forward(images, masks) -> (images, masks)``; no value is read back to the host.
    """

    def __init__(self, p=0.5, brightness=0.3):
        super().__init__()
        self.p, self.brightness = p, brightness

    def forward(self, images, masks):
        n = images.shape[0]
        flip = torch.rand(n, device=images.device) < self.p
        images = torch.where(flip.view(n, 1, 1, 1), images.flip(-1), images)
        masks = torch.where(flip.view(n, *([1] * (masks.dim() - 1))), masks.flip(-1), masks)
        scale = 1 + (torch.rand(n, 1, 1, 1, device=images.device) * 2 - 1) * self.brightness
        return images * scale, masks
