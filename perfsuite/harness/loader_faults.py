"""Loader bugs as code changes to a built pipeline: what the loader ledger must catch on any machine.

Each function mutates a reference :class:`~perfsuite.harness.pipeline.Pipeline`
in place before it runs (``Fault(mutation=...)`` in :mod:`perfsuite.harness.faults`):
its DataLoader's ``collate_fn``, or how its Dataset decodes. Workers are forked
after the mutation, so they run the changed code. The callables are module-level
classes, so they pickle where workers are spawned rather than forked.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfsuite.harness.pipeline import Pipeline

HEAVY_COLLATE_MS = 5.0


class HeavyCollate:
    """collate_fn = default_collate after 5 ms of CPU work per sample (padding, dict building in Python)"""

    def __init__(self, ms_per_sample: float = HEAVY_COLLATE_MS) -> None:
        self.ms_per_sample = ms_per_sample

    def __call__(self, samples: Any) -> Any:
        from torch.utils.data import default_collate

        end = time.thread_time() + self.ms_per_sample * len(samples) / 1e3
        while time.thread_time() < end:  # CPU time, whatever the machine's load: the cost a user's collate adds
            pass
        return default_collate(samples)


class ListCollate:
    """collate_fn = torch.tensor(nested Python lists) instead of stacking the arrays"""

    def __call__(self, samples: Any) -> Any:
        import torch

        images = torch.tensor([image.tolist() for image, _ in samples], dtype=torch.uint8)
        targets = torch.stack([target for _, target in samples])
        return images, targets


def heavy_collate(pipeline: Pipeline) -> None:
    """collate_fn doing 5 ms of CPU work per sample"""
    pipeline.loader.collate_fn = HeavyCollate()


def list_collate(pipeline: Pipeline) -> None:
    """collate_fn = torch.tensor(nested Python lists) instead of stacking arrays"""
    pipeline.loader.collate_fn = ListCollate()


class LargerDecode:
    """Dataset.load decodes an image with 4x the pixels, then resizes it to the size the model takes."""

    def __init__(self, dataset: Any, big_root: Path) -> None:
        self.dataset, self.big_root = dataset, big_root

    def __call__(self, index: int) -> tuple[Any, Any]:
        import numpy as np
        from PIL import Image

        ds = self.dataset
        mode = "RGB" if ds.workload.channels == 3 else "L"
        with Image.open(self.big_root / f"{index:06d}.{ds.ext}") as img:
            big = img.convert(mode)
            small = big.resize((big.width // 2, big.height // 2), Image.Resampling.BILINEAR)
        kind = ds.workload.target_kind
        target: Any = None
        if kind == "mask":
            with Image.open(ds.root / "masks" / f"{index:06d}.png") as m:
                target = np.array(m)
        elif kind == "keypoints":
            target = np.asarray(ds._targets()[index], dtype=np.float32)
        elif kind == "label":
            target = int(ds._targets()[index])
        return np.array(small), target


def _big_images(root: Path, ext: str) -> Path:
    """A copy of the dataset's images at twice the width and height (4x the pixels), written once, atomically."""
    from PIL import Image

    from perfsuite.core import tmpfiles

    target = root.parent / f"{root.name}-images-x4"
    if target.is_dir():
        return target
    tmp = tmpfiles.make_temp_dir(root.parent, target.name)
    for path in sorted((root / "images").glob(f"*.{ext}")):
        with Image.open(path) as img:
            img.resize((img.width * 2, img.height * 2), Image.Resampling.BICUBIC).save(tmp / path.name)
    try:
        tmp.rename(target)
    except OSError:  # another process put it in place first
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return target


def decode_4x(pipeline: Pipeline) -> None:
    """Dataset decodes images with 4x the pixels, then resizes them"""
    dataset = pipeline.loader.dataset
    dataset.load = LargerDecode(dataset, _big_images(dataset.root, dataset.ext))
