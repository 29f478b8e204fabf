"""Images painted from masks, and read back: what makes alignment testable on any paired transform.

Each label of a batch gets one colour of :data:`PALETTE` (:func:`palette_for`);
:func:`encode` paints images from masks with them, and :func:`decode` reads a
transformed image back to the label each pixel shows. Black is left out of the
palette: it is what geometry brings in from outside the frame (:data:`OUTSIDE`).
"""

from __future__ import annotations

import numpy as np

from perfsuite.errors import AugmentationError

OUTSIDE = -(2**62)  # decoded label of the image fill colour (black); no mask dtype perfsuite draws holds it
STRICT_TOL = 13.0  # 0.05 of the 0..255 range: uint8 rounding passes, a 20% MixUp blend does not
EXACT_TOL = 1.0  # an exact copy of a painted image: every pixel within uint8 rounding of a palette colour or black
LOOSE_TOL = 51.0  # 0.2 of the range: ~6 sigma of recipe noise, far below palette spacing (>= 127)

# Palette: the 3-level RGB grid without black (black is the image fill), corners first.
_LEVELS = (0, 128, 255)
_GRID = [(r, g, b) for r in _LEVELS for g in _LEVELS for b in _LEVELS if (r, g, b) != (0, 0, 0)]
PALETTE = np.array(sorted(_GRID, key=lambda c: (sum(v == 128 for v in c), c)), dtype=np.float64)


# -- painting and decoding ------------------------------------------------------------------


def palette_for(masks: np.ndarray) -> dict[int, np.ndarray]:
    """One colour per label present in ``masks``, shared by the whole batch."""
    labels = np.unique(masks).tolist()
    if len(labels) > len(PALETTE):
        raise AugmentationError(
            f"{len(labels)} labels in one batch but the palette has {len(PALETTE)} colours; "
            f"draw batches with at most {len(PALETTE)} distinct labels"
        )
    return {label: PALETTE[i] for i, label in enumerate(labels)}


def encode(masks: np.ndarray, palette: dict[int, np.ndarray]) -> np.ndarray:
    """Images ``[B, H, W, 3]`` uint8 whose colours are the masks' labels (any integer labels, -100 or 70,000 too)."""
    keys = np.array(sorted(palette), dtype=np.int64)
    colours = np.stack([palette[k] for k in keys.tolist()]).astype(np.uint8)
    idx = np.searchsorted(keys, masks.astype(np.int64)).clip(0, len(keys) - 1)
    if (keys[idx] != masks).any():
        raise AugmentationError(
            "encode: the masks hold labels the palette has no colour for; build it with palette_for"
        )
    return colours[idx]


def decode(images: np.ndarray, palette: dict[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(nearest label, distance to its colour) per pixel; black decodes to ``OUTSIDE``."""
    labels = np.array([OUTSIDE, *palette], dtype=np.int64)
    colours = np.stack([np.zeros(3), *palette.values()])
    dist = np.linalg.norm(images[..., None, :] - colours, axis=-1)
    nearest = dist.argmin(-1)
    return labels[nearest], np.take_along_axis(dist, nearest[..., None], -1)[..., 0]


def uniform(mask: np.ndarray, margin: int) -> np.ndarray:
    """True where the ``(2*margin+1)**2`` window around a pixel lies inside the mask and holds one label."""
    h, w = mask.shape
    padded = np.pad(mask.astype(np.int64), margin, constant_values=np.iinfo(np.int64).min)
    out = np.ones((h, w), bool)
    for dy in range(2 * margin + 1):
        for dx in range(2 * margin + 1):
            out &= padded[dy : dy + h, dx : dx + w] == mask
    return out


def copied(img: np.ndarray, colours_in: int) -> bool:
    """Was ``img`` copied (cropped, flipped, padded; colours changed per colour at most), not resampled or blurred?

    No more distinct colours than went in (``colours_in``, the fill included),
    each filling some 3x3 block: no pixel is a blend of two. It holds under
    colour jitter too, which maps each colour to one other.
    """
    levels = img.reshape(-1, img.shape[-1]).round().astype(np.int64)
    levels -= levels.min(initial=0)
    base = int(levels.max(initial=0)) + 1
    if base ** levels.shape[-1] < 2**62:  # each colour one integer: a 1-D unique, far quicker than rows
        key = np.zeros(len(levels), np.int64)
        for c in range(levels.shape[-1]):
            key = key * base + levels[:, c]
        _, ids = np.unique(key, return_inverse=True)
    else:
        _, ids = np.unique(levels, axis=0, return_inverse=True)
    ids = ids.reshape(img.shape[:2])
    n = int(ids.max()) + 1
    return n <= colours_in and len(np.unique(ids[uniform(ids, 1)])) == n
