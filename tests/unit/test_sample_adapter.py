"""perfsuite check's pieces, in process: a Dataset's transform call recorded and adapted, colours calibrated,
and the properties run on the Dataset's own samples (the subprocess end-to-end runs are in test_check_script.py)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from perfsuite.augment.painting import encode, palette_for
from perfsuite.augment.sample_adapter import CannotAdapt, calibrate, image_hwc, interface_of
from perfsuite.errors import PropertyViolation
from perfsuite.harness.script.transform_check import check_dataset_transform, spread

MEAN, STD = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])


def _mask(seed: int, size: int = 48) -> np.ndarray:
    """A face-like mask: background 0, a skin disc 1, left/right eyes 3/4, a mouth 5."""
    yy, xx = np.mgrid[:size, :size]
    rng = np.random.default_rng(seed)
    cy, cx = size / 2 + rng.uniform(-3, 3, 2)
    mask = np.zeros((size, size), np.uint8)
    mask[(yy - cy) ** 2 + (xx - cx) ** 2 < (size * 0.42) ** 2] = 1
    mask[(abs(yy - cy + 6) < 3) & (abs(xx - cx + 9) < 4)] = 3
    mask[(abs(yy - cy + 6) < 3) & (abs(xx - cx - 9) < 4)] = 4
    mask[(abs(yy - cy - 10) < 3) & (abs(xx - cx) < 8)] = 5
    return mask


class Flip:
    def __init__(self, swap: bool) -> None:
        self.swap = swap

    def __call__(self, sample: dict) -> dict:
        if random.random() < 0.5:
            mask = np.array(sample["mask"].transpose(Image.FLIP_LEFT_RIGHT))
            if self.swap:
                mask = np.where(mask == 3, 4, np.where(mask == 4, 3, mask)).astype(np.uint8)
            return {"image": sample["image"].transpose(Image.FLIP_LEFT_RIGHT), "mask": Image.fromarray(mask, "L")}
        return sample


class EraseToZero:
    def __call__(self, sample: dict) -> dict:
        if random.random() < 0.5:
            image, mask = np.array(sample["image"]), np.array(sample["mask"])
            image[10:26, 12:30] = np.random.randint(0, 256, image[10:26, 12:30].shape)
            mask[10:26, 12:30] = 0
            return {"image": Image.fromarray(image), "mask": Image.fromarray(mask, "L")}
        return sample


def jitter_and_normalise(sample: dict) -> dict:
    """Brightness jitter, then a torchvision-style ToTensor + Normalize: float CHW image, int64 mask."""
    image = np.asarray(sample["image"], np.float32) / 255.0 * random.uniform(0.8, 1.2)
    image = torch.from_numpy(((image - MEAN) / STD).astype(np.float32)).permute(2, 0, 1)
    return {"image": image, "mask": torch.from_numpy(np.array(sample["mask"], np.int64))}


class Faces(torch.utils.data.Dataset):
    """Reads 'files' (arrays standing in for them) and hands its transform a dict of PIL images."""

    def __init__(self, steps: list) -> None:
        self.masks = [_mask(i) for i in range(6)]
        self.steps = steps
        self.transform = self._compose

    def _compose(self, sample: dict) -> dict:
        for step in self.steps:
            sample = step(sample)
        return sample

    def __len__(self) -> int:
        return len(self.masks)

    def __getitem__(self, i: int) -> dict:
        sample = {"image": Image.new("RGB", (48, 48), (90, 60, 30)), "mask": Image.fromarray(self.masks[i], "L")}
        return self.transform(sample)


def check(steps: list, **kw: object) -> object:
    kw = {"num_classes": 6, "ignore_index": 255, "samples": 4, "seeds": 4, **kw}
    return check_dataset_transform(torch.utils.data.Subset(Faces(steps), [0, 1, 2, 3, 4, 5]), **kw)  # type: ignore[arg-type]


def test_interfaces_are_recognised_in_each_style() -> None:
    pil = (Image.new("RGB", (8, 6)), Image.new("L", (8, 6)))
    assert interface_of(({"img": pil[0], "lbl": pil[1], "name": "a"},), {}).describe() == (
        "transform({'img': PIL RGB 8x6, 'lbl': PIL L 8x6})"
    )
    tensors = (torch.zeros(3, 6, 8), torch.zeros(6, 8, dtype=torch.long))
    assert interface_of((tensors,), {}).style == "tuple"
    arrays = (np.zeros((6, 8, 3), np.uint8), np.zeros((6, 8), np.uint8))
    assert interface_of(arrays, {}).style == "args"
    assert interface_of((), {"image": arrays[0], "mask": arrays[1]}).style == "kwargs"


def test_an_interface_it_cannot_adapt_is_named_with_the_adapter_to_write() -> None:
    with pytest.raises(CannotAdapt) as info:
        interface_of(({"a": Image.new("RGB", (8, 6)), "b": Image.new("RGB", (8, 6))},), {})
    assert "transform(dict {'a', 'b'})" in str(info.value) and "write an adapter" in str(info.value)


def test_calibration_undoes_a_normalize_exactly() -> None:
    mask = _mask(0)
    palette = palette_for(mask[None])
    painted = encode(mask[None], palette)[0]
    normalised = ((painted / 255.0 - MEAN) / STD).transpose(2, 0, 1)
    back, share = calibrate(image_hwc(normalised), mask.astype(np.int64), palette)
    assert share == 1.0
    assert np.abs(back - painted).max() < 1e-6


def test_spread() -> None:
    assert spread(100, 4) == [0, 33, 66, 99] and spread(3, 8) == [0, 1, 2]


def test_a_correct_swapping_flip_with_jitter_and_normalize_passes() -> None:
    report = check([Flip(swap=True), jitter_and_normalise], flip_pairs=[(3, 4)])
    assert report.interface == "transform({'image': PIL RGB 48x48, 'mask': PIL L 48x48})"  # type: ignore[attr-defined]
    assert report.passes[0].startswith("labels, flip pairs")  # type: ignore[attr-defined]


def test_a_flip_without_the_swap_is_named() -> None:
    with pytest.raises(PropertyViolation) as info:
        check([Flip(swap=False), jitter_and_normalise], flip_pairs=[(3, 4)])
    assert info.value.cause == "missing swap" and "forgot the label swap" in str(info.value)
    assert "seed" in str(info.value) and "dataset[" in str(info.value)


def test_an_erase_to_a_real_class_is_named() -> None:
    with pytest.raises(PropertyViolation) as info:
        check([EraseToZero(), jitter_and_normalise])
    assert info.value.cause == "erase" and "Erase masks with the ignore index (255)" in str(info.value)


def test_a_mask_label_outside_the_classes_is_bad_input() -> None:
    from perfsuite.errors import PerfsuiteError

    with pytest.raises(PerfsuiteError, match=r"holds label\(s\) \[5\], neither a class \(0..4\)"):
        check([jitter_and_normalise], num_classes=5)


def test_labels_come_from_the_nearest_pyproject_and_unknown_keys_are_named(tmp_path: Path) -> None:
    from perfsuite.cli.check import labels_table
    from perfsuite.errors import PerfsuiteError

    (tmp_path / "pyproject.toml").write_text("[tool.perfsuite.labels]\nnum_classes = 11\nflip_pairs = [[3, 4]]\n")
    (tmp_path / "sub").mkdir()
    assert labels_table(tmp_path / "sub") == ({"num_classes": 11, "flip_pairs": [[3, 4]]}, tmp_path / "pyproject.toml")
    (tmp_path / "pyproject.toml").write_text("[tool.perfsuite.labels]\nclasses = 11\n")
    with pytest.raises(PerfsuiteError, match="unknown key 'classes'; known keys: flip_pairs, ignore_index, num_"):
        labels_table(tmp_path)
