"""The fault catalog: each bug the seed documents diagnosed by hand, as a named change perfsuite must catch.

A :class:`Fault` is a documented change to a reference workload's knobs
(``apply``) or to its built training step (``mutate``, for bugs that live in
code rather than config: seed 000's label-corrupting augmentation, images-only
MixUp/CutMix). Each names the seed and what it breaks in the seed's words,
the :class:`Reference` (the unchanged, good configuration it is applied to),
the metric that catches it, and the device the catch needs: ``cpu`` (caught
anywhere, including CPU CI) or ``gpu`` (the cost only exists on a CUDA
device). :mod:`perfsuite.tools.catch` runs every fault against its reference and
renders the catch table; ``pytest --perfsuite-inject NAME`` runs a whole
suite with one injected.

    >>> from perfsuite.harness.faults.catalog import FAULTS, REFERENCES
    >>> fault = FAULTS["num_workers_0"]
    >>> fault.apply(REFERENCES[fault.reference].knobs()).loader.num_workers
    0
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from perfsuite.core.knobs import PINNED_COPIES, Knobs
from perfsuite.errors import PerfsuiteError
from perfsuite.harness.faults.loader import decode_4x, heavy_collate, list_collate

if TYPE_CHECKING:
    from perfsuite.harness.pipeline import Pipeline

DEVICES = ("cpu", "gpu")
RULES = ("exact", "statistical")


@dataclass(frozen=True)
class Reference:
    """An unchanged reference configuration: a good pipeline, and how long to run it.

    ``observe_steps`` is at least the epoch length where a fault acts once
    per epoch (evaluation), so the observed steps always see it.
    """

    name: str
    workload: str
    flat: Mapping[str, Any]
    steps: int
    warmup: int
    observe_steps: int
    why: str
    nproc: int = 1  # ranks (perfsuite.harness.ranks.launch); 1: one process

    def knobs(self, device: str = "cpu") -> Knobs:
        return Knobs.from_flat(**{**self.flat, "device": device})


REFERENCES: dict[str, Reference] = {
    r.name: r
    for r in (
        Reference(
            "loader",
            "gray_classifier",
            {"aug": "none", "num_workers": 2, "persistent_workers": True, "prefetch_factor": 2},
            steps=18,
            warmup=3,
            observe_steps=0,
            why="seed 002's fixed loader: 2 persistent workers (one per core here), prefetch 2, batch 32; "
            "3 batches per epoch, so 6 epochs turn over inside the window",
        ),
        Reference(
            "loader_aug",
            "gray_classifier",
            {"aug": "gpu", "num_workers": 2, "persistent_workers": True, "prefetch_factor": 2},
            steps=18,
            warmup=3,
            observe_steps=0,
            why="seed 000's fix on seed 002's loader: the augmentation batched on the device, the workers only decode",
        ),
        Reference(
            "step",
            "super_resolution",
            {"aug": "none", "num_workers": 0, "amp": "bf16", "pin_memory": True, "non_blocking": True},
            steps=2,
            warmup=0,
            observe_steps=6,
            why="seed 003's fixed step: bf16, no host reads, pinned non-blocking copies; 6 observed steps = 1 epoch",
        ),
        Reference(
            "masks",
            "face_parsing",
            {"aug": "none", "num_workers": 0},
            steps=2,
            warmup=0,
            observe_steps=2,
            why="seed 000's workload as the loader ships it: uint8 images and uint8 masks, copied to the device",
        ),
        Reference(
            "compiled",
            "super_resolution",
            {"aug": "none", "num_workers": 0, "compile": "default"},
            steps=3,
            warmup=2,
            observe_steps=1,
            why="seed 003's step with torch.compile on",
        ),
        Reference(
            "labels",
            "face_parsing",
            {"aug": "gpu", "cutmix": 0.5, "num_workers": 0},
            steps=2,
            warmup=0,
            observe_steps=2,
            why="seed 000's workload with paired GPU augmentation (mask as its own data key) and paired CutMix",
        ),
        Reference(
            "cuda",
            "face_parsing",
            {
                "aug": "gpu",
                "num_workers": 4,
                "persistent_workers": True,
                "prefetch_factor": 2,
                "pin_memory": True,
                "non_blocking": True,
                "amp": "bf16",
                "tf32": True,
                "cudnn_benchmark": True,
                "fused": True,
            },
            steps=40,
            warmup=5,
            observe_steps=0,
            why="every GPU knob of the seeds' fixes on: pinned memory, non-blocking copies, TF32, cudnn.benchmark, "
            "fused AdamW",
        ),
        Reference(
            "ddp",
            "face_parsing",
            {"aug": "none", "num_workers": 0, **PINNED_COPIES},
            steps=12,
            warmup=1,
            observe_steps=1,
            nproc=2,
            why="seeds 003/004's `torch.distributed.launch --nproc_per_node=2` on seed 000's workload: 2 gloo "
            "ranks, a DistributedSampler with set_epoch, DDP; no workers, so 2 ranks x 1 thread fit 2 cores; "
            "3 batches per rank per epoch, so 4 epochs turn over",
        ),
        Reference(
            "ddp_loader",
            "face_parsing",
            {"aug": "none", "num_workers": 1, "persistent_workers": True, "prefetch_factor": 2, **PINNED_COPIES},
            steps=6,
            warmup=1,
            observe_steps=0,
            nproc=2,
            why="the ddp reference with one persistent DataLoader worker per rank (seed 002's loader on 2 ranks)",
        ),
    )
}
DDP_RANKS = 2  # the ranks of the ddp references: what seed 002's rule multiplies the workers by


@dataclass(frozen=True)
class Fault:
    """One seed bug as a change perfsuite must catch.

    Args:
        name: what ``--perfsuite-inject`` takes.
        seed: the seed document and item, e.g. ``"003 #5"``.
        breaks: what it breaks, in the seed's words (and the seed's Chinese where it helps).
        reference: the :data:`REFERENCES` entry it is applied to.
        changes: flat knobs it sets (``Knobs.replace``).
        requires: knob values the baseline must have for the change to mean anything
            (``{"amp": ("bf16", "fp16")}``); a value may be a tuple of allowed values.
        transform: a knob function used instead of ``changes`` (seed code paths).
        mutation: changes the built Pipeline in place (bugs that live in code).
        refused: flat knobs perfsuite's own validation must refuse: the config form of the bug.
        signal: the metric that catches it.
        rule: ``exact`` (deterministic counter or flag) or ``statistical`` (compared with the
            unchanged run in the same session).
        device: ``cpu`` (caught on any machine) or ``gpu`` (needs a CUDA GPU to show a cost).
        cause: the cause in the seeds' terms, the tail of the failure message.
        why_device: for ``gpu`` faults, why a CPU cannot show them.
    """

    name: str
    seed: str
    breaks: str
    reference: str
    signal: str
    rule: str
    device: str
    cause: str
    changes: Mapping[str, Any] = field(default_factory=dict)
    requires: Mapping[str, Any] = field(default_factory=dict)
    transform: Callable[[Knobs], Knobs] | None = None
    mutation: Callable[[Pipeline], None] | None = None
    refused: Mapping[str, Any] = field(default_factory=dict)
    why_device: str = ""

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise PerfsuiteError(f"fault {self.name}: device={self.device!r}; write one of {', '.join(DEVICES)}")
        if self.rule not in RULES:
            raise PerfsuiteError(f"fault {self.name}: rule={self.rule!r}; write one of {', '.join(RULES)}")
        from perfsuite.core import metrics

        metrics.get(self.signal)  # the signal must be a registered metric: the engine judges it
        if self.reference not in REFERENCES:
            raise PerfsuiteError(f"fault {self.name}: unknown reference {self.reference!r}")

    def applies_to(self, knobs: Knobs) -> str | None:
        """None if the baseline has what this fault removes; else what it is missing."""
        flat = knobs.flat()
        for name, wanted in self.requires.items():
            allowed = wanted if isinstance(wanted, tuple) else (wanted,)
            if flat.get(name) not in allowed:
                want = " or ".join(repr(v) for v in allowed)
                return f"fault {self.name} needs a baseline with {name}={want}, not {name}={flat.get(name)!r}"
        return None

    def apply(self, knobs: Knobs) -> Knobs:
        """The knobs with this fault injected (unchanged for faults that only mutate code)."""
        if self.transform is not None:
            return self.transform(knobs)
        return knobs.replace(**self.changes) if self.changes else knobs

    def mutate(self, pipeline: Pipeline) -> None:
        """Inject the code change into a built pipeline (no-op for knob faults)."""
        if self.mutation is not None:
            self.mutation(pipeline)

    @property
    def change(self) -> str:
        """The change, as a short text for tables: ``num_workers=0``, ``gpu_augment=SeedConcat``."""
        if self.mutation is not None:
            return self.mutation.__doc__.strip().splitlines()[0] if self.mutation.__doc__ else self.mutation.__name__
        if self.transform is not None:
            return (self.transform.__doc__ or self.transform.__name__).strip().splitlines()[0]
        return ", ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in self.changes.items())


# --------------------------------------------------------------------------- code-level faults


def seed_amp_bool(knobs: Knobs) -> Knobs:
    """amp: true -> use_amp = (amp == 'bf16') -> False -> amp=None"""
    raw = True  # config/training_config.yaml: "amp: true"
    use_amp = raw == "bf16"  # training_engine.py L71: config['train'].get('amp', 'none') == 'bf16'
    return knobs.replace(amp="bf16" if use_amp else None)


def seed_label_augment(pipeline: Pipeline) -> None:
    """gpu_augment = seed 000's GPUAugmentation (mask as 4th channel, .long(), clamp)"""
    from perfsuite.augment.seed_variants import SeedConcat

    pipeline.gpu_augment = SeedConcat(num_classes=int(pipeline.workload.num_classes or 19)).to(pipeline.device)


