"""perfsuite check finds a Dataset's paired transform by what it does, wherever it lives, and names the line of a
flip that forgot the left/right swap. In process, on tiny faces: one Dataset per placement (an attribute under
any name called with a dict, a short attribute called with two arrays, a module-level function, a method, a
Compose of dict callables, albumentations-style keywords), each with a planted missing swap and a correct one."""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image, ImageEnhance

from perfsuite.augment.sample_adapter import CannotAdapt
from perfsuite.errors import PropertyViolation
from perfsuite.harness.script.transform_check import check_dataset_transform

PAIRS = [(2, 3), (4, 5), (7, 8)]  # brows, eyes, ears, as CelebAMask-HQ numbers them
NUM_CLASSES = 19
SIZE = 40


def face(i: int) -> np.ndarray:
    """A face mask, not mirror-symmetric: skin 1, brows 2/3, eyes 4/5, ears 7/8, nose 10, mouth 11, hair 17 on one
    side."""
    yy, xx = np.mgrid[:SIZE, :SIZE]
    cy, cx = SIZE / 2 + (i % 3) - 1, SIZE / 2 + (i % 2)
    m = np.zeros((SIZE, SIZE), np.uint8)
    m[(yy - cy) ** 2 + (xx - cx) ** 2 < 14**2] = 1
    m[(abs(yy - cy + 8) < 2) & (abs(xx - cx + 7) < 4)] = 2
    m[(abs(yy - cy + 8) < 2) & (abs(xx - cx - 7) < 4)] = 3
    m[(abs(yy - cy + 3) < 2) & (abs(xx - cx + 7) < 3)] = 4
    m[(abs(yy - cy + 3) < 2) & (abs(xx - cx - 7) < 3)] = 5
    m[(abs(yy - cy) < 4) & (abs(xx - cx + 16) < 3)] = 7
    m[(abs(yy - cy) < 4) & (abs(xx - cx - 16) < 3)] = 8
    m[(abs(yy - cy - 2) < 3) & (abs(xx - cx) < 2)] = 10
    m[(abs(yy - cy - 8) < 2) & (abs(xx - cx) < 5)] = 11
    m[(yy < cy - 11) & (xx < cx + 4)] = 17
    return m


def swap_lr(lb: np.ndarray) -> np.ndarray:
    out = lb.copy()
    for a, b in PAIRS:
        out[lb == a], out[lb == b] = b, a
    return out


