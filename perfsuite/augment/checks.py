"""Properties every paired (image, mask) augmentation must keep, usable on any such callable.

The trick that makes alignment testable: the image is painted FROM its mask,
each label a distinct colour (:func:`encode`). After augmentation, the
image's colour at a pixel says which label the image put there; the mask
says which label the mask put there. If the same geometry moved both, they
agree.

Tolerance, and why:

* Only pixels whose ``(2*margin+1)**2`` neighbourhood in the OUTPUT mask is
  one label are compared: at a label boundary bilinear (image) and nearest
  (mask) resampling legitimately disagree by a pixel. Pixels labelled
  ``ignore_index`` or ``fill`` are not compared (they are what geometry
  brings in from outside, where the image is filled with some colour).
* ``photometric=False`` (geometry and mixing only): the strict decode. A
  compared pixel must be within ``STRICT_TOL`` of its label's palette colour;
  one that is near no palette colour is skipped at a boundary but is an
  error deeper inside (``margin+1``): something blended images (MixUp).
* ``photometric=True`` (jitter, blur, noise on): absolute colours are gone,
  but jitter is a per-image function of colour, so the image's colour must
  still be a function of the mask's label. Each label's compared pixels
  must lie within ``LOOSE_TOL`` of that label's median colour, looking one
  pixel deeper (blur spreads colour a pixel). Noise of std 0.03 is ~8/255.

The properties: :func:`assert_mask_format`, :func:`assert_valid_labels`,
:func:`assert_aligned`, :func:`assert_paired` (sample i's image still comes
from sample i), :func:`assert_masks_unchanged` (photometric-only ops). They
take NumPy arrays in one layout: images ``[B, H, W, 3]`` float 0..255, masks
``[B, H, W]`` integers. :func:`check_paired_augmentation` adapts a torch or
NumPy callable to that and runs them all under a Hypothesis search.

Example:
    >>> from perfsuite.augment.gpu import GpuAugment
    >>> from perfsuite.augment.recipe import Recipe
    >>> check_paired_augmentation(GpuAugment(Recipe(), "mask"), num_classes=19)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfsuite.augment.adapters import LAYOUTS, NumpyPerSample, TorchBatched, make_adapter
from perfsuite.augment.flips import assert_label_map
from perfsuite.augment.hints import (
    clamp_end,
    erased,
    interior_box,
    invented_label,
    overwritten_box,
    padded_with,
    pasted_from_another,
)
from perfsuite.augment.labels import CAST_ADVICE, LabelSpace, explain_by_cast
from perfsuite.augment.outputs import Output, seeded, stack_outputs
from perfsuite.augment.painting import (
    EXACT_TOL,
    LOOSE_TOL,
    OUTSIDE,
    PALETTE,
    STRICT_TOL,
    copied,
    decode,
    encode,
    palette_for,
    uniform,
)
from perfsuite.augment.search import assert_reproducible, flaky_advice, search_settings
from perfsuite.augment.shrinking import ShrinkBudget, fingerprint, shrink_calls_for
from perfsuite.errors import AugmentationError, PropertyArgumentError, PropertyViolation

FUNC = "check_paired_augmentation"
SUBPIXEL_SIDES = (128, 192)  # default mask sides under subpixel=True: see the scan in docs/properties.md
__all__ = [  # what the docs and tests import from here; adapters, outputs and painting are their own modules
    "LAYOUTS",
    "LOOSE_TOL",
    "OUTSIDE",
    "PALETTE",
    "STRICT_TOL",
    "AugmentationError",
    "Declared",
    "NumpyPerSample",
    "Output",
    "PropertyViolation",
    "TorchBatched",
    "assert_aligned",
    "assert_mask_format",
    "assert_masks_unchanged",
    "assert_paired",
    "assert_valid_labels",
    "check_example",
    "check_paired_augmentation",
    "decode",
    "encode",
    "make_adapter",
    "palette_for",
    "probe_output_size",
    "seeded",
    "stack_outputs",
    "uniform",
]


def _first(where: np.ndarray) -> str:
    ys, xs = np.nonzero(where)
    return f"{len(ys)} pixel(s), first at (y={ys[0]}, x={xs[0]})"


def _fmt(labels: Any) -> str:
    return "{" + ", ".join(str(v) for v in sorted(labels)) + "}"


def _violation(prop: str, message: str, *, sample: int | None = None, cause: str) -> PropertyViolation:
    err = PropertyViolation(prop, message, sample=sample)
    err.cause = cause
    return err


GEOMETRY = "image and mask were not moved by the same geometry (draw parameters once, apply to both)"


# -- the properties -------------------------------------------------------------------------


def assert_mask_format(
    masks_in: np.ndarray,
    masks_out: np.ndarray,
    images_out: np.ndarray,
    *,
    dtype_in: str,
    dtype_out: str,
    same_size: bool = True,
) -> None:
    """Masks come back integer, in the dtype they went in, one per image, at the image's size."""
    if dtype_out != dtype_in:
        raise PropertyViolation(
            "mask format",
            f"mask dtype changed from {dtype_in} to {dtype_out}; "
            "cast back with .to(masks.dtype) / .astype(mask.dtype) after resampling",
        )
    if masks_out.ndim != 3 or masks_out.shape[:1] != masks_in.shape[:1]:
        raise PropertyViolation(
            "mask format",
            f"masks went in as {masks_in.shape} and came out as {masks_out.shape}; return one [H, W] mask per sample",
        )
    if masks_out.shape[1:] != images_out.shape[1:3]:
        raise PropertyViolation(
            "mask format",
            f"masks are {masks_out.shape[1:]} but images are "
            f"{images_out.shape[1:3]}; resize both with the same geometry",
        )
    if same_size and masks_out.shape != masks_in.shape:
        raise PropertyViolation(
            "mask format",
            f"masks went in as {masks_in.shape} and came out as {masks_out.shape}. If the callable crops or "
            "resizes on purpose, pass output_size='auto' (one output size for every input) or same_size=False "
            "(with per_sample_sizes=True if each sample gets its own size): an exact crop is then still compared "
            "at every pixel, so a window one pixel off is caught; offsets under a pixel inside a resize need "
            "subpixel=True on the geometry alone (photometric=False)",
        )


