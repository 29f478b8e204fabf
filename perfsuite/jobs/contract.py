"""The contract for a training job: a loader, a model, an optimizer and a step. One path for every run.

A user hands perfsuite their own training job as a :class:`Job`: their
DataLoader (or their Dataset plus loader settings, and perfsuite builds the
DataLoader), their model and optimizer, and their step, any callable
``step(batch) -> loss tensor``. The runner (perfsuite/harness/runner.py) runs every
job alike: warm-up, the measured window, then observed steps with every
probe attached, as pytest-benchmark takes any callable. The reference
workloads are clients of the same contract: perfsuite/harness/pipeline.py builds
their loader, model and step from a Workload and its knobs, then hands the
runner a Job (:meth:`perfsuite.harness.pipeline.Pipeline.as_job`).

What perfsuite did not set, it does not claim. For a user's job the Result
records the loader knobs read back from the user's DataLoader, each marked
"set by the user's code" (or "set by perfsuite" where it built the loader
from ``Job(dataset=...)`` and was asked to set them); step knobs it cannot
know (amp, compile, ...) are absent from ``Result.knobs`` and marked "not
applied" in ``Result.knob_sources``.

The label probe checks what reaches the loss through one documented hook:
``Job(criterion=...)``, the loss module the step calls as
``criterion(output, target)``. perfsuite puts a forward pre-hook on it in the
observed steps; a plain loss function is wrapped in :class:`LossHook` first.
Without a criterion, ``label_violations`` is unavailable, with that reason.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from perfsuite.errors import DeviceError, JobError
from perfsuite.jobs.workload import TARGET_KINDS

USER = "set by the user's code"
PERFSUITE = "set by perfsuite"
TORCH_DEFAULT = "torch default (not set by the user's code)"
NOT_APPLIED = "not applied: perfsuite does not change a user's step"
LOADER_KNOBS = ("batch_size", "num_workers", "pin_memory", "persistent_workers", "prefetch_factor", "drop_last")
# Knobs of perfsuite's own step: for a user's job they live in the user's code.
STEP_KNOBS = (
    "amp",
    "compile",
    "channels_last",
    "tf32",
    "cudnn_benchmark",
    "fused",
    "log_interval",
    "eval_interval",
    "non_blocking",
    "cutmix",
    "mixup",
)
AUG_PLACEMENTS = ("cpu", "gpu", "none")


@dataclass
class Job:
    """A training job as its user wrote it, handed to perfsuite.

    step: ``step(batch) -> loss``, one training iteration on one batch from
      the loader (forward, loss, backward, optimizer step, whatever logging the
      loop does). It must return the loss as a tensor.
    loader: the user's DataLoader (or any iterable of batches); or
    dataset + loader_kwargs: perfsuite builds ``DataLoader(dataset, **loader_kwargs)``
      and may then apply loader knobs (``num_workers=4``) itself.
    model, optimizer: the user's; the model's device is the job's device unless
      ``device`` says otherwise (and then the model must be there).
    criterion: the loss module the step calls as ``criterion(output, target)``;
      the label probe checks the targets it receives against ``num_classes``
      and ``ignore_index``. ``target_kind`` is ``mask`` (per-pixel classes) or
      ``label`` (one class per sample).
    aug: where the user's augmentation runs (``cpu`` in the workers, ``gpu``
      on the batch, ``none``), recorded as the ``aug`` knob; gpu_transform is
      the batched transform the step applies (``transform(images, masks) ->
      (images, masks)``); the label probe checks its properties when it can.
    flip_pairs: labels that swap when a sample is mirrored (left/right eye:
      ``[(4, 5), (6, 7)]``): the property check then expects ``gpu_transform``
      to swap them on the samples it flips, instead of calling the swap a violation.
    name: how Results and baselines name the job.
    epoch_start: what the training loop does before each epoch's first batch,
      called with the epoch number (0, 1, ...): ``sampler.set_epoch`` for a
      DistributedSampler, so each epoch draws a new order. perfsuite iterates
      the loader itself, so a loop's own ``set_epoch`` call reaches it only here.
    """

    step: Callable[[Any], Any]
    model: Any = None
    optimizer: Any = None
    loader: Any = None
    dataset: Any = None
    loader_kwargs: Mapping[str, Any] = field(default_factory=dict)
    device: Any = None
    name: str = "job"
    criterion: Any = None
    num_classes: int | None = None
    ignore_index: int | None = None
    target_kind: str = "mask"
    aug: str | None = None
    gpu_transform: Any = None
    flip_pairs: Any = None
    epoch_start: Callable[[int], Any] | None = None
    # Set by perfsuite when it adapts a reference workload (perfsuite.harness.pipeline): not for users.
    pipeline: Any = field(default=None, repr=False)
    knobs: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not callable(self.step):
            raise JobError(
                f"Job(step={self.step!r}): step must be a callable step(batch) -> loss tensor; "
                "write Job(step=my_train_step, ...)"
            )
        if (self.loader is None) == (self.dataset is None):
            raise JobError(
                "a Job takes either loader=your DataLoader or dataset=your Dataset (with loader_kwargs="
                "{'batch_size': ..., ...}), exactly one of them"
            )
        if self.loader_kwargs and self.loader is not None:
            raise JobError(
                "loader_kwargs go with dataset=...: a DataLoader handed over as loader= is used as built; "
                "drop loader_kwargs or pass dataset= instead"
            )
        if self.epoch_start is not None and not callable(self.epoch_start):
            raise JobError(
                f"Job(epoch_start={self.epoch_start!r}) must be a callable taking the epoch number; "
                "write Job(epoch_start=sampler.set_epoch, ...)"
            )
        if self.target_kind not in TARGET_KINDS:
            raise JobError(f"target_kind={self.target_kind!r}; write one of {', '.join(TARGET_KINDS)}")
        if self.aug is not None and self.aug not in AUG_PLACEMENTS:
            raise JobError(
                f"aug={self.aug!r}; write one of {', '.join(AUG_PLACEMENTS)} (where your own "
                "augmentation runs), or leave it None"
            )
        if self.num_classes is not None and (
            isinstance(self.num_classes, bool) or not isinstance(self.num_classes, int) or self.num_classes < 1
        ):
            raise JobError(f"num_classes={self.num_classes!r} must be a positive integer")
        if self.flip_pairs is not None:
            self.flip_pairs = check_flip_pairs(self.flip_pairs, self.num_classes, f"job {self.name!r}")
        if self.criterion is not None and not hasattr(self.criterion, "register_forward_pre_hook"):
            raise JobError(
                f"criterion={self.criterion!r} is a plain function, so perfsuite cannot see the targets passed to "
                "it; wrap it once, criterion = perfsuite.LossHook(your_loss), call that criterion in your step, "
                "and pass Job(criterion=criterion)"
            )


def check_flip_pairs(pairs: Any, num_classes: int | None, who: str) -> tuple[tuple[int, int], ...]:
    """``[(4, 5), (6, 7)]`` as a tuple of int pairs, each label in one pair only (and a class, when known)."""
    out: list[tuple[int, int]] = []
    seen: set[int] = set()
    try:
        items = list(pairs)
    except TypeError:
        items = [pairs]
    for pair in items:
        try:
            a, b = (v for v in pair)
        except (TypeError, ValueError):
            a = b = None
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (a, b)):
            raise JobError(
                f"{who}: flip_pairs item {pair!r} is not a pair of labels; write flip_pairs=[(4, 5), (6, 7)]"
            )
        assert isinstance(a, int) and isinstance(b, int)
        for label in (a, b):
            if a == b or label in seen:
                raise JobError(f"{who}: flip_pairs: label {label} is in more than one pair (or paired with itself)")
            if num_classes is not None and not 0 <= label < num_classes:
                raise JobError(f"{who}: flip_pairs: label {label} is not a class (0..{num_classes - 1})")
            seen.add(label)
        out.append((a, b))
    return tuple(out)


class LossHook:
    """Wrap a loss function so the label probe can see the targets a step passes to it.

    ``criterion = LossHook(F.cross_entropy)``; the step calls
    ``criterion(output, target)``; ``Job(criterion=criterion)``. (An
    ``nn.Module`` loss such as ``nn.CrossEntropyLoss`` needs no wrapper.)
    """

    def __new__(cls, fn: Callable[..., Any]) -> Any:
        from torch import nn

        class _Loss(nn.Module):
            def __init__(self, f: Callable[..., Any]) -> None:
                super().__init__()
                self.fn = f

            def forward(self, output: Any, target: Any, *args: Any, **kwargs: Any) -> Any:
                return self.fn(output, target, *args, **kwargs)

        return _Loss(fn)


@dataclass
class JobInfo:
    """What probes read of a job's targets (a reference Workload offers the same attributes)."""

    name: str
    target_kind: str
    num_classes: int | None
    ignore_index: int | None
    flip_pairs: tuple[tuple[int, int], ...] = ()

    @property
    def fill(self) -> int:
        """The label geometric augmentation fills with: the ignore index, else 255 (as a Workload's)."""
        return self.ignore_index if self.ignore_index is not None else 255


