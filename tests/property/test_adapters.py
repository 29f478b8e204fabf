"""Each adapter with a correct transform of its interface (passes) and a broken one (caught).

* ``layout="dict"``: ``fn({"im": PIL RGB, "lb": PIL L})``, the dict-in/dict-out style of many repos.
* ``layout="albumentations"``: the real library (skipped where it is not installed).
* ``layout="torchvision"``: torchvision cannot be installed next to this torch (every wheel pins
  another torch), so ``tv_tensors.Image``/``tv_tensors.Mask`` are duck-typed stand-ins (tensor
  subclasses) injected with ``adapter=TorchvisionV2(fn, image_type=..., mask_type=...)``; the real
  tv_tensors are what ``layout="torchvision"`` uses when torchvision is present.
* ``layout="kornia"``: the real ``AugmentationSequential(data_keys=["input", "mask"])``.
"""

from __future__ import annotations

import random

import pytest
import torch

from perfsuite.augment.adapters import TorchvisionV2
from perfsuite.augment.checks import PropertyViolation, check_paired_augmentation
from perfsuite.errors import PropertyArgumentError

NUM_CLASSES = 19


def _caught(fn, **declared) -> PropertyViolation:
    with pytest.raises(PropertyViolation) as info:
        check_paired_augmentation(fn, num_classes=NUM_CLASSES, photometric=False, **declared)
    err = info.value
    b, h, w = err.example.masks.shape
    print(f"{err.example} seed={err.seed}: {err}")
    assert b <= 4 and max(h, w) <= 24, f"shrunk only to B={b}, {h}x{w}"
    return err


# -- dict of PIL images -----------------------------------------------------------------------------


def pil_flip_rotate(sample, mask_resample=None):
    from PIL import Image

    im, lb = sample["im"], sample["lb"]
    if random.random() < 0.5:
        im, lb = im.transpose(Image.Transpose.FLIP_LEFT_RIGHT), lb.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    angle = random.uniform(-30, 30)
    im = im.rotate(angle, resample=Image.Resampling.BILINEAR, fillcolor=(0, 0, 0))
    lb = lb.rotate(angle, resample=mask_resample or Image.Resampling.NEAREST, fillcolor=255)
    return {"im": im, "lb": lb}


def test_dict_pil_correct_transform_passes():
    check_paired_augmentation(pil_flip_rotate, num_classes=NUM_CLASSES, layout="dict", photometric=False)


def test_dict_pil_bilinear_mask_is_caught():
    from PIL import Image

    err = _caught(lambda s: pil_flip_rotate(s, Image.Resampling.BILINEAR), layout="dict", with_ignore=False)
    assert err.prop in ("valid labels", "alignment")


def test_dict_pil_other_keys():
    def renamed(sample):
        out = pil_flip_rotate({"im": sample["image"], "lb": sample["label"]})
        return {"image": out["im"], "label": out["lb"]}

    check_paired_augmentation(
        renamed, num_classes=NUM_CLASSES, layout="dict", keys=("image", "label"), photometric=False
    )
    with pytest.raises(PropertyArgumentError, match=r"looked up key 'image'.*pass keys="):
        check_paired_augmentation(renamed, num_classes=NUM_CLASSES, layout="dict", photometric=False)
    with pytest.raises(PropertyViolation, match="pass keys=") as info:  # returns other keys than it was given
        check_paired_augmentation(
            lambda s: {"image": s["im"], "label": s["lb"]}, num_classes=NUM_CLASSES, layout="dict", photometric=False
        )
    assert "'im' and 'lb'" in str(info.value)


# -- albumentations (the real library) -------------------------------------------------------------


def _albumentations(mask_interpolation: int | None = None):
    A = pytest.importorskip("albumentations")
    cv2 = pytest.importorskip("cv2")
    return A.Compose(
        [
            A.HorizontalFlip(p=0.5),
            A.Affine(
                rotate=(-30, 30),
                scale=(0.8, 1.2),
                p=1.0,
                interpolation=cv2.INTER_LINEAR,
                mask_interpolation=cv2.INTER_NEAREST if mask_interpolation is None else mask_interpolation,
                fill=0,
                fill_mask=255,
            ),
        ]
    )


