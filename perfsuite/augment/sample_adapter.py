"""A Dataset's own transform, adapted to the property checks from one recorded call.

``perfsuite check`` records what a Dataset's ``__getitem__`` hands its transform
(:func:`interface_of`): a dict holding an image and a mask, an ``(image, mask)``
tuple, two positional arguments, or ``image=``/``mask=`` keywords
(albumentations), each value a PIL image, a NumPy array or a torch tensor, in
any of the layouts users write (HWC or CHW, uint8 or float). The adapter
(:class:`SampleAdapter`) then calls the transform on the user's real mask with
the image replaced by one painted from that mask (:func:`perfsuite.augment.painting.encode`),
in the same type, mode, layout and dtype as the real image, so the alignment and
label properties can read the result.

What comes back is read in the same way, and its colours are calibrated per
channel (:func:`calibrate`): a robust affine fit from each label's painted
colour to the median colour of its region, inverted. A ``Normalize`` (mean/std)
or a 0..1 float image is such a map, so a transform that only normalises is
compared exactly; one that jitters colours is noticed (:attr:`SampleAdapter.exactness`)
and then compared by consistency only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfsuite.augment.outputs import Output, seeded
from perfsuite.augment.painting import STRICT_TOL, palette_for, uniform
from perfsuite.errors import AugmentationError, PropertyViolation

ADAPTER_ADVICE = (
    "write an adapter: a callable adapter(images [B, H, W, 3] uint8, masks [B, H, W], seed) -> "
    "perfsuite.augment.outputs.Output that calls your transform, and pass it as "
    "check_paired_augmentation(None, adapter=your_adapter, num_classes=...) (docs/properties.md)"
)


class CannotAdapt(AugmentationError):
    """The transform's interface is none perfsuite adapts: the message names what was found and what to write."""


def _kind(value: Any) -> str | None:
    """'pil', 'numpy' or 'torch' for an image-like value, else None."""
    if type(value).__module__.startswith("PIL.") and hasattr(value, "mode"):
        return "pil"
    if isinstance(value, np.ndarray) and value.ndim in (2, 3):
        return "numpy"
    if type(value).__module__.startswith("torch") and hasattr(value, "ndim") and value.ndim in (2, 3):
        return "torch"
    return None


def _as_array(value: Any) -> np.ndarray:
    kind = _kind(value)
    if kind == "pil":
        return np.asarray(value)
    if kind == "torch":
        return value.detach().cpu().numpy()
    return np.asarray(value)


def _is_image(value: Any) -> bool:
    """Three channels: PIL RGB, HWC or CHW arrays/tensors."""
    if _kind(value) == "pil":
        return value.mode in ("RGB", "RGBA")
    return _kind(value) is not None and value.ndim == 3 and (value.shape[-1] in (3, 4) or value.shape[0] in (3, 4))


def _is_mask(value: Any) -> bool:
    """One channel of integers: PIL L/P/I modes, [H, W] or [1, H, W] arrays/tensors."""
    kind = _kind(value)
    if kind == "pil":
        return value.mode in ("L", "P", "I", "I;16")
    if kind is None or not (value.ndim == 2 or (value.ndim == 3 and value.shape[0] == 1)):
        return False
    arr = _as_array(value)
    return arr.dtype.kind != "f" or bool((arr == np.round(arr)).all())


def _describe(value: Any) -> str:
    kind = _kind(value)
    if kind == "pil":
        return f"PIL {value.mode} {value.size[0]}x{value.size[1]}"
    if kind is not None:
        return f"{kind} {tuple(value.shape)} {str(value.dtype).replace('torch.', '')}"
    return type(value).__name__


