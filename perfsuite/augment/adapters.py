"""Adapters: the interfaces users' paired transforms have, to the checks' one layout.

Each adapter is ``adapter(images [B, H, W, 3] uint8, masks [B, H, W], seed) -> Output``
and is chosen by ``check_paired_augmentation(layout=...)`` (or passed as ``adapter=``):

* ``"torch"`` :class:`~perfsuite.augment.checks.TorchBatched`: ``fn(images [B,3,H,W] float 0..1, masks [B,H,W] long)
  -> (images, masks)``, batched.
* ``"numpy"`` :class:`~perfsuite.augment.checks.NumpyPerSample`: ``fn(image HxWx3 uint8, mask HxW) -> (image, mask)``,
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

from perfsuite.augment.checks import Output, seeded, stack_outputs
from perfsuite.errors import PropertyArgumentError, PropertyViolation


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
