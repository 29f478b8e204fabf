"""Hypothesis strategies for paired image/mask batches.

Masks are a background plus a few rectangles and ellipses, drawn on a coarse
grid whose cells are at least ``MIN_CELL`` pixels: alignment is only
measurable where a region is wider than a resampling footprint, and per-pixel
noise would leave nothing to compare. Images are not drawn here; the checks
paint them from the masks (see ``checks.encode``), so every image decodes
back to its labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from hypothesis import strategies as st

from perfsuite.augment.labels import LabelSpace

MIN_SIDE, MAX_SIDE = 9, 48
MAX_BATCH = 4
MIN_CELL = 3
LABELS_PER_SAMPLE = 6
PALETTE_COLOURS = 26  # checks.PALETTE: labels per batch, ignore index included


@dataclass(frozen=True)
class MaskBatch:
    """A batch of label masks ``[B, H, W]`` (any integer dtype) and the label space they live in."""

    masks: np.ndarray
    num_classes: int
    ignore_index: int | None

    @cached_property
    def labels(self) -> tuple[frozenset[int], ...]:
        """The labels each sample's input mask holds."""
        return tuple(frozenset(np.unique(m).tolist()) for m in self.masks)

    def __repr__(self) -> str:  # what a falsifying example prints
        b, h, w = self.masks.shape
        sets = ", ".join(str(sorted(s)) for s in self.labels)
        return f"MaskBatch(B={b}, H={h}, W={w}, dtype={self.masks.dtype}, labels=[{sets}])"


