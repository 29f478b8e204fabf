"""Why a label appeared: classify a valid-labels failure before advising.

The advice for a label the input did not hold depends on where it came from,
and the evidence is in the batch: the other samples' input labels, what the
IMAGE shows at those pixels (painted from the input mask, so it still knows
which input label or the outside fill is there), and the region's shape.
The causes, in the order they are tried (most specific first):

* ``dtype``: the label is what a lossy cast makes of an input label
  (bfloat16/float16 rounding, uint8/int8/int16 wrap-around);
* ``mixes samples``: the label is another sample's and the image shows it
  there too: image and mask were pasted together from another sample
  (CutMix, Mosaic, copy-paste) and ``mixes_samples=True`` was not declared;
* ``pairing``: most of the mask holds another sample's labels while the image
  does not, so sample i got sample j's mask (a permutation applied to images
  or masks alone);
* ``clamp``: the image shows the ignore index (or the fill) where the mask
  says the end of the class range that clamping that value gives
  (``clamp(0, C-1)`` turns 255 into C-1 and -100 into 0);
* ``erase``: an axis-aligned box inside the frame (not touching it) set to one
  real class, where the image is erased too or untouched (RandomErasing,
  Cutout or CoarseDropout applied to the mask with a class value);
* ``padding``: the image shows the outside fill there: geometry brought in
  pixels from outside and the mask was padded with a class (zero padding);
  tried after the clamp rule only where the ignore index proves a clamp, since
  zero padding (grid_sample's zeros, albumentations' ``fill_mask=0``) is far
  more common than a clamp that ends at 0;
* ``resampling``: anything else, typically a value between two input labels
  (bilinear) at a boundary.

Every piece of advice names a configuration that still catches the fault:
declaring a label as the fill accepts it as padding only, never as a class.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfsuite.augment.labels import CAST_ADVICE, LabelSpace, explain_by_cast

RESAMPLE = "Resample masks with nearest interpolation, never bilinear, and never clamp labels"
MIN_BOX_SIDE = 2  # px: an erase box is at least 2x2 (a single stray pixel is resampling, not an eraser)


@dataclass(frozen=True)
class Diagnosis:
    cause: str
    advice: str


def _fmt(labels) -> str:
    return "{" + ", ".join(str(v) for v in sorted(labels)) + "}"


def _majority(values: np.ndarray) -> int | None:
    if not values.size:
        return None
    found, counts = np.unique(values, return_counts=True)
    return int(found[counts.argmax()])


def clamp_end(value: int | None, num_classes: int) -> int | None:
    """What ``clamp(0, num_classes - 1)`` makes of ``value`` if it changes it, else None."""
    if value is None or 0 <= value < num_classes:
        return None
    return 0 if value < 0 else num_classes - 1


def interior_box(where: np.ndarray) -> tuple[int, int, int, int] | None:
    """``(y0, x0, h, w)`` if ``where`` is one filled axis-aligned box, at least 2x2, not touching the frame."""
    ys, xs = np.nonzero(where)
    if len(ys) < MIN_BOX_SIDE * MIN_BOX_SIDE:
        return None
    y0, y1, x0, x1 = int(ys.min()), int(ys.max()), int(xs.min()), int(xs.max())
    h, w = where.shape
    if y0 == 0 or x0 == 0 or y1 == h - 1 or x1 == w - 1:  # geometry brings the outside in from the frame
        return None
    if min(y1 - y0, x1 - x0) + 1 < MIN_BOX_SIDE or not where[y0 : y1 + 1, x0 : x1 + 1].all():
        return None
    return y0, x0, y1 - y0 + 1, x1 - x0 + 1


ERASED = {
    "both": "image and mask were erased there, the mask with class {label}",
    "image": "the image shows the outside fill there (erased) while the mask says class {label}",
    "mask": "the mask was set to class {label} there while the image was not erased",
    "overwritten": "the image was overwritten there (colours that are not class {label}'s: noise, a constant, "
    "another picture) while the mask says class {label}",
}


def erased(label: int, box: tuple[int, int, int, int], ignore_index: int | None, seen: str) -> Diagnosis:
    """A box inside the frame erased to class ``label``; ``seen``: "both", "image" or "mask" (see :data:`ERASED`)."""
    y0, x0, h, w = box
    erase_with = (
        f"Erase masks with the ignore index ({ignore_index})"
        if ignore_index is not None
        else "Erase masks with a label the loss ignores (declare it: ignore_index=...)"
    )
    return Diagnosis(
        "erase",
        f"a {h}x{w} rectangle at (y={y0}, x={x0}): {ERASED[seen].format(label=label)} (RandomErasing, Cutout or "
        f"CoarseDropout with a class value for the mask): erased pixels are not class {label}. {erase_with}, "
        "wherever the image is erased",
    )


MIN_BOX_SHARE = 0.5  # of an erase box's pixels, at least this share must disagree with the mask
SAME_SOURCE = 0.95  # a pasted mask box matches its source sample at this share of pixels at least
IMAGE_SOURCE = 0.6  # the image's box is attributed to the sample it matches best, at this share at least


def overwritten_box(bad: np.ndarray, mask: np.ndarray, good: np.ndarray) -> tuple[int, int, int, int] | None:
    """``(y0, x0, h, w)`` when the pixels where image and mask disagree (``bad``) fill most of an axis-aligned
    box inside the frame over which the mask holds one label, with pixels where they agree (``good``) elsewhere,
    at least half the box's count: an eraser that wrote a class into the mask and something else into the image. None
    otherwise (geometry moves whole regions, and an image-wide blend leaves no agreeing pixel around)."""
    ys, xs = np.nonzero(bad)
    if len(ys) < MIN_BOX_SIDE * MIN_BOX_SIDE:
        return None
    y0, y1, x0, x1 = int(ys.min()), int(ys.max()), int(xs.min()), int(xs.max())
    h, w = mask.shape
    if y0 == 0 or x0 == 0 or y1 == h - 1 or x1 == w - 1 or min(y1 - y0, x1 - x0) + 1 < MIN_BOX_SIDE:
        return None
    box = mask[y0 : y1 + 1, x0 : x1 + 1]
    if (box != box.flat[0]).any() or bad[y0 : y1 + 1, x0 : x1 + 1].mean() < MIN_BOX_SHARE:
        return None
    if good.sum() < MIN_BOX_SHARE * box.size:  # an image-wide blend or overwrite leaves few agreeing pixels
        return None
    return y0, x0, y1 - y0 + 1, x1 - x0 + 1


def _best_match(region: tuple[slice, slice], target: np.ndarray, masks_in: np.ndarray, skip: int) -> tuple[int, float]:
    """The sample (other than ``skip``) whose input mask matches ``target`` best over ``region``, and the share."""
    best, share = -1, 0.0
    for j, m in enumerate(masks_in):
        if j == skip:
            continue
        got = float((m[region] == target).mean())
        if got > share:
            best, share = j, got
    return best, share


def pasted_from_another(
    i: int, masks_in: np.ndarray, mask_out: np.ndarray, shown_out: np.ndarray | None
) -> Diagnosis | None:
    """Sample ``i``'s mask holds a box copied from sample j at the same place, while its image shows sample k's
    content there (or its own): the mix drew one partner for the image and another for the mask."""
    if len(masks_in) < 2 or masks_in.shape[1:] != mask_out.shape:
        return None
    changed = mask_out != masks_in[i]
    ys, xs = np.nonzero(changed)
    if len(ys) < MIN_BOX_SIDE * MIN_BOX_SIDE:
        return None
    y0, y1, x0, x1 = int(ys.min()), int(ys.max()), int(xs.min()), int(xs.max())
    h, w = mask_out.shape
    if (y1 - y0 + 1) * (x1 - x0 + 1) >= 0.9 * h * w:
        return None  # the whole frame: a reordered mask (pairing), not a pasted box
    region = (slice(y0, y1 + 1), slice(x0, x1 + 1))
    j, share = _best_match(region, mask_out[region], masks_in, skip=i)
    if share < SAME_SOURCE:
        return None
    where = f"a {y1 - y0 + 1}x{x1 - x0 + 1} box at (y={y0}, x={x0})"
    if shown_out is None:
        image = "the image's content there is not sample {j}'s"
    else:
        shown = shown_out[region]
        own = float((masks_in[i][region] == shown).mean())
        k, k_share = _best_match(region, shown, masks_in, skip=-1)
        if k == j or float((masks_in[j][region] == shown).mean()) >= IMAGE_SOURCE:
            return None  # image and mask pasted from the same partner: a consistent mix
        if own >= IMAGE_SOURCE and own >= k_share:
            image = f"the image there still shows sample {i}'s own content ({own:.0%} of the box)"
        elif k_share >= IMAGE_SOURCE:
            image = f"the image there shows sample {k}'s content ({k_share:.0%} of the box)"
        else:
            image = "the image there shows content that is not sample {j}'s"
    return Diagnosis(
        "mixing source",
        f"{where} of sample {i}'s mask is sample {j}'s mask at the same place ({share:.0%} of its pixels), but "
        f"{image.format(j=j)}: the mix pasted the mask from another partner than the image (a permutation drawn "
        "once for the images and again for the masks, or a mask-only paste). Draw the partner indices and the box "
        "once, and index images and masks with the same ones",
    )


def invented_label(
    label: int,
    i: int,
    masks_in: np.ndarray,
    mask_out: np.ndarray,
    space: LabelSpace,
    shown_out: np.ndarray | None = None,
    outside: int | None = None,
) -> Diagnosis:
    """Why ``label`` appeared in sample ``i``'s output mask. ``shown_out``: the labels its image decodes to."""
    where = mask_out == label
    have = set(np.unique(masks_in[i]).tolist())
    n = space.num_classes
    fill = space.effective_fill

    cast = explain_by_cast(label, have | space.extra)
    if cast is not None:
        name, src = cast
        return Diagnosis(
            "dtype",
            f"label {label} is what a {name} round trip makes of label {src} "
            f"({CAST_ADVICE[name]}): the masks passed through {name} (an autocast region, .half(), "
            ".to(torch.bfloat16), or a uint8 image path). Keep masks integer end to end; if an op needs "
            "floats, use float32 (exact for integers up to 2**24) and cast back with .round().long()",
        )

    shows = None if shown_out is None else _majority(shown_out[where])
    extra = space.extra
    counted = ~np.isin(mask_out, list(extra)) if extra else np.ones_like(where)
    for j in range(len(masks_in)):
        if j == i:
            continue
        theirs = set(np.unique(masks_in[j]).tolist()) - extra - have
        if label not in theirs:
            continue
        if shows == label:
            return Diagnosis(
                "mixes samples",
                f"label {label} is sample {j}'s, and sample {i}'s image shows it there too: image and mask "
                f"were pasted together from another sample (CutMix, Mosaic, copy-paste). If mixing is "
                f"intended, declare mixes_samples=True (alignment is still checked: a box pasted into one of "
                f"them alone stays caught)",
            )
        if counted.any() and np.isin(mask_out[counted], list(theirs)).mean() >= 0.5:
            return Diagnosis(
                "pairing",
                f"most of sample {i}'s mask holds sample {j}'s labels {_fmt(theirs)}: the "
                f"sample got sample {j}'s mask (images and masks were reordered separately: a shuffle, "
                "a permutation or a sort applied to one of them). Index images and masks with the same "
                "permutation, or keep each pair in one record",
            )

    pasted = pasted_from_another(i, masks_in, mask_out, shown_out)
    if pasted is not None:
        return pasted

    if shows is not None and shows == space.ignore_index and clamp_end(space.ignore_index, n) == label:
        return _clamped(label, f"the ignore index ({space.ignore_index})", "ignore_index", n)

    if shown_out is not None and shows == outside:
        box = interior_box(where & (shown_out == outside))
        if box is not None:
            return erased(label, box, space.ignore_index, "both")
        ignored = np.asarray(shown_out == space.ignore_index) & (space.ignore_index is not None)
        if clamp_end(fill, n) == label and ignored.any() and (mask_out[ignored] == label).mean() >= 0.5:
            # the ignore index became this label too: clamped after padding with the (out-of-range) fill
            return _clamped(label, f"the padding (fill {fill})", "the fill", n)
        clamped_fill = fill if clamp_end(fill, n) == label else None
        return padded_with(label, space.ignore_index, is_class=0 <= label < n, clamped_fill=clamped_fill)

    box = interior_box(where)
    if box is not None and 0 <= label < n:
        return erased(label, box, space.ignore_index, "mask")

    below = [v for v in have if v < label]
    above = [v for v in have if v > label]
    between = (
        f" (label {label} lies between input labels {max(below)} and {min(above)}: an interpolated value)"
        if below and above
        else ""
    )
    return Diagnosis("resampling", f"{RESAMPLE}{between}")