def seed_flip_without_swap(pipeline: Pipeline) -> None:
    """gpu_augment flips without swapping left/right classes (seed 000's np.fliplr on image and mask)"""
    import dataclasses

    from perfsuite.augment.gpu import GpuAugment

    augment = pipeline.gpu_augment
    assert isinstance(augment, GpuAugment), "the labels reference augments on the GPU"
    recipe = dataclasses.replace(augment.recipe, flip=dataclasses.replace(augment.recipe.flip, pairs=()))
    pipeline.gpu_augment = GpuAugment(recipe, augment.target_kind, fill=augment.fill).to(pipeline.device)


def seed_images_only_cutmix(pipeline: Pipeline) -> None:
    """batch_mix = seed 000's images-only RandomCutMixV2 (p=1)"""
    from perfsuite.augment.seed_variants import ImagesOnlyCutMix

    pipeline.batch_mix = ImagesOnlyCutMix(p=1.0)


def seed_images_only_mixup(pipeline: Pipeline) -> None:
    """batch_mix = seed 000's images-only RandomMixUpV2 (p=1)"""
    from perfsuite.augment.seed_variants import ImagesOnlyMixUp

    pipeline.batch_mix = ImagesOnlyMixUp(p=1.0)


class Int64Targets:
    """collate_fn = default_collate, then targets .long(): masks shipped as int64 instead of uint8"""

    def __call__(self, samples: Any) -> Any:
        from torch.utils.data import default_collate

        images, target = default_collate(samples)
        return images, target.long()


