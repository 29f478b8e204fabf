"""The CPU executor: per-sample PIL and NumPy, as users' ``Dataset.__getitem__`` does it.

This is the "slow CPU augmentation" of seed 000 that the suite measures, so
it is an honest implementation, not a strawman: the geometric ops are
composed into one affine matrix per sample and applied once (PIL bilinear
for the image, nearest for the mask, the matrix itself for keypoints),
colour jitter uses PIL's enhancers, blur PIL's kernel filter, noise NumPy.

Parameters are drawn (:meth:`CpuAugment.sample_params`) separately from
being applied (:meth:`CpuAugment.apply`), Kornia style, so a sample can be
replayed and image/target alignment can be checked.

Coordinates: keypoints are (x, y) in pixel-index units, pixel centres at
integers, the same convention Kornia uses, so both executors move a keypoint
to the same place. Rotation angles are counter-clockwise on screen, as in
Kornia and ``PIL.Image.rotate``.

Example:
    >>> import numpy as np
    >>> aug = CpuAugment(Recipe(), "mask", seed=0)
    >>> image, mask = aug(np.zeros((32, 48, 3), np.uint8), np.zeros((32, 48), np.uint8))
    >>> image.shape, mask.dtype
    ((32, 48, 3), dtype('uint8'))
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, ImageEnhance, ImageFilter

from perfsuite.augment.recipe import Recipe, check_target_kind
from perfsuite.errors import AugmentationError

_BRIGHTNESS, _CONTRAST, _SATURATION, _HUE = range(4)


@dataclass(frozen=True)
class JitterParams:
    """Factors for one sample's colour jitter, applied in ``order`` (indices as in Kornia)."""

    brightness: float = 1.0
    contrast: float = 1.0
    saturation: float = 1.0
    hue: float = 0.0
    order: tuple[int, ...] = (_BRIGHTNESS, _CONTRAST, _SATURATION, _HUE)


@dataclass(frozen=True)
class CpuParams:
    """Everything random about one sample; :meth:`CpuAugment.apply` is deterministic given these.

    Neutral values mean "op not applied": flip False, angle 0, scale 1,
    jitter/blur_sigma/noise_seed None.
    """

    flip: bool = False
    angle: float = 0.0
    scale: float = 1.0
    jitter: JitterParams | None = None
    blur_sigma: float | None = None
    noise_seed: int | None = None

    def matrix(self, height: int, width: int) -> np.ndarray:
        """The 3x3 forward matrix (flip, then rotate, then scale, about the centre) in pixel-index units."""
        return affine_matrix(height, width, flip=self.flip, angle=self.angle, scale=self.scale)


def affine_matrix(height: int, width: int, *, flip: bool = False, angle: float = 0.0, scale: float = 1.0) -> np.ndarray:
    """Forward map of output = scale(rotate(flip(input))) about the centre ((W-1)/2, (H-1)/2).

    Same convention as Kornia's flip (x -> W-1-x) and rotation matrix, so
    keypoints land where the GPU executor puts them.
    """
    cx, cy = (width - 1) / 2.0, (height - 1) / 2.0
    to_centre = np.array([[1.0, 0.0, -cx], [0.0, 1.0, -cy], [0.0, 0.0, 1.0]])
    from_centre = np.array([[1.0, 0.0, cx], [0.0, 1.0, cy], [0.0, 0.0, 1.0]])
    f = np.diag([-1.0 if flip else 1.0, 1.0, 1.0])
    t = math.radians(angle)
    c, s = math.cos(t), math.sin(t)
    r = np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])
    sc = np.diag([scale, scale, 1.0])
    return from_centre @ sc @ r @ f @ to_centre


def _pil_affine_data(forward: np.ndarray) -> tuple[float, ...]:
    """PIL wants output->input coefficients in continuous coordinates (pixel centres at +0.5)."""
    shift = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5], [0.0, 0.0, 1.0]])
    unshift = np.array([[1.0, 0.0, -0.5], [0.0, 1.0, -0.5], [0.0, 0.0, 1.0]])
    inverse = shift @ np.linalg.inv(forward) @ unshift
    return tuple(float(v) for v in inverse[:2].ravel())


def _gaussian_kernel(size: int, sigma: float) -> ImageFilter.Kernel:
    radius = size // 2
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    g = np.exp(-(x**2) / (2.0 * sigma**2))
    g /= g.sum()
    return ImageFilter.Kernel((size, size), np.outer(g, g).ravel().tolist(), scale=1.0)


def _swap_pairs(mask: np.ndarray, pairs: tuple[tuple[int, int], ...]) -> np.ndarray:
    """A mirrored sample's mask with each left/right pair of classes traded (other labels, the fill too, kept)."""
    out = mask.copy()
    for a, b in pairs:
        out[mask == a], out[mask == b] = b, a
    return out


