"""The property checks on an unchanged training script's own transform (``perfsuite check``).

1. The script runs until it iterates its training DataLoader (:mod:`perfsuite.harness.script.find_loader`).
2. For a few samples spread over its Dataset, ``dataset[i]`` runs traced: the user's own files are read by
   the user's own code, and the outermost call that takes the image and the mask together and returns them
   together is the transform, whatever its name or place (:mod:`perfsuite.augment.paired_call`); the call it
   got is kept (:func:`perfsuite.augment.sample_adapter.interface_of`).
3. Each recorded sample's real mask goes through the real transform under several seeds, its image
   painted from the mask (:class:`perfsuite.augment.sample_adapter.SampleAdapter`), and
   :func:`perfsuite.augment.checks.check_example` runs the label, flip-pair and alignment properties:
   by colour consistency (the transform may jitter colours), and, when every call kept the painted
   colours up to a per-channel affine map (a Normalize), strictly and at sub-pixel precision too.

No Hypothesis search: the inputs are the user's samples, not drawn ones, so a failure is reported at
once, naming the Dataset index and the seed that reproduce it; a flip-pair failure is replayed to name
the line of the user's transform that did it (:mod:`perfsuite.augment.blame`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfsuite.augment.blame import CAUSES, fix_text, locate
from perfsuite.augment.checks import Declared, check_example
from perfsuite.augment.labels import LabelSpace
from perfsuite.augment.paired_call import PairedCall, Seen, choose, others, trace_item
from perfsuite.augment.sample_adapter import CannotAdapt, Interface, SampleAdapter, mask_hw
from perfsuite.errors import JobError, PerfsuiteError, PropertyViolation, RunTimeout
from perfsuite.harness.script.find_loader import find_training_loader
from perfsuite.harness.watchdog import DEFAULT_FLOOR_S, Watchdog, WatchdogConfig
from perfsuite.jobs.script import Script

EXACT_SHARE = 0.97  # every call must keep this share of region interiors at the painted colours for the strict pass


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
            f"dataset      {self.dataset}",
            f"transform    {self.transform}",
            f"interface    {self.interface}",
            f"samples      dataset[{', '.join(map(str, self.indices))}] x {self.seeds} seed(s)",
            *(f"passed       {p}" for p in self.passes),
            *(f"note         {n}" for n in self.notes),
        ]


# The most one ``dataset[i]`` may take before the check stops, as perfsuite exec's phase deadline floor: a read
# that blocks (a dead network mount) ends the check in one line instead of hanging it until a CI limit.
DATASET_DEADLINE_S = DEFAULT_FLOOR_S


def read_item(dataset: Any, index: int, deadline_s: float = DATASET_DEADLINE_S) -> Seen:
    """:func:`trace_item` of ``dataset[index]`` within ``deadline_s``; a PerfsuiteError naming where it blocked."""
    import io

    dog = Watchdog(WatchdogConfig(), stream=io.StringIO())  # the stacks are not shown: the one line says where
    name = f"{type(dataset).__name__}[{index}]"
    try:
        with dog.phase(name, deadline_s=deadline_s):
            return trace_item(dataset, index)
    except RunTimeout as exc:
        at = f" (at {exc.site})" if getattr(exc, "site", "") else ""
        raise PerfsuiteError(
            f"{name} did not return within {deadline_s:g} s{at}: the Dataset's read blocks (a network mount, a "
            "lock, a worker pool?); make it return, or give --deadline more seconds if it is only slow"
        ) from None


def find_transform(
    dataset: Any,
    indices: list[int],
    wanted: str | None = None,
    log: Callable[[str], None] | None = None,
    deadline_s: float = DATASET_DEADLINE_S,
) -> tuple[PairedCall, list[tuple[int, Interface]], list[str]]:
    """The transform ``dataset[i]`` runs (:func:`perfsuite.augment.paired_call.choose`), its recorded call for each
    index, and the other paired calls at its depth (what the choice left out)."""
    first = read_item(dataset, indices[0], deadline_s)
    chosen = choose(first, wanted)
    if log is not None:
        log(f"transform: {chosen.name}, defined at {chosen.defined}")
    recorded = [(indices[0], chosen.interface)]
    for i in indices[1:]:
        if log is not None:
            log(f"recording the call {type(dataset).__name__}[{i}] makes")
        same = [c for c in read_item(dataset, i, deadline_s).paired if c.code is chosen.code]
        if not same:
            raise CannotAdapt(
                f"{type(dataset).__name__}[{i}] did not call {chosen.name} ({chosen.defined}), which "
                f"{type(dataset).__name__}[{indices[0]}] called with the image and mask; name the transform every "
                "sample goes through with --transform NAME"
            )
        recorded.append((i, min(same, key=lambda c: c.depth).interface))
    return chosen, recorded, others(first, chosen)


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
    transform: str | None = None,
    log: Callable[[str], None] | None = None,
    deadline_s: float = DATASET_DEADLINE_S,
) -> CheckReport:
    """Run the properties on ``dataset``'s own transform over its own samples; raise the first violation.

    ``subpixel``: None decides from the transform (strict and sub-pixel passes only if it keeps colours up to a
    per-channel affine map); False never; True demands it (an error if the transform jitters colours).
    """
    space = LabelSpace.declare(num_classes, ignore_index, None, None, flip_pairs)
    allowed = set(range(num_classes)) | ({ignore_index} if ignore_index is not None else set())
    try:
        length = len(dataset)
    except TypeError as exc:
        raise CannotAdapt(f"{type(dataset).__name__} has no len(); perfsuite check reads map-style Datasets") from exc
    indices = spread(length, samples)
    if not indices:
        raise PerfsuiteError(f"{type(dataset).__name__} is empty: the training Dataset has no samples to check")
    if log is not None:
        log(f"finding the transform: tracing {type(dataset).__name__}[{indices[0]}]")
    chosen, recorded, siblings = find_transform(dataset, indices, transform, log, deadline_s)
    for i, interface in recorded:
        labels = set(np.unique(mask_hw(interface.mask)).tolist())
        if not labels <= allowed:
            raise PerfsuiteError(
                f"the mask of {chosen.dataset}[{i}] holds label(s) {sorted(labels - allowed)}, neither a class "
                f"(0..{num_classes - 1}) nor the ignore index ({ignore_index}); pass the --num-classes and "
                "--ignore-index your data uses"
            )
    report = CheckReport(
        chosen.dataset,
        f"{chosen.name}, defined at {chosen.defined}",
        recorded[0][1].describe(),
        [i for i, _ in recorded],
        seeds,
    )
    report.notes.append(
        "the transform is the outermost call in __getitem__ that took the image and the mask together and returned "
        "them together"
        + (f" (--transform {transform})" if transform is not None else "")
        + (f"; also such calls at that depth, not checked: {', '.join(siblings)}" if siblings else "")
    )
    groups: dict[tuple[int, ...], list[tuple[int, Interface]]] = {}
    for i, interface in recorded:  # samples of one mask size are checked as a batch: sub-pixel fits pool them
        groups.setdefault(np.asarray(mask_hw(interface.mask)).shape, []).append((i, interface))
    fn = chosen.fn
    assert fn is not None, "choose() returns only a call it can make again"
    adapters = [
        ([i for i, _ in group], SampleAdapter(fn, [itf for _, itf in group], space.flip_map))
        for group in groups.values()
    ]

    pairs = tuple((a, b) for a, b in space.flip_map if a < b)

    def run(mode: str, declared: Declared) -> None:
        for g, (indices_, adapter) in enumerate(adapters):
            masks = adapter.masks()
            for seed in range(seeds):
                if log is not None:
                    group = f", mask size {g + 1}/{len(adapters)}" if len(adapters) > 1 else ""
                    log(f"{mode}: seed {seed + 1}/{seeds} on {len(indices_)} sample(s){group}")
                try:
                    check_example(adapter, masks, seed, declared)
                except PropertyViolation as err:
                    out = _where(indices_, seed, err, mode)
                    if log is not None and err.sample is not None and err.cause in CAUSES and pairs:
                        log(f"replaying dataset[{indices_[err.sample]}], seed {seed}, to find the line that did it")
                    found = locate(adapter, masks, seed, err.sample, err.cause, pairs)
                    out.where = fix_text(err.cause or err.prop, found, chosen, pairs)
                    raise out from None
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
    transform: str | None = None,
    log: Callable[[str], None] | None = None,
    deadline_s: float = DATASET_DEADLINE_S,
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
        transform=transform,
        log=log,
        deadline_s=deadline_s,
    )
    report.notes.insert(
        0,
        f"training loader {found.describe()}; ignore index {ignore}"
        + (" (the loss module's)" if script.ignore_index is None and ignore is not None else ""),
    )
    return report
