"""The workload contract: what a reference workload (or a user's own) must say and do.

Every reference workload (and a user's own) is one subclass of Workload with
the same small surface, TorchBench style, so the runner treats them alike:
it draws samples into real image files, builds a model, computes a loss.
Workloads know nothing of probes or pytest.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from perfsuite.errors import WorkloadError

if TYPE_CHECKING:
    import numpy as np
    import torch
    from torch import nn

    from perfsuite.augment.recipe import Recipe

SCALES = ("smoke", "full")
TARGET_KINDS = ("mask", "keypoints", "none", "label")


@dataclass(frozen=True)
class Scale:
    """Sizes of one scale of a workload.

    image_size is (height, width). num_samples is the dataset's size on disk:
    small enough that runs cross epoch boundaries (where persistent_workers
    matters), large enough that the page cache, not the generator, serves it.
    """

    name: str
    image_size: tuple[int, int]
    num_samples: int
    batch_size: int
    model: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Sample:
    """One generated sample: an image array and its target, before writing."""

    image: np.ndarray  # HxWx3 or HxW uint8
    target: Any  # HxW uint8 mask | (K, 2) float32 keypoints | int label | None


class Workload(ABC):
    """A reference training job. Subclasses set the class attributes and four methods.

    target_kind says what the target is, and so how augmentation treats it:
    ``mask`` (labels resampled nearest, same geometry), ``keypoints`` (points
    moved by the same geometry), ``none`` (image only; the target is derived
    from the image on the device, as in super-resolution) or ``label`` (a class
    index that geometry does not change).
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    seed_doc: ClassVar[str]
    target_kind: ClassVar[str]
    channels: ClassVar[int] = 3
    image_format: ClassVar[str] = "jpg"
    num_classes: ClassVar[int | None] = None
    ignore_index: ClassVar[int | None] = None
    flip_pairs: ClassVar[tuple[tuple[int, int], ...]] = ()  # mask classes a mirror swaps (left/right eye, ...)
    scales: ClassVar[dict[str, Scale]]

    # -- data ---------------------------------------------------------------
    def generate(self, index: int, rng: np.random.Generator, scale: Scale) -> Sample:
        """Draw sample ``index`` deterministically from ``rng`` (optional: a user's own data needs none).

        A workload whose samples come from a user's files is better handed to
        perfsuite as a :class:`perfsuite.Job`, whose own Dataset reads the files
        where they are. A generate() that reads files must list them in
        :meth:`data_sources`, so the cached copy follows them.
        """
        raise WorkloadError(
            f"workload {self.name!r} has no generate(), so perfsuite has no samples to write; define "
            "generate(index, rng, scale), or hand perfsuite your own Dataset and DataLoader as a perfsuite.Job "
            "(docs/own_job.md)"
        )

    def data_sources(self, scale: Scale) -> list[Any]:
        """Files or folders generate() reads, if any: their size and mtime key the dataset cache."""
        return []

    def recipe(self) -> Recipe:
        """The augmentation recipe for this workload: seed 000's list, its flip swapping ``flip_pairs``."""
        from perfsuite.augment.recipe import Flip, Recipe

        return Recipe(flip=Flip(pairs=self.flip_pairs))

    # -- training -----------------------------------------------------------
    @abstractmethod
    def build_model(self, scale: Scale) -> nn.Module:
        """A fresh model for this scale."""

    @abstractmethod
    def loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The training loss of one batch."""

    def prepare(self, images: torch.Tensor, target: Any, scale: Scale) -> tuple[torch.Tensor, Any]:
        """Turn an augmented device batch into (model input, loss target).

        images arrive as float in [0, 1]; the default normalises to roughly
        zero mean. Super-resolution overrides this to derive its LR input.
        """
        return images.sub(0.5).div_(0.25), target

    # -- helpers ------------------------------------------------------------
    def scale(self, name: str) -> Scale:
        try:
            return self.scales[name]
        except KeyError:
            raise WorkloadError(
                f"workload {self.name!r} has no scale {name!r}; write one of {', '.join(self.scales)}"
            ) from None

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "summary": self.summary,
            "seed": self.seed_doc,
            "target": self.target_kind,
            "scales": {
                n: {
                    "image_size": list(s.image_size),
                    "num_samples": s.num_samples,
                    "batch_size": s.batch_size,
                    "model": s.model,
                }
                for n, s in self.scales.items()
            },
        }

    @property
    def fill(self) -> int:
        """The label geometric augmentation fills with: the ignore index, else 255."""
        return self.ignore_index if self.ignore_index is not None else 255