def assert_valid_labels(
    masks_in: np.ndarray,
    masks_out: np.ndarray,
    *,
    num_classes: int,
    ignore_index: int | None,
    fill: int | None = None,
    mixes_samples: bool = False,
    shown_out: np.ndarray | None = None,
) -> None:
    """Output labels come from the input (this sample's, or the batch's if it mixes samples) or are ignore/fill.

    A failure is classified before it advises (:mod:`perfsuite.augment.hints`):
    ``shown_out``, the labels the output images decode to, lets it tell
    padding, clamping and erasing apart. The cause is on the error as ``.cause``.
    """
    space = LabelSpace(num_classes, ignore_index, fill)
    fill = space.effective_fill
    extra = space.extra
    batch_labels = set(np.unique(masks_in).tolist())
    for i, (m_in, m_out) in enumerate(zip(masks_in, masks_out)):
        have = set(np.unique(m_in).tolist())
        allowed = (batch_labels if mixes_samples else have) | extra
        for label in sorted(set(np.unique(m_out).tolist()) - allowed):
            outside = "" if 0 <= label < num_classes else f", and it is not a class (0..{num_classes - 1})"
            source = "the batch's input masks" if mixes_samples else "the input mask"
            diagnosis = invented_label(
                label, i, masks_in, m_out, space, None if shown_out is None else shown_out[i], OUTSIDE
            )
            err = PropertyViolation(
                "valid labels",
                f"label {label} appeared but {source} held only {_fmt(have if not mixes_samples else batch_labels)} "
                f"(ignore_index {ignore_index}, fill {fill}){outside}; {_first(m_out == label)}. "
                f"Cause: {diagnosis.cause}. {diagnosis.advice}",
                sample=i,
            )
            err.cause = diagnosis.cause
            raise err


def assert_masks_unchanged(masks_in: np.ndarray, masks_out: np.ndarray) -> None:
    """Photometric-only augmentation must hand masks back bit-identical."""
    if masks_out.shape != masks_in.shape:
        raise PropertyViolation("photometric masks", f"shape {masks_in.shape} became {masks_out.shape}")
    for i, (a, b) in enumerate(zip(masks_in, masks_out)):
        diff = a != b
        if diff.any():
            y, x = (int(v[0]) for v in np.nonzero(diff))
            raise PropertyViolation(
                "photometric masks",
                f"a photometric-only augmentation changed the mask at {_first(diff)}: {a[y, x]} -> {b[y, x]}; "
                "colour ops must not touch masks (pass masks around them, not through them)",
                sample=i,
            )