def _shift_hue(img: Image.Image, hue: float) -> Image.Image:
    """Rotate hue by ``hue`` turns via PIL's HSV mode (hue is 0..255 there), as torchvision does."""
    h, s, v = img.convert("HSV").split()
    shift = int(round(hue * 255)) % 256
    h_arr = ((np.asarray(h, dtype=np.int16) + shift) % 256).astype(np.uint8)
    return Image.merge("HSV", (Image.fromarray(h_arr, "L"), s, v)).convert("RGB")


class CpuAugment:
    """Per-sample augmentation of one image and its target, for use inside a Dataset.

    Args:
        recipe: what to do (:class:`~perfsuite.augment.recipe.Recipe`).
        target_kind: ``"mask"`` (HxW uint8 labels), ``"keypoints"`` ((K, 2)
            float x, y) or ``"none"`` (the target is returned untouched).
        fill: label written where rotation/scale bring in area from outside
            the image (255, the usual ignore index). Images are filled with 0.
        seed: optional. Each DataLoader worker seeds lazily from torch's
            per-worker seed (which PyTorch derives from the loader's
            generator, so it differs per worker and per epoch and repeats
            under ``torch.manual_seed``/``generator=``), mixed with ``seed``.
            Outside workers, ``seed`` alone seeds the stream (None: fresh
            OS entropy). A stream made in one process is never reused by a
            forked child, which would make every worker draw the same
            augmentations.

    Shape:
        image: (H, W), (H, W, 1) or (H, W, 3) uint8 -> the same.
        target: (H, W) uint8 mask -> the same; (K, 2) keypoints -> (K, 2)
        float32; anything with ``"none"`` -> unchanged.
    """

    def __init__(self, recipe: Recipe, target_kind: str, fill: int = 255, seed: int | None = None) -> None:
        if not isinstance(recipe, Recipe):
            raise AugmentationError(f"recipe={recipe!r} must be a Recipe; write CpuAugment(Recipe(), ...)")
        check_target_kind(target_kind)
        if isinstance(fill, bool) or not isinstance(fill, int) or not 0 <= fill <= 255:
            raise AugmentationError(
                f"fill={fill!r} must be an integer label 0..255 (CPU masks are uint8); write fill=255 "
                "for the usual ignore index"
            )
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise AugmentationError(f"seed={seed!r} must be a non-negative integer or None")
        self.recipe = recipe
        self.target_kind = target_kind
        self.fill = fill
        self.seed = seed
        self._rng: np.random.Generator | None = None
        self._rng_owner: tuple[int, int | None] | None = None

    def __repr__(self) -> str:
        return f"CpuAugment({self.recipe!r}, {self.target_kind!r}, fill={self.fill}, seed={self.seed})"

    # -- randomness ---------------------------------------------------------------------------

    def generator(self) -> np.random.Generator:
        """This process's (and this worker's) stream, created on first use."""
        from torch.utils.data import get_worker_info  # only needed here; keeps import cheap

        info = get_worker_info()
        owner = (os.getpid(), None if info is None else info.id)
        if self._rng is None or self._rng_owner != owner:
            if info is None:
                entropy: Any = self.seed
            else:
                entropy = [info.seed] if self.seed is None else [info.seed, self.seed]
            self._rng = np.random.default_rng(entropy)
            self._rng_owner = owner
        return self._rng

    def sample_params(self, rng: np.random.Generator) -> CpuParams:
        """Draw one sample's parameters; ops with p=0 draw nothing."""
        r = self.recipe
        flip = r.flip.p > 0 and rng.random() < r.flip.p
        angle = 0.0
        if r.rotation.p > 0 and rng.random() < r.rotation.p:
            angle = float(rng.uniform(-r.rotation.degrees, r.rotation.degrees))
        scale = 1.0
        if r.scale.p > 0 and rng.random() < r.scale.p:
            scale = float(rng.uniform(*r.scale.scale))
        jitter = None
        if r.jitter.p > 0 and rng.random() < r.jitter.p:
            j = r.jitter

            def factor(x: float) -> float:
                return float(rng.uniform(max(0.0, 1.0 - x), 1.0 + x))

            jitter = JitterParams(
                brightness=factor(j.brightness),
                contrast=factor(j.contrast),
                saturation=factor(j.saturation),
                hue=float(rng.uniform(-j.hue, j.hue)),
                order=tuple(int(i) for i in rng.permutation(4)),
            )
        blur_sigma = None
        if r.blur.p > 0 and rng.random() < r.blur.p:
            blur_sigma = float(rng.uniform(*r.blur.sigma))
        noise_seed = None
        if r.noise.p > 0 and rng.random() < r.noise.p:
            noise_seed = int(rng.integers(2**63))
        return CpuParams(bool(flip), angle, scale, jitter, blur_sigma, noise_seed)

    # -- applying -----------------------------------------------------------------------------

    def __call__(self, image: np.ndarray, target: Any = None) -> tuple[np.ndarray, Any]:
        return self.apply(image, target, self.sample_params(self.generator()))

    def apply(self, image: np.ndarray, target: Any, params: CpuParams) -> tuple[np.ndarray, Any]:
        """Apply ``params`` to one sample: geometry to image and target alike, then photometry to the image."""
        self._check_image(image)
        target = self._check_target(image, target)
        height, width = image.shape[:2]
        pil = Image.fromarray(image if image.ndim == 2 else (image[..., 0] if image.shape[2] == 1 else image))

        forward = params.matrix(height, width)
        if not np.allclose(forward, np.eye(3)):
            pil, target = self._geometry(pil, target, params, forward)
        if params.jitter is not None:
            pil = self._jitter(pil, params.jitter)
        if params.blur_sigma is not None:
            pil = pil.filter(_gaussian_kernel(self.recipe.blur.kernel_size, params.blur_sigma))

        out = np.asarray(pil)
        if params.noise_seed is not None:
            noise = np.random.default_rng(params.noise_seed).normal(0.0, self.recipe.noise.std * 255.0, out.shape)
            out = np.clip(np.rint(out + noise), 0, 255).astype(np.uint8)
        return np.ascontiguousarray(out.reshape(image.shape)), target

    def _geometry(
        self, pil: Image.Image, target: Any, params: CpuParams, forward: np.ndarray
    ) -> tuple[Image.Image, Any]:
        size = pil.size
        if params.angle == 0.0 and params.scale == 1.0:
            # A pure flip is a pixel permutation: do it exactly, as users' np.fliplr does.
            pil = pil.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
            if self.target_kind == "mask":
                target = np.ascontiguousarray(target[:, ::-1])
        else:
            data = _pil_affine_data(forward)
            pil = pil.transform(size, Image.Transform.AFFINE, data, resample=Image.Resampling.BILINEAR, fillcolor=0)
            if self.target_kind == "mask":
                mask = Image.fromarray(target, "L").transform(
                    size, Image.Transform.AFFINE, data, resample=Image.Resampling.NEAREST, fillcolor=self.fill
                )
                target = np.asarray(mask).copy()
        if self.target_kind == "keypoints":
            xy1 = np.concatenate([target.astype(np.float64), np.ones((len(target), 1))], axis=1)
            target = (xy1 @ forward.T)[:, :2].astype(np.float32)
        if self.target_kind == "mask" and params.flip and self.recipe.flip.pairs:
            target = _swap_pairs(target, self.recipe.flip.pairs)
        return pil, target

    @staticmethod
    def _jitter(pil: Image.Image, j: JitterParams) -> Image.Image:
        colour = pil.mode == "RGB"
        for step in j.order:
            if step == _BRIGHTNESS and j.brightness != 1.0:
                pil = ImageEnhance.Brightness(pil).enhance(j.brightness)
            elif step == _CONTRAST and j.contrast != 1.0:
                pil = ImageEnhance.Contrast(pil).enhance(j.contrast)
            elif step == _SATURATION and colour and j.saturation != 1.0:
                pil = ImageEnhance.Color(pil).enhance(j.saturation)
            elif step == _HUE and colour and j.hue != 0.0:
                pil = _shift_hue(pil, j.hue)
        return pil

    # -- validation ---------------------------------------------------------------------------

    @staticmethod
    def _check_image(image: Any) -> None:
        ok = (
            isinstance(image, np.ndarray)
            and image.dtype == np.uint8
            and (image.ndim == 2 or (image.ndim == 3 and image.shape[2] in (1, 3)))
        )
        if not ok:
            what = f"{type(image).__name__} {getattr(image, 'dtype', '')} {getattr(image, 'shape', '')}".strip()
            raise AugmentationError(
                f"CpuAugment takes an HxW, HxWx1 or HxWx3 uint8 array, got {what}; "
                "write np.asarray(Image.open(path).convert('RGB'))"
            )

    def _check_target(self, image: np.ndarray, target: Any) -> Any:
        if self.target_kind == "mask":
            if not (isinstance(target, np.ndarray) and target.dtype == np.uint8 and target.shape == image.shape[:2]):
                what = f"{type(target).__name__} {getattr(target, 'dtype', '')} {getattr(target, 'shape', '')}"
                raise AugmentationError(
                    f"target_kind='mask' needs an HxW uint8 mask the size of the image {image.shape[:2]}, "
                    f"got {what.strip()}; write np.asarray(Image.open(mask_path)) (mode 'L' or 'P')"
                )
            return target
        if self.target_kind == "keypoints":
            arr = np.asarray(target, dtype=np.float32) if target is not None else None
            if arr is None or arr.ndim != 2 or arr.shape[1] != 2:
                raise AugmentationError(
                    f"target_kind='keypoints' needs a (K, 2) array of (x, y) pixel coordinates, got "
                    f"{getattr(arr, 'shape', target)!r}; write np.array([[x0, y0], [x1, y1]], np.float32)"
                )
            return arr
        return target
