"""Sub-pixel alignment: image and mask must agree on where each region is, to a quarter pixel.

The pixel-level alignment check forgives a pixel at every boundary, so a
geometric disagreement smaller than a pixel (an ``align_corners`` mismatch
between the image's and the mask's resize, a half-pixel offset of nearest
sampling) passes it. Here each label's region is located twice, with
sub-pixel precision: by the mask (``mask == L``) and by the image (pixels
whose colour decodes to ``L``; the image was painted from the input mask, so
the image's region went through the image's geometry). The two centroids
must coincide.

Tolerance, derived:

* A correct pair (image bilinear, mask nearest, same geometry) puts both
  region boundaries where the continuous boundary is: nearest takes the
  label of the closest source pixel, and bilinear's colour crosses the
  half-way blend at the same mid-point between source pixel centres. They
  differ only where the boundary turns (corners) or where three labels meet,
  by at most one pixel, on both sides of the region about equally. A
  region of area ``A`` and perimeter ``P`` moves its centroid by at most
  ``|D| * r / A`` for ``|D|`` disagreeing pixels at distance ``r``; with
  ``|D|`` bounded by the corner count and ``r <= P / 2``, and regions
  required to have ``A >= MIN_AREA`` and to be compact (``P**2 / A <=``
  ``MAX_COMPACTNESS``), the noise stays far below a quarter pixel except for
  small or ragged regions, which are skipped.
* A disagreement of ``delta`` pixels between the two geometries moves every
  measured region by ``delta`` where it is a translation; an align_corners
  mismatch is a scale about the centre, moving a region at distance ``r``
  from the centre by ``r * (1/(W-1) - 1/W)``-ish, i.e. up to half an output
  pixel at the border for a 2x resize.
* So the check flags ``|d| > tol`` with ``tol = BASE_TOL + NOISE_PER_EDGE * P / A``:
  a quarter pixel, plus an allowance that grows with the region's share of
  boundary pixels (``P/A`` is 0.25 for a 16-px disk and 0.1 for a 40-px one,
  so the allowance is 0.05-0.12 px). The false-alarm scan in
  ``scripts/subpixel_scan.py`` (docs/properties.md) measures the margin.
* Regions touching the image border (within ``BORDER`` px) are skipped: a
  crop cuts image and mask at the same place but the image's cut is blended
  with the outside fill, which moves its centroid and not the mask's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfsuite.errors import PropertyViolation

BASE_TOL = 0.25  # px: the aim of issue 13; half-pixel mismatches are caught with a 2x margin
NOISE_PER_EDGE = 0.5  # px of allowance per unit of P/A (boundary pixels per region pixel)
MIN_AREA = 48  # px: smaller regions' centroids are too coarse to judge a quarter pixel
MAX_COMPACTNESS = 60.0  # P**2/A: a disk is 12.6, a 4:1 rectangle 20; thin, ragged shapes are skipped
MAX_AREA_RATIO = 1.25  # image and mask regions of very different sizes are a different failure (other checks)
BORDER = 2
NEAR = 2  # px around the mask's region where the image's region is looked for


@dataclass(frozen=True)
class Offset:
    label: int
    dy: float
    dx: float
    area: int
    perimeter: int
    tol: float
    centre: tuple[float, float]

    @property
    def size(self) -> float:
        return float(np.hypot(self.dy, self.dx))


def _perimeter(region: np.ndarray) -> int:
    padded = np.pad(region, 1)
    inner = padded[1:-1, 1:-1]
    edges = 0
    for dy, dx in ((0, 1), (0, -1), (1, 0), (-1, 0)):
        edges += int((inner & ~padded[1 + dy:padded.shape[0] - 1 + dy, 1 + dx:padded.shape[1] - 1 + dx]).sum())
    return edges


def _dilate(region: np.ndarray, r: int) -> np.ndarray:
    h, w = region.shape
    padded = np.pad(region, r)
    out = np.zeros_like(region)
    for dy in range(2 * r + 1):
        for dx in range(2 * r + 1):
            out |= padded[dy:dy + h, dx:dx + w]
    return out


def _decode_nearest(image: np.ndarray, palette: dict[int, np.ndarray]) -> np.ndarray:
    labels = np.array([-(2**62), *palette], dtype=np.int64)
    colours = np.stack([np.zeros(3), *palette.values()])
    return labels[np.linalg.norm(image[..., None, :] - colours, axis=-1).argmin(-1)]


def soft_weight(colours: np.ndarray, own: np.ndarray, others: np.ndarray) -> np.ndarray:
    """How much of ``own``'s colour each pixel holds: its blend weight against the best-fitting other colour.

    Bilinear resampling of a two-label boundary gives ``a*own + (1-a)*other``;
    ``a`` is recovered by projection. Linear interpolation keeps first
    moments, so the weighted centroid follows the geometry to a small
    fraction of a pixel, where a hard decode would lose thin tips and corners.
    """
    best_a = np.zeros(len(colours))
    best_r = np.full(len(colours), np.inf)
    for other in others:
        span = own - other
        a = np.clip(((colours - other) @ span) / max(float(span @ span), 1e-9), 0.0, 1.0)
        r = np.linalg.norm(colours - (other + a[:, None] * span), axis=-1)
        better = r < best_r
        best_a[better], best_r[better] = a[better], r[better]
    return best_a


def offsets(image: np.ndarray, mask: np.ndarray, palette: dict[int, np.ndarray], skip: set[int],
            tol: float | None = None) -> list[Offset]:
    """Centroid offset (image minus mask) of every measurable label region of one sample."""
    h, w = mask.shape
    out = []
    for label in np.unique(mask).tolist():
        if label in skip or label not in palette:
            continue
        m = mask == label
        am = int(m.sum())
        if am < MIN_AREA:
            continue
        near = _dilate(m, NEAR)
        ys, xs = np.nonzero(near)
        if ys.min() < BORDER or xs.min() < BORDER or ys.max() >= h - BORDER or xs.max() >= w - BORDER:
            continue
        p = _perimeter(m)
        if p * p / am > MAX_COMPACTNESS:
            continue
        around = np.unique(mask[_dilate(m, NEAR + 1)]).tolist()
        others = [np.zeros(3)] + [palette[k] for k in around if k != label and k in palette]
        wts = soft_weight(image[ys, xs], palette[label], np.stack(others))
        total = float(wts.sum())
        if not am / MAX_AREA_RATIO <= total <= am * MAX_AREA_RATIO:
            continue
        cs = np.array([(wts * ys).sum(), (wts * xs).sum()]) / total
        cm = np.argwhere(m).mean(0)
        allowed = tol if tol is not None else BASE_TOL + NOISE_PER_EDGE * p / am
        out.append(Offset(int(label), float(cs[0] - cm[0]), float(cs[1] - cm[1]), am, p, allowed,
                          (float(cm[0]), float(cm[1]))))
    return out


def assert_subpixel_aligned(images_out: np.ndarray, masks_out: np.ndarray, palette: dict[int, np.ndarray], *,
                            skip: set[int], tol: float | None = None, mixes_samples: bool = False) -> None:
    """No systematic image-vs-mask displacement above ``tol`` (default :data:`FIT_TOL`), see :func:`systematic`."""
    if mixes_samples:  # pasted boxes cut regions; their centroids are not comparable
        return
    limit = FIT_TOL if tol is None else tol
    for i, (img, mask) in enumerate(zip(images_out, masks_out)):
        fit = systematic(offsets(img, mask, palette, skip))
        if fit is not None and fit[0] > limit:
            size, o = fit
            err = PropertyViolation(
                "sub-pixel alignment",
                f"image and mask disagree systematically by {size:.2f} px (allowed {limit:.2f}) at label {o.label}'s "
                f"region ({o.area} px, centred at y={o.centre[0]:.1f}, x={o.centre[1]:.1f}; measured image minus "
                f"mask dy={o.dy:+.2f}, dx={o.dx:+.2f}): image and mask were resampled on different pixel grids. Use "
                "the same align_corners for both (resize the image with align_corners=False, the mask with "
                "mode='nearest-exact'), and the same output size and crop offsets", sample=i)
            err.cause = "subpixel"
            raise err


FIT_TOL = 0.3  # px: the fitted systematic displacement allowed at the farthest measured region
MIN_REGIONS = 4


def systematic(found: list[Offset]) -> tuple[float, Offset] | None:
    """Fit ``d = t + s * (c - mean c)`` (a translation and a scale) to the regions' offsets, area-weighted.

    Per-region offsets carry quantization noise of a few tenths of a pixel
    (nearest sampling of thin shapes); a geometric disagreement is
    systematic across regions: a translation (a half-pixel offset) or a scale
    about the centre (align_corners). The fit averages the noise away;
    returns (largest fitted displacement over the regions, that region).
    """
    if len(found) < MIN_REGIONS:
        return None
    c = np.array([o.centre for o in found])
    d = np.array([(o.dy, o.dx) for o in found])
    wts = np.sqrt(np.array([o.area for o in found], float))
    rel = c - np.average(c, axis=0, weights=wts)
    # unknowns: ty, tx, s  (d_y = ty + s*rel_y, d_x = tx + s*rel_x)
    a = np.zeros((2 * len(found), 3))
    a[0::2, 0], a[1::2, 1] = 1, 1
    a[0::2, 2], a[1::2, 2] = rel[:, 0], rel[:, 1]
    ww = np.repeat(wts, 2)
    sol, *_ = np.linalg.lstsq(a * ww[:, None], d.reshape(-1) * ww, rcond=None)
    pred = a @ sol
    size = np.hypot(pred[0::2], pred[1::2])
    k = int(size.argmax())
    return float(size[k]), found[k]