def assert_aligned(
    images_out: np.ndarray,
    masks_out: np.ndarray,
    palette: dict[int, np.ndarray],
    *,
    ignore_index: int | None,
    fill: int | None = None,
    photometric: bool = False,
    margin: int = 1,
    masks_in: np.ndarray | None = None,
    num_classes: int | None = None,
    batch_in: np.ndarray | None = None,
) -> None:
    """Where the output mask says label L (away from boundaries), the image shows L's colour.

    A sample whose image holds only exact palette colours (an exact copy: flips,
    crops, pads, quarter turns; nothing resampled it) is compared at every
    pixel, since there is no resampling boundary to forgive: a crop of the mask
    one pixel off is caught. ``photometric=True`` compares by consistency only.

    With ``masks_in``, a pixel may also show a bilinear blend of L's colour with
    another label of the SAME input sample, as long as L weighs at least a
    quarter (the nearest of bilinear's four taps always does): a structure thin
    enough for nearest sampling to drop legitimately tints the image. Other
    samples' labels never count, so images-only MixUp/CutMix stay caught.

    ``batch_in`` (the batch's input masks) only sharpens the cause: a box of the mask pasted from another
    sample than the image's is named as such, even where mixing is declared.
    """
    skip = {ignore_index, ignore_index if fill is None else fill}
    if batch_in is None:
        batch_in = masks_in
    for i, (img, mask) in enumerate(zip(images_out, masks_out)):
        if photometric:
            colours_in = len(np.unique(masks_in[i])) + 1 if masks_in is not None else len(palette) + 1  # + black
            _consistent(i, img, mask, skip, margin + 1, colours_in, _Sources(batch_in, palette, ignore_index))
        else:
            partners = sorted(set(np.unique(masks_in[i]).tolist()) & set(palette)) if masks_in is not None else []
            _strict(i, img, mask, palette, skip, margin, partners, ignore_index, num_classes, batch_in)


MIN_OWN_WEIGHT = 0.25  # bilinear: the tap nearest the sample point has weight >= 1/4


def _blend_of_own_label(colours: np.ndarray, own: np.ndarray, palette: dict, partners: list[int]) -> np.ndarray:
    """Per colour: is it a*palette[own] + (1-a)*palette[k], a >= MIN_OWN_WEIGHT, for a partner k (within tol)?"""
    ok = np.zeros(len(colours), dtype=bool)
    own_rgb = np.stack([palette[int(label)] for label in own]) if len(own) else np.zeros((0, 3))
    for k in partners:
        other = palette[k]
        span = own_rgb - other
        norm2 = np.maximum((span * span).sum(-1), 1e-9)
        a = np.clip(((colours - other) * span).sum(-1) / norm2, MIN_OWN_WEIGHT, 1.0)
        ok |= np.linalg.norm(colours - (other + a[:, None] * span), axis=-1) <= STRICT_TOL
    return ok


