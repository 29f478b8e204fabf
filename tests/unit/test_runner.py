"""The runner builds every workload with every augmentation path and knob set, and runs it.

No timing assertions: what is checked is that runs happen, record what they
ran with, and that the knobs reach the pipeline (loader, autocast, reads).
"""

from __future__ import annotations

import math

import pytest
import torch

from perfsuite.core.knobs import Knobs
from perfsuite.errors import AugmentationError, KnobError
from perfsuite.harness.pipeline import build_pipeline
from perfsuite.harness.runner import RunSpec, run
from perfsuite.jobs.registry import get_workload

NAMES = ["captcha_slider", "face_parsing", "gray_classifier", "super_resolution"]


def _run(name: str, steps: int = 2, **flat):
    return run(RunSpec(name, knobs=Knobs.from_flat(**flat), steps=steps, warmup=1, observe_steps=0), probes=[])


@pytest.mark.slow  # a real training run
@pytest.mark.parametrize("aug", ["cpu", "gpu", "none"])
@pytest.mark.parametrize("name", NAMES)
def test_every_workload_runs_with_every_augmentation_path(name: str, aug: str) -> None:
    result = _run(name, aug=aug, num_workers=0, log_interval=1)
    assert result.workload == name and result.scale == "smoke"
    assert result.knobs["aug"] == aug
    assert len(result.samples["step_ms"]) == 2
    assert result.value("samples_per_s") > 0


@pytest.mark.slow  # a real training run
@pytest.mark.parametrize("name", NAMES)
def test_every_workload_trains_in_bf16_on_cpu(name: str) -> None:
    pipeline = build_pipeline(
        get_workload(name),
        get_workload(name).scale("smoke"),
        Knobs.from_flat(amp="bf16", num_workers=0, log_interval=1),
    )
    batch = next(iter(pipeline.loader))
    x, _ = pipeline.to_device(batch)
    with pipeline.autocast():
        out = pipeline.model(x)
    assert out.dtype == torch.bfloat16
    loss = pipeline.step(batch, 0)
    assert math.isfinite(loss.item())
    assert len(pipeline.loss_log) == 1


@pytest.mark.slow  # a real training run
@pytest.mark.parametrize("workers", [0, 2])
def test_loader_workers_are_real_processes_and_runs_cross_epochs(workers: int) -> None:
    # gray_classifier smoke: 96 samples / batch 32 = 3 batches per epoch, so 7 steps cross two epochs.
    result = _run("gray_classifier", steps=7, aug="cpu", num_workers=workers)
    assert result.knobs["num_workers"] == workers
    assert len(result.samples["fetch_ms"]) == 7


def test_the_window_keeps_the_steps_that_began_an_epoch() -> None:
    """3 batches per epoch: 7 window steps hold 2 or 3 epoch starts, 3 steps apart (doctor tells the loader's
    epoch-locked long steps from a job's periodic work by these positions)."""
    result = _run("gray_classifier", steps=7, aug="cpu", num_workers=0)
    starts = result.samples["epoch_start_step"]
    assert len(starts) == len(result.samples["epoch_fetch_ms"]) >= 2
    assert all(b - a == 3 for a, b in zip(starts, starts[1:])) and 0 <= starts[0] < 3


def test_knobs_reach_the_dataloader() -> None:
    w = get_workload("face_parsing")
    knobs = Knobs.from_flat(
        num_workers=2, persistent_workers=True, prefetch_factor=3, drop_last=False, batch_size=4, aug="cpu"
    )
    p = build_pipeline(w, w.scale("smoke"), knobs)
    assert (p.loader.num_workers, p.loader.persistent_workers, p.loader.prefetch_factor) == (2, True, 3)
    assert p.loader.batch_size == 4 and p.loader.drop_last is False
    assert p.gpu_augment is None and p.loader.dataset.augment is not None


def test_gpu_placement_augments_on_the_device_not_in_workers() -> None:
    w = get_workload("face_parsing")
    p = build_pipeline(w, w.scale("smoke"), Knobs.from_flat(aug="gpu", num_workers=0))
    assert p.gpu_augment is not None and p.loader.dataset.augment is None


@pytest.mark.slow  # a real training run
def test_log_interval_reads_the_loss_exactly_when_asked() -> None:
    w = get_workload("gray_classifier")
    p = build_pipeline(w, w.scale("smoke"), Knobs.from_flat(num_workers=0, log_interval=3, aug="none"))
    batch = next(iter(p.loader))
    for index in range(7):
        p.step(batch, index)
    assert len(p.loss_log) == 3  # steps 0, 3, 6


def test_fused_optimizer_knob_reaches_adamw() -> None:
    w = get_workload("gray_classifier")
    fused = build_pipeline(w, w.scale("smoke"), Knobs.from_flat(num_workers=0, fused=True))
    plain = build_pipeline(w, w.scale("smoke"), Knobs.from_flat(num_workers=0))
    assert fused.optimizer.defaults["fused"] is True
    assert not plain.optimizer.defaults.get("fused")


@pytest.mark.slow  # a real training run
def test_cuda_only_knobs_on_cpu_are_recorded_as_notes() -> None:
    result = _run("gray_classifier", aug="none", num_workers=0, pin_memory=True, tf32=True)
    assert result.knobs["pin_memory"] is True  # kept: the sync model reads it (the batches a GPU run pins)
    assert result.knobs["tf32"] is False
    assert any(n.startswith("pin_memory=True: not applied without CUDA") for n in result.notes)
    assert any("tf32=True has no effect without CUDA" in n for n in result.notes)


def test_mixup_on_masks_is_refused_before_anything_runs() -> None:
    with pytest.raises(AugmentationError, match="MixUp blends images.*Write mixup=0.0"):
        _run("face_parsing", mixup=0.5)


@pytest.mark.slow  # a real training run
def test_cutmix_runs_for_segmentation_and_is_refused_for_keypoints() -> None:
    assert _run("face_parsing", cutmix=1.0, num_workers=0).knobs["cutmix"] == 1.0
    with pytest.raises(AugmentationError, match="cutmix=1.0 on captcha_slider"):
        _run("captcha_slider", cutmix=1.0, num_workers=0)


def test_a_batch_larger_than_the_dataset_is_refused() -> None:
    with pytest.raises(KnobError, match="batch_size=1000 is larger than the 96 samples"):
        _run("gray_classifier", batch_size=1000, num_workers=0)


def test_run_spec_validates_its_lengths() -> None:
    with pytest.raises(KnobError, match="steps=1 must be an integer >= 2"):
        RunSpec("gray_classifier", steps=1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: runs the step on cuda with CUDA events")
def test_runs_on_cuda_with_pinned_non_blocking_copies() -> None:
    result = _run("face_parsing", aug="gpu", num_workers=2, pin_memory=True, non_blocking=True, device="cuda")
    assert result.knobs["pin_memory"] is True and result.fingerprint.gpu_model