@dataclass
class BoundJob:
    """A Job ready to run: its loader built or read, its device checked, its knobs and their sources."""

    job: Job
    loader: Any
    device: Any
    batch_size: int
    knobs: dict[str, Any]
    knob_sources: dict[str, str]
    notes: list[str]

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def model(self) -> Any:
        return self.job.model

    @property
    def optimizer(self) -> Any:
        return self.job.optimizer

    @property
    def reference(self) -> bool:
        """A reference workload's pipeline adapted by perfsuite (rather than a user's own job)."""
        return self.job.pipeline is not None

    @property
    def info(self) -> JobInfo:
        j = self.job
        return JobInfo(j.name, j.target_kind, j.num_classes, j.ignore_index, tuple(j.flip_pairs or ()))

    def step(self, batch: Any) -> Any:
        loss = self.job.step(batch)
        check_loss(loss, self.job.name)
        return loss


def check_loss(loss: Any, name: str) -> None:
    """A step returns its loss tensor: a float (``loss.item()``), None or a tuple is an error saying what to write."""
    import torch

    if isinstance(loss, torch.Tensor):
        if loss.numel() != 1:
            raise JobError(
                f"the step of job {name!r} returned a tensor of shape {tuple(loss.shape)}, not a loss; "
                "return the scalar training loss (e.g. loss.mean())"
            )
        return
    shown = repr(loss)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    hint = (
        "return the loss tensor itself (return loss), not loss.item(): perfsuite must not add a read-back"
        if isinstance(loss, (float, int))
        else "end your step with `return loss`, the loss tensor"
    )
    raise JobError(f"the step of job {name!r} returned {type(loss).__name__} {shown}, not a loss tensor; {hint}")


