"""Build the training pipeline of a workload from its knobs: loader, model, step.

This is the code under test: one place that turns every knob the seeds talk
about into what a training script does with it (DataLoader arguments, the
copy's non_blocking, GPU augmentation, channels_last, autocast, GradScaler,
torch.compile, TF32/cudnn.benchmark, fused AdamW, reading the loss back).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.utils.data import DataLoader

from perfsuite.core.knobs import Knobs
from perfsuite.errors import AugmentationError, JobError, KnobError, PerfsuiteError
from perfsuite.harness import workers
from perfsuite.harness.watchdog import DEFAULT_LOADER_TIMEOUT_S, make_worker_init
from perfsuite.jobs.workload import Scale, Workload
from perfsuite.jobs.workloads.data import ImageFileDataset, materialize

if TYPE_CHECKING:
    from perfsuite.jobs.contract import Job

EVAL_BATCHES = 2

# What augmentation does with each kind of workload target.
AUG_TARGET_KIND = {"mask": "mask", "keypoints": "keypoints", "none": "none", "label": "none"}


def _seed_worker(worker_id: int) -> None:
    """Seed NumPy in each worker from torch's per-worker seed (distinct, reproducible)."""
    import numpy as np

    np.random.seed(torch.initial_seed() % 2**32)


def build_loader(
    dataset: Any,
    knobs: Knobs,
    batch_size: int,
    seed: int,
    shuffle: bool = True,
    timeout_s: float | None = DEFAULT_LOADER_TIMEOUT_S,
    sampler: Any = None,
) -> DataLoader[Any]:
    """The DataLoader the knobs describe.

    ``sampler`` (a DistributedSampler on several ranks) replaces the shuffle:
    it decides the order and the shard. With workers, ``timeout_s`` becomes ``DataLoader(timeout=...)`` (None or 0:
    none), so a worker that hangs fails the run instead of the session, and
    each worker dumps its Python stacks on SIGUSR1 for perfsuite.harness.watchdog.
    """
    lk = knobs.loader
    extra: dict[str, Any] = {}
    worker_init: Any = _seed_worker
    if lk.num_workers > 0:
        extra["persistent_workers"] = lk.persistent_workers
        extra["timeout"] = float(timeout_s or 0.0)
        worker_init = make_worker_init(_seed_worker)
        if lk.prefetch_factor is not None:
            extra["prefetch_factor"] = lk.prefetch_factor
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=shuffle if sampler is None else False,
        sampler=sampler,
        num_workers=lk.num_workers,
        pin_memory=lk.pin_memory and torch.accelerator.is_available(),  # else kept for the sync model: driver.py
        drop_last=lk.drop_last,
        generator=torch.Generator().manual_seed(seed),
        worker_init_fn=worker_init,
        **extra,
    )


class BatchStream:
    """Endless batches across epochs; a new epoch re-creates the loader's iterator.

    Without persistent_workers that is where workers are torn down and forked
    again (seed 000's fifth bottleneck), so epochs must fall inside runs.
    ``on_epoch(epoch)`` runs before each epoch's iterator is made, as a training
    loop's ``sampler.set_epoch(epoch)`` does (the job's ``epoch_start``).
    """

    def __init__(self, loader: Any, on_epoch: Callable[[int], Any] | None = None) -> None:
        self.loader = loader
        self.epochs = 0
        self.on_epoch = on_epoch
        self._it: Iterator[Any] | None = None

    def __next__(self) -> Any:
        try:
            if self._it is not None:
                try:
                    return next(self._it)
                except StopIteration:
                    pass
            if self.on_epoch is not None:
                self.on_epoch(self.epochs)
            self._it = iter(self.loader)
            self.epochs += 1
            try:
                return next(self._it)
            except StopIteration:
                raise JobError(f"the loader yielded no batch in a new epoch: {_why_empty(self.loader)}") from None
        except PerfsuiteError as exc:  # torch's "Caught DatasetError in DataLoader worker process 0": ours first
            clear = workers.unwrapped(exc)
            if clear is None:
                raise
            raise clear from None

    def close(self) -> None:
        """Stop the workers now, not at garbage collection: a failed test's traceback keeps the iterator
        alive, and its workers would outlive the test."""
        it, self._it = self._it, None
        if it is not None:
            workers.shutdown_iterator(it)
        workers.shutdown_loader(self.loader)


