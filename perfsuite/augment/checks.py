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

import contextlib
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfsuite.errors import AugmentationError, PropertyViolation

OUTSIDE = -1  # decoded label of the image fill colour (black)
STRICT_TOL = 13.0  # 0.05 of the 0..255 range: uint8 rounding passes, a 20% MixUp blend does not
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
    """Images ``[B, H, W, 3]`` uint8 whose colours are the masks' labels."""
    lut = np.zeros((256, 3), np.uint8)
    for label, colour in palette.items():
        lut[label] = colour
    return lut[masks]


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


def _first(where: np.ndarray) -> str:
    ys, xs = np.nonzero(where)
    return f"{len(ys)} pixel(s), first at (y={ys[0]}, x={xs[0]})"


def _fmt(labels: Any) -> str:
    return "{" + ", ".join(str(v) for v in sorted(labels)) + "}"


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
            f"masks went in as {masks_in.shape} and came out as "
            f"{masks_out.shape}; pass same_size=False if resizing is intended",
        )


def assert_valid_labels(
    masks_in: np.ndarray,
    masks_out: np.ndarray,
    *,
    num_classes: int,
    ignore_index: int,
    fill: int | None = None,
    mixes_samples: bool = False,
) -> None:
    """Output labels come from the input (this sample's, or the batch's if it mixes samples) or are ignore/fill."""
    fill = ignore_index if fill is None else fill
    extra = {ignore_index, fill}
    batch_labels = set(np.unique(masks_in).tolist())
    for i, (m_in, m_out) in enumerate(zip(masks_in, masks_out)):
        have = set(np.unique(m_in).tolist())
        allowed = (batch_labels if mixes_samples else have) | extra
        for label in sorted(set(np.unique(m_out).tolist()) - allowed):
            outside = "" if 0 <= label < num_classes else f", and it is not a class (0..{num_classes - 1})"
            source = "the batch's input masks" if mixes_samples else "the input mask"
            raise PropertyViolation(
                "valid labels",
                f"label {label} appeared but {source} held only {_fmt(have if not mixes_samples else batch_labels)} "
                f"(ignore_index {ignore_index}, fill {fill}){outside}; {_first(m_out == label)}. "
                "Resample masks with nearest interpolation, never bilinear, and never clamp labels",
                sample=i,
            )


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
    ignore_index: int,
    fill: int | None = None,
    photometric: bool = False,
    margin: int = 1,
    masks_in: np.ndarray | None = None,
) -> None:
    """Where the output mask says label L (away from boundaries), the image shows L's colour.

    With ``masks_in``, a pixel may also show a bilinear blend of L's colour with
    another label of the SAME input sample, as long as L weighs at least a
    quarter (the nearest of bilinear's four taps always does): a structure thin
    enough for nearest sampling to drop legitimately tints the image. Other
    samples' labels never count, so images-only MixUp/CutMix stay caught.
    """
    skip = {ignore_index, ignore_index if fill is None else fill}
    for i, (img, mask) in enumerate(zip(images_out, masks_out)):
        if photometric:
            _consistent(i, img, mask, skip, margin + 1)
        else:
            partners = sorted(set(np.unique(masks_in[i]).tolist()) & set(palette)) if masks_in is not None else []
            _strict(i, img, mask, palette, skip, margin, partners)


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
    i: int, img: np.ndarray, mask: np.ndarray, palette: dict, skip: set, margin: int, partners: list[int]
) -> None:
    label, dist = decode(img, palette)
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
        y, x = (int(v[0]) for v in np.nonzero(wrong))
        shown = "the fill colour (outside the image)" if label[y, x] == OUTSIDE else f"label {label[y, x]}"
        raise PropertyViolation(
            "alignment",
            f"the mask says label {mask[y, x]} but the image shows {shown} at {_first(wrong)}; "
            "image and mask were not moved by the same geometry (draw parameters once, apply to both)",
            sample=i,
        )
    blended = uniform(mask, margin + 1) & keep & ~decodable
    if blended.any():
        y, x = (int(v[0]) for v in np.nonzero(blended))
        raise PropertyViolation(
            "alignment",
            f"inside a region of label {mask[y, x]} the image colour {img[y, x].round(1).tolist()} is no label's "
            f"colour ({dist[y, x]:.0f} away from the nearest) at {_first(blended)}: the image mixes in content the "
            "mask does not show (another sample's, as MixUp on images only does; or the outside fill or another "
            "region, as misaligned geometry does). If the callable has photometric ops, pass photometric=True",
            sample=i,
        )


