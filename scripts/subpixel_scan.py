"""False-alarm scan of the sub-pixel alignment check on real face-parsing masks (issue 13).

Draws N random batches of the face_parsing workload's masks, runs perfsuite's
CPU and GPU (Kornia, on whatever device torch has) executors with the
geometric recipe (flip, rotation, scale) and correct resizes at several
factors, and counts batches the sub-pixel check flags. Then runs the
align_corners-mismatch control and counts batches it catches.

    PYTHONPATH=. python scripts/subpixel_scan.py --batches 2000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F

from perfsuite.augment.alignment import batch_fits
from perfsuite.augment.checks import NumpyPerSample, TorchBatched, encode, palette_for
from perfsuite.augment.cpu import CpuAugment
from perfsuite.augment.gpu import GpuAugment
from perfsuite.jobs.registry import get_workload


def resize(factor: float, image_align_corners: bool | None):
    """Resize by ``factor``: image bilinear (align_corners as given), mask nearest-exact."""

    def fn(x, m):
        h, w = x.shape[-2:]
        size = (max(2, round(h * factor)), max(2, round(w * factor)))
        xo = F.interpolate(x, size=size, mode="bilinear", align_corners=image_align_corners)
        mo = F.interpolate(m[:, None].float(), size=size, mode="nearest-exact")[:, 0].to(m.dtype)
        return xo, mo

    return fn


def batch(w, rng, side, b=4):
    scale = w.scale("smoke")
    scale = type(scale)(
        scale.name, (side, side + int(rng.integers(0, 9))), scale.num_samples, scale.batch_size, scale.model
    )
    first = int(rng.integers(0, 10**6))
    return np.stack([w.generate(i, np.random.default_rng(i), scale).target for i in range(first, first + b)])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    w = get_workload("face_parsing")
    rng = np.random.default_rng(args.seed)
    skip = {w.ignore_index}
    geometry = w.recipe().geometric_only()
    subjects = {
        "cpu executor (geometric recipe)": lambda: NumpyPerSample(
            lambda s: CpuAugment(geometry, "mask", fill=w.ignore_index, seed=s), factory=True
        ),
        "gpu executor (geometric recipe)": lambda: TorchBatched(GpuAugment(geometry, "mask", fill=w.ignore_index)),
        "correct resize x0.5..x4": None,
    }
    counts = {
        k: [0, 0, 0.0]
        for k in [
            *subjects,
            "align_corners mismatch resize x2 (control)",
            "align_corners mismatch resize x0.5..x4 (control)",
        ]
    }
    worst = {k: 0.0 for k in counts}
    by_factor: dict = {}
    t0 = time.time()
    for n in range(args.batches):
        side = int(rng.choice([48, 64, 96, 128]))
        masks = batch(w, rng, side)
        palette = palette_for(masks)
        images = encode(masks, palette)
        seed = int(rng.integers(0, 2**31))
        factor = float(rng.choice([0.5, 0.75, 1.5, 2.0, 3.0, 4.0]))
        runs = {
            "cpu executor (geometric recipe)": subjects["cpu executor (geometric recipe)"](),
            "gpu executor (geometric recipe)": subjects["gpu executor (geometric recipe)"](),
            "correct resize x0.5..x4": TorchBatched(resize(factor, False)),
            "align_corners mismatch resize x2 (control)": TorchBatched(resize(2.0, True)),
            "align_corners mismatch resize x0.5..x4 (control)": TorchBatched(resize(factor, True)),
        }
        for name, paired in runs.items():
            out = paired(images, masks, seed)
            flagged, m, judged = False, 0.0, 0
            for sample, f in batch_fits(out.images, out.masks, palette, skip):  # what assert_subpixel_aligned judges
                if f is not None:
                    judged += sample is not None
                    m = max(m, f.score())
                    flagged |= f.flagged() is not None
            counts[name][2] += judged
            counts[name][0] += flagged
            counts[name][1] += 1
            worst[name] = max(worst[name], m)
            if flagged and "x0.5..x4" in name:
                by_factor.setdefault((name, factor), [0, 0])[0] += 1
            if "x0.5..x4" in name:
                by_factor.setdefault((name, factor), [0, 0])[1] += 1
        if (n + 1) % 250 == 0 or n + 1 == args.batches:
            report(n + 1, time.time() - t0, counts, worst, by_factor)


def report(n, dt, counts, worst, by_factor) -> None:
    print(
        f"{n} batches of 4 real face_parsing masks (sides 48-135 px), {dt:.0f} s, "
        f"torch {torch.__version__}, device cpu",
        flush=True,
    )
    for name, (flagged, total, judged) in counts.items():
        print(
            f"  {name:52s} flagged {flagged:5d} / {total} batches "
            f"({judged:.0f} samples judged alone, plus the pooled batch; "
            f"worst score {worst[name]:.2f}, > 1 is flagged)",
            flush=True,
        )
    for (name, factor), (flagged, total) in sorted(by_factor.items()):
        print(f"    {name[:30]:30s} x{factor:<5} flagged {flagged:5d} / {total}", flush=True)


if __name__ == "__main__":
    main()