def _strict(
    i: int,
    img: np.ndarray,
    mask: np.ndarray,
    palette: dict,
    skip: set,
    margin: int,
    partners: list[int],
    ignore_index: int | None = None,
    num_classes: int | None = None,
    batch_in: np.ndarray | None = None,
) -> None:
    label, dist = decode(img, palette)
    if (dist <= EXACT_TOL).all():  # nothing resampled the image: no boundary to forgive
        margin = 0
    keep = uniform(mask, margin) & ~np.isin(mask, list(skip))
    decodable = dist <= STRICT_TOL
    if partners:  # forgive own-sample boundary blends that happen to sit near some palette colour
        suspect = keep & ~(decodable & (label == mask))
        ys, xs = np.nonzero(suspect)
        explained = np.zeros_like(suspect)
        explained[ys, xs] = _blend_of_own_label(img[ys, xs], mask[ys, xs], palette, partners)
        keep &= ~explained
    wrong = keep & decodable & (label != mask)
    if wrong.any():
        content = wrong & (label != OUTSIDE)  # content in the wrong place outranks outside fill as evidence
        y, x = (int(v[0]) for v in np.nonzero(content if content.any() else wrong))
        shown = "the fill colour (outside the image)" if label[y, x] == OUTSIDE else f"label {label[y, x]}"
        cause, advice = _misaligned_cause(mask, label, decodable, skip, (y, x), ignore_index, num_classes)
        if cause == "geometry" and batch_in is not None:
            pasted = pasted_from_another(i, batch_in, mask, np.where(decodable, label, OUTSIDE))
            if pasted is not None:
                cause, advice = pasted.cause, pasted.advice
        raise _violation(
            "alignment",
            f"the mask says label {mask[y, x]} but the image shows {shown} at {_first(wrong)}; {advice}",
            sample=i,
            cause=cause,
        )
    blended = uniform(mask, margin + 1) & keep & ~decodable
    if blended.any():
        y, x = (int(v[0]) for v in np.nonzero(blended))
        box = overwritten_box(keep & ~decodable, mask, keep & decodable & (label == mask))
        if box is not None:
            raise _violation(
                "alignment",
                f"inside a region of label {mask[y, x]} the image colour {img[y, x].round(1).tolist()} is no label's "
                f"colour at {_first(blended)}; {erased(int(mask[y, x]), box, ignore_index, 'overwritten').advice}",
                sample=i,
                cause="erase",
            )
        raise _violation(
            "alignment",
            f"inside a region of label {mask[y, x]} the image colour {img[y, x].round(1).tolist()} is no label's "
            f"colour ({dist[y, x]:.0f} away from the nearest) at {_first(blended)}: the image mixes in content the "
            "mask does not show (another sample's, as MixUp on images only does; or the outside fill or another "
            "region, as misaligned geometry does). If the callable has photometric ops, pass photometric=True",
            sample=i,
            cause="blend",
        )


def _misaligned_cause(
    mask: np.ndarray,
    label: np.ndarray,
    decodable: np.ndarray,
    skip: set,
    at: tuple[int, int],
    ignore_index: int | None,
    num_classes: int | None,
) -> tuple[str, str]:
    """(cause, advice) for a pixel whose mask label is not what the image shows (see :mod:`perfsuite.augment.hints`).

    ``at`` is the first pixel where the image shows content (a label) in the wrong place, or, if it shows
    none, the first where it shows the outside fill. Content in the wrong place is geometry, a cast, or a
    clamped ignore index. Outside fill alone is an eraser's box if it is an axis-aligned box not touching
    the frame, else padding of the mask with the one class it holds there (in a one-label mask a mask that
    never moved looks the same: the advice says both).
    """
    from scipy import ndimage

    y, x = at
    said, shown = int(mask[y, x]), int(label[y, x])
    if shown == OUTSIDE:
        regions, _ = ndimage.label(decodable & (label == OUTSIDE))
        region = regions == regions[y, x]
        box = interior_box(region)
        if box is not None:
            return "erase", erased(said, box, ignore_index, "image").advice
        padded = np.unique(mask[region & ~np.isin(mask, list(skip))])
        if len(padded) == 1:
            is_class = num_classes is None or 0 <= int(padded[0]) < num_classes
            pad = padded_with(int(padded[0]), ignore_index, is_class=is_class).advice
            return "padding", f"{pad} If instead the mask did not move at all: {GEOMETRY}"
        return "geometry", GEOMETRY
    if num_classes is not None and shown == ignore_index and clamp_end(ignore_index, num_classes) == said:
        return "clamp", (
            f"the image shows the ignore index ({ignore_index}) where the mask says {said}: labels were clamped "
            f"into 0..{num_classes - 1} (torch.clamp / np.clip / a lookup table). Never clamp masks: keep "
            "ignore_index as it is and let the loss ignore it"
        )
    cast = explain_by_cast(said, [shown])
    if cast is not None:
        return "dtype", (
            f"mask label {said} is what a {cast[0]} round trip makes of label {shown} "
            f"({CAST_ADVICE[cast[0]]}): keep masks integer end to end"
        )
    return "geometry", GEOMETRY


@dataclass(frozen=True)
class _Sources:
    """What a photometric check needs to name a cause beyond geometry: the batch's input masks and palette."""

    batch_in: np.ndarray | None
    palette: dict
    ignore_index: int | None


