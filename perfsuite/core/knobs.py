"""Knobs: how a workload runs. Validated when built, so a typo fails loudly.

Seed 003 trained in FP32 for weeks because its config said ``amp: true`` and
the code compared that with ``'bf16'``. Every knob here refuses values outside
its set, and the message says what to write instead.

Knobs come in three groups (augmentation, loader, step) plus the device; the
flat form (:meth:`Knobs.flat`, :meth:`Knobs.from_flat`) is what the CLI,
pytest markers and JSON results use, with one name per knob everywhere.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from perfsuite.errors import DeviceError, KnobError

AUG_PLACEMENTS = ("cpu", "gpu", "none")
AMP_DTYPES = (None, "bf16", "fp16")
COMPILE_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
DEVICES = ("cpu", "cuda")

_AMP_HINTS = {
    "bfloat16": "bf16",
    "torch.bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "torch.float16": "fp16",
    "16": "fp16",
}


def _check_bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise KnobError(f"{name}={value!r} must be True or False")


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise KnobError(f"{name}={value!r} must be an integer >= {minimum}")
    if value < minimum:
        raise KnobError(f"{name}={value} is below {minimum}; write {name}={minimum} or more")


def _check_prob(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise KnobError(f"{name}={value!r} must be a probability between 0.0 and 1.0")


@dataclass(frozen=True)
class AugKnobs:
    """Where the augmentation recipe runs, and the batch-level mixes.

    placement: ``cpu`` (per-sample PIL/NumPy in the DataLoader workers),
    ``gpu`` (batched Kornia on the run's device, whatever device that is) or
    ``none``. cutmix is the per-batch probability of a paired CutMix (mask
    regions move with image regions); mixup is refused for masks.
    """

    placement: str = "gpu"
    cutmix: float = 0.0
    mixup: float = 0.0

    def __post_init__(self) -> None:
        if self.placement not in AUG_PLACEMENTS:
            raise KnobError(f"aug={self.placement!r} is not a placement; write one of {', '.join(AUG_PLACEMENTS)}")
        _check_prob("cutmix", self.cutmix)
        _check_prob("mixup", self.mixup)


@dataclass(frozen=True)
class LoaderKnobs:
    """DataLoader knobs exactly as torch names them, plus the copy's non_blocking.

    batch_size None means the workload scale's default. prefetch_factor None
    means torch's default (2 batches per worker).
    """

    num_workers: int = 2
    pin_memory: bool = False
    persistent_workers: bool = False
    prefetch_factor: int | None = None
    drop_last: bool = True
    non_blocking: bool = False
    batch_size: int | None = None

    def __post_init__(self) -> None:
        _check_int("num_workers", self.num_workers, 0)
        for name in ("pin_memory", "persistent_workers", "drop_last", "non_blocking"):
            _check_bool(name, getattr(self, name))
        if self.prefetch_factor is not None:
            _check_int("prefetch_factor", self.prefetch_factor, 1)
            if self.num_workers == 0:
                raise KnobError(
                    f"prefetch_factor={self.prefetch_factor} needs worker processes; "
                    "write num_workers=1 or more, or prefetch_factor=None"
                )
        if self.persistent_workers and self.num_workers == 0:
            raise KnobError(
                "persistent_workers=True needs worker processes; "
                "write num_workers=1 or more, or persistent_workers=False"
            )
        if self.batch_size is not None:
            _check_int("batch_size", self.batch_size, 1)


@dataclass(frozen=True)
class StepKnobs:
    """What the training step does on the device.

    amp: None (FP32), ``"bf16"`` or ``"fp16"`` -- never a bool. compile: None
    or a torch.compile mode. log_interval: read the loss back to the host every
    N steps (1 = every step, the seeds' per-step ``.item()``); 0 = never.
    eval_interval: run a short validation pass every N steps (seed 002 evaluated
    every epoch); 0 = never.
    """

    amp: str | None = None
    compile: str | None = None
    channels_last: bool = False
    tf32: bool = False
    cudnn_benchmark: bool = False
    fused: bool = False
    log_interval: int = 0
    eval_interval: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.amp, bool):
            raise KnobError(
                f"amp={self.amp!r} is not a precision: write amp='bf16' (or 'fp16' on CUDA) to "
                "train in mixed precision, or amp=None for FP32. A boolean here is how a config's "
                "'amp: true', compared with 'bf16', silently trains in FP32."
            )
        if self.amp not in AMP_DTYPES:
            hint = _AMP_HINTS.get(str(self.amp).lower())
            suggestion = f"write amp={hint!r}" if hint else "write amp='bf16', amp='fp16' or amp=None"
            raise KnobError(f"amp={self.amp!r} is not one of None, 'bf16', 'fp16'; {suggestion}")
        if isinstance(self.compile, bool):
            raise KnobError(
                f"compile={self.compile!r} is not a mode: write compile='default' (or another torch.compile "
                "mode) to compile, or compile=None"
            )
        if self.compile not in COMPILE_MODES:
            modes = ", ".join(repr(m) for m in COMPILE_MODES if m)
            raise KnobError(f"compile={self.compile!r} is not a torch.compile mode; write one of {modes} or None")
        for name in ("channels_last", "tf32", "cudnn_benchmark", "fused"):
            _check_bool(name, getattr(self, name))
        _check_int("log_interval", self.log_interval, 0)
        _check_int("eval_interval", self.eval_interval, 0)


_GROUPS = {"aug": AugKnobs, "loader": LoaderKnobs, "step": StepKnobs}
# Flat names that differ from the field names in their group.
_FLAT_ALIASES = {"aug": ("aug", "placement")}


def _flat_fields() -> dict[str, tuple[str, str]]:
    """flat name -> (group, field name)."""
    names: dict[str, tuple[str, str]] = {}
    for group, cls in _GROUPS.items():
        for f in dataclasses.fields(cls):
            names[f.name] = (group, f.name)
    for flat, (group, name) in _FLAT_ALIASES.items():
        names.pop(name, None)
        names[flat] = (group, name)
    return names


FLAT_KNOBS = _flat_fields()


@dataclass(frozen=True)
class Knobs:
    """Every knob of one run, plus the device it runs on."""

    aug: AugKnobs = field(default_factory=AugKnobs)
    loader: LoaderKnobs = field(default_factory=LoaderKnobs)
    step: StepKnobs = field(default_factory=StepKnobs)
    device: str = "cpu"

    def __post_init__(self) -> None:
        base = str(self.device).split(":")[0]
        if base not in DEVICES:
            raise KnobError(f"device={self.device!r} is not supported; write 'cpu', 'cuda' or 'cuda:N'")

    @classmethod
    def from_flat(cls, **flat: Any) -> Knobs:
        """Build from flat names (``aug='cpu', num_workers=4, amp='bf16', device='cuda'``)."""
        groups: dict[str, dict[str, Any]] = {g: {} for g in _GROUPS}
        device = flat.pop("device", "cpu")
        for name, value in flat.items():
            if name not in FLAT_KNOBS:
                raise KnobError(f"unknown knob {name!r}; known knobs: {', '.join(sorted(FLAT_KNOBS))}, device")
            group, field_name = FLAT_KNOBS[name]
            groups[group][field_name] = value
        return cls(**{g: _GROUPS[g](**kw) for g, kw in groups.items()}, device=device)

    def flat(self) -> dict[str, Any]:
        """One dict, one name per knob: the form used in JSON, CLI and markers."""
        out: dict[str, Any] = {}
        for flat_name, (group, field_name) in FLAT_KNOBS.items():
            out[flat_name] = getattr(getattr(self, group), field_name)
        out["device"] = self.device
        return out

    def replace(self, **flat: Any) -> Knobs:
        """A copy with some flat knobs changed (how faults and matrices are built)."""
        merged = self.flat()
        merged.update(flat)
        return Knobs.from_flat(**merged)

    @property
    def on_cuda(self) -> bool:
        return self.device.startswith("cuda")


# Knobs a CPU run turns off (they only change what CUDA does), and those it keeps because perfsuite models them.
CUDA_ONLY = ("tf32", "cudnn_benchmark")
MODELLED_ON_CPU = ("pin_memory", "non_blocking")
# The copy the seeds' fix makes (seed 000): batches pinned by the DataLoader and copied with non_blocking=True,
# the one host-to-device copy that makes the host wait for nothing on CUDA (docs/syncs.md).
PINNED_COPIES = {"pin_memory": True, "non_blocking": True}


def resolve_for_device(knobs: Knobs, cuda_available: bool) -> tuple[Knobs, list[str]]:
    """Check knobs against the device; return the knobs that will run and notes.

    Knobs that cannot work raise DeviceError. Without CUDA, tf32 and
    cudnn_benchmark are turned off, each with a note, which the Result and the
    CLI show: a documented fallback, never a silent one. ``pin_memory`` and
    ``non_blocking`` are kept as asked: the DataLoader is built with them (torch
    pins nothing without an accelerator, and a non-blocking copy to the CPU is a
    plain one), and the sync probe reads them to predict what a GPU run's
    copies would make the host wait for (:mod:`perfsuite.probes.synckinds`), so
    the Result records the same settings on every device.
    """
    if knobs.on_cuda and not cuda_available:
        raise DeviceError(
            f"device={knobs.device!r} but torch sees no CUDA device; write device='cpu', or run on a GPU machine"
        )
    if knobs.on_cuda:
        return knobs, []
    if knobs.step.amp == "fp16":
        raise DeviceError(
            "amp='fp16' needs CUDA (its GradScaler is CUDA-only); on the CPU write amp='bf16', or amp=None for FP32"
        )
    notes: list[str] = []
    changes: dict[str, Any] = {}
    for name in CUDA_ONLY:
        if knobs.flat()[name]:
            changes[name] = False
            notes.append(f"{name}=True has no effect without CUDA; ran with {name}=False")
    modelled = [f"{name}=True" for name in MODELLED_ON_CPU if knobs.flat()[name]]
    if modelled:
        notes.append(
            f"{' and '.join(modelled)}: not applied without CUDA; the sync probe counts the copies as a GPU run "
            "makes them (docs/syncs.md)"
        )
    return (knobs.replace(**changes) if changes else knobs), notes
