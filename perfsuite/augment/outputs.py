"""What every adapter returns, and how it seeds a call: shared by the adapters and the checks.

A module of its own so that :mod:`perfsuite.augment.adapters` (which builds
:class:`Output`) and :mod:`perfsuite.augment.checks` (which reads it) need not
import each other.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfsuite.errors import PropertyViolation


@dataclass(frozen=True)
class Output:
    images: Any  # [B, H, W, 3] float 0..255; a list of [H_i, W_i, 3] when sizes vary per sample
    masks: Any  # [B, H, W] int64; a list of [H_i, W_i] when sizes vary per sample
    dtype_in: str
    dtype_out: str

    @property
    def ragged(self) -> bool:
        """Each sample came out at its own size (random crops): the properties run per sample."""
        return isinstance(self.masks, list)


def stack_outputs(images: list, masks: list, dtype_in: str, per_sample_sizes: bool = False) -> Output:
    """Per-sample outputs (image 0..255 or 0..1, mask) as one :class:`Output`; ragged if sizes differ and allowed."""
    imgs = [np.asarray(i, np.float64) * (1.0 if np.asarray(i).dtype == np.uint8 else 255.0) for i in images]
    ms = [np.asarray(m) for m in masks]
    dtypes = {str(m.dtype) for m in ms}
    shapes = {m.shape for m in ms} | {i.shape[:2] for i in imgs}
    dtype_out = "/".join(sorted(dtypes))
    if len(shapes) != 1:
        if per_sample_sizes:
            return Output(imgs, [m.astype(np.int64) for m in ms], dtype_in, dtype_out)
        raise PropertyViolation(
            "mask format",
            f"per-sample outputs have different sizes {sorted(shapes)}; if the "
            "callable crops or scales each sample to its own size, pass per_sample_sizes=True "
            "(each sample is then checked on its own)",
        )
    return Output(np.stack(imgs), np.stack(ms).astype(np.int64), dtype_in, dtype_out)


@contextlib.contextmanager
def seeded(seed: int, device: str = "cpu") -> Iterator[None]:
    """Seed torch, NumPy's and Python's global generators for one call, restoring them after."""
    import torch

    np_state, py_state = np.random.get_state(), random.getstate()
    devices = [torch.device(device).index or 0] if str(device).startswith("cuda") else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        np.random.seed(seed)
        random.seed(seed)
        try:
            yield
        finally:
            np.random.set_state(np_state)
            random.setstate(py_state)