def _consistent(
    i: int, img: np.ndarray, mask: np.ndarray, skip: set, margin: int, colours_in: int, sources: _Sources | None = None
) -> None:
    """Each label's pixels show one colour (jitter is a per-image function of colour).

    An image with no more distinct colours than the input had (``colours_in``,
    the fill included), each of them filling some 3x3 block, was copied, not
    resampled, blurred or noised (:func:`~perfsuite.augment.painting.copied`): every pixel is compared,
    and must match its label's colour exactly.
    """
    tol = LOOSE_TOL
    if copied(img, colours_in):
        margin, tol = 0, 2 * EXACT_TOL
    keep = uniform(mask, margin) & ~np.isin(mask, list(skip))
    for label in np.unique(mask[keep]).tolist():
        where = keep & (mask == label)
        colours = img[where]
        dev = np.linalg.norm(colours - np.median(colours, axis=0), axis=-1)
        if dev.max() > tol:
            ys, xs = np.nonzero(where)
            k = int(dev.argmax())
            cause, advice = _photometric_cause(i, img, mask, keep, tol, sources)
            raise _violation(
                "alignment",
                f"pixels the mask labels {label} show different colours: (y={ys[k]}, x={xs[k]}) is "
                f"{dev[k]:.0f} away from the label's median colour ({int((dev > tol).sum())} such pixels); {advice}",
                sample=i,
                cause=cause,
            )


def _photometric_cause(
    i: int, img: np.ndarray, mask: np.ndarray, keep: np.ndarray, tol: float, sources: _Sources | None
) -> tuple[str, str]:
    """(cause, advice) for a label whose pixels show two colours: a pasted box from another sample than the
    image's, an erase box (one label in the mask, other colours in the image), else geometry."""
    if sources is not None and sources.batch_in is not None:
        shown, _ = decode(img[None], sources.palette)
        pasted = pasted_from_another(i, sources.batch_in, mask, shown[0])
        if pasted is not None:
            return pasted.cause, pasted.advice
    off = np.zeros_like(keep)
    for label in np.unique(mask[keep]).tolist():
        where = keep & (mask == label)
        colours = img[where]
        off[where] = np.linalg.norm(colours - np.median(colours, axis=0), axis=-1) > tol
    box = overwritten_box(off, mask, keep & ~off)
    if box is not None:
        ignore_index = sources.ignore_index if sources else None
        return "erase", erased(int(mask[box[0], box[1]]), box, ignore_index, "overwritten").advice
    return "geometry", GEOMETRY


def assert_paired(masks_in: np.ndarray, images_out: np.ndarray, palette: dict[int, np.ndarray]) -> None:
    """Sample i's output image shows only sample i's labels (with per-sample label sets, it came from sample i)."""
    label, dist = decode(images_out, palette)
    for i, (m_in, lab, d) in enumerate(zip(masks_in, label, dist)):
        have = set(np.unique(m_in).tolist())
        # A foreign label must fill a 3x3 block: boundary blends can pass near a third colour, never a block.
        lab = np.where(d <= STRICT_TOL, lab, OUTSIDE)
        foreign = uniform(lab, 1) & ~np.isin(lab, [*have, OUTSIDE])
        if foreign.any():
            y, x = (int(v[0]) for v in np.nonzero(foreign))
            raise PropertyViolation(
                "pairing",
                f"the image shows label {lab[y, x]}, which only another sample's mask holds "
                f"(this sample's: {_fmt(have)}), at {_first(foreign)}; images were reordered or mixed "
                "without their masks",
                sample=i,
            )


# -- one example, and the Hypothesis search ---------------------------------------------------


@dataclass(frozen=True)
class Declared:
    """What the callable under test is allowed to do."""

    num_classes: int
    ignore_index: int | None = 255
    fill: int | None = None
    photometric: bool = True
    photometric_only: bool = False
    mixes_samples: bool = False
    same_size: bool = True
    margin: int = 1
    flip_map: tuple[tuple[int, int], ...] = ()
    subpixel: bool = False
    subpixel_tol: float | None = None

    @property
    def space(self) -> LabelSpace:
        return LabelSpace(self.num_classes, self.ignore_index, self.fill, "int64", self.flip_map)


def zoomed_margin(margin: int, shape_in: tuple[int, ...], shape_out: tuple[int, ...]) -> int:
    """The boundary margin in OUTPUT pixels: a resize by z smears each input boundary over ~z output pixels."""
    zoom = max(shape_out[-2] / shape_in[-2], shape_out[-1] / shape_in[-1])
    return max(margin, int(np.ceil(margin * zoom)))