@dataclass(frozen=True)
class Interface:
    """How the transform is called: ``style`` 'dict' (keys), 'tuple' (indices), 'args' or 'kwargs'."""

    style: str
    image_at: Any
    mask_at: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    @property
    def image(self) -> Any:
        return self._get(self.image_at)

    @property
    def mask(self) -> Any:
        return self._get(self.mask_at)

    def _get(self, at: Any) -> Any:
        if self.style == "dict":
            return self.args[0][at]
        if self.style == "tuple":
            return self.args[0][at]
        if self.style == "args":
            return self.args[at]
        return self.kwargs[at]

    def describe(self) -> str:
        what = {
            "dict": "transform({{{i!r}: {ii}, {m!r}: {mm}}})",
            "tuple": "transform(({ii}, {mm}))",
            "args": "transform({ii}, {mm})",
            "kwargs": "transform({i}={ii}, {m}={mm})",
        }[self.style]
        return what.format(i=self.image_at, m=self.mask_at, ii=_describe(self.image), mm=_describe(self.mask))

    def call(self, fn: Callable, image: Any) -> Any:
        """Call ``fn`` as the Dataset did, with ``image`` in place of the real one (the mask copied)."""
        return self.call_with(fn, image, self.mask.copy() if hasattr(self.mask, "copy") else self.mask.clone())

    def pack(self, image: Any, mask: Any) -> Any:
        """``image`` and ``mask`` laid out as this call's input was, so :meth:`result` reads them back."""
        if self.style in ("dict", "kwargs"):
            out = dict(self.args[0]) if self.style == "dict" else {}
            out[self.image_at], out[self.mask_at] = image, mask
            return out
        items: list[Any] = [None] * (max(self.image_at, self.mask_at) + 1)
        items[self.image_at], items[self.mask_at] = image, mask
        return tuple(items)

    def call_with(self, fn: Callable, image: Any, mask: Any) -> Any:
        """Call ``fn`` as the Dataset did, with ``image`` and ``mask`` in place of the real ones."""
        if self.style == "dict":
            sample = dict(self.args[0])
            sample[self.image_at], sample[self.mask_at] = image, mask
            return fn(sample, *self.args[1:], **self.kwargs)
        if self.style == "tuple":
            items = list(self.args[0])
            items[self.image_at], items[self.mask_at] = image, mask
            return fn(type(self.args[0])(items), *self.args[1:], **self.kwargs)
        if self.style == "args":
            args = list(self.args)
            args[self.image_at], args[self.mask_at] = image, mask
            return fn(*args, **self.kwargs)
        kwargs = dict(self.kwargs)
        kwargs[self.image_at], kwargs[self.mask_at] = image, mask
        return fn(*self.args, **kwargs)

    def result(self, out: Any) -> tuple[Any, Any]:
        """(image, mask) from what the transform returned, read as its input was laid out."""
        if isinstance(out, dict):
            keys = (self.image_at, self.mask_at) if self.style in ("dict", "kwargs") else ("image", "mask")
            if keys[0] in out and keys[1] in out:
                return out[keys[0]], out[keys[1]]
        if isinstance(out, (tuple, list)) and len(out) >= 2:
            at = (self.image_at, self.mask_at) if self.style in ("tuple", "args") else (0, 1)
            if all(isinstance(a, int) and a < len(out) for a in at):
                return out[at[0]], out[at[1]]
        if isinstance(out, (dict, tuple, list)):  # another container than it got: one image and one mask in it
            values = out if isinstance(out, dict) else dict(enumerate(out))
            picked = _pick(values)
            if picked is not None:
                return values[picked[0]], values[picked[1]]
        got = f"dict with keys {sorted(map(str, out))}" if isinstance(out, dict) else type(out).__name__
        raise CannotAdapt(
            f"the transform is called as {self.describe()} but returned {got}, with no image and mask where its "
            f"input had them; {ADAPTER_ADVICE}"
        )


def _pick(values: dict[Any, Any]) -> tuple[Any, Any] | None:
    """(image position, mask position) among ``values`` if exactly one is an image and one a mask."""
    images = [k for k, v in values.items() if _is_image(v)]
    masks = [k for k, v in values.items() if _is_mask(v) and k not in images]
    return (images[0], masks[0]) if len(images) == 1 and len(masks) == 1 else None


