"""Adapters: the interfaces users' paired transforms have, to the checks' one layout.

Each adapter is ``adapter(images [B, H, W, 3] uint8, masks [B, H, W], seed) -> Output``
and is chosen by ``check_paired_augmentation(layout=...)`` (or passed as ``adapter=``):

* ``"torch"`` :class:`TorchBatched`: ``fn(images [B,3,H,W] float 0..1, masks [B,H,W] long)
  -> (images, masks)``, batched.
* ``"numpy"`` :class:`NumpyPerSample`: ``fn(image HxWx3 uint8, mask HxW) -> (image, mask)``,
  per sample.
* ``"dict"`` :class:`DictPIL`: ``fn({"im": PIL RGB, "lb": PIL L or I}) -> same dict``, per sample (``keys=`` renames
  them).
* ``"albumentations"`` :class:`Albumentations`: ``fn(image=HxWx3 uint8, mask=HxW) -> {"image", "mask"}``, per sample,
  seeded through ``set_random_seed``.
* ``"torchvision"`` :class:`TorchvisionV2`: ``fn(tv_tensors.Image, tv_tensors.Mask) -> (Image, Mask)``, per sample (v2
  draws one set of parameters per call).
* ``"kornia"`` :class:`KorniaSequential`: ``aug(images [B,3,H,W], masks [B,1,H,W])`` for
  ``AugmentationSequential(data_keys=["input", "mask"])``, batched.

Per-sample adapters take ``per_sample_sizes=True`` for transforms whose output
size varies per sample (random crop/scale): each sample is then checked on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from perfsuite.augment.outputs import Output, seeded, stack_outputs
from perfsuite.errors import PropertyArgumentError, PropertyViolation


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
    """Adapts ``fn(image HxWx3 uint8, mask HxW) -> (image, mask)``, called once per sample.

    ``factory=True``: ``fn(seed)`` builds the callable once per batch (e.g.
    ``lambda s: CpuAugment(recipe, "mask", seed=s)``). ``per_sample_sizes``:
    outputs may differ in size per sample (random crop/scale).
    """

    def __init__(
        self, fn: Callable, *, image_dtype: str = "uint8", factory: bool = False, per_sample_sizes: bool = False
    ) -> None:
        self.fn, self.image_dtype, self.factory = fn, image_dtype, factory
        self.per_sample_sizes = per_sample_sizes

    def call_one(self, fn: Callable, image: np.ndarray, mask: np.ndarray) -> tuple[Any, Any]:
        x = image if self.image_dtype == "uint8" else image.astype(self.image_dtype) / 255.0
        return fn(x, mask)

    def __call__(self, images: np.ndarray, masks: np.ndarray, seed: int) -> Output:
        outs = []
        with seeded(seed):
            fn = self.fn(seed) if self.factory else self.fn
            for img, mask in zip(images, masks):
                outs.append(self.call_one(fn, img, mask.copy()))
        return stack_outputs([o[0] for o in outs], [o[1] for o in outs], str(masks.dtype), self.per_sample_sizes)


class _PerSample:
    """Calls ``call_one`` per sample under one seed; ``factory=True``: ``fn(seed)`` builds the callable."""

    def __init__(self, fn: Callable, *, factory: bool = False, per_sample_sizes: bool = False) -> None:
        self.fn, self.factory, self.per_sample_sizes = fn, factory, per_sample_sizes

    def build(self, seed: int) -> Callable:
        return self.fn(seed) if self.factory else self.fn

    def call_one(self, fn: Callable, image: np.ndarray, mask: np.ndarray) -> tuple[Any, Any, str]:
        raise NotImplementedError

    def __call__(self, images: np.ndarray, masks: np.ndarray, seed: int) -> Output:
        outs, dtype_in = [], str(masks.dtype)
        with seeded(seed):
            fn = self.build(seed)
            for img, mask in zip(images, masks):
                image_out, mask_out, dtype_in = self.call_one(fn, img, mask.copy())
                outs.append((np.asarray(image_out), np.asarray(mask_out)))
        return stack_outputs([o[0] for o in outs], [o[1] for o in outs], dtype_in, self.per_sample_sizes)


class DictPIL(_PerSample):
    """``fn({"im": PIL.Image RGB, "lb": PIL.Image}) -> dict``: masks as mode ``L`` (uint8) or ``I`` (int32)."""

    def __init__(self, fn: Callable, *, keys: tuple[str, str] = ("im", "lb"), **kw: Any) -> None:
        super().__init__(fn, **kw)
        self.keys = keys

    def call_one(self, fn: Callable, image: np.ndarray, mask: np.ndarray) -> tuple[Any, Any, str]:
        from PIL import Image

        ik, mk = self.keys
        lb = Image.fromarray(mask, "L") if mask.dtype == np.uint8 else Image.fromarray(mask.astype(np.int32), "I")
        try:
            out = fn({ik: Image.fromarray(image, "RGB"), mk: lb})
        except KeyError as e:
            if e.args and e.args[0] not in self.keys:
                raise PropertyArgumentError(
                    f"check_paired_augmentation(layout='dict'): the transform looked up key {e.args[0]!r} but is "
                    f"given {{{ik!r}: image, {mk!r}: mask}}; pass keys=(image_key, mask_key) with the names it uses"
                ) from e
            raise
        if not isinstance(out, dict) or ik not in out or mk not in out:
            raise PropertyViolation(
                "mask format",
                f"the transform returned {type(out).__name__} without keys "
                f"{ik!r} and {mk!r}; return the dict it was given (pass keys=(image_key, "
                "mask_key) if yours are named differently)",
            )
        return out[ik], out[mk], str(np.asarray(lb).dtype)


class Albumentations(_PerSample):
    """``fn(image=HxWx3 uint8, mask=HxW) -> {"image": ..., "mask": ...}``.

    Seeded with ``fn.set_random_seed(seed)`` when the pipeline has it.
    """

    def build(self, seed: int) -> Callable:
        fn = super().build(seed)
        if hasattr(fn, "set_random_seed"):  # albumentations >= 1.4.? keeps its own generator
            fn.set_random_seed(seed)
        return fn

    def call_one(self, fn: Callable, image: np.ndarray, mask: np.ndarray) -> tuple[Any, Any, str]:
        out = fn(image=image, mask=mask)
        return out["image"], out["mask"], str(mask.dtype)


def _tv_types() -> tuple[Callable, Callable]:
    try:
        from torchvision import tv_tensors
    except ImportError:
        raise PropertyArgumentError(
            "check_paired_augmentation(layout='torchvision'): torchvision is not installed; install the torchvision "
            "that matches your torch, or pass adapter=TorchvisionV2(fn, image_type=..., mask_type=...)"
        ) from None
    return tv_tensors.Image, tv_tensors.Mask


class TorchvisionV2(_PerSample):
    """``fn(tv_tensors.Image [3,H,W] uint8, tv_tensors.Mask [H,W]) -> (image, mask)``, one call per sample."""

    def __init__(
        self, fn: Callable, *, image_type: Callable | None = None, mask_type: Callable | None = None, **kw: Any
    ) -> None:
        super().__init__(fn, **kw)
        self.image_type, self.mask_type = image_type, mask_type

    def call_one(self, fn: Callable, image: np.ndarray, mask: np.ndarray) -> tuple[Any, Any, str]:
        import torch

        if self.image_type is None or self.mask_type is None:
            self.image_type, self.mask_type = _tv_types()
        m = torch.from_numpy(mask.astype(np.int64) if mask.dtype == np.uint16 else mask)
        x = self.image_type(torch.from_numpy(image).permute(2, 0, 1).contiguous())
        xo, mo = fn(x, self.mask_type(m))
        xo = torch.as_tensor(xo).detach().cpu()
        xo = xo.permute(1, 2, 0).numpy()
        mo = torch.as_tensor(mo).detach().cpu()
        if mo.ndim == 3 and mo.shape[0] == 1:
            mo = mo[0]
        return xo, mo.numpy(), str(m.dtype).replace("torch.", "")


class KorniaSequential:
    """``aug(images [B,3,H,W] float 0..1, masks [B,1,H,W] float)`` as ``AugmentationSequential(data_keys=["input",
    "mask"])`` calls it.

    Masks go in as float32 (exact for labels up to 2**24) and come back
    rounded to the input dtype, since that is how Kornia users feed masks.
    """

    def __init__(self, aug: Callable, *, device: str = "cpu", factory: bool = False) -> None:
        self.aug, self.device, self.factory = aug, device, factory

    def __call__(self, images: np.ndarray, masks: np.ndarray, seed: int) -> Output:
        import torch

        x = torch.from_numpy(images).permute(0, 3, 1, 2).to(self.device, torch.float32) / 255.0
        m = torch.from_numpy(masks.astype(np.int64)).to(self.device, torch.float32)[:, None]
        with seeded(seed, self.device), torch.no_grad():
            aug = self.aug(seed) if self.factory else self.aug
            xo, mo = aug(x, m)
        mo = mo.detach().cpu()
        if mo.ndim == 4:
            mo = mo[:, 0]
        labels = mo.round().to(torch.int64).numpy()
        xo = (xo.detach().cpu().double() * 255.0).permute(0, 2, 3, 1).numpy()
        return Output(xo, labels, str(masks.dtype), str(masks.dtype))


LAYOUTS = ("torch", "numpy", "dict", "albumentations", "torchvision", "kornia")
FUNC = "check_paired_augmentation"


def make_adapter(
    fn: Callable,
    layout: str,
    *,
    device: str = "cpu",
    image_dtype: str | None = None,
    mask_dtype: str = "int64",
    factory: bool = False,
    per_sample_sizes: bool = False,
    keys: tuple[str, str] | None = None,
) -> Callable[..., Output]:
    """The adapter for ``layout`` (the module docstring summarises each in one line)."""
    if layout == "torch":
        return TorchBatched(
            fn, device=device, image_dtype=image_dtype or "float32", mask_dtype=mask_dtype, factory=factory
        )
    if layout == "numpy":
        return NumpyPerSample(
            fn, image_dtype=image_dtype or "uint8", factory=factory, per_sample_sizes=per_sample_sizes
        )
    if layout == "dict":
        return DictPIL(fn, keys=keys or ("im", "lb"), factory=factory, per_sample_sizes=per_sample_sizes)
    if layout == "albumentations":
        return Albumentations(fn, factory=factory, per_sample_sizes=per_sample_sizes)
    if layout == "torchvision":
        return TorchvisionV2(fn, factory=factory, per_sample_sizes=per_sample_sizes)
    if layout == "kornia":
        return KorniaSequential(fn, device=device, factory=factory)
    raise PropertyArgumentError(
        f"{FUNC}(layout={layout!r}): not a layout; write one of {', '.join(map(repr, LAYOUTS))} "
        "(or pass adapter=... with your own)"
    )