def check_example(paired: Callable[..., Output], masks: np.ndarray, seed: int, d: Declared) -> None:
    """Run every property on one batch of masks (images painted from them)."""
    palette = palette_for(masks)
    out = paired(encode(masks, palette), masks, seed)
    if out.ragged:  # each sample its own size: check each alone, against the whole batch's palette
        for i in range(len(masks)):
            one = Output(out.images[i][None], out.masks[i][None], out.dtype_in, out.dtype_out)
            try:
                _check_output(masks[i : i + 1], one, palette, d)
            except PropertyViolation as e:
                msg = str(e).replace(f"{e.prop} in sample 0:", f"{e.prop} in sample {i}:", 1)
                err = PropertyViolation(e.prop, msg.split(": ", 1)[1], sample=i)
                err.cause = getattr(e, "cause", None)
                raise err from None
        return
    _check_output(masks, out, palette, d)


def _check_output(masks: np.ndarray, out: Output, palette: dict, d: Declared) -> None:
    assert_mask_format(
        masks, out.masks, out.images, dtype_in=out.dtype_in, dtype_out=out.dtype_out, same_size=d.same_size
    )
    if d.photometric_only:
        assert_masks_unchanged(masks, out.masks)
    margin = zoomed_margin(d.margin, masks.shape, out.masks.shape)
    masks_out = out.masks
    aligned: dict[str, Any] = {
        "ignore_index": d.ignore_index,
        "fill": d.fill,
        "photometric": d.photometric,
        "margin": margin,
        "masks_in": None if d.mixes_samples else masks,
        "num_classes": d.num_classes,
        "batch_in": masks if masks.shape == masks_out.shape else None,
    }
    if d.flip_map:
        if d.photometric:  # one colour per region, whatever label it carries: the pair identities rest on it
            assert_aligned(out.images, masks_out, palette, **aligned)
        masks_out = assert_label_map(masks, out.images, masks_out, palette, d.space, margin, d.photometric)
    shown, _ = decode(out.images, palette)
    assert_valid_labels(
        masks,
        masks_out,
        num_classes=d.num_classes,
        ignore_index=d.ignore_index,
        fill=d.fill,
        mixes_samples=d.mixes_samples,
        shown_out=shown,
    )
    if not (d.flip_map and d.photometric):
        assert_aligned(out.images, masks_out, palette, **aligned)
    if not d.photometric and not d.mixes_samples:
        assert_paired(masks, out.images, palette)
    if d.subpixel and not d.photometric:
        from perfsuite.augment.alignment import assert_subpixel_aligned

        assert_subpixel_aligned(
            out.images,
            masks_out,
            palette,
            masks_in=masks,
            skip=d.space.extra,
            tol=d.subpixel_tol,
            mixes_samples=d.mixes_samples,
        )


def stream_seed(seed: int, batch: int) -> int:
    """The RNG seed for one example: the drawn seed, varied by batch size.

    Hypothesis reuses each drawn integer across several examples (about 36
    distinct seeds in 200 examples); mixing in the batch size multiplies the
    streams, so rare random branches (a 9% CutMix) get found. Height and
    width are left out so that shrinking a side keeps the same stream.
    """
    return (seed * 1_000_003 + batch) % 2**32