def interface_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Interface:
    """The interface of one recorded transform call; :class:`CannotAdapt` if it is none of the four."""
    candidates: list[tuple[str, dict[Any, Any]]] = []
    if kwargs:
        candidates.append(("kwargs", kwargs))
    if len(args) >= 2:
        candidates.append(("args", dict(enumerate(args))))
    if len(args) == 1 and isinstance(args[0], dict):
        candidates.append(("dict", args[0]))
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        candidates.append(("tuple", dict(enumerate(args[0]))))
    for style, values in candidates:
        picked = _pick(values)
        if picked is not None:
            return Interface(style, picked[0], picked[1], args, kwargs)
    shown = [_describe(a) if not isinstance(a, dict) else f"dict {{{', '.join(map(repr, a))}}}" for a in args]
    shown += [f"{k}={_describe(v)}" for k, v in kwargs.items()]
    raise CannotAdapt(
        f"the Dataset calls its transform as transform({', '.join(shown)}): perfsuite adapts a dict holding one "
        "RGB image and one integer mask, an (image, mask) tuple, two such arguments, or image=/mask= keywords "
        f"(PIL images, NumPy arrays or tensors); {ADAPTER_ADVICE}"
    )


def _painted_like(painted: np.ndarray, template: Any) -> Any:
    """The painted HWC uint8 image in the template's type, mode, layout and dtype (float: its 0..1 or 0..255)."""
    kind = _kind(template)
    if kind == "pil":
        from PIL import Image

        return Image.fromarray(painted, "RGB").convert(template.mode)
    real = _as_array(template)
    chw = real.shape[0] in (3, 4) and real.shape[-1] not in (3, 4)
    channels = real.shape[0] if chw else real.shape[-1]
    out = painted if channels == 3 else np.concatenate([painted, np.full(painted.shape[:2] + (1,), 255, np.uint8)], -1)
    if chw:
        out = np.ascontiguousarray(out.transpose(2, 0, 1))
    if real.dtype.kind == "f":
        out = out.astype(real.dtype) / (255.0 if real.max(initial=0) <= 1.0 else 1.0)
    else:
        out = out.astype(real.dtype)
    if kind == "torch":
        import torch

        return torch.from_numpy(out)
    return out


def image_hwc(value: Any) -> np.ndarray:
    """An output image as [H, W, 3] float (channel order kept, alpha dropped)."""
    arr = _as_array(value).astype(np.float64)
    if arr.ndim == 3 and arr.shape[0] in (1, 3, 4) and arr.shape[-1] not in (3, 4):
        arr = arr.transpose(1, 2, 0)
    if arr.ndim == 2:
        arr = np.repeat(arr[..., None], 3, -1)
    return arr[..., :3]


def mask_hw(value: Any) -> np.ndarray:
    arr = _as_array(value)
    return arr[0] if arr.ndim == 3 and arr.shape[0] == 1 else arr


def calibrate(
    image: np.ndarray,
    mask: np.ndarray,
    palette: dict[int, np.ndarray],
    paired: dict[int, int] | None = None,
    margin: int = 1,
) -> tuple[np.ndarray, float]:
    """(image mapped back to the painted colours, the share of region interiors within STRICT_TOL of them).

    Region interiors are the pixels ``margin`` away from any other label (a resize by z blurs z pixels). Per
    channel, a Theil-Sen line through (painted level, median output level) of each label's interior pixels:
    robust to a misaligned minority. Labels a flip swaps (``paired``: label -> partner) are left out of the fit
    (a correct swap shows the partner's colour) and count as kept at either colour. A channel whose labels share
    one level takes the others' slope.
    """
    from scipy.stats import theilslopes

    paired = paired or {}
    inner = uniform(mask, margin) & np.isin(mask, list(palette))
    counts = {lab: int((mask[inner] == lab).sum()) for lab in np.unique(mask[inner]).tolist()}
    labels = [lab for lab, n in counts.items() if n >= 4 and lab not in paired]
    if not labels:
        return image, 0.0
    painted = np.stack([palette[lab] for lab in labels])
    seen = np.stack([np.median(image[inner & (mask == lab)], axis=0) for lab in labels])
    slopes: list[float | None] = []
    for c in range(3):
        x, y = painted[:, c], seen[:, c]
        slopes.append(float(theilslopes(y, x)[0]) if np.ptp(x) > 0 else None)
    known = [s for s in slopes if s is not None and abs(s) > 1e-6]
    out = image.copy()
    for c in range(3):
        own = slopes[c]
        slope = own if own is not None and abs(own) > 1e-6 else (float(np.median(known)) if known else 1.0)
        offset = float(np.median(seen[:, c] - slope * painted[:, c]))
        out[..., c] = (image[..., c] - offset) / slope
    if not inner.any():
        return out, 0.0
    keys = np.array(sorted(palette))
    at = np.searchsorted(keys, mask[inner])  # every interior label is a palette key (``inner`` says so)
    want = np.stack([palette[k] for k in keys.tolist()])[at]
    close = np.linalg.norm(out[inner] - want, axis=-1) <= STRICT_TOL
    if paired:
        other = np.stack([palette.get(paired.get(k, k), palette[k]) for k in keys.tolist()])[at]
        close |= np.linalg.norm(out[inner] - other, axis=-1) <= STRICT_TOL
    return out, float(close.mean())