class Float64Images:
    """collate_fn = default_collate, then images .double(): inputs built as float64"""

    def __call__(self, samples: Any) -> Any:
        from torch.utils.data import default_collate

        images, target = default_collate(samples)
        return images.double(), target


def int64_targets(pipeline: Pipeline) -> None:
    """loader yields int64 targets (masks 8x the bytes of uint8)"""
    pipeline.loader.collate_fn = Int64Targets()


def float64_images(pipeline: Pipeline) -> None:
    """loader yields float64 images (8x the bytes of uint8)"""
    pipeline.loader.collate_fn = Float64Images()


def grad_scaler_with_bf16(pipeline: Pipeline) -> None:
    """scaler = GradScaler() on a bf16 autocast step"""
    import torch

    pipeline.scaler = torch.amp.GradScaler(pipeline.device.type)


def channels_last_input(pipeline: Pipeline) -> None:
    """x.contiguous(channels_last) inside the step, model left NCHW"""
    import torch

    original = pipeline.to_device

    def to_device(batch: Any) -> Any:
        x, y = original(batch)
        return x.contiguous(memory_format=torch.channels_last), y

    pipeline.to_device = to_device  # type: ignore[method-assign]


def print_loss(pipeline: Pipeline) -> None:
    """print(loss) after every step"""
    import io

    original = pipeline.step

    def step(batch: Any, index: int) -> Any:
        loss = original(batch, index)
        print(f"step {index} loss {loss}", file=io.StringIO())  # formatting the tensor reads it back
        return loss

    pipeline.step = step  # type: ignore[method-assign]


