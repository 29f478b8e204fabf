"""The workload contract as a test class: every workload, a user's included, inherits it.

Subclass it in a test module and name the workload; pytest then checks that
the workload keeps the contract the runner relies on, on the CPU, in seconds::

    from perfsuite.testing import WorkloadContract

    class TestMyWorkload(WorkloadContract):
        workload = "my_workload"          # a registered name, or a Workload instance

Checked: both scales exist and fit; ``generate`` is deterministic per seed and
returns uint8 images of the scale's size with a target of the declared kind
(mask labels in the class set or the ignore index, keypoints inside the image,
labels below ``num_classes``); the on-disk Dataset returns uint8 CHW tensors;
and one training step (model, ``prepare``, ``loss``, backward) runs and gives a
finite scalar loss. Samples are generated at the smoke scale's image size but
only a handful of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from perfsuite.jobs.registry import get_workload
from perfsuite.jobs.workload import SCALES, Scale, Workload
from perfsuite.probes.base import Probe

__all__ = ["CompiledCallsInWindow", "WorkloadContract", "check_script_transform"]


class WorkloadContract:
    """Inherit and set ``workload``; see the module docstring. ``samples`` sets how many samples are generated."""

    workload: ClassVar[str | Workload]
    samples: ClassVar[int] = 4

    @pytest.fixture
    def w(self) -> Workload:
        chosen = getattr(type(self), "workload", None)
        if chosen is None:
            pytest.fail(
                f"{type(self).__name__} inherits WorkloadContract but names no workload; "
                "set workload = 'name' (or a Workload instance)",
                pytrace=False,
            )
        return get_workload(chosen) if isinstance(chosen, str) else chosen

    @pytest.fixture
    def tiny(self, w: Workload) -> Scale:
        smoke = w.scale("smoke")
        return Scale(
            "contract", smoke.image_size, num_samples=self.samples, batch_size=min(2, self.samples), model=smoke.model
        )

    def test_both_scales_exist_and_fit(self, w: Workload) -> None:
        for name in SCALES:
            scale = w.scale(name)
            assert scale.name == name and scale.num_samples >= scale.batch_size >= 1, scale
            assert all(side > 0 for side in scale.image_size), scale
        assert w.target_kind in ("mask", "keypoints", "label", "none")
        assert w.channels in (1, 3) and w.image_format in ("jpg", "png")

    def test_generate_is_deterministic_and_typed(self, w: Workload, tiny: Scale) -> None:
        for index in range(tiny.num_samples):
            a = w.generate(index, np.random.default_rng([7, index]), tiny)
            b = w.generate(index, np.random.default_rng([7, index]), tiny)
            assert np.array_equal(a.image, b.image), f"sample {index}: same seed, different image"
            self._check_image(w, tiny, a.image)
            self._check_target(w, tiny, a.target)

    def test_dataset_items_are_uint8_chw_tensors(self, w: Workload, tiny: Scale, tmp_path: Path) -> None:
        from perfsuite.jobs.workloads.data import ImageFileDataset, materialize

        dataset = ImageFileDataset(materialize(w, tiny, seed=0, cache_dir=tmp_path), w)
        assert len(dataset) == tiny.num_samples
        image, target = dataset[0]
        assert str(image.dtype) == "torch.uint8" and tuple(image.shape) == (w.channels, *tiny.image_size)
        assert hasattr(target, "dtype"), f"target is a {type(target).__name__}, not a tensor"

    def test_one_training_step_gives_a_finite_loss(self, w: Workload, tiny: Scale, tmp_path: Path) -> None:
        import torch

        from perfsuite.jobs.workloads.data import ImageFileDataset, materialize

        dataset = ImageFileDataset(materialize(w, tiny, seed=0, cache_dir=tmp_path), w)
        items = [dataset[i] for i in range(tiny.batch_size)]
        images, target = torch.stack([it[0] for it in items]), torch.stack([it[1] for it in items])
        model = w.build_model(tiny)
        x, y = w.prepare(images.float().div_(255), target, tiny)
        loss = w.loss(model(x), y)
        assert loss.dim() == 0 and torch.isfinite(loss), f"loss {loss!r}: a finite scalar is needed"
        loss.backward()
        assert any(p.grad is not None for p in model.parameters()), "the loss does not reach the model"

    @staticmethod
    def _check_image(w: Workload, scale: Scale, image: Any) -> None:
        expected = scale.image_size if w.channels == 1 else (*scale.image_size, 3)
        assert isinstance(image, np.ndarray) and image.dtype == np.uint8, f"image is {type(image)}, not uint8"
        assert image.shape == expected, f"image shape {image.shape}, expected {expected}"

    @staticmethod
    def _check_target(w: Workload, scale: Scale, target: Any) -> None:
        h, wd = scale.image_size
        if w.target_kind == "mask":
            mask = np.asarray(target)
            assert mask.shape == (h, wd), f"mask shape {mask.shape}, expected {(h, wd)}"
            allowed = set(range(w.num_classes or 256)) | ({w.ignore_index} if w.ignore_index is not None else set())
            assert set(np.unique(mask).tolist()) <= allowed, "mask labels outside the class set and ignore index"
        elif w.target_kind == "keypoints":
            points = np.asarray(target, dtype=np.float32)
            assert points.ndim == 2 and points.shape[1] == 2, f"keypoints shape {points.shape}, expected (K, 2)"
            assert ((points >= 0) & (points <= [wd, h])).all(), "keypoints outside the image"
        elif w.target_kind == "label":
            assert 0 <= int(target) < (w.num_classes or int(target) + 1), f"label {target} outside the classes"
        else:
            assert target is None, f"target_kind 'none' but the sample has a {type(target).__name__} target"


COMPILED_MARKERS = ("CompiledFxGraph", "Torch-Compiled Region")


class CompiledCallsInWindow(Probe):
    """A test instrument, not a probe for real runs: profiles the measured window (which costs time) and counts
    the compiled-graph calls in it, to prove that a compiled run's window runs compiled code.

    The profiler is no torch mode, so the runner's window guard lets it in; that is exactly why it must stay a
    test instrument (tests/integrity, scripts/compiled_window.py).
    """

    name = "compiled-calls-in-window"

    def __init__(self) -> None:
        self.calls = 0
        self._prof: Any = None

    def start(self) -> None:
        import torch

        self._prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        self._prof.__enter__()

    def stop(self) -> None:
        if self._prof is None:
            return
        prof, self._prof = self._prof, None
        prof.__exit__(None, None, None)
        self.calls = sum(1 for e in prof.events() if any(m in e.name for m in COMPILED_MARKERS))


def check_script_transform(
    script: Any, *, samples: int = 8, seeds: int = 4, subpixel: bool | None = None, transform: str | None = None
) -> Any:
    """``perfsuite check`` from a test: the paired-augmentation properties on ``script``'s own training transform.

    ``script`` is a :class:`perfsuite.Script` whose ``num_classes`` (and ``flip_pairs``, ``ignore_index``) say the
    labels; ``transform`` is ``--transform`` (default: the outermost call in ``dataset[i]`` that takes and returns
    the image and mask). Raises :class:`perfsuite.errors.PropertyViolation` (``.cause`` names the fault, ``.where``
    the fix at the line that did it) on the first broken property; returns the
    :class:`perfsuite.harness.script.transform_check.CheckReport` of what was checked::

        def test_my_augmentation():
            check_script_transform(perfsuite.Script(["train.py", "--data", "data"], num_classes=19))
    """
    from perfsuite.harness.script.transform_check import check_script

    return check_script(script, samples=samples, seeds=seeds, subpixel=subpixel, transform=transform)
