"""The augmentation recipe: one description, two executors.

The CPU executor (per-sample PIL/NumPy in DataLoader workers) and the GPU
executor (batched Kornia) both read the same :class:`Recipe`, so a run that
moves augmentation from CPU to GPU changes *where* the work happens, never
*what* it is. The defaults are seed 000's face-parsing list.

Every op has a probability ``p``; an op with ``p=0`` is off, and executors
skip it entirely (no wasted work, no random draws). Ops are geometric (they
move pixels, so targets must move with them) or photometric (they change
pixel values only, so targets must not change).

Example:
    >>> Recipe().without("blur", "noise").active
    ('flip', 'rotation', 'scale', 'jitter')
    >>> Recipe().photometric_only().geometric_active
    ()
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from perfsuite.errors import AugmentationError

GEOMETRIC = ("flip", "rotation", "scale")
PHOTOMETRIC = ("jitter", "blur", "noise")
OPS = GEOMETRIC + PHOTOMETRIC


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_p(op: str, p: Any) -> None:
    if not _is_number(p) or not 0.0 <= p <= 1.0:
        raise AugmentationError(f"{op}.p={p!r} must be a probability between 0.0 and 1.0; write e.g. p=0.5")


def _check_nonneg(op: str, name: str, value: Any, upper: float | None = None) -> None:
    if not _is_number(value) or value < 0 or (upper is not None and value > upper):
        bound = f"between 0 and {upper}" if upper is not None else "a number >= 0"
        raise AugmentationError(f"{op}.{name}={value!r} must be {bound}; write 0 to disable this part")


def _check_range(op: str, name: str, value: Any, minimum: float) -> None:
    ok = (
        isinstance(value, tuple)
        and len(value) == 2
        and all(_is_number(v) for v in value)
        and minimum < value[0] <= value[1]
    )
    if not ok:
        raise AugmentationError(
            f"{op}.{name}={value!r} must be a tuple (low, high) with {minimum} < low <= high; "
            f"write e.g. {name}=(0.8, 1.2)"
        )


@dataclass(frozen=True)
class Flip:
    """Horizontal flip. Vertical flips are left out: faces and CAPTCHAs are never upside down.

    ``pairs``: mask classes that trade places on a flipped sample, because a
    mirror turns the subject's left into its right (face parsing: left and
    right eye, brow, ear). Both executors swap them on exactly the samples
    they flip; a flip that forgets to is seed 000's bug.
    """

    p: float = 0.5
    pairs: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        _check_p("flip", self.p)
        seen: set[int] = set()
        for pair in self.pairs:
            ok = (
                isinstance(pair, tuple)
                and len(pair) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in pair)
                and pair[0] != pair[1]
                and not seen & set(pair)
            )
            if not ok:
                raise AugmentationError(
                    f"flip.pairs={self.pairs!r}: each pair is two different class labels >= 0 and a label is in "
                    "one pair at most; write e.g. pairs=((4, 5), (6, 7), (8, 9))"
                )
            seen |= set(pair)


@dataclass(frozen=True)
class Rotation:
    """Rotation about the image centre by an angle drawn from [-degrees, degrees]."""

    degrees: float = 20.0
    p: float = 0.6

    def __post_init__(self) -> None:
        _check_nonneg("rotation", "degrees", self.degrees, upper=180.0)
        _check_p("rotation", self.p)


@dataclass(frozen=True)
class Scale:
    """Scale about the centre by a factor drawn from ``scale``, cropped back to the input size."""

    scale: tuple[float, float] = (0.8, 1.2)
    p: float = 0.6

    def __post_init__(self) -> None:
        _check_range("scale", "scale", self.scale, 0.0)
        _check_p("scale", self.p)


@dataclass(frozen=True)
class Jitter:
    """Colour jitter with torchvision's meaning of each factor.

    Brightness, contrast and saturation factors are drawn from
    ``[max(0, 1 - x), 1 + x]``, hue shifts from ``[-hue, hue]`` (in turns).
    Saturation and hue do nothing on one-channel images.
    """

    brightness: float = 0.3
    contrast: float = 0.2
    saturation: float = 0.2
    hue: float = 0.1
    p: float = 0.5

    def __post_init__(self) -> None:
        for name in ("brightness", "contrast", "saturation"):
            _check_nonneg("jitter", name, getattr(self, name))
        _check_nonneg("jitter", "hue", self.hue, upper=0.5)
        _check_p("jitter", self.p)


@dataclass(frozen=True)
class Blur:
    """Gaussian blur with a square odd kernel and sigma drawn from ``sigma``."""

    kernel_size: int = 3
    sigma: tuple[float, float] = (0.1, 2.0)
    p: float = 0.3

    def __post_init__(self) -> None:
        k = self.kernel_size
        if isinstance(k, bool) or not isinstance(k, int) or k not in (3, 5):
            raise AugmentationError(
                f"blur.kernel_size={k!r} must be 3 or 5 (odd, and what PIL's kernel filter supports, "
                "so the CPU and GPU executors blur alike); write kernel_size=3"
            )
        _check_range("blur", "sigma", self.sigma, 0.0)
        _check_p("blur", self.p)


@dataclass(frozen=True)
class Noise:
    """Additive Gaussian noise, ``std`` in units of the [0, 1] intensity range."""

    std: float = 0.03
    p: float = 0.3

    def __post_init__(self) -> None:
        _check_nonneg("noise", "std", self.std, upper=1.0)
        _check_p("noise", self.p)


_OP_TYPES = {"flip": Flip, "rotation": Rotation, "scale": Scale, "jitter": Jitter, "blur": Blur, "noise": Noise}


@dataclass(frozen=True)
class Recipe:
    """Seed 000's augmentation list, op by op, each with its probability.

    Derive variants instead of editing: :meth:`without`, :meth:`only`,
    :meth:`geometric_only`, :meth:`photometric_only`, :meth:`with_p`, or
    ``dataclasses.replace(recipe, rotation=Rotation(degrees=10))``.
    """

    flip: Flip = field(default_factory=Flip)
    rotation: Rotation = field(default_factory=Rotation)
    scale: Scale = field(default_factory=Scale)
    jitter: Jitter = field(default_factory=Jitter)
    blur: Blur = field(default_factory=Blur)
    noise: Noise = field(default_factory=Noise)

    def __post_init__(self) -> None:
        for name, cls in _OP_TYPES.items():
            value = getattr(self, name)
            if not isinstance(value, cls):
                raise AugmentationError(
                    f"Recipe.{name}={value!r} must be a {cls.__name__}; write {name}={cls.__name__}(...)"
                )

    @property
    def active(self) -> tuple[str, ...]:
        """Names of the ops with p > 0, in application order."""
        return tuple(name for name in OPS if getattr(self, name).p > 0)

    @property
    def geometric_active(self) -> tuple[str, ...]:
        return tuple(name for name in self.active if name in GEOMETRIC)

    @property
    def photometric_active(self) -> tuple[str, ...]:
        return tuple(name for name in self.active if name in PHOTOMETRIC)

    def with_p(self, **probabilities: float) -> Recipe:
        """A copy with some ops' probabilities changed: ``recipe.with_p(flip=1.0, noise=0.0)``."""
        _check_names(probabilities)
        changes = {name: dataclasses.replace(getattr(self, name), p=p) for name, p in probabilities.items()}
        return dataclasses.replace(self, **changes)

    def without(self, *names: str) -> Recipe:
        """A copy with the named ops switched off (p=0)."""
        return self.with_p(**{name: 0.0 for name in names})

    def only(self, *names: str) -> Recipe:
        """A copy with every op except the named ones switched off."""
        _check_names(names)
        return self.without(*(name for name in OPS if name not in names))

    def geometric_only(self) -> Recipe:
        return self.only(*GEOMETRIC)

    def photometric_only(self) -> Recipe:
        return self.only(*PHOTOMETRIC)


def _check_names(names: Any) -> None:
    unknown = [name for name in names if name not in OPS]
    if unknown:
        raise AugmentationError(f"unknown augmentation op(s) {unknown}; write one of {', '.join(OPS)}")


def is_geometric(name: str) -> bool:
    """True for ops that move pixels (targets must follow), False for ops that change values only."""
    _check_names([name])
    return name in GEOMETRIC


TARGET_KINDS = ("mask", "keypoints", "none")


def check_target_kind(target_kind: Any) -> None:
    """Both executors take the same target kinds; refuse anything else up front."""
    if target_kind not in TARGET_KINDS:
        raise AugmentationError(
            f"target_kind={target_kind!r} is not a target kind; write one of {', '.join(map(repr, TARGET_KINDS))} "
            "('none' for image-only samples such as super-resolution patches or class labels)"
        )
