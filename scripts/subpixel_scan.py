"""False-alarm and catch-rate scan of the sub-pixel alignment check (perfsuite/augment/alignment.py).

Correct subjects (every flag is a false alarm): perfsuite's CPU and GPU
executors running the geometric recipe (flip, rotation +-20 deg, scale
0.8-1.2), Kornia's AugmentationSequential (flip, RandomAffine with the same
ranges), albumentations' Affine, and correct resizes (bilinear image with
align_corners=False, nearest-exact mask) by 0.5/0.75/1.5/2/3. Controls (every
flag is a catch): a rotation whose image grid is built for
align_corners=False but sampled with align_corners=True (half a pixel at the
border), a 0.5x resize with align_corners=True on the image and 'nearest' on
the mask, the same at 2x with 'nearest-exact' on the mask, and a mask one
pixel off after a 1.5x resize.

Masks: ``--masks blobs`` draws the batches ``check_paired_augmentation(...,
subpixel=True)`` draws itself (the strategies' blob masks, from Hypothesis's
generator seeded with ``--seed``); ``--masks faces`` the face_parsing
workload's masks. Each batch is 4 samples at a side drawn from ``--sides``
(+0..8 px). A batch counts as flagged if any sample alone or the pooled batch
is flagged, exactly as the check decides.

    PYTHONPATH=. python scripts/subpixel_scan.py --masks blobs --batches 200 --seed 0
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F

from perfsuite.augment.adapters import KorniaSequential, NumpyPerSample, TorchBatched
from perfsuite.augment.alignment import batch_fits
from perfsuite.augment.cpu import CpuAugment
from perfsuite.augment.gpu import GpuAugment
from perfsuite.augment.painting import encode, palette_for

IGNORE = 255
FACTORS = (0.5, 0.75, 1.5, 2.0, 3.0)


def resize(factor: float, image_align_corners: bool | None = False, mask_mode: str = "nearest-exact", shift: int = 0):
    def fn(x, m):
        h, w = x.shape[-2:]
        size = (max(2, round(h * factor)), max(2, round(w * factor)))
        xo = F.interpolate(x, size=size, mode="bilinear", align_corners=image_align_corners)
        mo = F.interpolate(m[:, None].float(), size=size, mode=mask_mode)[:, 0].to(m.dtype)
        return xo, mo.roll(shift, dims=-1)

    return fn


def half_pixel_rotation(degrees: float = 20.0):
    """Image: grid for align_corners=False, sampled with align_corners=True; mask: consistent nearest."""

    def fn(x, m):
        b, _, h, w = x.shape
        t = torch.deg2rad((torch.rand(b) * 2 - 1) * degrees)
        theta = torch.stack(
            [torch.stack([t.cos(), -t.sin(), torch.zeros(b)], -1), torch.stack([t.sin(), t.cos(), torch.zeros(b)], -1)],
            1,
        )
        grid = F.affine_grid(theta, (b, 1, h, w), align_corners=False)
        xo = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=True)
        shifted = m[:, None].float() - IGNORE
        mo = F.grid_sample(shifted, grid, mode="nearest", padding_mode="zeros", align_corners=False)
        return xo, (mo[:, 0] + IGNORE).round().to(m.dtype)

    return fn


def subjects(recipe_seed: int):
    import albumentations as A
    import cv2
    import kornia.augmentation as K

    from perfsuite.augment.recipe import Recipe

    geometry = Recipe().geometric_only()
    kornia = K.AugmentationSequential(
        K.RandomHorizontalFlip(), K.RandomAffine(degrees=20.0, scale=(0.8, 1.2), p=1.0), data_keys=["input", "mask"]
    )

    def albu(seed):
        pipe = A.Compose(
            [
                A.HorizontalFlip(p=0.5),
                A.Affine(
                    rotate=(-20, 20),
                    scale=(0.8, 1.2),
                    p=1.0,
                    interpolation=cv2.INTER_LINEAR,
                    mask_interpolation=cv2.INTER_NEAREST,
                    fill=0,
                    fill_mask=IGNORE,
                ),
            ],
            seed=seed,
        )
        return lambda image, mask: (lambda o: (o["image"], o["mask"]))(pipe(image=image, mask=mask))

    return {
        "cpu executor (geometric recipe)": (
            "correct",
            NumpyPerSample(lambda s: CpuAugment(geometry, "mask", fill=IGNORE, seed=s), factory=True),
        ),
        "gpu executor (geometric recipe)": ("correct", TorchBatched(GpuAugment(geometry, "mask", fill=IGNORE))),
        "kornia AugmentationSequential (flip, affine)": ("correct", KorniaSequential(kornia)),
        "albumentations Affine (flip, affine)": ("correct", NumpyPerSample(albu, factory=True)),
        **{f"correct resize x{f}": ("correct", TorchBatched(resize(f))) for f in FACTORS},
        "rotation, image sampled align_corners=True on an align_corners=False grid": (
            "control",
            TorchBatched(half_pixel_rotation()),
        ),
        "resize x0.5, image align_corners=True, mask 'nearest'": (
            "control",
            TorchBatched(resize(0.5, True, "nearest")),
        ),
        "resize x2, image align_corners=True, mask 'nearest-exact'": ("control", TorchBatched(resize(2.0, True))),
        "resize x1.5, mask one pixel off": ("control", TorchBatched(resize(1.5, False, shift=1))),
    }


def blob_batches(n: int, seed: int, sides: list[int]):
    """``n`` batches of 4 from the strategy check_paired_augmentation(subpixel=True) draws, seeded."""
    import hypothesis
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    from perfsuite.augment.labels import LabelSpace
    from perfsuite.augment.strategies import mask_batches

    space = LabelSpace.declare(19, IGNORE)
    out: list[np.ndarray] = []

    @hypothesis.seed(seed)
    @settings(
        max_examples=n,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def draw(data):
        side = data.draw(st.sampled_from(sides))
        batch = data.draw(
            mask_batches(
                space=space,
                distinct_samples=True,
                blobs=True,
                min_batch=4,
                max_batch=4,
                min_side=side,
                max_side=side + 8,
            )
        )
        out.append(batch.masks)

    draw()
    return out


def face_batches(n: int, seed: int, sides: list[int]):
    from perfsuite.jobs.registry import get_workload

    w = get_workload("face_parsing")
    rng = np.random.default_rng(seed)
    scale = w.scale("smoke")
    out = []
    for _ in range(n):
        side = int(rng.choice(sides))
        s = type(scale)(scale.name, (side, side + int(rng.integers(0, 9))), scale.num_samples, 4, scale.model)
        first = int(rng.integers(0, 10**6))
        out.append(np.stack([w.generate(i, np.random.default_rng(i), s).target for i in range(first, first + 4)]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--masks", choices=("blobs", "faces"), default="blobs")
    ap.add_argument("--sides", default="64,96,128,192,256,384,512")
    ap.add_argument("--only", default="", help="run only subjects whose name contains this")
    ap.add_argument("--json", default="", help="write the counts here")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    torch.manual_seed(args.seed)
    sides = [int(v) for v in args.sides.split(",")]
    t0, c0 = time.time(), time.process_time()
    batches = (blob_batches if args.masks == "blobs" else face_batches)(args.batches, args.seed, sides)
    runs = {k: v for k, v in subjects(args.seed).items() if args.only in k}
    counts = {
        k: {"kind": kind, "flagged": 0, "batches": 0, "judged": 0, "samples": 0, "worst": 0.0}
        for k, (kind, _) in runs.items()
    }
    by_side: dict[str, dict[int, list[int]]] = {k: {} for k in runs}
    rng = np.random.default_rng(args.seed)
    for n, masks in enumerate(batches, start=1):
        if n % 10 == 0:
            print(f"... {n} batches, {time.time() - t0:.0f} s", flush=True)
        palette = palette_for(masks)
        images = encode(masks, palette)
        seed = int(rng.integers(0, 2**31))
        side = int(
            masks.shape[1] // 8 * 8 if masks.shape[1] < sides[0] else max(s for s in sides if s <= masks.shape[1])
        )
        skip = {IGNORE}
        for name, (_, paired) in runs.items():
            out = paired(images, masks, seed)
            flagged, judged, worst = False, 0, 0.0
            for sample, f in batch_fits(
                out.images, out.masks, masks.astype(np.int64), palette, skip | ({0} if "kornia" in name else set())
            ):
                if f is not None:
                    judged += sample is not None
                    worst = max(worst, f.score())
                    flagged |= f.flagged() is not None
            c = counts[name]
            c["flagged"] += flagged
            c["batches"] += 1
            c["judged"] += judged
            c["samples"] += len(masks)
            c["worst"] = max(c["worst"], worst)
            hit = by_side[name].setdefault(side, [0, 0])
            hit[0] += flagged
            hit[1] += 1
    wall, cpu = time.time() - t0, time.process_time() - c0
    head = (
        f"{args.batches} batches of 4 {args.masks} masks, sides {args.sides} (+0..8), seed {args.seed}; "
        f"torch {torch.__version__} on {platform.machine()} CPU; {wall:.0f} s wall, {cpu:.0f} s CPU"
    )
    print(head)
    for name, c in counts.items():
        sides_txt = " ".join(f"{s}:{a}/{b}" for s, (a, b) in sorted(by_side[name].items()))
        print(
            f"  [{c['kind']:7s}] {name:72s} flagged {c['flagged']:4d} / {c['batches']}  "
            f"(judged alone {c['judged']} of {c['samples']} samples; worst score {c['worst']:.2f})  by side {sides_txt}"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "header": head,
                    "counts": counts,
                    "by_side": {k: {str(s): v for s, v in d.items()} for k, d in by_side.items()},
                },
                fh,
                indent=1,
            )


if __name__ == "__main__":
    main()
