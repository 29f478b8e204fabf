"""Sub-pixel alignment: image and mask must be moved by the same geometry, to well under a pixel.

The pixel-level alignment check forgives a pixel at every boundary, so a
geometric disagreement smaller than that (an ``align_corners`` mismatch between
the image's and the mask's resize; a one-pixel shift, which no 3x3-uniform
pixel ever shows) passes it. Here each label's region is located twice, with
sub-pixel precision: by the mask (``mask == L``) and by the image (how much of
L's colour each pixel holds; the image was painted from the input mask, so its
regions went through the image's geometry). Then the two geometries are
compared as transforms, not as raw centroids.

The estimator, and why:

* **Per region**: offset ``d_i = c_image - c_mask`` (image minus mask centroid).
  Only regions that are large (``A >= MIN_AREA``), compact (``P**2/A <=
  MAX_COMPACTNESS``) and away from the frame (``BORDER`` px, plus the
  resampling blur) are used: a frame cut blends the image with the outside fill
  and moves its centroid, not the mask's.
* **Noise of a region**: nearest sampling puts each boundary pixel in or out
  of the region with an error uniform over one pixel (variance 1/12); for
  ragged boundaries these errors are independent and the mask centroid errs
  per axis by ``sqrt(sum_b (y_b - c)**2 / 12) / A`` over the boundary pixels
  ``b``. A straight edge rounds as a whole, though: its whole side moves by
  one uniform error, which moves the centroid by half of it, so a region with
  two straight sides errs by ``sqrt(2 / 12) / 2 = 0.20`` px per axis whatever
  its area (measured on correct pairs of real face masks: 0.13 to 0.16 px per
  region, nearly independent of area). Each region's sigma is the independent
  term, that bound (``SIGMA_COHERENT``) and the image side's own floor
  (``SIGMA_FLOOR``), in quadrature; when the fit's residuals say more, every
  sigma is scaled up by the measured reduced chi-square, never down.
* **The fit**: ``d(c) = t + s (c - c_bar) + r * perp(c - c_bar)``: a
  translation, an isotropic scale and a rotation (the difference of the
  image's and the mask's transforms, restricted to what resampling bugs make:
  crop offsets and rotation centres translate, ``align_corners`` scales,
  angle mix-ups rotate). Weighted least squares, weights ``1/sigma_i**2``
  (larger, rounder regions count more), dropping one outlying region (>
  ``OUTLIER_Z`` sigma) once. A full affine (with shear and anisotropic scale)
  was measured to false-alarm: face masks are mirror-symmetric, so a correct
  pair's rounding errors are mirrored too (``dx`` of the left eye = ``-dx`` of
  the right one) and a full affine fits them as a horizontal stretch with a
  vertical squeeze; an isotropic scale does not.
* **What is a disagreement**: nearest sampling resolves a tie (a sample point
  exactly half-way between two source pixels, as every sample of a 2x
  downscale is) by rounding one way, which legitimately translates the mask by
  up to half an output pixel but never scales it. So:

  - the linear part is flagged when its displacement at the farthest measured
    region exceeds ``LINEAR_TOL`` (a quarter pixel) AND is ``Z`` standard
    errors from zero; an ``align_corners`` mismatch is exactly such a scale
    about the centre, ``(f - 1) / 2`` output px at the frame border for a
    resize by ``f`` (half a pixel for 2x);
  - the translation is flagged when it exceeds ``TRANSLATION_TOL`` (half a
    pixel: what ties can explain) by ``Z`` standard errors: a one-pixel shift
    is caught, a half-pixel translation is indistinguishable from tie rounding
    and is not.

  ``tol`` (``subpixel_tol=``) replaces ``LINEAR_TOL``; the significance
  requirement stays, so a small ``tol`` does not turn noise into alarms.
* **A scale shows in both axes**: a resize's ``align_corners`` mismatch
  scales both axes alike, while a mirror-symmetric mask (a face) rounds
  mirror-wise, its left regions' errors the negatives of its right ones'
  in x and nothing like it in y: an isotropic fit reads that as a scale
  (measured: ~0.3 px at x1.5, up to 5.4 standard errors over a batch of four
  faces of the same layout). So a flagged scale must also stand ``Z_AXIS``
  standard errors out in each axis's own scale, with the same sign. A
  mismatch in one axis only (a width-only resize) is not flagged.
* **Per sample, then pooled**: each sample is judged alone, then all the
  batch's regions together, with the scale and rotation about the frame's
  centre (same-size outputs only). A resize or crop bug disagrees the same way
  in every sample, and 40 regions average the rounding noise down where 10
  cannot: on 64-px face masks the x2 ``align_corners`` mismatch stands about
  2.5-3.5 standard errors out of one sample's noise, 5-7 out of a batch's.
* At least ``MIN_REGIONS`` measurable regions are needed (the fit has 4
  unknowns); otherwise the sample is not judged.

The false-alarm scan (``scripts/subpixel_scan.py``, docs/properties.md)
measures this on real face masks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfsuite.errors import PropertyViolation

LINEAR_TOL = 0.25  # px: the aim of issue 13, for the scale/rotation/shear part of the disagreement
TRANSLATION_TOL = 0.5  # px: what nearest sampling's tie rounding can legitimately shift a mask by
Z = 5.0  # standard errors a flagged disagreement must stand out from what a correct pair can show
SIGMA_FLOOR = 0.05  # px: the image-side centroid's own error (measured: 0.045 px on exact 3x replication)
SIGMA_COHERENT = 0.2  # px: a straight edge rounds as a whole: sqrt(2/12)/2 for two sides (measured 0.13-0.16)
OUTLIER_Z = 5.0
MIN_AREA = 48  # px
MAX_COMPACTNESS = 60.0  # P**2/A: a disk is 12.6, a 4:1 rectangle 20; thin, ragged shapes are skipped
MAX_AREA_RATIO = 1.25  # image and mask regions of very different sizes are a different failure (other checks)
BORDER = 2
NEAR = 2  # px around the mask's region where the image's region is looked for
MIN_REGIONS = 4
Z_AXIS = 2.5  # a flagged scale must also show in each axis alone, this many standard errors out, the same way


@dataclass(frozen=True)
class Offset:
    label: int
    dy: float
    dx: float
    area: int
    perimeter: int
    sigma: tuple[float, float]  # per-axis std of (dy, dx) from nearest quantisation (model, before the floor)
    centre: tuple[float, float]

    @property
    def size(self) -> float:
        return float(np.hypot(self.dy, self.dx))


def _shifted_or(region: np.ndarray, r: int) -> np.ndarray:
    h, w = region.shape
    padded = np.pad(region, r)
    out = np.zeros_like(region)
    for dy in range(2 * r + 1):
        for dx in range(2 * r + 1):
            out |= padded[dy : dy + h, dx : dx + w]
    return out


def _inner_boundary(region: np.ndarray) -> np.ndarray:
    padded = np.pad(region, 1)
    h, w = region.shape
    interior = region.copy()
    for dy, dx in ((0, 1), (2, 1), (1, 0), (1, 2)):
        interior &= padded[dy : dy + h, dx : dx + w]
    return region & ~interior


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


def offsets(
    image: np.ndarray, mask: np.ndarray, palette: dict[int, np.ndarray], skip: set[int], border: int = BORDER
) -> list[Offset]:
    """Centroid offset (image minus mask) of every measurable label region of one sample."""
    h, w = mask.shape
    out = []
    pad = NEAR + 2
    for label in np.unique(mask).tolist():
        if label in skip or label not in palette:
            continue
        full = mask == label
        am = int(full.sum())
        if am < MIN_AREA:
            continue
        ys, xs = np.nonzero(full)
        y0, y1, x0, x1 = ys.min(), ys.max(), xs.min(), xs.max()
        if y0 - NEAR < border or x0 - NEAR < border or y1 + NEAR >= h - border or x1 + NEAR >= w - border:
            continue  # cut by the frame, or close enough for the image's blend with the outside fill
        # work in a crop around the region (with room for the dilations)
        cy0, cx0 = max(0, y0 - pad), max(0, x0 - pad)
        sl = (slice(cy0, min(h, y1 + pad + 1)), slice(cx0, min(w, x1 + pad + 1)))
        m, mk, img = full[sl], mask[sl], image[sl]
        p = _perimeter(m)
        if p * p / am > MAX_COMPACTNESS:
            continue
        near = _shifted_or(m, NEAR)
        around = np.unique(mk[_shifted_or(m, NEAR + 1)]).tolist()
        others = [np.zeros(3)] + [palette[k] for k in around if k != label and k in palette]
        ny, nx = np.nonzero(near)
        wts = soft_weight(img[ny, nx], palette[label], np.stack(others))
        total = float(wts.sum())
        if not am / MAX_AREA_RATIO <= total <= am * MAX_AREA_RATIO:
            continue
        cs = np.array([(wts * ny).sum(), (wts * nx).sum()]) / total
        my, mx = np.nonzero(m)
        cm = np.array([my.mean(), mx.mean()])
        by, bx = np.nonzero(_inner_boundary(m))
        sig = np.sqrt([((by - cm[0]) ** 2).sum() / 12.0, ((bx - cm[1]) ** 2).sum() / 12.0]) / am
        out.append(
            Offset(
                int(label),
                float(cs[0] - cm[0]),
                float(cs[1] - cm[1]),
                am,
                p,
                (float(sig[0]), float(sig[1])),
                (float(cm[0] + cy0), float(cm[1] + cx0)),
            )
        )
    return out


@dataclass(frozen=True)
class Fit:
    """The disagreement field ``d(c) = t + L (c - c_bar)`` fitted to a sample's regions.

    ``L`` is a scale and a rotation.
    """

    translation: np.ndarray  # (dy, dx) at the regions' weighted centre
    linear: np.ndarray  # 2x2: [[s, -r], [r, s]]
    linear_px: float  # |L (c - c_bar)| at the region where it is largest
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
        """The scale part shows in each axis alone, the same way: what a resize bug does, and mirrored rounding
        (a mirror-symmetric mask's errors are antisymmetric in x only) does not."""
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


def _weighted_centre(c: np.ndarray, s: np.ndarray, keep: np.ndarray) -> np.ndarray:
    cw = 1.0 / s[keep] ** 2  # (n, 2): per-axis weights
    return (c[keep] * cw).sum(0) / cw.sum(0)


def _wls(
    c: np.ndarray,
    d: np.ndarray,
    s: np.ndarray,
    keep: np.ndarray,
    centre: np.ndarray | None = None,
    design: Callable[[np.ndarray], np.ndarray] = _design,
):
    rel = c - (_weighted_centre(c, s, keep) if centre is None else centre)
    a = design(rel)
    rows = np.repeat(keep, 2)
    sw = 1.0 / s.reshape(-1)
    aw, bw = a[rows] * sw[rows, None], (d.reshape(-1) * sw)[rows]
    theta, *_ = np.linalg.lstsq(aw, bw, rcond=None)
    cov = np.linalg.pinv(aw.T @ aw)
    resid = (d.reshape(-1) - a @ theta) * sw  # in sigmas
    return theta, cov, a, resid, rel


def fit(found: list[Offset], centre: tuple[float, float] | None = None) -> Fit | None:
    """Fit the disagreement field (translation, scale, rotation), weighted by the regions' noise; None if too few.

    ``centre``: the point the scale and rotation are about (the frame's centre,
    for regions pooled from several samples); default: the regions' weighted centre.
    """
    if len(found) < MIN_REGIONS:
        return None
    c = np.array([o.centre for o in found])
    d = np.array([(o.dy, o.dx) for o in found])
    s = np.sqrt(np.array([o.sigma for o in found]) ** 2 + SIGMA_FLOOR**2 + SIGMA_COHERENT**2)
    keep = np.ones(len(found), bool)
    ref = None if centre is None else np.asarray(centre, float)
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
    field = rel @ lin.T  # (n, 2): the scale/rotation part of the disagreement at each region
    mag = np.hypot(field[:, 0], field[:, 1])
    mag[~keep] = 0.0
    k = int(mag.argmax())
    lin_se = 0.0
    if mag[k] > 0:
        u = field[k] / mag[k]
        jac = u[0] * a[2 * k] + u[1] * a[2 * k + 1]
        jac[:2] = 0.0
        lin_se = float(np.sqrt(max(jac @ cov @ jac, 0.0)))
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
    return Fit(
        t, lin, float(mag[k]), lin_se, tmag, tr_se, found[k], int(keep.sum()), float(scale), axis_scales, axis_se
    )


def assert_subpixel_aligned(
    images_out: np.ndarray,
    masks_out: np.ndarray,
    palette: dict[int, np.ndarray],
    *,
    skip: set[int],
    tol: float | None = None,
    mixes_samples: bool = False,
) -> None:
    """No image-vs-mask disagreement (translation, scale, rotation) that is both large and significant.

    Judged per sample, then over the whole batch's regions pooled (one field
    about the frame's centre): a resize or crop bug disagrees the same way in
    every sample of a batch, and pooled regions average the rounding noise
    down; per-sample random geometry that is correct pools to noise.
    """
    if mixes_samples:  # pasted boxes cut regions; their centroids are not comparable
        return
    n = len(images_out)
    for sample, f in batch_fits(images_out, masks_out, palette, skip):
        where = "" if sample is not None else f" (pooled over the batch's {n} samples: the same field in each)"
        _raise_if_flagged(f, tol, sample, where)


def batch_fits(
    images_out, masks_out, palette: dict[int, np.ndarray], skip: set[int]
) -> list[tuple[int | None, Fit | None]]:
    """``(sample, fit)`` for each sample, then ``(None, fit)`` of all regions pooled about the frame's centre."""
    out: list[tuple[int | None, Fit | None]] = []
    pooled: list[Any] = []
    for i, (img, mask) in enumerate(zip(images_out, masks_out)):
        found = offsets(img, mask, palette, skip)
        pooled += found
        out.append((i, fit(found)))
    if len(masks_out) > 1 and len({m.shape for m in masks_out}) == 1:
        h, w = masks_out[0].shape
        out.append((None, fit(pooled, centre=((h - 1) / 2, (w - 1) / 2))))
    return out


def _raise_if_flagged(f: Fit | None, tol: float | None, sample: int | None, where: str) -> None:
    kind = None if f is None else f.flagged(tol)
    if f is None or kind is None:
        return
    o = f.region
    if kind == "scale":
        what = (
            f"a scale/rotation difference that displaces label {o.label}'s region ({o.area} px, centred at "
            f"y={o.centre[0]:.1f}, x={o.centre[1]:.1f}) by {f.linear_px:.2f} px (allowed "
            f"{LINEAR_TOL if tol is None else tol:.2f}; {f.linear_px / f.linear_se:.1f} standard errors)"
        )
    else:
        what = (
            f"a translation of {f.translation_px:.2f} px (dy={f.translation[0]:+.2f}, "
            f"dx={f.translation[1]:+.2f}; nearest sampling's tie rounding explains up to "
            f"{TRANSLATION_TOL:.2f})"
        )
    err = PropertyViolation(
        "sub-pixel alignment",
        f"image and mask disagree systematically over {f.regions} regions{where} (image minus mask): {what}: image "
        "and mask were resampled on different pixel grids. Use the same align_corners for both (resize the image "
        "with align_corners=False, the mask with mode='nearest-exact'), and the same output size, crop offsets "
        "and centre of rotation",
        sample=sample,
    )
    err.cause = "subpixel"
    raise err