def _consistent(i: int, img: np.ndarray, mask: np.ndarray, skip: set, margin: int) -> None:
    keep = uniform(mask, margin) & ~np.isin(mask, list(skip))
    for label in np.unique(mask[keep]).tolist():
        where = keep & (mask == label)
        colours = img[where]
        dev = np.linalg.norm(colours - np.median(colours, axis=0), axis=-1)
        if dev.max() > LOOSE_TOL:
            ys, xs = np.nonzero(where)
            k = int(dev.argmax())
            raise PropertyViolation(
                "alignment",
                f"pixels the mask labels {label} show different colours: (y={ys[k]}, x={xs[k]}) is "
                f"{dev[k]:.0f} away from the label's median colour ({int((dev > LOOSE_TOL).sum())} such pixels); "
                "image and mask were not moved by the same geometry (draw parameters once, apply to both)",
                sample=i,
            )


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


# -- adapters: any paired callable -> NumPy in one layout -----------------------------------


@dataclass(frozen=True)
class Output:
    images: np.ndarray  # [B, H, W, 3] float 0..255
    masks: np.ndarray  # [B, H, W] int64
    dtype_in: str
    dtype_out: str


@contextlib.contextmanager
def seeded(seed: int, device: str = "cpu") -> Iterator[None]:
    """Seed torch, NumPy's and Python's global generators for one call, restoring them after."""
    import torch

    np_state, py_state = np.random.get_state(), random.getstate()
    devices = [torch.device(device).index or 0] if str(device).startswith("cuda") else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        np.random.seed(seed)
        random.seed(seed)
        try:
            yield
        finally:
            np.random.set_state(np_state)
            random.setstate(py_state)


class TorchBatched:
    """Adapts ``fn(images [B, 3, H, W], masks [B, H, W]) -> (images, masks)`` on torch tensors.

    Images go in as ``image_dtype`` (float32 in [0, 1] or uint8), masks as
    ``mask_dtype`` (long by default). ``factory=True``: ``fn(seed)`` builds the
    callable, for augmentations with their own generator.
    """

    def __init__(
        self,
        fn: Callable,
        *,
        device: str = "cpu",
        image_dtype: str = "float32",
        mask_dtype: str = "int64",
        factory: bool = False,
    ) -> None:
        self.fn, self.device, self.factory = fn, device, factory
        self.image_dtype, self.mask_dtype = image_dtype, mask_dtype

    def __call__(self, images: np.ndarray, masks: np.ndarray, seed: int) -> Output:
        import torch

        x = torch.from_numpy(images).permute(0, 3, 1, 2).contiguous().to(self.device)
        x = x.to(getattr(torch, self.image_dtype))
        if x.is_floating_point():
            x = x / 255.0
        m = torch.from_numpy(masks).to(self.device, getattr(torch, self.mask_dtype))
        with seeded(seed, self.device), torch.no_grad():
            fn = self.fn(seed) if self.factory else self.fn
            xo, mo = fn(x, m)
        scale = 255.0 if x.is_floating_point() else 1.0  # back to the 0..255 the images were painted in
        xo = (xo.detach().cpu().double() * scale).permute(0, 2, 3, 1).numpy()
        return Output(xo, mo.detach().cpu().long().numpy(), str(m.dtype), str(mo.dtype))


class NumpyPerSample:
    """Adapts ``fn(image HxWx3 uint8, mask HxW uint8) -> (image, mask)``, called once per sample.

    ``factory=True``: ``fn(seed)`` builds the callable once per batch (e.g.
    ``lambda s: CpuAugment(recipe, "mask", seed=s)``).
    """

    def __init__(self, fn: Callable, *, image_dtype: str = "uint8", factory: bool = False) -> None:
        self.fn, self.image_dtype, self.factory = fn, image_dtype, factory

    def __call__(self, images: np.ndarray, masks: np.ndarray, seed: int) -> Output:
        outs = []
        with seeded(seed):
            fn = self.fn(seed) if self.factory else self.fn
            for img, mask in zip(images, masks):
                x = img if self.image_dtype == "uint8" else img.astype(self.image_dtype) / 255.0
                outs.append(fn(x, mask.copy()))
        imgs = [np.asarray(o[0], np.float64) * (1.0 if np.asarray(o[0]).dtype == np.uint8 else 255.0) for o in outs]
        ms = [np.asarray(o[1]) for o in outs]
        dtypes = {str(m.dtype) for m in ms}
        shapes = {m.shape for m in ms} | {i.shape[:2] for i in imgs}
        if len(shapes) != 1:
            raise PropertyViolation("mask format", f"per-sample outputs have different sizes {sorted(shapes)}")
        return Output(np.stack(imgs), np.stack(ms).astype(np.int64), str(masks.dtype), "/".join(sorted(dtypes)))


