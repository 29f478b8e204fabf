"""The property checks on an unchanged training script's own transform (``perfsuite check``).

1. The script runs until it iterates its training DataLoader (:mod:`perfsuite.harness.find_loader`);
   its Dataset (through ``Subset``/``ConcatDataset``) and the Dataset's transform attribute are found.
2. For a few samples spread over the Dataset, ``dataset[i]`` runs with the transform replaced by a
   recorder: the user's own files are read by the user's own code, and the call the transform would
   get is kept (:func:`perfsuite.augment.sample_adapter.interface_of`).
3. Each recorded sample's real mask goes through the real transform under several seeds, its image
   painted from the mask (:class:`perfsuite.augment.sample_adapter.SampleAdapter`), and
   :func:`perfsuite.augment.checks.check_example` runs the label, flip-pair and alignment properties:
   by colour consistency (the transform may jitter colours), and, when every call kept the painted
   colours up to a per-channel affine map (a Normalize), strictly and at sub-pixel precision too.

No Hypothesis search: the inputs are the user's samples, not drawn ones, so a failure is reported at
once, naming the Dataset index and the seed that reproduce it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfsuite.augment.checks import Declared, check_example
from perfsuite.augment.labels import LabelSpace
from perfsuite.augment.sample_adapter import (
    ADAPTER_ADVICE,
    CannotAdapt,
    Interface,
    SampleAdapter,
    interface_of,
    mask_hw,
)
from perfsuite.errors import JobError, PerfsuiteError, PropertyViolation
from perfsuite.harness.find_loader import find_training_loader
from perfsuite.jobs.script import Script

TRANSFORM_NAMES = ("transform", "transforms", "joint_transform", "train_transform", "augment", "augmentation")
EXACT_SHARE = 0.97  # every call must keep this share of region interiors at the painted colours for the strict pass


class _Recorded(BaseException):
    """Raised by the recorder in place of the transform: ``__getitem__`` has read the sample from disk."""


@dataclass
class CheckReport:
    """What was checked: the Dataset, its transform, the interface, samples and calls, and the passes run."""

    dataset: str
    transform: str
    interface: str
    indices: list[int]
    seeds: int
    passes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [
            f"dataset      {self.dataset}, transform .{self.transform}",
            f"interface    {self.interface}",
            f"samples      dataset[{', '.join(map(str, self.indices))}] x {self.seeds} seed(s)",
            *(f"passed       {p}" for p in self.passes),
            *(f"note         {n}" for n in self.notes),
        ]


def unwrap(dataset: Any) -> Any:
    """The Dataset that holds the transform, through ``Subset`` (``.dataset``) and ``ConcatDataset`` (the first)."""
    for _ in range(8):
        inner = getattr(dataset, "dataset", None)
        if inner is None and isinstance(getattr(dataset, "datasets", None), (list, tuple)) and dataset.datasets:
            inner = dataset.datasets[0]
        if inner is None or inner is dataset:
            return dataset
        if any(getattr(dataset, name, None) is not None for name in TRANSFORM_NAMES):
            return dataset
        dataset = inner
    return dataset


def transform_attribute(dataset: Any) -> str:
    """The name of the Dataset attribute that holds its transform."""
    attrs = vars(dataset) if hasattr(dataset, "__dict__") else {}
    for name in TRANSFORM_NAMES:
        if callable(attrs.get(name)):
            return name
    for name, value in attrs.items():
        if callable(value) and ("transform" in name.lower() or "aug" in name.lower()):
            return name
    shown = ", ".join(f"{k} ({type(v).__name__})" for k, v in attrs.items()) or "none"
    raise CannotAdapt(
        f"{type(dataset).__name__} holds no transform attribute perfsuite knows ({', '.join(TRANSFORM_NAMES)}, or a "
        f"callable named *transform*/*aug*); its attributes: {shown}. Pass the transform to "
        "check_paired_augmentation directly, or " + ADAPTER_ADVICE
    )


def record_call(dataset: Any, name: str, index: int) -> Interface:
    """What ``dataset[index]`` hands its transform (read from the user's files by the user's own code)."""
    original = getattr(dataset, name)
    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def recorder(*args: Any, **kwargs: Any) -> Any:
        seen.append((args, kwargs))
        raise _Recorded

    setattr(dataset, name, recorder)
    try:
        dataset[index]
    except _Recorded:
        pass
    finally:
        setattr(dataset, name, original)
    if not seen:
        raise CannotAdapt(
            f"{type(dataset).__name__}[{index}] did not call its .{name}; perfsuite records the sample a Dataset hands "
            "its transform. Pass the transform to check_paired_augmentation directly, or " + ADAPTER_ADVICE
        )
    return interface_of(*seen[0])


def spread(length: int, count: int) -> list[int]:
    """``count`` indices spread evenly over ``range(length)`` (all of them if fewer)."""
    if length <= count:
        return list(range(length))
    return sorted({int(round(v)) for v in np.linspace(0, length - 1, count)})


def _where(indices: list[int], seed: int, err: PropertyViolation, mode: str) -> PropertyViolation:
    """The violation, naming the Dataset index (the batch's sample ``err.sample``) and seed that show it."""
    message = str(err).split(": ", 1)[1] if ": " in str(err) else str(err)
    where = f"dataset[{indices[err.sample]}]" if err.sample is not None else f"dataset{indices} pooled"
    out = PropertyViolation(err.prop, f"{message} [{where}, seed {seed}, {mode}]")
    out.cause, out.seed = err.cause, seed
    return out


def check_dataset_transform(
    dataset: Any,
    *,
    num_classes: int,
    ignore_index: int | None,
    flip_pairs: Any = None,
    samples: int = 8,
    seeds: int = 4,
    subpixel: bool | None = None,
    log: Callable[[str], None] | None = None,
) -> CheckReport:
    """Run the properties on ``dataset``'s own transform over its own samples; raise the first violation.

    ``subpixel``: None decides from the transform (strict and sub-pixel passes only if it keeps colours up to a
    per-channel affine map); False never; True demands it (an error if the transform jitters colours).
    """
    holder = unwrap(dataset)
    name = transform_attribute(holder)
    space = LabelSpace.declare(num_classes, ignore_index, None, None, flip_pairs)
    allowed = set(range(num_classes)) | ({ignore_index} if ignore_index is not None else set())
    try:
        length = len(holder)
    except TypeError as exc:
        raise CannotAdapt(f"{type(holder).__name__} has no len(); perfsuite check reads map-style Datasets") from exc
    indices = spread(length, samples)
    if not indices:
        raise PerfsuiteError(f"{type(holder).__name__} is empty: the training Dataset has no samples to check")
    recorded: list[tuple[int, Interface]] = []
    for i in indices:
        interface = record_call(holder, name, i)
        labels = set(np.unique(mask_hw(interface.mask)).tolist())
        if not labels <= allowed:
            raise PerfsuiteError(
                f"the mask of {type(holder).__name__}[{i}] holds label(s) {sorted(labels - allowed)}, neither a class "
                f"(0..{num_classes - 1}) nor the ignore index ({ignore_index}); pass the --num-classes and "
                "--ignore-index your data uses"
            )
        recorded.append((i, interface))
    transform = getattr(holder, name)
    report = CheckReport(type(holder).__name__, name, recorded[0][1].describe(), [i for i, _ in recorded], seeds)
    groups: dict[tuple[int, ...], list[tuple[int, Interface]]] = {}
    for i, interface in recorded:  # samples of one mask size are checked as a batch: sub-pixel fits pool them
        groups.setdefault(np.asarray(mask_hw(interface.mask)).shape, []).append((i, interface))
    adapters = [
        ([i for i, _ in group], SampleAdapter(transform, [itf for _, itf in group], space.flip_map))
        for group in groups.values()
    ]

    def run(mode: str, declared: Declared) -> None:
        for indices_, adapter in adapters:
            masks = adapter.masks()
            for seed in range(seeds):
                try:
                    check_example(adapter, masks, seed, declared)
                except PropertyViolation as err:
                    raise _where(indices_, seed, err, mode) from None
        report.passes.append(mode)
        if log is not None:
            log(f"passed: {mode}")

    common: dict[str, Any] = dict(ignore_index=ignore_index, same_size=False, flip_map=space.flip_map)
    run("labels, flip pairs and alignment by colour consistency", Declared(num_classes, photometric=True, **common))
    share = min(x for _, a in adapters for x in a.exactness)
    keeps_colours = share >= EXACT_SHARE
    if subpixel is True and not keeps_colours:
        raise PerfsuiteError(
            f"--subpixel: the transform changes colours (only {share:.0%} of region interiors kept their painted "
            "colour in some call): the strict and sub-pixel passes need a transform without colour jitter, blur "
            "or noise; leave --subpixel out, or point the check at a geometry-only transform"
        )
    if keeps_colours and subpixel is not False:
        run("alignment, strict and sub-pixel", Declared(num_classes, photometric=False, subpixel=True, **common))
    elif not keeps_colours:
        report.notes.append(
            f"the transform changes colours (jitter, blur or noise: {share:.0%} of region interiors kept their "
            "painted colour in the worst call), so alignment was checked by consistency only: the strict and "
            "sub-pixel passes need a geometry-only transform"
        )
    return report


def check_script(
    script: Script,
    *,
    samples: int = 8,
    seeds: int = 4,
    subpixel: bool | None = None,
    log: Callable[[str], None] | None = None,
) -> CheckReport:
    """:func:`check_dataset_transform` on the training Dataset of ``script`` (its ``num_classes``, ``flip_pairs``
    and ``ignore_index``; the last defaults to the loss module's, as ``perfsuite exec``'s does)."""
    if script.num_classes is None:
        raise JobError(
            f"script {script.label!r}: the property checks need the class count; pass --num-classes N (or "
            "Script(num_classes=N), or num_classes in [tool.perfsuite.labels])"
        )
    found = find_training_loader(script)
    if log is not None:
        log(f"training loader: {found.describe()}")
    ignore = script.ignore_index if script.ignore_index is not None else found.ignore_index
    report = check_dataset_transform(
        found.dataset,
        num_classes=script.num_classes,
        ignore_index=ignore,
        flip_pairs=script.flip_pairs,
        samples=samples,
        seeds=seeds,
        subpixel=subpixel,
        log=log,
    )
    report.notes.insert(
        0,
        f"training loader {found.describe()}; ignore index {ignore}"
        + (" (the loss module's)" if script.ignore_index is None and ignore is not None else ""),
    )
    return report