def test_albumentations_correct_pipeline_passes():
    check_paired_augmentation(_albumentations(), num_classes=NUM_CLASSES, layout="albumentations", photometric=False)


def test_albumentations_linear_mask_interpolation_is_caught():
    cv2 = pytest.importorskip("cv2")
    err = _caught(_albumentations(cv2.INTER_LINEAR), layout="albumentations", with_ignore=False)
    assert err.prop in ("valid labels", "alignment")


def test_albumentations_class_mask_fill_says_padding():
    A = pytest.importorskip("albumentations")
    cv2 = pytest.importorskip("cv2")
    pad0 = A.Compose(
        [
            A.Affine(
                translate_px=(-3, 3),
                p=1.0,
                interpolation=cv2.INTER_LINEAR,
                mask_interpolation=cv2.INTER_NEAREST,
                fill=0,
                fill_mask=5,
            )
        ]
    )
    err = _caught(pad0, layout="albumentations")  # 5: seldom in the input, see test_hints
    assert err.cause == "padding" and "declare fill=5" in str(err)


# -- torchvision v2 (stand-ins for tv_tensors) -----------------------------------------------------


class StandInImage(torch.Tensor):
    """Stand-in for ``torchvision.tv_tensors.Image`` (a tensor subclass, as the real one is)."""


class StandInMask(torch.Tensor):
    """Stand-in for ``torchvision.tv_tensors.Mask``."""


def _image(t):
    return t.as_subclass(StandInImage)


def _mask(t):
    return t.as_subclass(StandInMask)


def tv_style_flip(image, mask, flip_mask=True):
    """What ``v2.RandomHorizontalFlip`` does: one draw per call, applied to every tv_tensor it is given."""
    assert isinstance(image, StandInImage) and isinstance(mask, StandInMask)
    assert image.shape[0] == 3 and image.dtype == torch.uint8 and mask.ndim == 2
    if torch.rand(()) < 0.5:
        image = image.flip(-1)
        mask = mask.flip(-1) if flip_mask else mask
    return image, mask


def test_torchvision_v2_correct_transform_passes():
    adapter = TorchvisionV2(tv_style_flip, image_type=_image, mask_type=_mask)
    check_paired_augmentation(None, num_classes=NUM_CLASSES, adapter=adapter, photometric=False)


def test_torchvision_v2_mask_left_behind_is_caught():
    adapter = TorchvisionV2(lambda x, m: tv_style_flip(x, m, flip_mask=False), image_type=_image, mask_type=_mask)
    err = _caught(None, adapter=adapter)
    assert err.prop == "alignment"


def test_torchvision_layout_without_torchvision_says_what_to_do():
    pytest.importorskip("torch")
    try:
        import torchvision  # noqa: F401
    except ImportError:
        with pytest.raises(PropertyArgumentError, match="adapter=TorchvisionV2"):
            check_paired_augmentation(tv_style_flip, num_classes=NUM_CLASSES, layout="torchvision", photometric=False)
    else:  # pragma: no cover - torchvision present: the real tv_tensors are used
        pytest.skip("torchvision is installed; the stand-in tests above cover the adapter")


# -- Kornia AugmentationSequential (the real library) ----------------------------------------------


def _kornia(data_keys):
    import kornia.augmentation as K

    return K.AugmentationSequential(K.RandomHorizontalFlip(), K.RandomAffine(degrees=30.0, p=1.0), data_keys=data_keys)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_kornia_sequential_passes():
    # Kornia pads masks with zeros: declared as the fill (an ignored label in the user's loss).
    check_paired_augmentation(
        _kornia(["input", "mask"]),
        num_classes=NUM_CLASSES,
        ignore_index=None,
        fill=0,
        layout="kornia",
        photometric=False,
        with_ignore=False,
    )


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_kornia_mask_passed_as_input_is_caught():
    err = _caught(_kornia(["input", "input"]), ignore_index=None, fill=0, layout="kornia", with_ignore=False)
    assert err.prop in ("valid labels", "alignment")
