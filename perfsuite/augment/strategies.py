"""Hypothesis strategies for paired image/mask batches.

Masks are a background plus a few rectangles and ellipses, drawn on a coarse
grid whose cells are at least ``MIN_CELL`` pixels: alignment is only
measurable where a region is wider than a resampling footprint, and per-pixel
noise would leave nothing to compare. Images are not drawn here; the checks
paint them from the masks (see ``checks.encode``), so every image decodes
back to its labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from hypothesis import strategies as st

MIN_SIDE, MAX_SIDE = 9, 48
MAX_BATCH = 4
MIN_CELL = 3


@dataclass(frozen=True)
class MaskBatch:
    """A batch of label masks ``[B, H, W]`` uint8 and the label space they live in."""

    masks: np.ndarray
    num_classes: int
    ignore_index: int

    @cached_property
    def labels(self) -> tuple[frozenset[int], ...]:
        """The labels each sample's input mask holds."""
        return tuple(frozenset(np.unique(m).tolist()) for m in self.masks)

    def __repr__(self) -> str:  # what a falsifying example prints
        b, h, w = self.masks.shape
        sets = ", ".join(str(sorted(s)) for s in self.labels)
        return f"MaskBatch(B={b}, H={h}, W={w}, labels=[{sets}])"


def _cell_index(side: int) -> tuple[int, np.ndarray]:
    """Split ``side`` pixels into cells of >= MIN_CELL px; return (cells, pixel->cell)."""
    cells = max(1, side // MIN_CELL)
    bounds = np.linspace(0, side, cells + 1).round().astype(int)
    return cells, np.searchsorted(bounds, np.arange(side), side="right") - 1


@st.composite
def masks(draw, height: int, width: int, labels: list[int], extra: list[int] = (), max_shapes: int = 4):
    """One ``[H, W]`` uint8 mask: background from ``labels``, shapes from ``labels + extra``.

    ``extra`` is where the ignore index goes: a region of it, never the background.
    """
    gh, row = _cell_index(height)
    gw, col = _cell_index(width)
    coarse = np.full((gh, gw), draw(st.sampled_from(labels)), dtype=np.uint8)
    for _ in range(draw(st.integers(0, max_shapes))):
        label = draw(st.sampled_from(list(labels) + list(extra)))
        y0, x0 = draw(st.integers(0, gh - 1)), draw(st.integers(0, gw - 1))
        y1, x1 = draw(st.integers(y0, gh - 1)), draw(st.integers(x0, gw - 1))
        if draw(st.booleans()):  # ellipse inscribed in the box
            yy, xx = np.mgrid[y0 : y1 + 1, x0 : x1 + 1]
            cy, cx, ry, rx = (y0 + y1) / 2, (x0 + x1) / 2, (y1 - y0) / 2 + 0.5, (x1 - x0) / 2 + 0.5
            inside = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1.0
            coarse[y0 : y1 + 1, x0 : x1 + 1][inside] = label
        else:
            coarse[y0 : y1 + 1, x0 : x1 + 1] = label
    return coarse[row][:, col]


@st.composite
def mask_batches(
    draw,
    num_classes: int = 19,
    ignore_index: int = 255,
    *,
    min_batch: int = 1,
    max_batch: int = MAX_BATCH,
    min_side: int = MIN_SIDE,
    max_side: int = MAX_SIDE,
    distinct_samples: bool = False,
    with_ignore: bool = True,
) -> MaskBatch:
    """Batches of structured masks: odd and non-square sizes, single-class masks included.

    distinct_samples gives each sample labels no other sample uses (sample i
    draws from ``{i, i+B, i+2B, ...}``), so a label tells which sample a pixel
    came from: the pairing properties rely on it.
    """
    if not 2 <= num_classes <= ignore_index <= 255:
        raise ValueError(
            f"mask_batches needs 2 <= num_classes <= ignore_index <= 255 (uint8 masks), "
            f"got num_classes={num_classes}, ignore_index={ignore_index}"
        )
    b = draw(st.integers(min_batch, max_batch))
    h = draw(st.integers(min_side, max_side))
    w = draw(st.integers(min_side, max_side))
    out = []
    for i in range(b):
        labels = list(range(i, num_classes, b)) if distinct_samples else list(range(num_classes))
        labels = labels[:6]  # a handful per sample keeps palettes well separated
        extra = [ignore_index] if with_ignore else []
        out.append(draw(masks(h, w, labels, extra)))
    return MaskBatch(np.stack(out), num_classes, ignore_index)


def seeds() -> st.SearchStrategy[int]:
    """RNG seeds for the augmentation under test; shrink towards 0."""
    return st.integers(0, 2**16 - 1)


def devices() -> st.SearchStrategy[str]:
    """``cpu``, plus ``cuda`` where a GPU is present."""
    import torch

    return st.sampled_from(["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])


def image_dtypes() -> st.SearchStrategy[str]:
    """The image dtypes the adapters can hand a callable: ``uint8`` (0..255) or ``float32`` (0..1)."""
    return st.sampled_from(["uint8", "float32"])
