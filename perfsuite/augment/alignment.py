"""Sub-pixel alignment: image and mask must be moved by the same geometry, to well under a pixel.

The pixel-level alignment check forgives a pixel at every resampled boundary,
so a geometric disagreement smaller than that (an ``align_corners`` mismatch
between the image's and the mask's resize, a rotation sampled on a grid half a
pixel off) passes it. Here the disagreement is measured region by region, with
the mask's own rounding taken out:

1. **Regions.** Each connected part of a label in the output mask that is
   large (``A >= MIN_AREA``), compact (``P**2/A <= MAX_COMPACTNESS``) and off
   the frame (a cut moves a centroid), matched to the part of the same label
   in the input mask it came from.
2. **The image's geometry.** Each region's centroid in the IMAGE (how much of
   its colour each pixel holds, :func:`soft_weight`: bilinear resampling keeps
   first moments) against its centroid in the input gives a point pair; an
   affine map ``A`` is fitted to them. A sample whose regions ``A`` does not
   explain to ``MAX_RESIDUAL`` px is not judged: its geometry is not affine
   (elastic, perspective, per-region moves), which this check does not model.
3. **The mask that geometry predicts.** The input mask resampled through
   ``A`` by nearest sampling. Nearest sampling displaces a region by up to
   half a pixel, and when ``A`` is close to a whole-number scale (a flip, a
   0.4-degree rotation, a 2x resize) it does so coherently over whole regions
   and in a pattern across the frame that reads as a scale or a rotation of
   up to half a pixel: measured, on perfsuite's own executors, 0.46 px at
   5 standard errors under the previous estimator, which compared image and
   mask centroids directly. Both the actual and the predicted mask contain
   that rounding, so their difference does not.
4. **The disagreement.** Per region, predicted minus actual mask centroid;
   fitted with ``d(c) = t + s (c - c0) + r perp(c - c0)`` about the frame's
   centre (a translation, an isotropic scale, a rotation: what resampling
   bugs make), weighted least squares with sigma ``SIGMA`` per axis scaled up
   (never down) by the measured reduced chi-square, one outlying region
   dropped once. Judged per sample, then over the batch's regions pooled
   (same-size outputs): a resize bug disagrees the same way in every sample.

What is flagged:

* the scale/rotation part, when its displacement at the frame's farthest
  corner exceeds ``LINEAR_TOL`` AND stands ``Z`` standard errors out; a scale
  must also show in each axis alone (``Z_AXIS`` standard errors, same sign),
  since a resize's ``align_corners`` mismatch scales both. An
  ``align_corners`` mismatch of a resize by ``f`` displaces the border by
  ``|f - 1| / 2`` output px: 0.5 px for 2x, 0.25 px for 0.5x;
* the translation, when it exceeds ``TRANSLATION_TOL`` by ``Z`` standard
  errors: nearest sampling's convention at exact half-pixel positions (ties,
  which every sample of a 2x downscale is) and torch's legacy ``'nearest'``
  (which is ``'nearest-exact'`` shifted by half an input pixel) translate a
  mask by up to half an output pixel, so a half-pixel translation is not
  told from them; a one-pixel shift is.

``tol`` (``subpixel_tol=``) replaces ``LINEAR_TOL``; the significance
requirement stays. The false-alarm scan (``scripts/subpixel_scan.py``,
docs/properties.md) measures all of this.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfsuite.errors import PropertyViolation

LINEAR_TOL = 0.2  # px at the frame's corner: a 0.5x resize's align_corners mismatch moves it 0.25 px
TRANSLATION_TOL = 0.5  # px: what nearest sampling's tie convention can legitimately shift a mask by
Z = 5.0  # standard errors a flagged disagreement must stand out from what a correct pair can show
Z_AXIS = 2.5  # a flagged scale must also show in each axis alone, this many standard errors out, the same way
SIGMA = 0.05  # px per axis: a region's predicted-vs-actual centroid noise (the fitted geometry's own error)
OUTLIER_Z = 5.0
MIN_AREA = 48  # px
MAX_COMPACTNESS = 60.0  # P**2/A: a disk is 12.6, a 4:1 rectangle 20; thin, ragged shapes are skipped
MAX_AREA_RATIO = 1.25  # image and mask regions of very different sizes are a different failure (other checks)
MAX_RESIDUAL = 0.3  # px RMS: regions an affine map does not explain better than this are not an affine geometry
MATCH_TOL = 3.0  # px: a region is matched to the input part of its label that the geometry puts within this
TIE = 0.1  # input px: sample points closer than this to a rounding boundary are not compared (see _render_nearest)
MAX_SEEDS = 7  # the largest regions whose every three seed the correspondence search (35 trios)
BORDER = 2
NEAR = 2  # px around the mask's region where the image's (and the predicted mask's) region is looked for
MIN_REGIONS = 4


@dataclass(frozen=True)
class Offset:
    """One region's disagreement: predicted (from the image's geometry) minus actual mask centroid."""

    label: int
    dy: float
    dx: float
    area: int
    perimeter: int
    sigma: tuple[float, float]  # per-axis std of (dy, dx) before the chi-square scaling
    centre: tuple[float, float]  # the actual mask region's centroid (y, x)

    @property
    def size(self) -> float:
        return float(np.hypot(self.dy, self.dx))


def _shifted_or(region: np.ndarray, r: int) -> np.ndarray:
    """``region`` grown by ``r`` px in every direction (a square neighbourhood)."""
    from scipy import ndimage

    return ndimage.binary_dilation(region, structure=np.ones((2 * r + 1, 2 * r + 1), bool))


def _perimeter(region: np.ndarray) -> int:
    padded = np.pad(region, 1)
    h, w = region.shape
    return int(sum((region & ~padded[dy : dy + h, dx : dx + w]).sum() for dy, dx in ((0, 1), (2, 1), (1, 0), (1, 2))))


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


def _parts(mask: np.ndarray, label: int) -> list[tuple[tuple[slice, slice], np.ndarray]]:
    """The connected parts of ``label`` in ``mask`` (parts closer than ``2 * NEAR`` px count as one), each as
    (its bounding box grown by ``NEAR + 2`` px and cut to the frame, the part inside that box)."""
    from scipy import ndimage

    full = mask == label
    zones, _ = ndimage.label(_shifted_or(full, NEAR), structure=np.ones((3, 3), bool))
    out = []
    pad = NEAR + 2
    for k, (ys, xs) in enumerate(ndimage.find_objects(zones), start=1):
        sl = (
            slice(max(0, ys.start - pad), min(mask.shape[0], ys.stop + pad)),
            slice(max(0, xs.start - pad), min(mask.shape[1], xs.stop + pad)),
        )
        out.append((sl, full[sl] & (zones[sl] == k)))
    return out


def _centroid(sl: tuple[slice, slice], local: np.ndarray) -> np.ndarray:
    return np.argwhere(local).mean(0) + (sl[0].start, sl[1].start)


@dataclass(frozen=True)
class _Region:
    label: int
    box: tuple[slice, slice]  # where ``where`` lies in the frame
    where: np.ndarray  # the actual mask region inside ``box``
    mask_c: np.ndarray  # (y, x) centroid in the mask
    image_c: np.ndarray  # (y, x) centroid of the image's soft weights
    area: int
    perimeter: int


def _measure(
    image: np.ndarray, mask: np.ndarray, palette: dict, label: int, sl: tuple[slice, slice], m: np.ndarray
) -> _Region | None:
    """The region, or None if it is not measurable (small, ragged, near the frame, or unlike the image's)."""
    h, w = mask.shape
    am = int(m.sum())
    if am < MIN_AREA:
        return None
    ys, xs = np.nonzero(m)
    y0, y1, x0, x1 = ys.min() + sl[0].start, ys.max() + sl[0].start, xs.min() + sl[1].start, xs.max() + sl[1].start
    if y0 - NEAR < BORDER or x0 - NEAR < BORDER or y1 + NEAR >= h - BORDER or x1 + NEAR >= w - BORDER:
        return None  # cut by the frame, or close enough for the image's blend with the outside fill
    p = _perimeter(m)
    if p * p / am > MAX_COMPACTNESS:
        return None
    near = _shifted_or(m, NEAR)
    around = np.unique(mask[sl][_shifted_or(m, NEAR + 1)]).tolist()
    others = [np.zeros(3)] + [palette[k] for k in around if k != label and k in palette]
    ny, nx = np.nonzero(near)
    wts = soft_weight(image[sl][ny, nx], palette[label], np.stack(others))
    total = float(wts.sum())
    if not am / MAX_AREA_RATIO <= total <= am * MAX_AREA_RATIO:
        return None
    origin = np.array([sl[0].start, sl[1].start], float)
    image_c = np.array([(wts * ny).sum(), (wts * nx).sum()]) / total + origin
    return _Region(label, sl, m, np.array([ys.mean(), xs.mean()]) + origin, image_c, am, p)


def _fit_affine(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, float] | None:
    """(3x2 ``M`` with ``[y, x, 1] @ M = [y', x']``, RMS residual), or None if the points do not fix one."""
    design = np.hstack([src, np.ones((len(src), 1))])
    if len(src) < 3 or np.linalg.svd(src - src.mean(0), compute_uv=False)[-1] < 1.0:  # collinear: no 2-D map
        return None
    m, *_ = np.linalg.lstsq(design, dst, rcond=None)
    rms = float(np.sqrt(((design @ m - dst) ** 2).sum(1).mean()))
    return m, rms


def _inliers(m: np.ndarray, image_c: np.ndarray, part_h: np.ndarray, same: np.ndarray) -> np.ndarray:
    """Per region: the index of the one input part of its label that ``m`` puts within ``MATCH_TOL`` of it, else -1.

    ``image_c`` (regions, 2), ``part_h`` (parts, 3: y, x, 1), ``same`` (regions, parts): same label.
    """
    q = part_h @ m
    near = same & (np.hypot(image_c[:, None, 0] - q[None, :, 0], image_c[:, None, 1] - q[None, :, 1]) <= MATCH_TOL)
    return np.where(near.sum(1) == 1, near.argmax(1), -1)


def _geometry(regions: list[_Region], mask_in: np.ndarray) -> tuple[np.ndarray, list[_Region], np.ndarray] | None:
    """The image's affine geometry (input -> output), the regions it matched and their input centroids.

    A label may have several parts (one in each of several places), so the
    correspondence is searched for: every three of the largest regions, with
    every choice of input part of their labels, give a map; the map that puts
    the most regions onto a part of their own label wins, and is refitted to
    all of them. A second map that matches as many regions to other parts
    (a symmetric layout) leaves the sample undecided.
    """
    from itertools import combinations, product

    labels, cents = [], []
    for label in sorted({r.label for r in regions}):
        for sl, p in _parts(mask_in, label):
            if p.sum() >= MIN_AREA // 4:
                labels.append(label)
                cents.append(_centroid(sl, p))
    if not cents:
        return None
    part_label, part_h = np.array(labels), np.hstack([np.array(cents), np.ones((len(cents), 1))])
    usable = sorted((r for r in regions if r.label in labels), key=lambda r: -r.area)
    image_c = np.array([r.image_c for r in usable])
    same = np.array([r.label for r in usable])[:, None] == part_label[None, :]
    best: list[tuple[int, np.ndarray]] = []
    for trio in combinations(range(min(len(usable), MAX_SEEDS)), 3):
        for choice in product(*(np.flatnonzero(same[k]) for k in trio)):
            src = part_h[list(choice)]
            if abs(np.linalg.det(src)) < 1.0:  # input centroids (nearly) in a line: no 2-D map
                continue
            m = np.linalg.solve(src, image_c[list(trio)])
            scales = np.linalg.svd(m[:2], compute_uv=False)
            if scales[-1] < 0.2 or scales[0] > 5.0:  # no augmentation resizes by more than this
                continue
            best.append((int((_inliers(m, image_c, part_h, same) >= 0).sum()), m))
    if not best:
        return None
    top = max(n for n, _ in best)
    assignments = {tuple(_inliers(m, image_c, part_h, same)) for n, m in best if n == top}
    if len(assignments) > 1:  # as many regions matched another way: a symmetric layout, not one geometry
        return None
    match = np.array(assignments.pop())
    if (match >= 0).sum() < MIN_REGIONS or 2 * (match >= 0).sum() < len(usable):
        return None
    refit = _fit_affine(part_h[match[match >= 0], :2], image_c[match >= 0])
    if refit is None or refit[1] > MAX_RESIDUAL:
        return None
    match = _inliers(refit[0], image_c, part_h, same)
    return refit[0], [r for r, k in zip(usable, match) if k >= 0], part_h[match[match >= 0], :2]


def _render_nearest(mask_in: np.ndarray, m: np.ndarray, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """``mask_in`` resampled through the affine ``m`` (input -> output) by nearest sampling (-1 outside), and
    where that is unambiguous: the sample point is more than ``TIE`` input px from a rounding boundary.

    At an exact tie (every other sample of a 1.5x resize) the pipeline's convention decides, and the fitted
    geometry's own small error would flip whole rows of ties at once; those pixels are not compared.
    """
    lin, t = m[:2].T, m[2]  # output = lin @ input + t
    inv = np.linalg.inv(lin)
    yy, xx = np.mgrid[0 : shape[0], 0 : shape[1]]
    q = np.einsum("ij,jhw->ihw", inv, np.stack([yy - t[0], xx - t[1]]).astype(np.float64))
    clear = (np.abs(q - np.floor(q) - 0.5) > TIE).all(0)
    iy, ix = np.floor(q[0] + 0.5).astype(np.int64), np.floor(q[1] + 0.5).astype(np.int64)
    inside = (iy >= 0) & (iy < mask_in.shape[0]) & (ix >= 0) & (ix < mask_in.shape[1])
    out = np.full(shape, -1, dtype=np.int64)
    out[inside] = mask_in[iy[inside], ix[inside]]
    return out, clear


def offsets(
    image: np.ndarray, mask: np.ndarray, mask_in: np.ndarray, palette: dict[int, np.ndarray], skip: set[int]
) -> list[Offset]:
    """Per measurable region of one sample: the mask the image's geometry predicts minus the actual mask.

    Empty where the geometry is not affine or too few regions fix it (see the module docstring).
    """
    regions = []
    for label in np.unique(mask).tolist():
        if label in skip or label not in palette:
            continue
        for sl, where in _parts(mask, label):
            r = _measure(image, mask, palette, int(label), sl, where)
            if r is not None:
                regions.append(r)
    found = _geometry(regions, mask_in) if len(regions) >= 3 else None
    if found is None:
        return []
    m, matched, _ = found
    predicted, clear = _render_nearest(mask_in.astype(np.int64), m, mask.shape)
    out = []
    for r in matched:
        zone = _shifted_or(r.where, NEAR) & clear[r.box]
        pred, actual = zone & (predicted[r.box] == r.label), zone & r.where
        if not actual.sum() / MAX_AREA_RATIO <= pred.sum() <= actual.sum() * MAX_AREA_RATIO or not actual.any():
            continue
        d = np.argwhere(pred).mean(0) - np.argwhere(actual).mean(0)
        c = (float(r.mask_c[0]), float(r.mask_c[1]))
        out.append(Offset(r.label, float(d[0]), float(d[1]), r.area, r.perimeter, (SIGMA, SIGMA), c))
    return out


@dataclass(frozen=True)
class Fit:
    """The disagreement field ``d(c) = t + L (c - c0)`` fitted to a sample's (or a batch's) regions.

    ``L`` is a scale and a rotation; ``c0`` the frame's centre.
    """

    translation: np.ndarray  # (dy, dx) at c0
    linear: np.ndarray  # 2x2: [[s, -r], [r, s]]
    linear_px: float  # |L (corner - c0)| at the frame's farthest corner
    linear_se: float
    translation_px: float
    translation_se: float
    region: Offset  # the region where the linear part is largest
    regions: int
    scale: float  # sqrt(reduced chi-square) applied to the model sigmas (>= 1)
    axis_scales: tuple[float, float] = (0.0, 0.0)  # (s_y, s_x) of the same fit with a scale per axis
    axis_se: tuple[float, float] = (0.0, 0.0)

    @property
    def scale_in_both_axes(self) -> bool:
        """The scale part shows in each axis alone, the same way: what a resize bug does."""
        s = float(self.linear[0, 0])
        return all(np.sign(a) == np.sign(s) and abs(a) > Z_AXIS * se for a, se in zip(self.axis_scales, self.axis_se))

    def score(self, tol: float | None = None) -> float:
        """How close to flagging (> 1: flagged): the larger of the two parts' margins, see :meth:`flagged`."""
        lin_tol = LINEAR_TOL if tol is None else tol
        lin = min(self.linear_px / lin_tol, self.linear_px / (Z * self.linear_se)) if self.linear_se > 0 else 0.0
        if abs(self.linear[1, 0]) <= abs(self.linear[0, 0]):  # a scale: each axis alone must agree
            s = float(self.linear[0, 0])
            per_axis = [
                abs(a) / (Z_AXIS * se) if np.sign(a) == np.sign(s) and se > 0 else 0.0
                for a, se in zip(self.axis_scales, self.axis_se)
            ]
            lin = min(lin, *per_axis)
        tr = (self.translation_px - TRANSLATION_TOL) / (Z * self.translation_se) if self.translation_se > 0 else 0.0
        return max(lin, tr)

    def flagged(self, tol: float | None = None) -> str | None:
        """``"scale"``/``"translation"`` if that part of the disagreement is both large and significant, else None.

        A scale (not a rotation) must also show in each axis alone (:attr:`scale_in_both_axes`).
        """
        lin_tol = LINEAR_TOL if tol is None else tol
        rotation = abs(self.linear[1, 0]) > abs(self.linear[0, 0])
        if self.linear_px > lin_tol and self.linear_px > Z * self.linear_se and (rotation or self.scale_in_both_axes):
            return "scale"
        if self.translation_px - TRANSLATION_TOL > Z * self.translation_se:
            return "translation"
        return None


def _design(rel: np.ndarray) -> np.ndarray:
    """Rows (dy, dx) per region; unknowns ty, tx, s, r: ``dy = ty + s*ry - r*rx``, ``dx = tx + s*rx + r*ry``."""
    n = len(rel)
    a = np.zeros((2 * n, 4))
    a[0::2, 0], a[1::2, 1] = 1, 1
    a[0::2, 2], a[0::2, 3] = rel[:, 0], -rel[:, 1]
    a[1::2, 2], a[1::2, 3] = rel[:, 1], rel[:, 0]
    return a


def _design_per_axis(rel: np.ndarray) -> np.ndarray:
    """As :func:`_design` with a scale per axis: unknowns ty, tx, sy, sx, r."""
    a = np.zeros((2 * len(rel), 5))
    iso = _design(rel)
    a[:, [0, 1, 4]] = iso[:, [0, 1, 3]]
    a[0::2, 2], a[1::2, 3] = rel[:, 0], rel[:, 1]
    return a


def _wls(
    c: np.ndarray,
    d: np.ndarray,
    s: np.ndarray,
    keep: np.ndarray,
    centre: np.ndarray,
    design: Callable[[np.ndarray], np.ndarray] = _design,
):
    rel = c - centre
    a = design(rel)
    rows = np.repeat(keep, 2)
    sw = 1.0 / s.reshape(-1)
    aw, bw = a[rows] * sw[rows, None], (d.reshape(-1) * sw)[rows]
    theta, *_ = np.linalg.lstsq(aw, bw, rcond=None)
    cov = np.linalg.pinv(aw.T @ aw)
    resid = (d.reshape(-1) - a @ theta) * sw  # in sigmas
    return theta, cov, a, resid, rel


def fit(found: list[Offset], shape: tuple[int, int]) -> Fit | None:
    """Fit the disagreement field (translation, scale, rotation) about the centre of a ``shape`` frame.

    Weighted by the regions' sigmas (scaled up by the measured reduced
    chi-square, never down); None if fewer than ``MIN_REGIONS`` regions.
    """
    if len(found) < MIN_REGIONS:
        return None
    c = np.array([o.centre for o in found])
    d = np.array([(o.dy, o.dx) for o in found])
    s = np.array([o.sigma for o in found])
    keep = np.ones(len(found), bool)
    ref = np.array([(shape[0] - 1) / 2.0, (shape[1] - 1) / 2.0])
    theta, cov, a, resid, rel = _wls(c, d, s, keep, ref)
    worst = np.hypot(resid[0::2], resid[1::2])
    if len(found) > MIN_REGIONS and worst.max() > OUTLIER_Z:  # one region the model cannot explain: drop it once
        keep[int(worst.argmax())] = False
        theta, cov, a, resid, rel = _wls(c, d, s, keep, ref)
    dof = 2 * int(keep.sum()) - a.shape[1]
    chi2 = float((resid[np.repeat(keep, 2)] ** 2).sum())
    scale = max(1.0, np.sqrt(chi2 / dof)) if dof > 0 else 1.0
    cov = cov * scale**2
    lin = np.array([[theta[2], -theta[3]], [theta[3], theta[2]]])
    corners = np.array([(sy * ref[0], sx * ref[1]) for sy in (-1, 1) for sx in (-1, 1)])
    at_corner = corners @ lin.T
    k = int(np.hypot(at_corner[:, 0], at_corner[:, 1]).argmax())
    linear_px = float(np.hypot(*at_corner[k]))
    lin_se = 0.0
    if linear_px > 0:
        u = at_corner[k] / linear_px  # d|L r| / d(s, r) along the displacement at that corner
        ry, rx = corners[k]
        jac = np.array([0.0, 0.0, u[0] * ry + u[1] * rx, -u[0] * rx + u[1] * ry])
        lin_se = float(np.sqrt(max(jac @ cov @ jac, 0.0)))
    field = np.hypot(*(rel @ lin.T).T)
    field[~keep] = 0.0
    region = found[int(field.argmax())]
    # the same regions, weights and centre with a scale per axis, its errors scaled by the same chi-square
    theta2, cov2, *_ = _wls(c, d, s, keep, ref, design=_design_per_axis)
    axis_scales = (float(theta2[2]), float(theta2[3]))
    axis_se = (float(np.sqrt(max(cov2[2, 2], 0.0))) * scale, float(np.sqrt(max(cov2[3, 3], 0.0))) * scale)
    t = theta[:2]
    tmag = float(np.hypot(*t))
    tr_se = 0.0
    if tmag > 0:
        u = t / tmag
        tr_se = float(np.sqrt(max(u @ cov[:2, :2] @ u, 0.0)))
    return Fit(t, lin, linear_px, lin_se, tmag, tr_se, region, int(keep.sum()), float(scale), axis_scales, axis_se)


def assert_subpixel_aligned(
    images_out: np.ndarray,
    masks_out: np.ndarray,
    palette: dict[int, np.ndarray],
    *,
    masks_in: np.ndarray,
    skip: set[int],
    tol: float | None = None,
    mixes_samples: bool = False,
) -> None:
    """No image-vs-mask disagreement (translation, scale, rotation) that is both large and significant.

    Judged per sample, then over the whole batch's regions pooled (one field
    about the frame's centre): a resize or crop bug disagrees the same way in
    every sample of a batch, and pooled regions average the noise down; per-sample
    random geometry that is correct pools to noise.
    """
    if mixes_samples:  # pasted boxes cut regions; their centroids are not comparable
        return
    n = len(images_out)
    for sample, f in batch_fits(images_out, masks_out, masks_in, palette, skip):
        where = "" if sample is not None else f" (pooled over the batch's {n} samples: the same field in each)"
        _raise_if_flagged(f, tol, sample, where)


def batch_fits(
    images_out: Any, masks_out: Any, masks_in: np.ndarray, palette: dict[int, np.ndarray], skip: set[int]
) -> list[tuple[int | None, Fit | None]]:
    """``(sample, fit)`` for each sample, then ``(None, fit)`` of all regions pooled about the frame's centre."""
    out: list[tuple[int | None, Fit | None]] = []
    pooled: list[Offset] = []
    for i, (img, mask) in enumerate(zip(images_out, masks_out)):
        found = offsets(img, mask, masks_in[i], palette, skip)
        pooled += found
        out.append((i, fit(found, mask.shape)))
    if len(masks_out) > 1 and len({m.shape for m in masks_out}) == 1:
        out.append((None, fit(pooled, masks_out[0].shape)))
    return out


def _raise_if_flagged(f: Fit | None, tol: float | None, sample: int | None, where: str) -> None:
    kind = None if f is None else f.flagged(tol)
    if f is None or kind is None:
        return
    o = f.region
    if kind == "scale":
        what = (
            f"a scale/rotation difference that displaces the frame's corner by {f.linear_px:.2f} px (allowed "
            f"{LINEAR_TOL if tol is None else tol:.2f}; {f.linear_px / f.linear_se:.1f} standard errors), label "
            f"{o.label}'s region ({o.area} px, centred at y={o.centre[0]:.1f}, x={o.centre[1]:.1f}) by "
            f"{o.size:.2f} px"
        )
    else:
        what = (
            f"a translation of {f.translation_px:.2f} px (dy={f.translation[0]:+.2f}, "
            f"dx={f.translation[1]:+.2f}; nearest sampling's tie convention explains up to "
            f"{TRANSLATION_TOL:.2f})"
        )
    err = PropertyViolation(
        "sub-pixel alignment",
        f"image and mask disagree systematically over {f.regions} regions{where} (the mask the image's geometry "
        f"predicts minus the actual mask): {what}: image and mask were resampled on different pixel grids. Use "
        "the same align_corners for both (resize the image with align_corners=False, the mask with "
        "mode='nearest-exact'), and the same output size, crop offsets and centre of rotation",
        sample=sample,
    )
    err.cause = "subpixel"
    raise err