# --------------------------------------------------------------------------- DDP faults (runs on several ranks)


def _rank() -> int:
    """This process's rank; a DDP fault injected into a one-process run says what to write instead."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise PerfsuiteError(
            "this fault plants a DDP bug and needs a run on several ranks: perf_run(..., nproc_per_node=2) or "
            "perfsuite run ... --nproc-per-node 2"
        )
    return dist.get_rank()


def drop_distributed_sampler(pipeline: Pipeline) -> None:
    """DataLoader(shuffle=True) on every rank, no DistributedSampler"""
    from perfsuite.harness.pipeline import build_loader

    _rank()
    loader = pipeline.loader
    pipeline.loader = build_loader(
        loader.dataset, pipeline.knobs, pipeline.batch_size, 0, shuffle=True, timeout_s=loader.timeout or None
    )


def skip_set_epoch(pipeline: Pipeline) -> None:
    """sampler.set_epoch(epoch) never called"""
    _rank()
    pipeline.epoch_start = lambda epoch: None  # type: ignore[method-assign]


def seed_workers_per_gpu(knobs: Knobs) -> Knobs:
    """num_workers = min(num_workers * gpus, 32) on every rank"""
    workers = knobs.loader.num_workers
    return knobs.replace(num_workers=min(workers * DDP_RANKS, 32))  # seed 002's trainer.py, gpus = DDP_RANKS


def rank0_loss_log(pipeline: Pipeline) -> None:
    """log loss.item() on rank 0 only, every step"""
    import logging

    log = logging.getLogger("perfsuite.faults.rank0")
    log.addHandler(logging.NullHandler())
    log.propagate = False
    rank, original = _rank(), pipeline.step

    def step(batch: Any, index: int) -> Any:
        loss = original(batch, index)
        if rank == 0:
            log.info("step %d loss %.4f", index, loss.item())  # only rank 0 reads the loss back
        return loss

    pipeline.step = step  # type: ignore[method-assign]


def find_unused_parameters(pipeline: Pipeline) -> None:
    """DDP(model, find_unused_parameters=True) where every parameter is used"""
    _rank()
    pipeline.ddp_options["find_unused_parameters"] = True


STRAGGLER_SLEEP_S = 0.15  # a planted straggler's sleep per step: about one step of the smoke workload here


class SlowCollate:
    """collate_fn = default_collate, then a sleep on one rank: that rank's loader is slow"""

    def __init__(self, rank: int, seconds: float) -> None:
        self.slow = _rank() == rank
        self.seconds = seconds

    def __call__(self, samples: Any) -> Any:
        import time

        from torch.utils.data import default_collate

        if self.slow:
            time.sleep(self.seconds)
        return default_collate(samples)


def slow_loader_rank1(pipeline: Pipeline) -> None:
    """rank 1's collate_fn sleeps 150 ms per batch"""
    pipeline.loader.collate_fn = SlowCollate(1, STRAGGLER_SLEEP_S)


def slow_backward_rank0(pipeline: Pipeline) -> None:
    """rank 0 sleeps 150 ms at the start of its backward (a hook on the output's gradient)"""
    import time

    if _rank() != 0:
        return

    def sleep(grad: Any) -> Any:
        time.sleep(STRAGGLER_SLEEP_S)
        return grad

    def on_output(module: Any, args: Any, output: Any) -> None:
        if output.requires_grad:
            output.register_hook(sleep)

    pipeline.model.register_forward_hook(on_output)


def slow_optimizer_rank1(pipeline: Pipeline) -> None:
    """rank 1's optimizer.step() sleeps 150 ms"""
    import time

    if _rank() != 1:
        return
    optimizer = pipeline.optimizer
    original = optimizer.step

    def step(*args: Any, **kwargs: Any) -> Any:
        time.sleep(STRAGGLER_SLEEP_S)
        return original(*args, **kwargs)

    optimizer.step = step  # type: ignore[method-assign]