class SampleAdapter:
    """``adapter(images [B, H, W, 3] uint8, masks [B, H, W], seed) -> Output`` over the Dataset's own transform.

    One recorded call per sample (``interfaces``, all of one mask size); ``masks`` must be those samples' own
    masks (the transform gets the recorded objects, so PIL modes and tensor dtypes are the user's). Each
    sample is transformed under its own seed drawn from ``seed``. Each call's colour exactness (the worst
    sample's) is kept in :attr:`exactness`.
    """

    def __init__(
        self, transform: Callable, interfaces: list[Interface], flip_map: tuple[tuple[int, int], ...] = ()
    ) -> None:
        self.transform, self.interfaces = transform, interfaces
        self.paired = dict(flip_map)
        self.exactness: list[float] = []

    def masks(self) -> np.ndarray:
        """The recorded samples' masks, ``[B, H, W]``: what to call this adapter with."""
        return np.stack([np.asarray(mask_hw(itf.mask)) for itf in self.interfaces])

    def call_sample(self, images: np.ndarray, k: int, seed: int) -> Any:
        """The transform's raw return for sample ``k`` of one adapter call under ``seed`` (a replay gives the same)."""
        itf = self.interfaces[k]
        with seeded(seed * 1_000_003 + k):
            return itf.call(self.transform, _painted_like(images[k], itf.image))

    def __call__(self, images: np.ndarray, masks: np.ndarray, seed: int) -> Output:
        if len(images) != len(self.interfaces):
            raise AugmentationError(f"SampleAdapter holds {len(self.interfaces)} recorded samples; got {len(images)}")
        palette = palette_for(masks)
        outs, worst = [], 1.0
        dtype_in = dtype_out = ""
        for k, itf in enumerate(self.interfaces):
            dtype_in = str(np.asarray(mask_hw(itf.mask)).dtype)
            image_out, mask_out = itf.result(self.call_sample(images, k, seed))
            if _kind(image_out) is None or _kind(mask_out) is None:
                raise CannotAdapt(
                    f"the transform returned image {_describe(image_out)} and mask {_describe(mask_out)}; perfsuite "
                    f"reads PIL images, NumPy arrays and tensors; {ADAPTER_ADVICE}"
                )
            mask = mask_hw(mask_out)
            if mask.dtype.kind in "iub":
                dtype_out = dtype_in = str(mask.dtype)  # a Dataset's own ToTensor may widen the mask's integers
            else:
                dtype_out = str(mask.dtype)
            image = image_hwc(image_out)
            if image.shape[:2] != mask.shape:
                raise PropertyViolation(
                    "mask format",
                    f"the transform returned an image of {image.shape[:2]} and a mask of {mask.shape}; resize both "
                    "with the same geometry",
                )
            mask64 = mask.astype(np.int64) if mask.dtype.kind in "iub" else np.round(mask).astype(np.int64)
            zoom = max(mask.shape[0] / masks.shape[1], mask.shape[1] / masks.shape[2])
            calibrated, exact = calibrate(image, mask64, palette, self.paired, margin=max(1, int(np.ceil(zoom))))
            worst = min(worst, exact)
            outs.append((calibrated, mask64))
        self.exactness.append(worst)
        shapes = {m.shape for _, m in outs}
        if len(shapes) == 1:
            return Output(np.stack([i for i, _ in outs]), np.stack([m for _, m in outs]), dtype_in, dtype_out)
        return Output([i for i, _ in outs], [m for _, m in outs], dtype_in, dtype_out)