def line_of(fn: Callable[..., Any], marker: str = "# mirror") -> int:
    """The line of ``fn`` that carries ``marker``: where the test expects the blame."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(k for k, text in enumerate(lines) if marker in text)


class FaceBase(torch.utils.data.Dataset):
    """Reads 'files' (masks made in memory) as PIL images, as face-parsing repositories do."""

    def __init__(self, swap: bool) -> None:
        self.swap = swap

    def __len__(self) -> int:
        return 6

    def load(self, i: int) -> tuple[Image.Image, Image.Image]:
        lb = face(i)
        palette = np.array([[(30 + 11 * k) % 256, (200 + 9 * k) % 256, (60 * k) % 256] for k in range(256)], np.uint8)
        return Image.fromarray(palette[lb], "RGB"), Image.fromarray(lb, "L")


# -- 1. an attribute under any name (trans_train), a Compose of dict callables: dict(im=, lb=) -------------------


class Compose:
    def __init__(self, steps: list) -> None:
        self.steps = steps

    def __call__(self, im_lb: dict) -> dict:
        for step in self.steps:
            im_lb = step(im_lb)
        return im_lb


class ColorJitter:
    def __call__(self, im_lb: dict) -> dict:
        im = ImageEnhance.Brightness(im_lb["im"]).enhance(random.uniform(0.7, 1.3))
        return dict(im=im, lb=im_lb["lb"])


class HorizontalFlip:
    """As zllrunning/face-parsing.PyTorch writes it: the swapped map is built, the flip returns the unswapped one."""

    def __init__(self, swap: bool) -> None:
        self.swap = swap

    def __call__(self, im_lb: dict) -> dict:
        if random.random() > 0.5:
            return im_lb
        im, lb = im_lb["im"], im_lb["lb"]
        flip_lb = Image.fromarray(swap_lr(np.array(lb)))
        if self.swap:
            return dict(im=im.transpose(Image.FLIP_LEFT_RIGHT), lb=flip_lb.transpose(Image.FLIP_LEFT_RIGHT))
        return dict(im=im.transpose(Image.FLIP_LEFT_RIGHT), lb=lb.transpose(Image.FLIP_LEFT_RIGHT))  # mirror


class FaceMask(FaceBase):
    def __init__(self, swap: bool) -> None:
        super().__init__(swap)
        self.trans_train = Compose([ColorJitter(), HorizontalFlip(swap)])

    def __getitem__(self, i: int) -> tuple:
        img, label = self.load(i)
        im_lb = dict(im=img, lb=label)
        im_lb = self.trans_train(im_lb)
        img, label = im_lb["im"], im_lb["lb"]
        return torch.from_numpy(np.array(img)).permute(2, 0, 1), torch.from_numpy(np.array(label, np.int64))


# -- 2. a short attribute (self.t) called with two arrays ------------------------------------------------------


class PairFlip:
    def __init__(self, swap: bool) -> None:
        self.swap = swap

    def __call__(self, im: np.ndarray, lb: np.ndarray) -> tuple:
        if random.random() < 0.5:
            im = im[:, ::-1].copy()
            lb = lb[:, ::-1].copy()  # mirror
            if self.swap:
                lb = swap_lr(lb)
        return im, lb


class FaceArrays(FaceBase):
    def __init__(self, swap: bool) -> None:
        super().__init__(swap)
        self.t = PairFlip(swap)

    def __getitem__(self, i: int) -> tuple:
        img, label = (np.array(v) for v in self.load(i))
        img, label = self.t(img, label)
        return img, label


# -- 3. a module-level function ------------------------------------------------------------------------------


def augment(im: Image.Image, lb: Image.Image, swap: bool = True) -> tuple:
    if random.random() < 0.5:
        im = im.transpose(Image.FLIP_LEFT_RIGHT)
        lb = lb.transpose(Image.FLIP_LEFT_RIGHT)  # mirror
        if swap:
            lb = Image.fromarray(swap_lr(np.array(lb)))
    return im, lb


class FaceGlobal(FaceBase):
    def __getitem__(self, i: int) -> tuple:
        img, label = self.load(i)
        img, label = augment(img, label, swap=self.swap)
        return np.array(img), np.array(label)


# -- 4. a method -----------------------------------------------------------------------------------------------


class FaceMethod(FaceBase):
    def _augment(self, im: Image.Image, lb: Image.Image) -> tuple:
        image, mask = torch.from_numpy(np.array(im)).permute(2, 0, 1), torch.from_numpy(np.array(lb, np.int64))
        if random.random() < 0.5:
            image = image.flip(-1)
            mask = mask.flip(-1)  # mirror
            if self.swap:
                mask = torch.from_numpy(swap_lr(mask.numpy()))
        return image, mask

    def __getitem__(self, i: int) -> tuple:
        img, label = self.load(i)
        return self._augment(img, label)


# -- 5. albumentations-style keywords: aug(image=, mask=) -> {"image", "mask"} -------------------------------------


class AlbuFlip:
    def __init__(self, swap: bool, p: float = 0.5) -> None:
        self.swap, self.p = swap, p

    def __call__(self, force_apply: bool = False, **data: Any) -> dict:
        if random.random() < self.p:
            mask = np.ascontiguousarray(data["mask"][:, ::-1])  # mirror
            data = {**data, "image": np.ascontiguousarray(data["image"][:, ::-1]), "mask": mask}
            if self.swap:
                data["mask"] = swap_lr(mask)
        return data


class AlbuCompose:
    def __init__(self, transforms: list) -> None:
        self.transforms = transforms

    def __call__(self, *args: Any, force_apply: bool = False, **data: Any) -> dict:
        for t in self.transforms:
            data = t(**data)
        return data


class FaceAlbu(FaceBase):
    def __init__(self, swap: bool) -> None:
        super().__init__(swap)
        self.aug = AlbuCompose([AlbuFlip(swap)])

    def __getitem__(self, i: int) -> tuple:
        img, label = (np.array(v) for v in self.load(i))
        out = self.aug(image=img, mask=label)
        return out["image"], out["mask"]


PLACEMENTS = [
    # (Dataset, the transform the check must choose, the function whose marked line did the flip)
    pytest.param(FaceMask, "FaceMask.trans_train (Compose.__call__)", HorizontalFlip.__call__, id="attribute-dict"),
    pytest.param(FaceArrays, "FaceArrays.t (PairFlip.__call__)", PairFlip.__call__, id="short-attribute-args"),
    pytest.param(FaceGlobal, ":augment", augment, id="global-function"),
    pytest.param(FaceMethod, "FaceMethod._augment", FaceMethod._augment, id="method"),
    pytest.param(FaceAlbu, "FaceAlbu.aug (AlbuCompose.__call__)", AlbuFlip.__call__, id="albumentations-keywords"),
]


def check(dataset: Any, **kw: Any) -> Any:
    kw = {"num_classes": NUM_CLASSES, "ignore_index": 255, "flip_pairs": PAIRS, "samples": 3, "seeds": 4, **kw}
    return check_dataset_transform(dataset, **kw)


@pytest.mark.parametrize(("dataset", "chosen", "flip"), PLACEMENTS)
def test_a_missing_swap_is_named_at_the_line_that_flipped(dataset: type, chosen: str, flip: Callable) -> None:
    with pytest.raises(PropertyViolation) as info:
        check(dataset(swap=False))
    assert info.value.cause == "missing swap", str(info.value)
    function = flip.__qualname__
    assert info.value.where == (
        f"flip without the left/right swap of 2:3, 4:5, 7:8 at test_paired_call.py:{line_of(flip)} ({function})"
    )


@pytest.mark.parametrize(("dataset", "chosen", "flip"), PLACEMENTS)
def test_the_correct_swap_passes_and_the_outermost_call_is_named(dataset: type, chosen: str, flip: Callable) -> None:
    report = check(dataset(swap=True))
    assert chosen in report.transform and report.passes, report.lines()
    assert "the outermost call in __getitem__" in report.notes[0]


def test_a_subset_is_seen_through_and_the_dataset_named() -> None:
    report = check(torch.utils.data.Subset(FaceMask(swap=True), [0, 2, 4, 5]))
    assert report.dataset == "FaceMask" and report.indices == [0, 2, 3]


def test_transform_names_an_inner_call() -> None:
    """--transform picks a paired call other than the outermost: the flip inside the Compose."""
    report = check(FaceMask(swap=True), transform="HorizontalFlip")
    assert report.transform.startswith("HorizontalFlip.__call__, defined at test_paired_call.py:")
    assert "(--transform HorizontalFlip)" in report.notes[0]
    report = check(FaceGlobal(swap=True), transform=f"{__name__.rsplit('.', 1)[-1]}:augment")
    assert report.transform.endswith(f"test_paired_call.py:{inspect.getsourcelines(augment)[1]} (augment)")


def test_a_transform_name_no_paired_call_has_says_which_did() -> None:
    with pytest.raises(CannotAdapt, match=r"--transform jitter: no call of that name .* the calls that did: "):
        check(FaceMask(swap=True), transform="jitter")


class ImageOnly(FaceBase):
    """Transforms the image alone: no call takes and returns both."""

    def __init__(self) -> None:
        super().__init__(True)
        self.tf = lambda im: im.transpose(Image.FLIP_LEFT_RIGHT)

    def __getitem__(self, i: int) -> tuple:
        img, label = self.load(i)
        return np.array(self.tf(img)), np.array(label)


def test_when_no_call_takes_and_returns_both_it_says_what_was_seen() -> None:
    with pytest.raises(CannotAdapt) as info:
        check(ImageOnly())
    message = str(info.value)
    assert "ImageOnly[0] made no call that takes an image and a mask together" in message
    assert "FaceBase.load(int)" in message and "ImageOnly.__init__.<locals>.<lambda>(PIL RGB 40x40)" in message
    assert "\n" not in message


class FaceInTurn(FaceBase):
    """Two paired calls in turn in __getitem__: both are the transform (checked as a chain)."""

    def __init__(self, swap: bool) -> None:
        super().__init__(swap)
        self.crop = lambda im, lb: (im.crop((2, 2, 38, 38)), lb.crop((2, 2, 38, 38)))

    def __getitem__(self, i: int) -> tuple:
        img, label = self.load(i)
        img, label = self.crop(img, label)
        img, label = augment(img, label, swap=self.swap)
        return np.array(img), np.array(label)


def test_paired_calls_made_in_turn_are_checked_as_one_chain() -> None:
    report = check(FaceInTurn(swap=True))
    assert report.transform.startswith("FaceInTurn.crop (FaceInTurn.__init__.<locals>.<lambda>) -> ")
    assert ":augment, defined at" in report.transform
    with pytest.raises(PropertyViolation) as info:
        check(FaceInTurn(swap=False))
    assert (
        info.value.where
        == f"flip without the left/right swap of 2:3, 4:5, 7:8 at test_paired_call.py:{line_of(augment)} (augment)"
    )


class ThreeImages(FaceBase):
    """Hands its Compose {im, edges, lb}: perfsuite cannot tell which image the mask goes with."""

    def __init__(self) -> None:
        super().__init__(True)
        self.trans_train = Compose([HorizontalFlip(True)])

    def __getitem__(self, i: int) -> tuple:
        img, label = self.load(i)
        out = self.trans_train(dict(im=img, edges=img.copy(), lb=label))
        return np.array(out["im"]), np.array(out["lb"])


class FlipDropsEdges(HorizontalFlip):
    def __call__(self, im_lb: dict) -> dict:
        return super().__call__({"im": im_lb["im"], "lb": im_lb["lb"]})


def test_a_paired_step_inside_a_call_perfsuite_cannot_adapt_is_not_checked_alone() -> None:
    dataset = ThreeImages()
    dataset.trans_train = Compose([FlipDropsEdges(True)])
    with pytest.raises(CannotAdapt) as info:
        check(dataset)
    message = str(info.value)
    assert "transform(dict {'im', 'edges', 'lb'})" in message and "--transform FlipDropsEdges" in message
    assert check(dataset, transform="FlipDropsEdges").passes


def test_progress_says_what_the_check_is_doing() -> None:
    """What a live line shows under load: each stage, in order, up to the replay that finds the line."""
    said: list[str] = []
    with pytest.raises(PropertyViolation):
        check(FaceMask(swap=False), log=said.append)
    assert said[0] == "finding the transform: tracing FaceMask[0]"
    assert said[1].startswith("transform: FaceMask.trans_train (Compose.__call__), defined at test_paired_call.py:")
    assert said[2:4] == ["recording the call FaceMask[2] makes", "recording the call FaceMask[5] makes"]
    assert said[4].startswith("labels, flip pairs and alignment by colour consistency: seed 1/4 on 3 sample(s)")
    assert said[-1].startswith("replaying dataset[") and said[-1].endswith("to find the line that did it")


def test_names_on_a_python_without_co_qualname() -> None:
    """Python 3.10 (requires-python) has no code.co_qualname: the class comes from the object the call is bound to."""
    from types import SimpleNamespace

    from perfsuite.augment.paired_call import qualname

    bare = SimpleNamespace(co_name="__call__")
    assert qualname(bare, HorizontalFlip(True)) == "HorizontalFlip.__call__"  # type: ignore[arg-type]
    assert qualname(bare) == "__call__"  # type: ignore[arg-type]
    assert qualname(HorizontalFlip.__call__.__code__) == "HorizontalFlip.__call__"


def swap_on_its_own(im: Image.Image, lb: Image.Image) -> tuple:
    """The swap drawn apart from the flip (here: no flip at all)."""
    if random.random() < 0.5:
        lb = Image.fromarray(swap_lr(np.array(lb)))  # swap
    return im, lb


class FaceSwapOnly(FaceBase):
    def __getitem__(self, i: int) -> tuple:
        img, label = self.load(i)
        return swap_on_its_own(img, label)


def test_a_swap_without_a_flip_is_named_at_its_line() -> None:
    with pytest.raises(PropertyViolation) as info:
        check(FaceSwapOnly(True))
    assert info.value.cause == "swap without flip", str(info.value)
    line = line_of(swap_on_its_own, "# swap")
    assert info.value.where == (
        f"left/right swap of 2:3, 4:5, 7:8 without a flip at test_paired_call.py:{line} (swap_on_its_own)"
    )


def hflip(x: Image.Image) -> Image.Image:
    """A helper the transform calls for the image and the mask alike: the fix belongs in its caller."""
    out = x.transpose(Image.FLIP_LEFT_RIGHT)
    return out


def augment_with_helper(im: Image.Image, lb: Image.Image) -> tuple:
    if random.random() < 0.5:
        im = hflip(im)
        lb = hflip(lb)  # mirror
    return im, lb


class FaceHelper(FaceBase):
    def __getitem__(self, i: int) -> tuple:
        img, label = self.load(i)
        return augment_with_helper(img, label)


def test_a_flip_in_a_helper_is_named_at_the_transforms_line_that_called_it() -> None:
    with pytest.raises(PropertyViolation) as info:
        check(FaceHelper(False))
    line = line_of(augment_with_helper)
    assert info.value.where == (
        f"flip without the left/right swap of 2:3, 4:5, 7:8 at test_paired_call.py:{line} (augment_with_helper)"
    )


# -- a transform that is a module-level object: --transform names it by its global's own name --------------------

TRAIN_AUG = Compose([ColorJitter(), HorizontalFlip(True)])


class FaceModuleObject(FaceBase):
    def __getitem__(self, i: int) -> tuple:
        img, label = self.load(i)
        im_lb = TRAIN_AUG(dict(im=img, lb=label))
        return torch.from_numpy(np.array(im_lb["im"])).permute(2, 0, 1), torch.from_numpy(np.array(im_lb["lb"]))


@pytest.mark.parametrize("wanted", ["TRAIN_AUG", f"{__name__.rsplit('.', 1)[-1]}:TRAIN_AUG"])
def test_transform_names_a_module_level_object_by_its_global(wanted: str) -> None:
    report = check(FaceModuleObject(swap=True), transform=wanted)
    assert report.transform.startswith(f"{__name__.rsplit('.', 1)[-1]}:TRAIN_AUG (Compose.__call__), defined at")