def _cell_index(side: int) -> tuple[int, np.ndarray]:
    """Split ``side`` pixels into cells of >= MIN_CELL px; return (cells, pixel->cell)."""
    cells = max(1, side // MIN_CELL)
    bounds = np.linspace(0, side, cells + 1).round().astype(int)
    return cells, np.searchsorted(bounds, np.arange(side), side="right") - 1


@st.composite
def masks(
    draw,
    height: int,
    width: int,
    labels: list[int],
    extra: Sequence[int] = (),
    max_shapes: int = 4,
    dtype: str = "uint8",
    required: Sequence[int] = (),
):
    """One ``[H, W]`` mask of ``dtype``: background from ``labels``, shapes from ``labels + extra``.

    ``extra`` is where the ignore index goes: a region of it, never the background.
    ``required``: labels that get a shape of their own first (a flip pair, so both sides show).
    """
    gh, row = _cell_index(height)
    gw, col = _cell_index(width)
    coarse = np.full((gh, gw), draw(st.sampled_from(labels)), dtype=dtype)
    drawn = [*required, *(None for _ in range(draw(st.integers(0, max_shapes))))]
    for fixed in drawn:
        label = fixed if fixed is not None else draw(st.sampled_from(list(labels) + list(extra)))
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


REGION_MIN_SIDE = 32  # regions() needs room for a 2x2 grid of measurable blobs


@st.composite
def regions(draw, height: int, width: int, labels: list[int], dtype: str = "uint8"):
    """One ``[H, W]`` mask of compact blobs for the sub-pixel check: a background and one ellipse per cell.

    The frame less a 3-px margin is split into 2x2 (3x2 / 2x3 / 3x3 on larger sides) cells; each
    holds an ellipse of another label, at least 2 px from its cell's edges, with
    radii from a fifth to a third of the cell: regions large, compact and
    inside the frame, as :mod:`perfsuite.augment.alignment` needs to measure them
    (>= 48 px at sides >= 32; most of them far more after an upscale).
    """
    rows, cols = (3 if height >= 54 else 2), (3 if width >= 54 else 2)
    out = np.full((height, width), labels[0], dtype=dtype)
    others = list(labels[1:]) or list(labels)
    yy, xx = np.mgrid[0:height, 0:width]
    for k in range(rows * cols):
        r, c = divmod(k, cols)
        # cells tile the frame less a 3-px margin: a region near the frame is not measured
        y0, y1 = 3 + (height - 6) * r // rows, 3 + (height - 6) * (r + 1) // rows
        x0, x1 = 3 + (width - 6) * c // cols, 3 + (width - 6) * (c + 1) // cols
        ch, cw = y1 - y0, x1 - x0
        ry = draw(st.integers(max(3, ch // 5), max(3, ch // 3)))
        rx = draw(st.integers(max(3, cw // 5), max(3, cw // 3)))
        cy = draw(st.integers(y0 + 2 + ry, max(y0 + 2 + ry, y1 - 3 - ry)))
        cx = draw(st.integers(x0 + 2 + rx, max(x0 + 2 + rx, x1 - 3 - rx)))
        inside = ((yy - cy) / (ry + 0.5)) ** 2 + ((xx - cx) / (rx + 0.5)) ** 2 <= 1.0
        out[inside] = others[k % len(others)]
    return out


def class_labels(space: LabelSpace) -> st.SearchStrategy[int]:
    """Classes from the whole declared range: its ends and lossy-cast boundaries on purpose, any other at random.

    Shrinks towards 0; a 300-class space draws 257 and 299 (bfloat16 rounds
    both), a 70,000-class space 65,536 (uint16 wraps it).
    """
    return st.one_of(st.sampled_from(space.boundary_labels()), st.integers(0, space.num_classes - 1))


def sizes(
    output_size: tuple[int, int] | None = None,
    *,
    min_side: int = MIN_SIDE,
    max_side: int = MAX_SIDE,
    max_ratio: float = 1.5,
) -> st.SearchStrategy[tuple[int, int]]:
    """(H, W) of the input masks.

    Without ``output_size``: each side in ``min_side..max_side``. With it (a
    transform that crops or resizes to a fixed size): each side from the
    output side up to ``max_ratio`` times it, so a 512-px crop sees 512..768-px
    masks, never a 9-px mask upscaled 50 times, where every pixel is a
    resampling boundary.
    """
    if output_size is None:
        return st.tuples(st.integers(min_side, max_side), st.integers(min_side, max_side))
    oh, ow = (int(v) for v in output_size)
    return st.tuples(st.integers(oh, max(oh, int(oh * max_ratio))), st.integers(ow, max(ow, int(ow * max_ratio))))


@st.composite
def mask_batches(
    draw,
    num_classes: int = 19,
    ignore_index: int | None = 255,
    *,
    min_batch: int = 1,
    max_batch: int = MAX_BATCH,
    min_side: int = MIN_SIDE,
    max_side: int = MAX_SIDE,
    distinct_samples: bool = False,
    with_ignore: bool = True,
    mask_dtype: str | None = None,
    output_size: tuple[int, int] | None = None,
    labels_per_sample: int = LABELS_PER_SAMPLE,
    prefer_labels: tuple[int, ...] = (),
    space: LabelSpace | None = None,
    blobs: bool = False,
    pairs: tuple[tuple[int, int], ...] = (),
) -> MaskBatch:
    """Batches of structured masks: odd and non-square sizes, single-class masks included.

    Labels come from the whole declared range (:func:`class_labels`), at most
    ``labels_per_sample`` per sample; ``prefer_labels`` (e.g. the labels a
    flip swaps) are offered first. distinct_samples gives each sample labels
    no other sample uses, so a label tells which sample a pixel came from:
    the pairing properties rely on it. ``output_size``: see :func:`sizes`.
    ``blobs``: masks of compact regions (:func:`regions`), sides from
    ``REGION_MIN_SIDE``, for the sub-pixel check.
    ``pairs`` (the declared flip pairs, with ``distinct_samples``): each of the
    first ``len(pairs)`` samples may hold one whole pair, each member drawn as
    a shape of its own, so that a flip shows on both sides of a sample and
    the examples a small budget spends can find a missing swap.
    """
    if blobs:
        min_side, max_side = max(min_side, REGION_MIN_SIDE), max(max_side, REGION_MIN_SIDE)
    if space is None:
        space = LabelSpace.declare(num_classes, ignore_index, mask_dtype=mask_dtype)
    cap = min(max_batch, space.num_classes) if distinct_samples else max_batch
    b = draw(st.integers(min(min_batch, cap), cap))
    if output_size is None:  # two plain draws shrink independently towards min_side
        h, w = draw(st.integers(min_side, max_side)), draw(st.integers(min_side, max_side))
    else:
        h, w = draw(sizes(output_size, min_side=min_side, max_side=max_side))
    k = max(1, min(labels_per_sample, (PALETTE_COLOURS - 2) // b))
    values = class_labels(space)
    if prefer_labels:
        values = st.one_of(st.sampled_from(sorted(prefer_labels)), values)
    n_labels = min(space.num_classes, b * k)
    held: list[tuple[int, ...]] = [()] * b
    if distinct_samples and pairs and not blobs:
        held = [tuple(pairs[i]) if i < len(pairs) and draw(st.booleans()) else () for i in range(b)]
    taken = {v for pair in held for v in pair}
    if distinct_samples:
        least = min(n_labels, b * k) if blobs else b  # blobs: every cell its own label where the palette allows
        pool = draw(st.lists(values.filter(lambda v: v not in taken), min_size=least, max_size=n_labels, unique=True))
        per_sample = [[*held[i], *pool[i::b]] for i in range(b)]
    else:
        least = min(space.num_classes, k) if blobs else 1
        pool = draw(st.lists(values, min_size=least, max_size=min(space.num_classes, k), unique=True))
        per_sample = [pool] * b
    extra = [space.ignore_index] if with_ignore and space.ignore_index is not None else []
    if blobs:
        out = [draw(regions(h, w, labels, dtype=space.mask_dtype)) for labels in per_sample]
    else:
        out = [
            draw(masks(h, w, labels, extra, dtype=space.mask_dtype, required=held[i]))
            for i, labels in enumerate(per_sample)
        ]
    return MaskBatch(np.stack(out), space.num_classes, space.ignore_index)


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