def _clamped(label: int, what: str, keep: str, n: int) -> Diagnosis:
    return Diagnosis(
        "clamp",
        f"the image shows {what} where the mask says {label}: labels were clamped into 0..{n - 1} "
        f"(torch.clamp / np.clip / a lookup table). Never clamp masks: keep {keep} as it is and let the "
        "loss ignore it",
    )


def padded_with(
    label: int, ignore_index: int | None, *, is_class: bool = True, clamped_fill: int | None = None
) -> Diagnosis:
    """The image shows the outside fill where the mask says ``label``: the mask was padded with it.

    ``clamped_fill``: the declared fill, when clamping it would also give ``label`` (said as an alternative).
    """
    pad = (
        (f"Pad masks with the ignore index (fill={ignore_index} / border_value / fill_mask / padding_mode='constant')")
        if ignore_index is not None
        else "Pad masks with a label the loss ignores (and declare it: ignore_index=... or fill=...)"
    )
    if is_class:  # a class cannot be the ignore index; as the fill its pixels go unchecked
        meant = f"if class {label} is meant to mark padding, declare fill={label} (its pixels are then not compared)"
    else:
        meant = f"if {label} is meant to mark padding, declare fill={label} (or ignore_index={label})"
    clamp = (
        f" If the masks are padded with {clamped_fill} and then clamped, that clamp made the {label}: "
        "never clamp masks."
        if clamped_fill is not None
        else ""
    )
    return Diagnosis(
        "padding",
        f"the image shows the outside fill where the mask says {label}: geometry brought "
        f"in pixels from outside the image and the mask was padded with {label}"
        f"{' (zero padding)' if label == 0 else ''}. {pad}, or, {meant}.{clamp}",
    )
