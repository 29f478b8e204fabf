"""A face-parsing repository in miniature, written the way zllrunning/face-parsing.PyTorch is (for perfsuite check
and perfsuite exec end to end): ``transform.py`` holds dict-taking transforms (``dict(im=, lb=)`` in and out) and a
``Compose``; ``face_dataset.py`` holds ``FaceMask``, which keeps its transform in ``self.trans_train`` (or calls a
module-level function, ``placement="function"``); ``train.py`` trains a tiny net on it. The flip builds the swapped
label map and returns the unswapped one, as upstream does, unless ``swap=True``. Written for these tests; no code is
copied. CelebAMask-HQ's pairs: brows 2/3, eyes 4/5, ears 7/8 of 19 classes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

PAIRS_FLAG = "2:3,4:5,7:8"
MARK = "# mirror"

TRANSFORM = """
import random

import numpy as np
from PIL import Image, ImageEnhance


class HorizontalFlip(object):
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, im_lb):
        if random.random() > self.p:
            return im_lb
        im = im_lb["im"]
        lb = im_lb["lb"]
        flip_lb = np.array(lb)
        for a, b in ((2, 3), (4, 5), (7, 8)):
            flip_lb[np.array(lb) == a] = b
            flip_lb[np.array(lb) == b] = a
        flip_lb = Image.fromarray(flip_lb)
        return dict(im=im.transpose(Image.FLIP_LEFT_RIGHT), lb=RETURNED.transpose(Image.FLIP_LEFT_RIGHT))  # mirror


class ColorJitter(object):
    def __init__(self, brightness=0.5):
        self.brightness = [max(1 - brightness, 0), 1 + brightness]

    def __call__(self, im_lb):
        im = ImageEnhance.Brightness(im_lb["im"]).enhance(random.uniform(*self.brightness))
        return dict(im=im, lb=im_lb["lb"])


class Compose(object):
    def __init__(self, do_list):
        self.do_list = do_list

    def __call__(self, im_lb):
        for comp in self.do_list:
            im_lb = comp(im_lb)
        return im_lb
"""

DATASET = """
import os

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

from transform import ColorJitter, Compose, HorizontalFlip


def train_augment(im, lb):
    return Compose([ColorJitter(0.5), HorizontalFlip()])(dict(im=im, lb=lb))


class FaceMask(Dataset):
    def __init__(self, rootpth, mode="train"):
        self.rootpth = rootpth
        self.mode = mode
        self.imgs = sorted(os.listdir(os.path.join(rootpth, "images")))
        self.trans_train = Compose([ColorJitter(0.5), HorizontalFlip()])

    def __getitem__(self, idx):
        impth = self.imgs[idx]
        img = Image.open(os.path.join(self.rootpth, "images", impth)).convert("RGB")
        label = Image.open(os.path.join(self.rootpth, "masks", impth)).convert("P")
        if self.mode == "train":
            im_lb = dict(im=img, lb=label)
            im_lb = CALL
            img, label = im_lb["im"], im_lb["lb"]
        img = torch.from_numpy(np.array(img, np.float32) / 255.0).permute(2, 0, 1)
        label = np.array(label).astype(np.int64)[np.newaxis, :]
        return img, label

    def __len__(self):
        return len(self.imgs)
"""

TRAIN = """
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader

from face_dataset import FaceMask

parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)
parser.add_argument("--epochs", type=int, default=50)
args = parser.parse_args()

ds = FaceMask(args.data, mode="train")
dl = DataLoader(ds, batch_size=2, shuffle=True, num_workers=0, drop_last=True)
net = nn.Conv2d(3, 19, 3, padding=1)
criterion = nn.CrossEntropyLoss(ignore_index=255)
optim = torch.optim.SGD(net.parameters(), lr=0.01)
for epoch in range(args.epochs):
    for im, lb in dl:
        loss = criterion(net(im), lb.squeeze(1))
        optim.zero_grad()
        loss.backward()
        optim.step()
"""


def face(i: int, size: int = 40) -> np.ndarray:
    """A face mask, not mirror-symmetric: skin 1, brows 2/3, eyes 4/5, ears 7/8, nose 10, mouth 11, hair 17."""
    yy, xx = np.mgrid[:size, :size]
    cy, cx = size / 2 + (i % 3) - 1, size / 2 + (i % 2)
    m = np.zeros((size, size), np.uint8)
    m[(yy - cy) ** 2 + (xx - cx) ** 2 < 14**2] = 1
    for label, dy, dx, hy, hx in ((2, -8, -7, 2, 4), (3, -8, 7, 2, 4), (4, -3, -7, 2, 3), (5, -3, 7, 2, 3)):
        m[(abs(yy - cy - dy) < hy) & (abs(xx - cx - dx) < hx)] = label
    m[(abs(yy - cy) < 4) & (abs(xx - cx + 16) < 3)] = 7
    m[(abs(yy - cy) < 4) & (abs(xx - cx - 16) < 3)] = 8
    m[(abs(yy - cy - 2) < 3) & (abs(xx - cx) < 2)] = 10
    m[(abs(yy - cy - 8) < 2) & (abs(xx - cx) < 5)] = 11
    m[(yy < cy - 11) & (xx < cx + 4)] = 17
    return m


def write_data(folder: Path, count: int = 6) -> Path:
    """``count`` faces as PNG files: images/N.png (RGB) and masks/N.png (L), as the repository reads them."""
    rng = np.random.default_rng(0)
    colours = rng.integers(0, 256, (19, 3), dtype=np.uint8)
    for sub in ("images", "masks"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    for i in range(count):
        mask = face(i)
        Image.fromarray(colours[mask], "RGB").save(folder / "images" / f"{i}.png")
        Image.fromarray(mask, "L").save(folder / "masks" / f"{i}.png")
    return folder


def write_repo(folder: Path, *, swap: bool, placement: str = "attribute") -> Path:
    """The repository's three files in ``folder``; returns train.py. ``placement``: ``attribute``
    (``self.trans_train(im_lb)``) or ``function`` (``train_augment(img, label)``, module-level)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "transform.py").write_text(TRANSFORM.replace("RETURNED", "flip_lb" if swap else "lb"))
    call = "self.trans_train(im_lb)" if placement == "attribute" else "train_augment(img, label)"
    (folder / "face_dataset.py").write_text(DATASET.replace("CALL", call))
    (folder / "train.py").write_text(TRAIN)
    return folder / "train.py"


def flip_line(folder: Path) -> int:
    """The line of transform.py that mirrors the label map (where perfsuite check must put the blame)."""
    lines = (folder / "transform.py").read_text().splitlines()
    return next(k + 1 for k, text in enumerate(lines) if MARK in text)
