"""Declared left/right swaps: a mirrored sample swaps the paired labels, any other sample does not.

Two questions per sample, answered from different evidence so that neither can
fool the other:

* **Did the geometry mirror the sample?** (:func:`mirrored`) Read from where
  the input's regions went, never from the mask's paired labels (a swap must
  not fool it). First the exact symmetries of the frame are tried, which is
  how a flip is usually done ("compare the image with its own flip": the labels
  the image shows against the input mask, its left-right and up-down flips and
  its half turn); then, for flips composed with rotation or scale, a centroid
  affine fit and the sign of its determinant. A mirror-symmetric sample, a
  crop that biases centroids, or too few regions leave it undecided.
* **Which input label does each output region show?** (:func:`shown_labels`)
  Without colour ops, the image's absolute colours say it (each label was
  painted its own palette colour). Under colour jitter they do not, but
  jitter is one function of colour per image, and brightness, contrast,
  saturation, gamma and hue shifts under a quarter turn keep the *direction*
  between two colours: so for a pair (a, b) whose regions both show in the
  output, the colour difference of the mask's a- and b-regions points along
  ``palette[a] - palette[b]`` if the mask kept the labels, and against it if
  it swapped them. That is trusted only where the sample's other labels show
  the same: every two of them keep their direction. A pair with one member in
  the input needs no colour at all: whatever the mask calls it, it shows that
  member.

A sample whose mirroring or whose pair identities cannot be decided is left
out: its swap is neither demanded nor refused (the labels a correct swap makes
are accepted), never counted as "not mirrored".
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from perfsuite.augment.labels import LabelSpace
from perfsuite.augment.painting import EXACT_TOL, OUTSIDE, copied, decode, uniform
from perfsuite.errors import PropertyViolation

FLIP_DECODE_TOL = 63.0  # half the palette spacing: nearest-colour decoding is unambiguous within it
MIN_REGION = 4  # pixels a label needs, in and out, for its centroid or colour to count
MIN_COSINE = 0.5  # colour differences must keep their direction within 60 degrees to tell a and b apart
MIN_SEPARATION = 20.0  # 0..255 units: two regions' colours closer than this (grey-scaled, washed out) are not told
AGREE, DISAGREE = 0.98, 0.9  # a frame symmetry decides only if it fits and every opposite-handed one does not
MIN_KNOWN = 0.5  # ... and only where the image says which label most output pixels show
MAX_WINDOW_WORK = 20_000_000  # pixel comparisons a crop search may spend per symmetry (~20 MB of booleans)


# -- was a sample mirrored? -------------------------------------------------------------------------


def _symmetries(shape: tuple[int, int]) -> list[tuple[bool, object]]:
    """(mirrors, fn) for each symmetry of an ``shape`` frame that maps it onto itself."""
    out: list[tuple[bool, object]] = [
        (False, lambda m: m),
        (True, lambda m: m[:, ::-1]),
        (True, lambda m: m[::-1, :]),
        (False, lambda m: m[::-1, ::-1]),
    ]
    if shape[0] == shape[1]:
        out += [
            (True, lambda m: m.T),
            (True, lambda m: m[::-1, ::-1].T),
            (False, lambda m: np.rot90(m, 1)),
            (False, lambda m: np.rot90(m, -1)),
        ]
    return out


def _agreement(moved: np.ndarray, shown: np.ndarray, known: np.ndarray) -> float:
    """The best fraction of ``known`` pixels of ``shown`` equal to a same-size window of ``moved`` (a crop of it)."""
    h, w = shown.shape
    if moved.shape[0] < h or moved.shape[1] < w:
        return 0.0
    if moved.shape == shown.shape:
        return float((moved[known] == shown[known]).mean())
    offsets = (moved.shape[0] - h + 1) * (moved.shape[1] - w + 1)
    if offsets * int(known.sum()) > MAX_WINDOW_WORK:  # a small crop of a large frame: left to the centroid fit
        return 0.0
    windows = np.lib.stride_tricks.sliding_window_view(moved, (h, w))  # (oy, ox, h, w), no copy
    hits = (windows[..., known] == shown[known]).mean(-1)
    return float(hits.max())


def _by_symmetry(mask_in: np.ndarray, shown: np.ndarray) -> bool | None:
    """Mirrored (True/False) if one symmetry of the input frame, cropped anywhere to the output's size, explains
    ``shown`` and none of the other handedness does: flips, quarter turns and crops, exactly."""
    if shown.shape[0] > mask_in.shape[0] or shown.shape[1] > mask_in.shape[1]:
        return None
    known = shown != OUTSIDE
    counts = np.unique(shown[known], return_counts=True)[1]
    if known.mean() < MIN_KNOWN or (counts >= MIN_REGION).sum() < 2:  # too little structure to match by chance
        return None
    best: dict[bool, float] = {False: 0.0, True: 0.0}
    for mirrors, fn in _symmetries(mask_in.shape):
        moved = fn(mask_in)  # type: ignore[operator]
        best[mirrors] = max(best[mirrors], _agreement(moved, shown, known))
    for mirrors in (True, False):
        if best[mirrors] >= AGREE and best[not mirrors] < DISAGREE:
            return mirrors
    return None


def _touches_frame(where: np.ndarray) -> bool:
    return bool(where[0].any() or where[-1].any() or where[:, 0].any() or where[:, -1].any())


def _by_centroids(mask_in: np.ndarray, shown: np.ndarray, labels: Iterable[int]) -> bool | None:
    """Mirrored if an affine fit of the labels' centroids (in -> out) is close to a similarity with det < 0.

    Only labels whose output region stays off the frame count: a crop or a
    rotation that cuts a region moves its centroid. Fewer than three labels,
    centroids in a line, or a fit far from a rotation-scale-flip give None.
    """
    src, dst = [], []
    for label in labels:
        a, b = mask_in == label, shown == label
        if a.sum() >= MIN_REGION and b.sum() >= MIN_REGION and not _touches_frame(b):
            src.append(np.argwhere(a).mean(0)[::-1])  # (x, y)
            dst.append(np.argwhere(b).mean(0)[::-1])
    if len(src) < 3:
        return None
    src_c = np.array(src) - np.mean(src, 0)
    dst_c = np.array(dst) - np.mean(dst, 0)
    if np.linalg.svd(src_c, compute_uv=False)[-1] < 1.5:  # collinear centroids: no handedness
        return None
    a, *_ = np.linalg.lstsq(src_c, dst_c, rcond=None)
    s = np.linalg.svd(a, compute_uv=False)
    if s[-1] < 1e-6 or s[0] / s[-1] > 2.0:  # far from a rotation-scale-flip: crops moved the centroids
        return None
    return bool(np.linalg.det(a) < 0)


def mirrored(mask_in: np.ndarray, shown_out: np.ndarray, labels: Iterable[int], exact: bool = True) -> bool | None:
    """Did the geometry that made ``shown_out`` from ``mask_in`` reflect it? ``None`` if it cannot be told.

    ``shown_out`` is the input label each output pixel's IMAGE shows
    (:func:`shown_labels`; ``OUTSIDE`` where unknown), never the output mask.
    A reflection is any: a horizontal flip, or a vertical one (a horizontal
    flip turned 180 degrees), since both swap the subject's left and right.
    ``exact``: the image is a copy (:func:`~perfsuite.augment.painting.copied`),
    so frame symmetries and crops are tried pixel for pixel; a resampled image
    could match one by chance (a rescaled rectangle, cut by a crop).
    """
    found = _by_symmetry(mask_in, shown_out) if exact else None
    return found if found is not None else _by_centroids(mask_in, shown_out, labels)


# -- which input label does each output region show? -------------------------------------------


def _region_colours(img: np.ndarray, mask: np.ndarray, labels: Iterable[int], margin: int) -> dict[int, np.ndarray]:
    """The median image colour of each label's region in the output mask (labels with too few pixels left out).

    Its interior where it has one (one pixel deeper than alignment looks: blur
    spreads colour a pixel), else its whole region: an eye two pixels high is
    all boundary, and its colour a blend with what surrounds it, but a pair's
    two members blend with the same surroundings (skin), so the DIFFERENCE of
    their colours still points along their palette colours' difference.
    """
    inner = uniform(mask, margin + 1)
    out = {}
    for label in labels:
        region = mask == label
        where = inner & region
        where = where if where.sum() >= MIN_REGION else region
        if where.sum() >= MIN_REGION:
            out[int(label)] = np.median(img[where], axis=0)
    return out


def _keeps_directions(colours: dict[int, np.ndarray], palette: dict[int, np.ndarray]) -> bool:
    """Every two labels' observed colour difference points the way their palette colours' does (>= MIN_COSINE)."""
    labels = sorted(colours)
    for k, a in enumerate(labels):
        for b in labels[k + 1 :]:
            cos = _cosine(colours[a] - colours[b], palette[a] - palette[b])
            if cos is not None and cos < MIN_COSINE:
                return False
    return True


def _cosine(seen: np.ndarray, painted: np.ndarray) -> float | None:
    n_seen, n_painted = float(np.linalg.norm(seen)), float(np.linalg.norm(painted))
    if n_seen < MIN_SEPARATION or n_painted == 0:
        return None
    return float(seen @ painted) / (n_seen * n_painted)


def shown_labels(
    img: np.ndarray,
    mask_out: np.ndarray,
    labels_in: set[int],
    palette: dict[int, np.ndarray],
    space: LabelSpace,
    margin: int,
    photometric: bool,
) -> np.ndarray:
    """Per output pixel, the input label its image shows (``OUTSIDE`` where that is not known).

    ``photometric=False``: the absolute decode. ``photometric=True``: each
    output-mask region's identity, decided from its colour as the module
    docstring says, over the whole region (the consistency check, run first,
    has found one colour per region where the image's regions are).
    """
    if not photometric:
        seen, dist = decode(img, palette)
        return np.where(dist <= FLIP_DECODE_TOL, seen, OUTSIDE)
    mapping = dict(space.flip_map)
    present = [v for v in np.unique(mask_out).tolist() if v not in space.extra]  # a swap may bring in a new label
    colours = _region_colours(img, mask_out, present, margin)
    anchors = {k: v for k, v in colours.items() if k not in mapping and k in labels_in}
    directions_kept = _keeps_directions(anchors, palette)
    shown = np.full(mask_out.shape, OUTSIDE, dtype=np.int64)
    for label in present:
        partner = mapping.get(label)
        if partner is not None and (label in labels_in) != (partner in labels_in):
            # one member went in: whatever the mask calls the region, it shows that one (no colour needed,
            # so thin regions count too; the consistency check has put the mask's regions where the image's are)
            shown[mask_out == label] = label if label in labels_in else partner
            continue
        if label not in colours:
            continue
        who = label if partner is None else None
        if partner is not None and label in labels_in and partner in colours and directions_kept:
            cos = _cosine(colours[label] - colours[partner], palette[label] - palette[partner])
            if cos is not None and abs(cos) >= MIN_COSINE:
                who = label if cos > 0 else partner
        if who is not None:  # the whole region: the consistency check has put it where the image's colour is
            shown[mask_out == label] = who
    return shown


# -- the property ---------------------------------------------------------------------------------


def _violation(message: str, sample: int, cause: str) -> PropertyViolation:
    err = PropertyViolation("label swap", message, sample=sample)
    err.cause = cause
    return err


def _first(where: np.ndarray) -> str:
    ys, xs = np.nonzero(where)
    return f"{len(ys)} pixel(s), first at (y={ys[0]}, x={xs[0]})"


def assert_label_map(
    masks_in: np.ndarray,
    images_out: np.ndarray,
    masks_out: np.ndarray,
    palette: dict[int, np.ndarray],
    space: LabelSpace,
    margin: int = 1,
    photometric: bool = False,
) -> np.ndarray:
    """Mirrored samples swap the declared labels, others do not; return the masks with the swap undone.

    Where a sample's mirroring cannot be told, it is judged by whichever of
    "swapped" or "not swapped" its pixels follow, so a correct swap is never
    refused; Hypothesis finds the samples where it can be told.
    """
    mapping = dict(space.flip_map)
    domain = list(mapping)
    lut_from = np.array(domain, dtype=np.int64)
    lut_to = np.array([mapping[v] for v in domain], dtype=np.int64)
    out = masks_out.copy()
    for i in range(len(masks_out)):
        labels_in = {v for v in np.unique(masks_in[i]).tolist() if v not in space.extra}
        img = images_out[i]
        seen = shown_labels(img, masks_out[i], labels_in, palette, space, margin, photometric)
        exact = (
            copied(img, len(np.unique(masks_in[i])) + 1)
            if photometric
            else bool((decode(img, palette)[1] <= EXACT_TOL).all())
        )
        mir = mirrored(masks_in[i], seen, sorted(labels_in), exact)
        known = np.isin(seen, lut_from)
        partner = np.where(known, lut_to[np.searchsorted(lut_from, np.where(known, seen, lut_from[0]))], OUTSIDE)
        inside = uniform(masks_out[i], margin)  # a violation is only claimed away from boundaries
        swapped = inside & known & (masks_out[i] == partner)
        kept = inside & known & (masks_out[i] == seen)
        how = "read from the image" if not photometric else "read from where the input's regions went"
        if mir is None:  # left out: accept whichever the mask did, judged on every pixel whose identity is known
            mir = bool((known & (masks_out[i] == partner)).sum() > (known & (masks_out[i] == seen)).sum())
        elif mir and kept.any():
            y, x = (int(v[0]) for v in np.nonzero(kept))
            raise _violation(
                f"the geometry mirrored this sample ({how}) but the mask kept label {seen[y, x]} where the declared "
                f"flip map swaps {seen[y, x]} -> {mapping[int(seen[y, x])]}, at {_first(kept)}: the flip forgot the "
                "label swap. Swap paired labels whenever the geometry mirrors (a lookup table on the flipped "
                "samples' masks, after the flip)",
                i,
                "missing swap",
            )
        elif not mir and swapped.any():
            y, x = (int(v[0]) for v in np.nonzero(swapped))
            raise _violation(
                f"the geometry did not mirror this sample ({how}) but the mask shows label {masks_out[i][y, x]} "
                f"where the image shows {seen[y, x]}, at {_first(swapped)}: labels were swapped without a flip (the "
                "swap ran on samples the flip skipped, or the flip decision was drawn twice). Swap exactly the "
                "samples the geometry mirrored",
                i,
                "swap without flip",
            )
        if mir:
            out[i] = space.apply_map(masks_out[i], inverse=True)
    return out