def _why_empty(loader: Any) -> str:
    """What to write when a loader yields nothing, from what it was built with."""
    dataset = getattr(loader, "dataset", None)
    try:
        n = len(dataset) if dataset is not None else None
    except TypeError:
        n = None
    batch_size, drop_last = getattr(loader, "batch_size", None), getattr(loader, "drop_last", False)
    if n == 0:
        return (
            f"its dataset ({type(dataset).__name__}) has 0 samples; check the path it reads (an empty or "
            "misspelt folder) and give it at least one sample"
        )
    if n is not None and batch_size and drop_last and n < batch_size:
        return (
            f"its dataset has {n} samples, fewer than batch_size={batch_size} with drop_last=True; write "
            f"drop_last=False or batch_size={n} or less"
        )
    return (
        f"{type(loader).__name__} produced nothing when iterated; a loader must yield at least one batch per "
        "epoch (an iterable that can be iterated again, not a used-up generator)"
    )


@dataclass
class Pipeline:
    """A ready-to-step training pipeline. ``step(batch, index)`` is the code being measured."""

    workload: Workload
    scale: Scale
    knobs: Knobs
    device: torch.device
    loader: Any
    eval_loader: Any
    model: nn.Module
    optimizer: torch.optim.Optimizer
    scaler: Any
    gpu_augment: Callable[..., Any] | None
    batch_mix: Callable[..., Any] | None
    batch_size: int
    loss_log: list[float] = field(default_factory=list)
    # On several ranks (perfsuite.harness.ranks.ddp): keyword arguments of the DistributedDataParallel wrapper.
    ddp_options: dict[str, Any] = field(default_factory=dict)

    def epoch_start(self, epoch: int) -> None:
        """What a training loop does before each epoch: ``set_epoch`` on a sampler that has it (DistributedSampler)."""
        set_epoch = getattr(getattr(self.loader, "sampler", None), "set_epoch", None)
        if set_epoch is not None:
            set_epoch(epoch)

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        amp = self.knobs.step.amp
        if amp is None:
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if amp == "bf16" else torch.float16
        return torch.autocast(device_type=self.device.type, dtype=dtype)

    def to_device(self, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Copy, convert to float on the device, augment there if asked, prepare for the model."""
        nb = self.knobs.loader.non_blocking
        images, target = batch
        images = images.to(self.device, non_blocking=nb).float().div_(255)
        target = target.to(self.device, non_blocking=nb)
        kind = AUG_TARGET_KIND[self.workload.target_kind]
        if self.gpu_augment is not None or self.batch_mix is not None:
            with torch.no_grad():
                aug_target = target if kind != "none" else None
                if kind == "mask":
                    aug_target = target.long()
                if self.gpu_augment is not None:
                    images, aug_target = self.gpu_augment(images, aug_target)
                if self.batch_mix is not None:
                    images, aug_target = self.batch_mix(images, aug_target)
                if kind != "none":
                    target = aug_target
        x, y = self.workload.prepare(images, target, self.scale)
        if self.knobs.step.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return x, y

    def step(self, batch: Any, index: int) -> torch.Tensor:
        """One training step. Reads nothing back to the host unless log_interval asks."""
        x, y = self.to_device(batch)
        with self.autocast():
            output = self.model(x)
            loss = self.workload.loss(output, y)
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        sk = self.knobs.step
        if sk.log_interval and index % sk.log_interval == 0:
            self.loss_log.append(loss.item())  # the seeds' per-step read: one host-device sync
        if sk.eval_interval and (index + 1) % sk.eval_interval == 0:
            self.evaluate()
        return loss

    def as_job(self) -> Job:
        """This pipeline as a Job, the one contract the runner runs (perfsuite.jobs.contract).

        The step looks ``self.step`` up on every call, so a fault that replaces
        it (perfsuite.harness.faults.catalog) or a probe that wraps ``to_device`` still acts;
        the step index (for log_interval/eval_interval) counts every call.
        """
        from perfsuite.jobs.contract import Job

        counter = itertools.count()
        pipeline = self

        def step(batch: Any) -> torch.Tensor:
            return pipeline.step(batch, next(counter))

        wl = self.workload
        return Job(
            step=step,
            model=self.model,
            optimizer=self.optimizer,
            loader=self.loader,
            device=self.device,
            name=wl.name,
            num_classes=wl.num_classes,
            ignore_index=wl.ignore_index,
            target_kind=wl.target_kind,
            aug=self.knobs.aug.placement,
            gpu_transform=self.gpu_augment,
            epoch_start=lambda epoch: pipeline.epoch_start(epoch),  # looked up per call: a fault may replace it
            pipeline=self,
            knobs=self.knobs,
        )

    def evaluate(self) -> float:
        """A short validation pass (seed 002 ran one every epoch): fresh iterator, metrics read back."""
        self.model.eval()
        total = 0.0
        batches = iter(self.eval_loader)
        try:
            with torch.no_grad():
                for batch in itertools.islice(batches, EVAL_BATCHES):
                    images, target = batch
                    images = images.to(self.device).float().div_(255)
                    x, y = self.workload.prepare(images, target.to(self.device), self.scale)
                    with self.autocast():
                        total += self.workload.loss(self.model(x), y).item()
        finally:
            workers.shutdown_iterator(batches)  # now, as a training script's exhausted epoch would, not at GC
        self.model.train()
        return total


def apply_backend_flags(knobs: Knobs) -> None:
    """TF32 and cudnn.benchmark are process-wide switches; set them to exactly what the knobs say."""
    torch.backends.cuda.matmul.allow_tf32 = knobs.step.tf32
    torch.backends.cudnn.allow_tf32 = knobs.step.tf32
    torch.backends.cudnn.benchmark = knobs.step.cudnn_benchmark


def build_pipeline(
    workload: Workload,
    scale: Scale,
    knobs: Knobs,
    seed: int = 0,
    cache_dir: Path | None = None,
    loader_timeout_s: float | None = DEFAULT_LOADER_TIMEOUT_S,
) -> Pipeline:
    """Materialise the data (once), then build loader, model, optimizer and step from the knobs."""
    from perfsuite.augment.cpu import CpuAugment

    aug_kind = AUG_TARGET_KIND[workload.target_kind]
    if knobs.aug.mixup > 0:
        raise AugmentationError(
            f"mixup={knobs.aug.mixup} on {workload.name}: MixUp blends images but a {workload.target_kind!r} target "
            "cannot be blended with them without soft targets, which this workload's loss does not take "
            "(a MixUp that blends images and leaves the masks alone trains on wrong labels). Write mixup=0.0; for "
            "segmentation use cutmix, which pastes mask regions with image regions."
        )
    from perfsuite.core import phases  # here, not at the top: the recorded sites' lines above stay where they are

    torch.manual_seed(seed)
    device = torch.device(knobs.device)
    apply_backend_flags(knobs)
    with phases.within(phases.DATASET):  # generated once per machine; a cache hit reads its manifest
        root = materialize(workload, scale, seed=seed, cache_dir=cache_dir)
    recipe = workload.recipe()
    cpu_aug = CpuAugment(recipe, aug_kind, fill=workload.fill, seed=seed) if knobs.aug.placement == "cpu" else None
    batch_size = knobs.loader.batch_size or scale.batch_size
    dataset = ImageFileDataset(root, workload, augment=cpu_aug)
    if len(dataset) < batch_size and knobs.loader.drop_last:
        raise KnobError(
            f"batch_size={batch_size} is larger than the {len(dataset)} samples of {workload.name}/{scale.name} "
            "with drop_last=True: no batch would ever be produced; write a smaller batch_size"
        )
    loader = build_loader(dataset, knobs, batch_size, seed, timeout_s=loader_timeout_s)
    eval_loader = build_loader(
        ImageFileDataset(root, workload), knobs, batch_size, seed + 1, shuffle=False, timeout_s=loader_timeout_s
    )

    gpu_aug = None
    if knobs.aug.placement == "gpu":
        from perfsuite.augment.gpu import GpuAugment

        gpu_aug = GpuAugment(recipe, aug_kind, fill=workload.fill).to(device)
    batch_mix = None
    if knobs.aug.cutmix > 0:
        from perfsuite.augment.mix import PairedCutMix

        if aug_kind != "mask":
            raise AugmentationError(
                f"cutmix={knobs.aug.cutmix} on {workload.name}: CutMix here pastes mask regions with image regions, "
                f"and this workload's target is {workload.target_kind!r}; write cutmix=0.0"
            )
        batch_mix = PairedCutMix(p=knobs.aug.cutmix)

    with phases.within(phases.MODEL):
        model: nn.Module = workload.build_model(scale).to(device)
        if knobs.step.channels_last:
            model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        # fused=False leaves torch's default implementation (foreach on CUDA), as a user's script would.
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True if knobs.step.fused else None)
        scaler = torch.amp.GradScaler(device.type) if knobs.step.amp == "fp16" else None
        if knobs.step.compile:
            model = torch.compile(model, mode=knobs.step.compile)  # type: ignore[assignment]
    model.train()
    return Pipeline(
        workload, scale, knobs, device, loader, eval_loader, model, optimizer, scaler, gpu_aug, batch_mix, batch_size
    )