_PREFETCH_GPU = (
    "prefetch depth changes neither the CPU a sample costs nor how many samples/s the workers can make "
    "(the ledger's two figures): it decides how much of the loading's jitter reaches a device that waits for "
    "it, which only shows where the step does not share the workers' cores"
)

FAULTS: dict[str, Fault] = {
    f.name: f
    for f in (
        Fault(
            "cpu_augmentation",
            "000 #1",
            "CPU数据增强: per-sample PIL/NumPy augmentation in the DataLoader workers; the GPU waits for the CPU",
            "loader_aug",
            changes={"aug": "cpu"},
            requires={"aug": "gpu"},
            signal="loader_cpu_ms_per_sample",
            rule="statistical",
            device="cpu",
            cause="aug='cpu': PIL/NumPy augmentation in the DataLoader workers costs CPU per sample that the "
            "device's batched augmentation does not",
        ),
        Fault(
            "num_workers_0",
            "002 #1, 004 #2",
            "num_workers=0: no parallel loading, the main process blocks on every batch (主线程阻塞)",
            "loader",
            changes={"num_workers": 0, "persistent_workers": False, "prefetch_factor": None},
            requires={"num_workers": (1, 2, 3, 4, 6, 8, 12, 16)},
            signal="main_load_ms_per_step",
            rule="statistical",
            device="cpu",
            cause="num_workers=0: the training process decodes every batch itself, between its steps",
        ),
        Fault(
            "too_few_workers",
            "000 #2",
            "num_workers不足: too few workers to keep up, the GPU often idles waiting for the next batch",
            "loader",
            changes={"num_workers": 1},
            requires={"num_workers": (2, 3, 4, 6, 8, 12, 16)},
            signal="loader_capacity_samples_per_s",
            rule="statistical",
            device="cpu",
            cause="num_workers=1: one process decodes where two cores could, so the loader makes half the samples/s",
        ),
        Fault(
            "pin_memory_off",
            "000 #3",
            "没有pin_memory: pageable host memory, slower CPU->GPU copies (5-10 ms per batch)",
            "step",
            changes={"pin_memory": False},
            requires={"pin_memory": True, "non_blocking": True},
            signal="syncs_per_step",
            rule="exact",
            device="cpu",
            cause="pin_memory=False: each non_blocking copy is from pageable memory, so the host waits for it "
            "(a pageable copy per step, docs/syncs.md)",
        ),
        Fault(
            "blocking_copies",
            "000 #4",
            "数据传输同步阻塞: .to(device) without non_blocking=True, the GPU waits for each copy",
            "step",
            changes={"non_blocking": False},
            requires={"non_blocking": True},
            signal="syncs_per_step",
            rule="exact",
            device="cpu",
            cause="non_blocking=False: each copy blocks the host until it lands (a blocking copy per step)",
        ),
        Fault(
            "persistent_workers_off",
            "000 #5",
            "没有persistent_workers: workers are destroyed and re-created at every epoch",
            "loader",
            changes={"persistent_workers": False},
            requires={"persistent_workers": True},
            signal="epoch_start_cpu_ms",
            rule="statistical",
            device="cpu",
            cause="persistent_workers=False: workers are torn down and forked again every epoch",
        ),
        Fault(
            "prefetch_too_low",
            "002 进一步优化, 004 手动调优 3",
            "prefetch too low: each worker has one batch in flight, so jitter in loading reaches the step",
            "cuda",
            changes={"prefetch_factor": 1},
            requires={"prefetch_factor": (2, 3, 4, 6, 8)},
            signal="data_wait_frac",
            rule="statistical",
            device="gpu",
            cause="prefetch_factor=1: one batch in flight per worker",
            why_device=_PREFETCH_GPU,
        ),
        Fault(
            "amp_bool",
            "003 #1",
            "混合精度配置错误: config says amp: true (a bool), the code compares it with 'bf16', training runs in FP32",
            "step",
            transform=seed_amp_bool,
            refused={"amp": True},
            requires={"amp": ("bf16", "fp16")},
            signal="amp_lowp_frac",
            rule="exact",
            device="cpu",
            cause="seed 003's amp: true compared with 'bf16' is False, so training runs in FP32",
        ),
        Fault(
            "amp_off",
            "004 #4, 000 方案3",
            "没有混合精度训练: no autocast, every matmul and convolution in FP32",
            "step",
            changes={"amp": None},
            requires={"amp": ("bf16", "fp16")},
            signal="amp_lowp_frac",
            rule="exact",
            device="cpu",
            cause="amp=None: training runs in FP32",
        ),
        Fault(
            "compile_off",
            "003 #2",
            "torch.compile未启用: compile_model: false, the model runs eagerly",
            "compiled",
            changes={"compile": None},
            requires={"compile": ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")},
            signal="graph_breaks",
            rule="exact",
            device="cpu",
            cause="compile=None: torch.compile is configured but never called (seed 003's compile_model: false)",
        ),
        Fault(
            "tf32_cudnn_off",
            "003 #3",
            "硬件优化未应用: apply_hardware_optimizations() never called, TF32 and cudnn.benchmark stay off",
            "cuda",
            changes={"tf32": False, "cudnn_benchmark": False},
            requires={"tf32": True},
            signal="step_ms",
            rule="statistical",
            device="gpu",
            cause="tf32=False, cudnn_benchmark=False: FP32 matmuls without TF32, no cuDNN autotuning",
            why_device="TF32 and cuDNN exist only on a CUDA device; on the CPU the runner turns both off with a note",
        ),
        Fault(
            "host_read_every_step",
            "003 #5",
            "训练循环频繁GPU同步: .item() on the loss every batch, an unnecessary CPU-GPU sync per step",
            "step",
            changes={"log_interval": 1},
            requires={"log_interval": 0},
            signal="syncs_per_step",
            rule="exact",
            device="cpu",
            cause="the loss is read back with .item() every step",
        ),
        Fault(
            "unfused_optimizer",
            "003 #6",
            "没有fused优化器: AdamW without fused=True, one kernel per parameter tensor",
            "cuda",
            changes={"fused": False},
            requires={"fused": True},
            signal="step_ms",
            rule="statistical",
            device="gpu",
            cause="fused=False: AdamW launches per-tensor kernels",
            why_device="fused AdamW saves kernel launches on a GPU; on the CPU both paths are loops over tensors",
        ),
        Fault(
            "eval_every_epoch",
            "002 #4",
            "每epoch都评估: evaluation every epoch interrupts training with host reads of its metrics",
            "step",
            changes={"eval_interval": 6},
            requires={"eval_interval": 0},
            signal="syncs_per_step",
            rule="exact",
            device="cpu",
            cause="evaluation every epoch (eval_interval=6 steps = one smoke epoch) reads its loss back to the host",
        ),
        Fault(
            "batch_too_small",
            "002 #3, 003 #4, 004 #3",
            "batch_size保守 / GPU计算量不足: a batch too small to fill the device, per-step overhead dominates",
            "loader",
            changes={"batch_size": 2},
            requires={"batch_size": (None, 8, 16, 32, 64, 128, 256)},
            signal="step_ms",
            rule="statistical",
            device="gpu",
            cause="batch_size=2: per-step overhead dominates a batch too small to fill the device",
            why_device="a CPU has no idle parallel units for a bigger batch to fill, and under load per-step noise "
            "swamps per-sample time: measured here per-sample step time x1.56 (99% CI x0.48..x3.34, "
            "p=0.13) in one self-test, x2.97 (p=1e-6) in another; not reliable",
        ),
        Fault(
            "seed_label_augment",
            "000 方案1 GPUAugmentation",
            "mask concatenated as a 4th channel: bilinear resampling, blur and noise run on labels, .long() "
            "truncates them and clamp(0, 18) turns the ignore index into class 18",
            "labels",
            mutation=seed_label_augment,
            requires={"aug": "gpu"},
            signal="label_violations",
            rule="exact",
            device="cpu",
            cause="seed 000's GPUAugmentation resamples the mask as an image channel and clamps it to 0..18",
        ),
        Fault(
            "flip_without_swap",
            "000 _apply_augmentation (np.fliplr)",
            "a horizontal flip of image and mask that keeps the left/right classes: the mirrored left eye, brow "
            "and ear are trained as the left ones",
            "labels",
            mutation=seed_flip_without_swap,
            requires={"aug": "gpu"},
            signal="label_violations",
            rule="exact",
            device="cpu",
            cause="the flip mirrors faces without swapping their left and right classes",
        ),
        Fault(
            "images_only_cutmix",
            "000 GPUAugmentationAdvanced",
            "RandomCutMixV2 on images only: boxes pasted into images, masks left behind",
            "labels",
            mutation=seed_images_only_cutmix,
            requires={"cutmix": (0.1, 0.2, 0.3, 0.5, 1.0)},
            signal="label_violations",
            rule="exact",
            device="cpu",
            cause="seed 000's CutMix moves image regions without their mask regions",
        ),
        Fault(
            "int64_masks",
            "000 (masks)",
            "masks shipped from the loader as int64 instead of uint8: 8x the bytes of every mask copied to the device",
            "masks",
            mutation=int64_targets,
            signal="h2d_bytes_per_step",
            rule="exact",
            device="cpu",
            cause="the loader ships masks as int64; ship uint8 and convert with .long() on the device",
        ),
        Fault(
            "float64_inputs",
            "000 (inputs)",
            "images built as float64 on the host: 8x the bytes of uint8 copied to the device every step",
            "step",
            mutation=float64_images,
            signal="h2d_bytes_per_step",
            rule="exact",
            device="cpu",
            cause="the loader ships float64 images; ship uint8 and convert to float on the device",
        ),
        Fault(
            "grad_scaler_bf16",
            "003 (AMP)",
            "GradScaler with bf16 autocast: loss scaling bf16 does not need, plus unscale and inf checks every step",
            "step",
            mutation=grad_scaler_with_bf16,
            requires={"amp": "bf16"},
            signal="grad_scaler_bf16",
            rule="exact",
            device="cpu",
            cause="a GradScaler scales a bf16 loss; it is only needed for fp16",
        ),
        Fault(
            "channels_last_input",
            "003 #3 (layout)",
            "an NCHW model fed a channels_last conversion inside the step: layout copies every step",
            "step",
            mutation=channels_last_input,
            requires={"channels_last": False},
            signal="input_format",
            rule="exact",
            device="cpu",
            cause="the input is converted to channels_last but the model's weights are NCHW",
        ),
        Fault(
            "print_loss",
            "003 #5 (print)",
            "print(loss) every step: formatting a tensor reads it back to the host, a sync per step",
            "step",
            mutation=print_loss,
            signal="syncs_per_step",
            rule="exact",
            device="cpu",
            cause="the loss is printed every step, which reads it back to the host",
        ),
        Fault(
            "no_distributed_sampler",
            "003/004 DDP (torch.distributed.launch --nproc_per_node=2)",
            "a DataLoader without DistributedSampler under DDP: every rank reads the whole dataset, so each epoch "
            "reads it N times and the ranks train on the same batches",
            "ddp",
            mutation=drop_distributed_sampler,
            signal="dataset_passes_per_epoch",
            rule="exact",
            device="cpu",
            cause="no DistributedSampler: every rank reads the whole dataset, 2 x the samples per epoch",
        ),
        Fault(
            "set_epoch_missing",
            "003/004 DDP",
            "DistributedSampler without sampler.set_epoch(epoch): the same shuffled order every epoch",
            "ddp",
            mutation=skip_set_epoch,
            signal="repeated_epoch_orders",
            rule="exact",
            device="cpu",
            cause="sampler.set_epoch(epoch) is not called: every epoch draws the order of the first",
        ),
        Fault(
            "workers_times_ranks",
            "002 #5 (多GPU优化)",
            "num_workers = min(num_workers * gpus, 32) in every rank: workers x ranks above the cores (on seed "
            "002's 16-core host with 4 GPUs: 32 workers), so loading, compute and ranks take turns on the cores",
            "ddp_loader",
            transform=seed_workers_per_gpu,
            requires={"num_workers": (1, 2, 3, 4, 6, 8, 12, 16)},
            signal="cpu_oversubscription",
            rule="exact",
            device="cpu",
            cause="seed 002's min(num_workers * gpus, 32) starts num_workers x ranks workers in every rank: "
            "ranks x workers above the cores",
        ),
        Fault(
            "rank0_loss_read",
            "003 #5 (DDP)",
            "loss.item() for logging on rank 0 only: rank 0 stalls at each read while the other ranks wait for it "
            "at the next all-reduce",
            "ddp",
            mutation=rank0_loss_log,
            signal="syncs_per_step",
            rule="exact",
            device="cpu",
            cause="the loss is read back on rank 0 only (logging), so the other ranks wait for rank 0",
        ),
        Fault(
            "find_unused_parameters",
            "003/004 DDP",
            "DDP(find_unused_parameters=True) on a model that uses every parameter: a walk of the autograd graph "
            "after every forward, for nothing",
            "ddp",
            mutation=find_unused_parameters,
            signal="ddp_unused_search",
            rule="exact",
            device="cpu",
            cause="find_unused_parameters=True while every parameter gets a gradient",
        ),
        Fault(
            "straggler_loader",
            "003/004 DDP (straggler)",
            "one rank's loader is slow (a planted 150 ms sleep per batch on rank 1): every step waits for it",
            "ddp",
            mutation=slow_loader_rank1,
            signal="input_skew_frac",
            rule="statistical",
            device="cpu",
            cause="rank 1's loader sleeps 150 ms per batch",
        ),
        Fault(
            "straggler_backward",
            "003/004 DDP (straggler)",
            "one rank's backward is slow (a planted 150 ms sleep on rank 0): the others wait at the gradient "
            "all-reduce",
            "ddp",
            mutation=slow_backward_rank0,
            signal="straggler_wait_frac",
            rule="statistical",
            device="cpu",
            cause="rank 0 sleeps 150 ms in its backward",
        ),
        Fault(
            "straggler_optimizer",
            "003/004 DDP (straggler)",
            "one rank's optimizer step is slow (a planted 150 ms sleep on rank 1): it starts every step late",
            "ddp",
            mutation=slow_optimizer_rank1,
            signal="straggler_wait_frac",
            rule="statistical",
            device="cpu",
            cause="rank 1 sleeps 150 ms in its optimizer step",
        ),
        Fault(
            "images_only_mixup",
            "000 GPUAugmentationAdvanced",
            "RandomMixUpV2 on images only: images blended, masks left as they were",
            "labels",
            mutation=seed_images_only_mixup,
            refused={"mixup": 0.3},
            signal="label_violations",
            rule="exact",
            device="cpu",
            cause="seed 000's MixUp blends images and leaves their masks unblended",
        ),
        Fault(
            "heavy_collate",
            "issue 20 (a user's collate_fn)",
            "a collate_fn that does 5 ms of CPU work per sample in the workers: the loader's cost grows, the step "
            "does not",
            "loader",
            mutation=heavy_collate,
            signal="loader_cpu_ms_per_sample",
            rule="statistical",
            device="cpu",
            cause="the collate_fn costs 5 ms of CPU per sample",
        ),
        Fault(
            "decode_4x",
            "000 (512px photos), issue 20",
            "the Dataset decodes images with 4x the pixels the model takes, then resizes them in the workers",
            "loader",
            mutation=decode_4x,
            signal="loader_cpu_ms_per_sample",
            rule="statistical",
            device="cpu",
            cause="__getitem__ decodes 4x the pixels it keeps; store the images at the size the model takes",
        ),
        Fault(
            "list_collate",
            "issue 20 (a user's collate_fn)",
            "a collate_fn that builds the batch with torch.tensor() of nested Python lists instead of stacking arrays",
            "loader",
            mutation=list_collate,
            signal="loader_cpu_ms_per_sample",
            rule="statistical",
            device="cpu",
            cause="collate_fn converts every pixel to a Python int and back; stack the arrays (default_collate)",
        ),
    )
}


def get_fault(name: str) -> Fault:
    try:
        return FAULTS[name]
    except KeyError:
        raise PerfsuiteError(f"unknown fault {name!r}; write one of {', '.join(sorted(FAULTS))}") from None


def mutation(names: tuple[str, ...] | list[str]) -> Callable[[Pipeline], None] | None:
    """The combined pipeline mutation of the named faults (for ``RunSpec.mutate``); None if none mutates."""
    mutating = [get_fault(n) for n in names if get_fault(n).mutation is not None]
    if not mutating:
        return None

    def mutate(pipeline: Pipeline) -> None:
        for fault in mutating:
            fault.mutate(pipeline)

    return mutate
