"""The GPU executor: the same recipe, batched, with no host-device synchronisation.

Moving augmentation to the GPU only pays if the host never waits for the
device. Kornia's ``AugmentationSequential`` did (6 syncs per batch: ColorJiggle
reads its random order with ``.tolist()`` and tests factors with ``bool()``,
Gaussian blur tests sigma), so this executor draws every per-sample parameter
as a device tensor from torch's global generator (``torch.manual_seed`` makes a
run repeatable) and turns probabilities into neutral parameters (angle 0,
scale 1, factor 1, identity kernel, zero noise), never into branches or
boolean indexing. ``tests/unit/test_augment_gpu.py`` counts the syncs: zero.

* Geometry: flip, rotation and scale are one affine matrix per sample
  (:func:`affine_matrices`, the CPU executor's convention: pixel-index
  coordinates, counter-clockwise angles as in Kornia), so each pixel is
  resampled once: images bilinear, masks nearest, keypoints by the matrix.
  Flipped samples' masks trade the recipe's left/right class pairs
  (``Flip(pairs=...)``) with elementwise ``torch.where``.
  Masks are sampled shifted by ``-fill`` with zero padding, so area brought
  in from outside comes out as ``fill`` and no label is invented or clamped.
* Colour jitter is per-sample linear algebra in YIQ: brightness scales,
  contrast blends with the mean luma, saturation scales chroma (I, Q) and hue
  rotates it. All four commute, so they are one 3x3 matrix and an offset per
  sample (no random order needed) and intermediate clamps are left out; YIQ
  hue is a close approximation of the CPU executor's HSV shift. One-channel
  images get brightness and contrast only.
* Blur: per-sample separable Gaussian kernels as one grouped convolution
  (reflect padding, as Kornia's blur); noise: ``torch.randn``.

Kornia: its matrices define the conventions (tests compare against
``kornia.geometry.transform.rotate``), but its augmentation modules and
``kornia.enhance`` / ``kornia.filters`` are not used: they branch on tensor
values in Python, and each branch is a host sync.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from perfsuite.augment.recipe import Recipe, check_target_kind
from perfsuite.errors import AugmentationError

# Uniforms each active op draws per sample: its coin, then its values.
_UNIFORMS = {"flip": 1, "rotation": 2, "scale": 2, "jitter": 5, "blur": 2, "noise": 1}
_LUMA = (0.299, 0.587, 0.114)
_YIQ = ((*_LUMA,), (0.596, -0.274, -0.322), (0.211, -0.523, 0.312))


def _jitter_basis() -> torch.Tensor:
    """(3, 3, 3): RGB matrices of luma projection, chroma projection and chroma rotation by +90 degrees.

    The rotation's sign is chosen so that a positive hue moves colours the
    way an HSV hue increase does (red towards green).
    """
    t = torch.tensor(_YIQ, dtype=torch.float64)
    t_inv = torch.linalg.inv(t)
    luma = t_inv @ torch.diag(torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)) @ t
    turn = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]], dtype=torch.float64)
    return torch.stack([luma, torch.eye(3, dtype=torch.float64) - luma, t_inv @ turn @ t]).float()


def affine_matrices(
    height: int, width: int, flip: torch.Tensor, angle: torch.Tensor, scale: torch.Tensor
) -> torch.Tensor:
    """(B, 2, 3) forward maps of output = scale(rotate(flip(input))) about ((W-1)/2, (H-1)/2).

    ``flip`` bool, ``angle`` degrees counter-clockwise, ``scale``: (B,) tensors.
    Pixel-index units, exactly :func:`perfsuite.augment.cpu.affine_matrix`.
    """
    cx, cy = (width - 1) / 2.0, (height - 1) / 2.0
    fx = 1.0 - 2.0 * flip.to(angle.dtype)
    t = torch.deg2rad(angle)
    c, s = torch.cos(t) * scale, torch.sin(t) * scale
    a, b, d, e = c * fx, s, -s * fx, c
    return torch.stack(
        [torch.stack([a, b, cx - a * cx - b * cy], -1), torch.stack([d, e, cy - d * cx - e * cy], -1)], 1
    )


def _sampling_grid(matrix: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """(B, H, W, 2) ``grid_sample`` grid (align_corners=False) reading each output pixel from its source."""
    a, b, tx = matrix[:, 0].unbind(-1)
    d, e, ty = matrix[:, 1].unbind(-1)
    det = a * e - b * d
    ia, ib, id_, ie = e / det, -b / det, -d / det, a / det  # inverse of the 2x2 part, in closed form
    xs = torch.arange(width, device=matrix.device, dtype=matrix.dtype).view(1, 1, -1) - tx.view(-1, 1, 1)
    ys = torch.arange(height, device=matrix.device, dtype=matrix.dtype).view(1, -1, 1) - ty.view(-1, 1, 1)
    src_x = ia.view(-1, 1, 1) * xs + ib.view(-1, 1, 1) * ys
    src_y = id_.view(-1, 1, 1) * xs + ie.view(-1, 1, 1) * ys
    return torch.stack([(2.0 * src_x + 1.0) / width - 1.0, (2.0 * src_y + 1.0) / height - 1.0], -1)


class GpuAugment(nn.Module):
    """Batched, sync-free augmentation of images and their targets on their own device.

    Args:
        recipe: what to do (:class:`~perfsuite.augment.recipe.Recipe`).
        target_kind: ``"mask"``, ``"keypoints"`` or ``"none"``.
        fill: label for mask areas brought in from outside the image (any
            integer; 255 by default, -100 if you use CrossEntropyLoss's default
            ignore index). Images are filled with 0.

    Shape:
        images: (B, C, H, W) float in [0, 1], C = 1 or 3 -> the same, clamped to [0, 1].
        target: (B, H, W) integer mask -> the same dtype; (B, K, 2) float
        keypoints (x, y) -> the same; ``"none"``: returned untouched.

    ``last_params`` holds the last call's per-sample draws (device tensors:
    flip, angle, scale, brightness, contrast, saturation, hue, sigma, noise),
    neutral where an op was not applied, so a batch can be replayed.
    """

    def __init__(self, recipe: Recipe, target_kind: str, fill: int = 255) -> None:
        super().__init__()
        if not isinstance(recipe, Recipe):
            raise AugmentationError(f"recipe={recipe!r} must be a Recipe; write GpuAugment(Recipe(), ...)")
        check_target_kind(target_kind)
        if isinstance(fill, bool) or not isinstance(fill, int):
            raise AugmentationError(f"fill={fill!r} must be an integer label; write fill=255")
        self.recipe = recipe
        self.target_kind = target_kind
        self.fill = fill
        self.last_params: dict[str, torch.Tensor] = {}
        # A buffer, so .to(device) moves it once: building it per call would be a host-to-device copy.
        self.register_buffer("_jitter_basis", _jitter_basis(), persistent=False)

    def extra_repr(self) -> str:
        return f"target_kind={self.target_kind!r}, fill={self.fill}"

    def forward(self, images: torch.Tensor, target: Any = None) -> tuple[torch.Tensor, Any]:
        self._check(images, target)
        r = self.recipe
        channels = images.shape[1]
        jitter = r.jitter.p > 0 and any(
            (r.jitter.brightness, r.jitter.contrast) + ((r.jitter.saturation, r.jitter.hue) if channels == 3 else ())
        )
        if not (r.geometric_active or jitter or r.blur.p > 0 or r.noise.p > 0):
            self.last_params = {}
            return images, target
        p = self._draw(images.shape[0], images.device)
        self.last_params = p
        out = images
        if r.geometric_active:
            out, target = self._geometry(out, target, p)
        if jitter:
            out = self._jitter(out, p)
        if r.blur.p > 0:
            out = self._blur(out, p["sigma"])
        if r.noise.p > 0:
            out = out + r.noise.std * p["noise"].view(-1, 1, 1, 1) * torch.randn_like(out)
        return out.clamp(0.0, 1.0), target

    # -- parameters ---------------------------------------------------------------------------

    def _draw(self, n: int, device: torch.device) -> dict[str, torch.Tensor]:
        """Per-sample parameters, neutral where the op's coin says no.

        One ``torch.rand`` call (one kernel launch) gives every uniform the
        active ops need; ops with p=0 take no column and get neutral values.
        """
        r, j = self.recipe, self.recipe.jitter
        u = iter(torch.rand(n, sum(_UNIFORMS[op] for op in r.active), device=device).T)

        def coin(p: float) -> torch.Tensor:
            return next(u) < p if p > 0 else torch.zeros(n, dtype=torch.bool, device=device)

        def value(applied: torch.Tensor, low: float, high: float, neutral: float) -> torch.Tensor:
            return torch.where(applied, low + (high - low) * next(u), neutral)

        def op(p: float, low: float, high: float, neutral: float) -> torch.Tensor:
            return value(coin(p), low, high, neutral) if p > 0 else torch.full((n,), neutral, device=device)

        params = {
            "flip": coin(r.flip.p),
            "angle": op(r.rotation.p, -r.rotation.degrees, r.rotation.degrees, 0.0),
            "scale": op(r.scale.p, *r.scale.scale, 1.0),
        }
        jittered = coin(j.p)  # one coin for the whole jitter, then torchvision's range for each factor
        for name in ("brightness", "contrast", "saturation", "hue"):
            x = getattr(j, name)
            low, high, neutral = (-x, x, 0.0) if name == "hue" else (max(0.0, 1.0 - x), 1.0 + x, 1.0)
            params[name] = value(jittered, low, high, neutral) if j.p > 0 else torch.full((n,), neutral, device=device)
        params["sigma"] = op(r.blur.p, *r.blur.sigma, 0.0)  # 0: identity kernel
        params["noise"] = coin(r.noise.p).float()  # 1: add noise, 0: not
        return params

    # -- ops ----------------------------------------------------------------------------------

    def _geometry(self, images: torch.Tensor, target: Any, p: dict[str, torch.Tensor]) -> tuple[torch.Tensor, Any]:
        """One warp per sample: flip, rotation and scale composed into a single matrix."""
        _, _, h, w = images.shape
        matrix = affine_matrices(h, w, p["flip"], p["angle"], p["scale"])
        grid = _sampling_grid(matrix, h, w)
        out = F.grid_sample(images, grid.to(images.dtype), mode="bilinear", padding_mode="zeros", align_corners=False)
        if self.target_kind == "mask":
            # Integer labels up to 2**24 are exact in float32; nearest sampling only copies them, and
            # zero padding of the shifted mask is ``fill`` once shifted back.
            shifted = (target.to(torch.float32) - self.fill).unsqueeze(1)
            moved = F.grid_sample(shifted, grid, mode="nearest", padding_mode="zeros", align_corners=False)
            target = (moved.squeeze(1) + self.fill).round_().to(target.dtype)
            target = self._swap_pairs(target, p["flip"])
        elif self.target_kind == "keypoints":
            m = matrix.to(target.dtype)
            target = target @ m[:, :, :2].transpose(1, 2) + m[:, None, :, 2]
        return out, target

    def _swap_pairs(self, masks: torch.Tensor, flipped: torch.Tensor) -> torch.Tensor:
        """Trade each left/right pair of classes on the flipped samples: elementwise, so no sync."""
        flipped = flipped.view(-1, 1, 1)
        for a, b in self.recipe.flip.pairs:
            is_a, is_b = flipped & (masks == a), flipped & (masks == b)
            masks = torch.where(is_a, b, torch.where(is_b, a, masks))
        return masks

    def _jitter(self, images: torch.Tensor, p: dict[str, torch.Tensor]) -> torch.Tensor:
        """out = A x + offset per sample: brightness * (contrast blend with mean luma), chroma scaled and turned."""
        b, c = p["brightness"].view(-1, 1, 1), p["contrast"].view(-1, 1, 1)
        if images.shape[1] == 1:
            gain, luma = b * c, images
        else:
            basis: torch.Tensor = self._jitter_basis.to(images.device, images.dtype)  # type: ignore[assignment]
            t = 2.0 * math.pi * p["hue"]
            sat = p["saturation"]
            weights = torch.stack([torch.ones_like(t), sat * torch.cos(t), sat * torch.sin(t)], 1).to(images.dtype)
            gain = b * c * torch.einsum("bk,kij->bij", weights, basis)
            luma = torch.einsum("c,bchw->bhw", basis[0, 0], images).unsqueeze(1)
        mean = luma.mean((1, 2, 3)).view(-1, 1, 1, 1)
        offset = (b * (1.0 - c)).view(-1, 1, 1, 1) * mean
        return torch.einsum("bij,bjhw->bihw", gain, images) + offset

    def _blur(self, images: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        """Separable per-sample Gaussian as one grouped convolution; sigma 0 is the identity kernel."""
        n, ch, h, w = images.shape
        k = self.recipe.blur.kernel_size
        x = torch.arange(k, device=images.device, dtype=images.dtype) - k // 2
        s = sigma.to(images.dtype).view(-1, 1)
        g = torch.exp(-(x**2) / (2.0 * s.clamp_min(1e-3) ** 2))
        g = torch.where(s > 0, g / g.sum(1, keepdim=True), (x == 0).to(images.dtype).expand_as(g))
        g = g.unsqueeze(1).expand(n, ch, k).reshape(n * ch, 1, k)
        padded = F.pad(images.reshape(1, n * ch, h, w), (k // 2,) * 4, mode="reflect")
        out = F.conv2d(padded, g.unsqueeze(3), groups=n * ch)
        out = F.conv2d(out, g.unsqueeze(2), groups=n * ch)
        return out.reshape(n, ch, h, w)

    def _check(self, images: Any, target: Any) -> None:
        if not (
            isinstance(images, torch.Tensor)
            and images.is_floating_point()
            and images.ndim == 4
            and images.shape[1] in (1, 3)
        ):
            what = f"{type(images).__name__} {getattr(images, 'dtype', '')} {tuple(getattr(images, 'shape', ()))}"
            raise AugmentationError(
                f"GpuAugment takes float images (B, C, H, W) in [0, 1] with C = 1 or 3, got {what}; "
                "write images.float() / 255 for uint8 batches"
            )
        b, _, h, w = images.shape
        pad = self.recipe.blur.kernel_size // 2
        if self.recipe.blur.p > 0 and min(h, w) <= pad:
            raise AugmentationError(
                f"images of {h}x{w} pixels are too small for blur.kernel_size={self.recipe.blur.kernel_size} "
                f"(reflect padding needs more than {pad} pixel(s) per side); use larger images or "
                "recipe.without('blur')"
            )
        if self.target_kind == "mask":
            ok = (
                isinstance(target, torch.Tensor)
                and not target.is_floating_point()
                and target.dtype != torch.bool
                and tuple(target.shape) == (b, h, w)
            )
            if not ok:
                what = f"{getattr(target, 'dtype', type(target).__name__)} {tuple(getattr(target, 'shape', ()))}"
                raise AugmentationError(
                    f"target_kind='mask' needs an integer mask (B, H, W) = {(b, h, w)}, got {what}; "
                    "write masks.long() (never a float mask: resampling a float mask invents labels)"
                )
        elif self.target_kind == "keypoints":
            ok = (
                isinstance(target, torch.Tensor)
                and target.is_floating_point()
                and target.ndim == 3
                and target.shape[0] == b
                and target.shape[2] == 2
            )
            if not ok:
                what = f"{getattr(target, 'dtype', type(target).__name__)} {tuple(getattr(target, 'shape', ()))}"
                raise AugmentationError(
                    f"target_kind='keypoints' needs float keypoints (B, K, 2) with B = {b}, got {what}; "
                    "write keypoints.float()"
                )
