"""Why a label appeared: classify a valid-labels failure before advising.

The advice for a label the input did not hold depends on where it came from,
and the evidence is in the batch: the other samples' input labels, what the
IMAGE shows at those pixels (painted from the input mask, so it still knows
which input label or the outside fill is there), and the region's shape.
The causes, in the order they are tried (most specific first):

* ``dtype``: the label is what a lossy cast makes of an input label
  (bfloat16/float16 rounding, uint8/int8/int16 wrap-around);
* ``pairing``: most of the mask holds another sample's labels, so sample i
  got sample j's mask (a permutation applied to images or masks alone);
* ``clamp``: the label is a range end (0 or num_classes-1) where the image
  shows the ignore index or the fill: ``clamp(0, C-1)`` swallowed them;
* ``erase``: an axis-aligned rectangle of one real class inside the image
  (RandomErasing, Cutout, CoarseDropout applied to the mask with a class value);
* ``padding``: the image shows the outside fill there: geometry brought in
  pixels from outside and the mask was padded with a class (zero padding);
* ``resampling``: anything else, typically a value between two input labels
  (bilinear) at a boundary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfsuite.augment.labels import CAST_ADVICE, LabelSpace, explain_by_cast

RESAMPLE = "Resample masks with nearest interpolation, never bilinear, and never clamp labels"


@dataclass(frozen=True)
class Diagnosis:
    cause: str
    advice: str


def _fmt(labels) -> str:
    return "{" + ", ".join(str(v) for v in sorted(labels)) + "}"


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

    extra = space.extra
    counted = ~np.isin(mask_out, list(extra)) if extra else np.ones_like(where)
    for j in range(len(masks_in)):
        if j == i:
            continue
        theirs = set(np.unique(masks_in[j]).tolist()) - extra - have
        if label in theirs and counted.any() and np.isin(mask_out[counted], list(theirs)).mean() >= 0.5:
            return Diagnosis(
                "pairing",
                f"most of sample {i}'s mask holds sample {j}'s labels {_fmt(theirs)}: the "
                f"sample got sample {j}'s mask (images and masks were reordered separately: a shuffle, "
                "a permutation or a sort applied to one of them). Index images and masks with the same "
                "permutation, or keep each pair in one record",
            )

    shows = None
    if shown_out is not None and where.any():
        values, counts = np.unique(shown_out[where], return_counts=True)
        shows = int(values[counts.argmax()])
    is_end = label in (0, n - 1)
    if (
        shows is not None
        and is_end
        and (
            (space.ignore_index is not None and shows == space.ignore_index)
            or (shows == outside and fill is not None and not 0 <= fill < n)
        )
    ):
        what = "the ignore index" if shows == space.ignore_index else f"the padding (fill {fill})"
        return Diagnosis(
            "clamp",
            f"the image shows {what} where the mask says {label}: labels were clamped into "
            f"0..{n - 1} (torch.clamp / np.clip / a lookup table). Never clamp masks: keep "
            f"{'ignore_index' if shows == space.ignore_index else 'the fill'} as it is and let the loss "
            "ignore it",
        )

    ys, xs = np.nonzero(where)
    if len(ys) >= 4:
        y0, y1, x0, x1 = ys.min(), ys.max(), xs.min(), xs.max()
        h, w = mask_out.shape
        rect = where[y0 : y1 + 1, x0 : x1 + 1].all()
        strip = (y1 - y0 + 1 == h and (x0 == 0 or x1 == w - 1)) or (x1 - x0 + 1 == w and (y0 == 0 or y1 == h - 1))
        if rect and not strip and 0 <= label < n and (min(y1 - y0, x1 - x0) >= 1):
            return Diagnosis(
                "erase",
                f"a {y1 - y0 + 1}x{x1 - x0 + 1} rectangle at (y={y0}, x={x0}) was set to "
                f"class {label} (RandomErasing, Cutout or CoarseDropout applied to the mask): erased "
                f"pixels are not class {label}. Erase masks with the ignore index "
                f"({space.ignore_index}) or leave them untouched; if {label} deliberately marks "
                f"erased pixels, declare fill={label}",
            )
    if shows is not None and shows == outside:
        return padded_with(label, space.ignore_index)

    below = [v for v in have if v < label]
    above = [v for v in have if v > label]
    between = (
        f" (label {label} lies between input labels {max(below)} and {min(above)}: an interpolated value)"
        if below and above
        else ""
    )
    return Diagnosis("resampling", f"{RESAMPLE}{between}")


def padded_with(label: int, ignore_index: int | None) -> Diagnosis:
    """The image shows the outside fill where the mask says class ``label``: the mask was padded with it."""
    pad = (
        (f"Pad masks with the ignore index (fill={ignore_index} / border_value / mask_value / padding_mode='constant')")
        if ignore_index is not None
        else "Pad masks with a label the loss ignores (and declare it: ignore_index=... or fill=...)"
    )
    return Diagnosis(
        "padding",
        f"the image shows the outside fill where the mask says {label}: geometry brought "
        f"in pixels from outside the image and the mask was padded with {label}"
        f"{' (zero padding)' if label == 0 else ''}. {pad}, or, if {label} is meant to mark padding, "
        f"declare fill={label} (or ignore_index={label})",
    )