def read_loader_knobs(loader: Any) -> dict[str, Any]:
    """The loader knobs a torch DataLoader was built with ({} for any other iterable)."""
    from torch.utils.data import DataLoader

    if not isinstance(loader, DataLoader):
        return {}
    batch_size = loader.batch_size
    drop_last: bool | None = loader.drop_last
    if batch_size is None and loader.batch_sampler is not None:  # a custom batch_sampler
        batch_size = getattr(loader.batch_sampler, "batch_size", None)
        drop_last = getattr(loader.batch_sampler, "drop_last", None)
    return {
        "batch_size": batch_size,
        "num_workers": loader.num_workers,
        "pin_memory": loader.pin_memory,
        "persistent_workers": loader.persistent_workers,
        "prefetch_factor": loader.prefetch_factor if loader.num_workers > 0 else None,
        "drop_last": drop_last,
    }


def _device_of(model: Any) -> Any:
    for tensor in (*model.parameters(), *model.buffers()) if hasattr(model, "parameters") else ():
        return tensor.device
    return None


def _same_device(a: Any, b: Any) -> bool:
    import torch

    a, b = torch.device(a), torch.device(b)
    return a.type == b.type and (a.index or 0) == (b.index or 0)


def bind(job: Job, requested: Mapping[str, Any] | None = None, default_device: str | None = None) -> BoundJob:
    """Build or read the job's loader, check its device, and say where each knob came from.

    ``requested`` holds the flat knobs a caller asked of this job (perf_run's
    keyword knobs, the CLI's flags): loader knobs are applied when perfsuite
    builds the loader (``Job(dataset=...)``) and must agree with a DataLoader
    it was handed; step knobs cannot be applied to a user's step and are
    refused, with what to write instead.
    """
    import torch

    requested = dict(requested or {})
    requested.pop("device", None)
    if job.pipeline is not None:  # a reference workload: perfsuite set every knob
        pipeline = job.pipeline
        return BoundJob(job, job.loader, pipeline.device, pipeline.batch_size, job.knobs.flat(), {}, [])
    notes: list[str] = []
    model_device = _device_of(job.model) if job.model is not None else None
    device = (
        torch.device(job.device)
        if job.device is not None
        else (model_device if model_device is not None else torch.device(default_device or "cpu"))
    )
    if device.type == "cuda" and not torch.cuda.is_available():
        raise DeviceError(
            f"job {job.name!r} runs on {device} but torch sees no CUDA device; build the job for "
            "device='cpu' (a job factory receives the session's device)"
        )
    if model_device is not None and not _same_device(model_device, device):
        raise JobError(
            f"job {job.name!r}: the model's parameters are on {model_device} but the job runs on "
            f"{device}; call model.to({str(device)!r}) before building the optimizer, or write "
            f"Job(device={str(model_device)!r})"
        )
    if default_device is not None and not _same_device(default_device, device):
        notes.append(f"job {job.name!r} runs on {device} (its own device); the session's device is {default_device}")
    for name in STEP_KNOBS + ("aug",):
        if name in requested and not (name == "aug" and requested[name] == job.aug):
            raise JobError(
                f"{name}={requested[name]!r} asked of job {job.name!r}, but perfsuite does not change a user's step; "
                f"set {name} in your training code"
                + (" and declare it with Job(aug=...)" if name == "aug" else "")
                + f", and drop {name}= here"
            )
    unknown = sorted(set(requested) - set(LOADER_KNOBS) - set(STEP_KNOBS) - {"aug"})
    if unknown:
        raise JobError(
            f"unknown knob(s) {', '.join(unknown)} for job {job.name!r}; loader knobs are {', '.join(LOADER_KNOBS)}"
        )
    sources: dict[str, str] = {}
    if job.loader is not None:
        loader = job.loader
        read = read_loader_knobs(loader)
        for name, value in requested.items():
            if not read:
                raise JobError(
                    f"{name}={value!r} asked of job {job.name!r}, but its loader is a "
                    f"{type(loader).__name__}, not a torch DataLoader, so perfsuite can neither read nor "
                    f"set {name}; drop {name}= here"
                )
            if read[name] != value:
                raise JobError(
                    f"{name}={value!r} asked of job {job.name!r}, but your DataLoader was built with {name}="
                    f"{read[name]!r}, and perfsuite does not rebuild a DataLoader it was handed: build it with "
                    f"{name}={value!r}, drop {name}= here, or pass Job(dataset=..., loader_kwargs=...) so perfsuite "
                    "builds the loader"
                )
        for name in LOADER_KNOBS:
            sources[name] = USER if read else f"not known: the loader is a {type(loader).__name__}, not a DataLoader"
    else:
        from torch.utils.data import DataLoader

        kwargs = {**job.loader_kwargs, **{k: v for k, v in requested.items() if k in LOADER_KNOBS}}
        try:
            loader = DataLoader(job.dataset, **kwargs)
        except (TypeError, ValueError) as exc:
            raise JobError(f"job {job.name!r}: DataLoader(dataset, **{kwargs!r}) failed: {exc}") from exc
        read = read_loader_knobs(loader)
        for name in LOADER_KNOBS:
            sources[name] = PERFSUITE if name in requested else USER if name in job.loader_kwargs else TORCH_DEFAULT
    knobs: dict[str, Any] = {name: value for name, value in read.items()}
    if job.aug is not None:
        knobs["aug"], sources["aug"] = job.aug, USER
    else:
        sources["aug"] = "not known: declare where your augmentation runs with Job(aug='cpu'|'gpu'|'none')"
    for name in STEP_KNOBS:
        sources[name] = NOT_APPLIED
    knobs["device"], sources["device"] = str(device), USER
    if device.type == "cpu" and read.get("pin_memory"):
        notes.append(
            "pin_memory=True on a CPU run: without CUDA torch does not pin (nor copy to a device), so this run's "
            "loader skips the pinning a GPU run pays for, and its copies cannot overlap with compute as a GPU run's "
            "non_blocking copies from pinned memory do: samples/s and data wait here are not the GPU run's"
        )
    batch_size = read.get("batch_size") or 0
    return BoundJob(job, loader, device, int(batch_size), knobs, sources, notes)


def call_factory(factory: Callable[..., Any], device: str) -> Job:
    """A job factory takes the session's device (``def my_job(device): ...``) or nothing."""
    params: Mapping[str, inspect.Parameter]
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    takes_device = any(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params.values()
    )
    job = factory(device) if takes_device else factory()
    if not isinstance(job, Job):
        raise JobError(
            f"the job factory {getattr(factory, '__name__', factory)!r} returned "
            f"{type(job).__name__}, not a Job; end it with `return perfsuite.Job(step=..., loader=..., "
            "model=..., optimizer=...)`"
        )
    return job