def probe_output_size(paired: Callable[..., Output], space: LabelSpace) -> tuple[int, int] | None:
    """The callable's output size if it is fixed (the same for two different input sizes), else None."""
    sizes: set[tuple[int, int]] = set()
    for h, w in ((40, 52), (61, 47)):
        masks = np.zeros((1, h, w), space.mask_dtype)
        masks[:, h // 2 :] = min(1, space.num_classes - 1)
        palette = palette_for(masks)
        out = paired(encode(masks, palette), masks, 0)
        shape = out.masks[0].shape if out.ragged else out.masks.shape[1:]
        sizes.add((int(shape[0]), int(shape[1])))
    return sizes.pop() if len(sizes) == 1 else None


def check_paired_augmentation(
    fn: Callable,
    *,
    num_classes: int,
    ignore_index: int | None = 255,
    fill: int | None = None,
    layout: str = "torch",
    device: str = "cpu",
    image_dtype: str | None = None,
    factory: bool = False,
    photometric: bool = True,
    photometric_only: bool = False,
    mixes_samples: bool = False,
    same_size: bool = True,
    margin: int = 1,
    settings: Any = None,
    mask_dtype: str | None = None,
    flip_pairs: Any = None,
    flip_label_map: Any = None,
    subpixel: bool = False,
    subpixel_tol: float | None = None,
    per_sample_sizes: bool = False,
    output_size: tuple[int, int] | str | None = None,
    keys: tuple[str, str] | None = None,
    adapter: Callable[..., Output] | None = None,
    search_seed: int | None = None,
    shrink_calls: int | None = None,
    **strategy_kwargs: Any,
) -> None:
    """Search for a batch on which ``fn`` breaks a property; raise :class:`PropertyViolation` if found.

    Args:
        fn: the paired augmentation (or, with ``factory=True``, ``seed -> callable``).
        num_classes, ignore_index: classes are ``0..num_classes-1`` (any count
            up to 2**31); ``ignore_index`` anywhere outside them (255, -100) or None.
        fill: the label geometry pads masks with, if not ``ignore_index``.
        mask_dtype: ``uint8``/``int16``/``int32``/``int64``: the masks the
            callable receives. Default: int64 for ``layout="torch"``/``"kornia"``,
            else the smallest that holds the labels.
        flip_pairs / flip_label_map: labels that swap when a sample is mirrored,
            e.g. ``flip_pairs=[(4, 5), (6, 7), (8, 9)]``; see :mod:`perfsuite.augment.labels`.
        layout: ``"torch"`` (batched tensors, :class:`TorchBatched`), ``"numpy"``
            (per sample, :class:`NumpyPerSample`), ``"dict"`` (PIL dicts,
            ``keys=("im", "lb")``), ``"albumentations"``, ``"torchvision"``
            (v2, ``tv_tensors.Mask``), ``"kornia"`` (``AugmentationSequential``
            with ``data_keys=["input", "mask"]``); or any ``adapter=``.
        photometric: the callable may change colours (jitter, blur, noise):
            alignment decodes by consistency instead of exact colours, and
            the image-side pairing check is skipped. Pass False for
            geometry/mixing-only callables: the checks get stricter.
        photometric_only: masks must come back bit-identical.
        mixes_samples: CutMix-style: labels may come from other samples.
        subpixel, subpixel_tol: the sub-pixel check (:mod:`perfsuite.augment.alignment`; needs
            ``photometric=False``): the mask the image's geometry predicts against the actual one.
            Its measured false-alarm and catch rates are in docs/properties.md (the one place they
            are kept). Turns on ``blobs=True`` masks (compact regions it can measure) of sides
            :data:`SUBPIXEL_SIDES` (128-192) unless ``min_side``/``max_side`` say otherwise.
        per_sample_sizes: each sample may come out at its own size (random crops); checked per sample.
        output_size: ``(H, W)`` or ``"auto"`` (probe the callable: if its output
            size is fixed, draw inputs from that size up to 1.5x, never tiny
            masks upscaled 50x). Implies ``same_size=False``.
        search_seed: run the search from this seed (derandomization off): runs that differ, each
            reproducible; default: the settings decide (``ci`` is derandomized: one fixed run).
        shrink_calls: how many calls the shrinker may make once a failure is found; default: 100 for a
            derandomized search (the ``ci`` profile: a red CI job reports in seconds), unbounded otherwise
            (:mod:`perfsuite.augment.shrinking`). The failure says how far it shrank.
        settings: a ``hypothesis.settings``; default: the active profile, or outside pytest ``ci`` under
            ``CI`` (:mod:`perfsuite.augment.search`). Yours is merged with perfsuite's health-check
            suppressions; nothing is written into the working directory outside pytest.
        strategy_kwargs: passed to :func:`~perfsuite.augment.strategies.mask_batches`.

    Argument errors are :class:`~perfsuite.errors.PropertyArgumentError`. The
    falsifying batch is on the exception as ``.example`` (and ``.seed``), the
    classified cause as ``.cause``.
    """
    import hypothesis
    from hypothesis import given
    from hypothesis import settings as hsettings
    from hypothesis.errors import Flaky

    from perfsuite.augment.strategies import mask_batches, seeds

    if mask_dtype is None and layout in ("torch", "kornia") and adapter is None:
        mask_dtype = "int64"  # what torch code receives from a DataLoader
    space = LabelSpace.declare(num_classes, ignore_index, fill, mask_dtype, flip_pairs, flip_label_map)
    if not isinstance(margin, int) or margin < 0:
        raise PropertyArgumentError(f"{FUNC}(margin={margin!r}): pass a whole number of pixels >= 0 (default 1)")
    if subpixel and photometric:
        raise PropertyArgumentError(
            f"{FUNC}(subpixel=True, photometric=True): the sub-pixel check measures each region's colour blend, "
            "which jitter, blur and noise change; pass photometric=False and check the geometric part of the "
            "transform alone (e.g. Recipe().geometric_only(), or your pipeline without its colour ops)"
        )
    if subpixel_tol is not None and not subpixel_tol > 0:
        raise PropertyArgumentError(
            f"{FUNC}(subpixel_tol={subpixel_tol!r}): pass a positive pixel distance, "
            "or subpixel=False to skip the check"
        )
    unknown = set(strategy_kwargs) - {
        "min_batch",
        "max_batch",
        "min_side",
        "max_side",
        "with_ignore",
        "labels_per_sample",
        "prefer_labels",
        "blobs",
        "pairs",
    }
    if unknown:
        raise PropertyArgumentError(
            f"{FUNC}({', '.join(sorted(unknown))}=...): not a parameter of {FUNC} nor of "
            "mask_batches; see help(check_paired_augmentation)"
        )
    paired = adapter or make_adapter(
        fn,
        layout,
        device=device,
        image_dtype=image_dtype,
        mask_dtype=space.mask_dtype,
        factory=factory,
        per_sample_sizes=per_sample_sizes,
        keys=keys,
    )
    fixed = isinstance(output_size, tuple) and len(output_size) == 2 and all(int(v) > 0 for v in output_size)
    if output_size not in (None, "auto") and not fixed:
        raise PropertyArgumentError(f"{FUNC}(output_size={output_size!r}): pass (H, W), 'auto' or None")
    size: tuple[int, int] | None = (int(output_size[0]), int(output_size[1])) if fixed else None  # type: ignore[index]
    assert_reproducible(paired, space, layout, size or (40, 52))
    if output_size == "auto":
        size = probe_output_size(paired, space)
    if size is not None:
        same_size = False
    declared = Declared(
        num_classes,
        space.ignore_index,
        space.fill,
        photometric,
        photometric_only,
        mixes_samples,
        same_size,
        margin,
        space.flip_map,
        subpixel,
        subpixel_tol,
    )
    strategy_kwargs.setdefault("prefer_labels", tuple(k for k, _ in space.flip_map))
    strategy_kwargs.setdefault("pairs", tuple((a, b) for a, b in space.flip_map if a < b))
    if subpixel:  # centroids need large compact regions inside the frame; the default masks seldom have four
        strategy_kwargs.setdefault("blobs", True)
        # sides where a 0.5x resize's align_corners mismatch leaves regions to measure (docs/properties.md's scan)
        strategy_kwargs.setdefault("min_side", SUBPIXEL_SIDES[0])
        strategy_kwargs.setdefault("max_side", SUBPIXEL_SIDES[1])
    batches = mask_batches(distinct_samples=True, output_size=size, space=space, **strategy_kwargs)

    base = search_settings(settings)
    if search_seed is not None:
        base = hsettings(base, derandomize=False)

    budget = ShrinkBudget(shrink_calls_for(base, shrink_calls))

    # One failure, shrunk, is what a user can read; several distinct ones arrive as an ExceptionGroup.
    @hsettings(base, report_multiple_bugs=False)
    @given(batch=batches, seed=seeds())
    def search(batch: Any, seed: int) -> None:
        def body() -> None:
            try:
                check_example(paired, batch.masks, stream_seed(seed, len(batch.masks)), declared)
            except PropertyViolation as e:
                e.example, e.seed = batch, seed
                e.shrink = budget
                raise

        budget.run(fingerprint(seed, batch.masks), body)

    if search_seed is not None:
        search = hypothesis.seed(search_seed)(search)
    try:
        search()
    except Flaky as exc:
        raise flaky_advice(exc) from exc
    except PropertyViolation as exc:
        if (budget.limit is not None or budget.out_of_time) and exc.args:
            exc.args = (f"{exc.args[0]}\n[{budget.describe()}]", *exc.args[1:])
        raise
