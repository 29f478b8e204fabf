"""Loader bugs as code changes to a built pipeline: what the loader ledger must catch on any machine.

Each function mutates a reference :class:`~perfsuite.harness.pipeline.Pipeline`
in place before it runs (``Fault(mutation=...)`` in :mod:`perfsuite.harness.faults.catalog`):
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


# --------------------------------------------------------------------------- faults the exact counters catch
# Each changes the *work* of one stage; perfsuite.probes.loadercount counts it exactly and names the stage and
# the callable (tests/unit/test_loader_faults_exact.py). Module-level classes: they pickle for spawned workers.


class _Load:
    """The Dataset's own ``load`` with one change; subclasses override :meth:`image` or :meth:`mask`."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def image(self, path: Path, mode: str) -> Any:
        import numpy as np
        from PIL import Image

        with Image.open(path) as img:
            return np.array(img.convert(mode))

    def mask(self, path: Path) -> Any:
        import numpy as np
        from PIL import Image

        with Image.open(path) as m:
            m.load()
            return np.array(m)

    def __call__(self, index: int) -> tuple[Any, Any]:
        import numpy as np

        ds = self.dataset
        name = f"{index:06d}"
        image = self.image(ds.root / "images" / f"{name}.{ds.ext}", "RGB" if ds.workload.channels == 3 else "L")
        kind = ds.workload.target_kind
        target: Any = None
        if kind == "mask":
            target = self.mask(ds.root / "masks" / f"{name}.png")
        elif kind == "keypoints":
            target = np.asarray(ds._targets()[index], dtype=np.float32)
        elif kind == "label":
            target = int(ds._targets()[index])
        return image, target


class ExtraResizeLoad(_Load):
    """Resizes every image to the size it already has: one more PIL resize per sample."""

    def image(self, path: Path, mode: str) -> Any:
        import numpy as np
        from PIL import Image

        with Image.open(path) as img:
            rgb = img.convert(mode)
            return np.array(rgb.resize(rgb.size, Image.Resampling.BILINEAR))


class ExtraConvertLoad(_Load):
    """Converts every image to RGB and back to its mode: two more colour conversions per sample."""

    def image(self, path: Path, mode: str) -> Any:
        import numpy as np
        from PIL import Image

        with Image.open(path) as img:
            return np.array(img.convert("RGB").convert(mode) if mode != "RGB" else img.convert("L").convert(mode))


class MaskAsRGBLoad(_Load):
    """Decodes the mask as an RGB image and keeps its first channel (what the labels were, three times the work)."""

    def mask(self, path: Path) -> Any:
        import numpy as np
        from PIL import Image

        with Image.open(path) as m:
            return np.ascontiguousarray(np.array(m.convert("RGB"))[..., 0])


class Float64Load(_Load):
    """Ships images as float64 instead of uint8: 8x the bytes leaving __getitem__."""

    def image(self, path: Path, mode: str) -> Any:
        return super().image(path, mode).astype("float64")


class DoubleReadLoad(_Load):
    """Reads every image file whole (a checksum, say) before PIL opens and reads it again: twice the bytes."""

    def image(self, path: Path, mode: str) -> Any:
        import hashlib

        hashlib.md5(path.read_bytes(), usedforsecurity=False).hexdigest()
        return super().image(path, mode)


class Twice:
    """A per-sample transform applied twice (composed with itself by mistake)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __call__(self, image: Any, target: Any) -> Any:
        image, augmented = self.fn(image, target)
        return self.fn(image, augmented if target is not None else None)


class SleepyCollate:
    """collate_fn = default_collate after a 5 ms sleep per sample (a slow network read): no CPU, all waiting."""

    def __init__(self, ms_per_sample: float = HEAVY_COLLATE_MS) -> None:
        self.ms_per_sample = ms_per_sample

    def __call__(self, samples: Any) -> Any:
        from torch.utils.data import default_collate

        for _ in samples:
            time.sleep(self.ms_per_sample / 1e3)
        return default_collate(samples)


def extra_resize(pipeline: Pipeline) -> None:
    """Dataset resizes every image once more, to the size it has"""
    pipeline.loader.dataset.load = ExtraResizeLoad(pipeline.loader.dataset)


def extra_convert(pipeline: Pipeline) -> None:
    """Dataset converts every image to another colour mode and back"""
    pipeline.loader.dataset.load = ExtraConvertLoad(pipeline.loader.dataset)


def mask_as_rgb(pipeline: Pipeline) -> None:
    """Dataset decodes the mask as RGB and keeps one channel"""
    pipeline.loader.dataset.load = MaskAsRGBLoad(pipeline.loader.dataset)


def float64_samples(pipeline: Pipeline) -> None:
    """Dataset ships float64 images instead of uint8"""
    pipeline.loader.dataset.load = Float64Load(pipeline.loader.dataset)


def double_read(pipeline: Pipeline) -> None:
    """Dataset reads every image file twice"""
    pipeline.loader.dataset.load = DoubleReadLoad(pipeline.loader.dataset)


def transform_twice(pipeline: Pipeline) -> None:
    """Dataset applies its per-sample transform twice (needs aug='cpu')"""
    dataset = pipeline.loader.dataset
    if dataset.augment is None:
        raise ValueError("transform_twice needs a Dataset with a per-sample transform: run it with aug='cpu'")
    dataset.augment = Twice(dataset.augment)


def sleepy_collate(pipeline: Pipeline) -> None:
    """collate_fn sleeping 5 ms per sample"""
    pipeline.loader.collate_fn = SleepyCollate()


# name -> (mutation, the stage the counters must name, a callable they must name or None, the counter that moves)
EXACT_FAULTS: dict[str, tuple[Any, str, str | None, str]] = {
    "decode_4x": (decode_4x, "__getitem__", "PIL.Image.Image.resize", "loader_decoded_pixels_per_sample"),
    "extra_resize": (extra_resize, "__getitem__", "PIL.Image.Image.resize", "loader_calls_per_sample"),
    "transform_twice": (transform_twice, "transform", None, "loader_calls_per_sample"),
    "mask_as_rgb": (mask_as_rgb, "__getitem__", "builtins.ImagingCore.convert", "loader_calls_per_sample"),
    "heavy_collate": (heavy_collate, "collate_fn", "time.thread_time", "loader_calls_per_sample"),
    "float64_samples": (float64_samples, "__getitem__", None, "loader_output_bytes_per_sample"),
    # three more: a blocking collate, an extra colour conversion, a file read twice
    "sleepy_collate": (sleepy_collate, "collate_fn", "time.sleep", "loader_blocking_calls_per_sample"),
    "extra_convert": (extra_convert, "__getitem__", "builtins.ImagingCore.convert", "loader_calls_per_sample"),
    "double_read": (double_read, "__getitem__", None, "loader_read_bytes_per_sample"),
}
