"""Face parsing: 19-class semantic segmentation of 512x512 RGB faces (seed 000).

Masks are drawn as structured regions in the CelebAMask-HQ layout (skin,
brows, eyes, nose, lips, hair, ears, neck, cloth, optional glasses, hat,
earrings and necklace), with occluders labelled 255 (the ignore index); the
image is rendered from the mask with per-region colours, shading and noise,
then saved as JPEG, so the loader decodes what a real face dataset holds.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from perfsuite.jobs.workload import Sample, Scale, Workload
from perfsuite.jobs.workloads.models import EncoderDecoder

LABELS = (
    "background",
    "skin",
    "nose",
    "eye_g",
    "l_eye",
    "r_eye",
    "l_brow",
    "r_brow",
    "l_ear",
    "r_ear",
    "mouth",
    "u_lip",
    "l_lip",
    "hair",
    "hat",
    "ear_r",
    "neck_l",
    "neck",
    "cloth",
)
IGNORE_INDEX = 255
# What a horizontal flip swaps: the subject's left eye, brow and ear become its right ones.
FLIP_PAIRS = (
    (LABELS.index("l_eye"), LABELS.index("r_eye")),
    (LABELS.index("l_brow"), LABELS.index("r_brow")),
    (LABELS.index("l_ear"), LABELS.index("r_ear")),
)


def draw_face_mask(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A face-parsing label map with the regions of CelebAMask-HQ, jittered per sample."""
    from PIL import Image, ImageDraw

    mask = Image.new("L", (width, height), 0)
    d = ImageDraw.Draw(mask)
    cx = width * rng.uniform(0.42, 0.58)
    cy = height * rng.uniform(0.40, 0.52)
    fw, fh = width * rng.uniform(0.26, 0.34), height * rng.uniform(0.34, 0.42)

    def ell(x: float, y: float, rx: float, ry: float, label: int) -> None:
        d.ellipse([x - rx, y - ry, x + rx, y + ry], fill=label)

    d.polygon(
        [
            (cx - fw * 1.8, height),
            (cx - fw * 0.9, cy + fh * 1.1),
            (cx + fw * 0.9, cy + fh * 1.1),
            (cx + fw * 1.8, height),
        ],
        fill=18,
    )  # cloth
    d.rectangle([cx - fw * 0.45, cy + fh * 0.5, cx + fw * 0.45, cy + fh * 1.2], fill=17)  # neck
    if rng.random() < 0.3:
        d.line(
            [(cx - fw * 0.45, cy + fh * 1.05), (cx + fw * 0.45, cy + fh * 1.05)],
            fill=16,
            width=max(1, int(height * 0.012)),
        )  # necklace
    ell(cx, cy - fh * 0.15, fw * 1.2, fh * 1.15, 13)  # hair behind the face
    ell(cx - fw, cy, fw * 0.16, fh * 0.2, 8)
    ell(cx + fw, cy, fw * 0.16, fh * 0.2, 9)
    if rng.random() < 0.25:
        ell(cx - fw * 1.02, cy + fh * 0.22, fw * 0.05, fh * 0.05, 15)  # earring
    ell(cx, cy, fw, fh, 1)  # skin
    if rng.random() < 0.2:
        d.chord([cx - fw * 1.25, cy - fh * 1.6, cx + fw * 1.25, cy - fh * 0.45], 180, 360, fill=14)  # hat
    ey = cy - fh * rng.uniform(0.12, 0.22)
    ex = fw * rng.uniform(0.38, 0.48)
    for side, eye, brow in ((-1, 4, 6), (1, 5, 7)):
        d.rectangle([cx + side * ex - fw * 0.22, ey - fh * 0.2, cx + side * ex + fw * 0.22, ey - fh * 0.14], fill=brow)
        ell(cx + side * ex, ey, fw * 0.15, fh * 0.06, eye)
    if rng.random() < 0.25:  # glasses drawn over the eyes
        for side in (-1, 1):
            d.ellipse(
                [cx + side * ex - fw * 0.24, ey - fh * 0.1, cx + side * ex + fw * 0.24, ey + fh * 0.1],
                outline=3,
                width=max(1, int(width * 0.008)),
            )
    d.polygon([(cx, ey + fh * 0.02), (cx - fw * 0.14, cy + fh * 0.3), (cx + fw * 0.14, cy + fh * 0.3)], fill=2)
    my = cy + fh * rng.uniform(0.5, 0.6)
    mw = fw * rng.uniform(0.3, 0.42)
    ell(cx, my - fh * 0.04, mw, fh * 0.05, 11)
    ell(cx, my + fh * 0.05, mw, fh * 0.06, 12)
    if rng.random() < 0.5:
        ell(cx, my, mw * 0.8, fh * 0.025, 10)
    labels = np.asarray(mask).copy()
    if rng.random() < 0.3:  # an occluder nobody labelled: the ignore index
        ox, oy = rng.uniform(0, width), rng.uniform(0, height)
        r = min(width, height) * rng.uniform(0.04, 0.1)
        yy, xx = np.ogrid[:height, :width]
        labels[(xx - ox) ** 2 + (yy - oy) ** 2 < r * r] = IGNORE_INDEX
    return labels


def render_from_mask(rng: np.random.Generator, labels: np.ndarray, palette_size: int = 256) -> np.ndarray:
    """An RGB image whose regions follow the mask: colours, shading, a little noise."""
    h, w = labels.shape
    palette = rng.integers(20, 236, size=(palette_size, 3)).astype(np.float32)
    image = palette[labels]
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    shade = 1.0 + 0.15 * np.sin(xx / w * rng.uniform(2, 6) + rng.uniform(0, 6)) * np.cos(yy / h * rng.uniform(2, 6))
    image = image * shade[..., None] + rng.normal(0, 6, size=image.shape).astype(np.float32)
    return np.clip(image, 0, 255).astype(np.uint8)


class FaceParsing(Workload):
    name = "face_parsing"
    summary = "19-class face parsing, 512x512 RGB, encoder-decoder"
    seed_doc = "000"
    target_kind = "mask"
    num_classes = len(LABELS)
    ignore_index = IGNORE_INDEX
    flip_pairs = FLIP_PAIRS
    scales = {
        "smoke": Scale("smoke", (64, 64), num_samples=48, batch_size=8, model={"base": 8, "depth": 3}),
        "full": Scale("full", (512, 512), num_samples=1024, batch_size=32, model={"base": 32, "depth": 4}),
    }

    def generate(self, index: int, rng: np.random.Generator, scale: Scale) -> Sample:
        mask = draw_face_mask(rng, *scale.image_size)
        return Sample(image=render_from_mask(rng, mask), target=mask)

    def build_model(self, scale: Scale) -> EncoderDecoder:
        return EncoderDecoder(self.channels, self.num_classes, **scale.model)

    def prepare(self, images: torch.Tensor, target: torch.Tensor, scale: Scale) -> tuple[torch.Tensor, torch.Tensor]:
        x, _ = super().prepare(images, None, scale)
        return x, target.long()

    def loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(output, target, ignore_index=IGNORE_INDEX)