# -- one example, and the Hypothesis search ---------------------------------------------------


@dataclass(frozen=True)
class Declared:
    """What the callable under test is allowed to do."""

    num_classes: int
    ignore_index: int = 255
    fill: int | None = None
    photometric: bool = True
    photometric_only: bool = False
    mixes_samples: bool = False
    same_size: bool = True
    margin: int = 1


def check_example(paired: Callable[..., Output], masks: np.ndarray, seed: int, d: Declared) -> None:
    """Run every property on one batch of masks (images painted from them)."""
    palette = palette_for(masks)
    out = paired(encode(masks, palette), masks, seed)
    assert_mask_format(
        masks, out.masks, out.images, dtype_in=out.dtype_in, dtype_out=out.dtype_out, same_size=d.same_size
    )
    if d.photometric_only:
        assert_masks_unchanged(masks, out.masks)
    assert_valid_labels(
        masks,
        out.masks,
        num_classes=d.num_classes,
        ignore_index=d.ignore_index,
        fill=d.fill,
        mixes_samples=d.mixes_samples,
    )
    assert_aligned(
        out.images,
        out.masks,
        palette,
        ignore_index=d.ignore_index,
        fill=d.fill,
        photometric=d.photometric,
        margin=d.margin,
        masks_in=None if d.mixes_samples else masks,
    )
    if not d.photometric and not d.mixes_samples:
        assert_paired(masks, out.images, palette)


def stream_seed(seed: int, batch: int) -> int:
    """The RNG seed for one example: the drawn seed, varied by batch size.

    Hypothesis reuses each drawn integer across several examples (about 36
    distinct seeds in 200 examples); mixing in the batch size multiplies the
    streams, so rare random branches (a 9% CutMix) get found. Height and
    width are left out so that shrinking a side keeps the same stream.
    """
    return (seed * 1_000_003 + batch) % 2**32


def check_paired_augmentation(
    fn: Callable,
    *,
    num_classes: int,
    ignore_index: int = 255,
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
    **strategy_kwargs: Any,
) -> None:
    """Search for a batch on which ``fn`` breaks a property; raise :class:`PropertyViolation` if found.

    Args:
        fn: the paired augmentation (or, with ``factory=True``, ``seed -> callable``).
        layout: ``"torch"`` (batched tensors, :class:`TorchBatched`) or
            ``"numpy"`` (per sample, :class:`NumpyPerSample`).
        photometric: the callable may change colours (jitter, blur, noise):
            alignment decodes by consistency instead of exact colours, and
            the image-side pairing check is skipped. Pass False for
            geometry/mixing-only callables: the checks get stricter.
        photometric_only: masks must come back bit-identical.
        mixes_samples: CutMix-style: labels may come from other samples.
        settings: a ``hypothesis.settings``; default: the active profile.
        strategy_kwargs: passed to :func:`~perfsuite.augment.strategies.mask_batches`.

    The falsifying batch is on the exception as ``.example`` (and ``.seed``).
    """
    from hypothesis import given
    from hypothesis import settings as hsettings

    from perfsuite.augment.strategies import mask_batches, seeds

    if layout == "torch":
        paired = TorchBatched(fn, device=device, image_dtype=image_dtype or "float32", factory=factory)
    elif layout == "numpy":
        paired = NumpyPerSample(fn, image_dtype=image_dtype or "uint8", factory=factory)
    else:
        raise AugmentationError(
            f"layout={layout!r} is not a layout; write 'torch' (batched tensors) or 'numpy' (per sample)"
        )
    declared = Declared(
        num_classes, ignore_index, fill, photometric, photometric_only, mixes_samples, same_size, margin
    )
    batches = mask_batches(num_classes, ignore_index, distinct_samples=True, **strategy_kwargs)

    # One failure, shrunk, is what a user can read; several distinct ones arrive as an ExceptionGroup.
    @hsettings(settings or hsettings(), report_multiple_bugs=False)
    @given(batch=batches, seed=seeds())
    def search(batch: Any, seed: int) -> None:
        try:
            check_example(paired, batch.masks, stream_seed(seed, len(batch.masks)), declared)
        except PropertyViolation as e:
            e.example, e.seed = batch, seed
            raise

    search()
