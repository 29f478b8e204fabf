"""label_violations: are the targets that reach the model still the labels the data holds?

Seed 000's GPUAugmentation resampled masks bilinearly as a fourth image
channel, truncated them with ``.long()`` and clamped them to [0, 18]: the
ignore index became class 18 and boundaries grew labels no annotator drew.
Its GPUAugmentationAdvanced then ran MixUp and CutMix on images alone, so
mixed pixels were trained against the other sample's mask. Neither shows in
a loss curve; both are exact to count. In each observed step this probe
looks at the batch as the loader gave it and at the target the loss gets:

* out of set: target values outside the class set and the ignore index
  (for a class-label workload: labels outside ``0..num_classes-1``);
* invented (masks): pixels whose label the sample's input mask did not hold
  (the batch's masks, when a batch mix may paste labels across samples),
  other than the ignore/fill label that geometry brings in from outside;
* unpaired (masks, when the pipeline has a batch mix): the pipeline's batch
  mix is run again, with the RNG state forked, on images painted from this
  batch's masks (each label one colour, see :mod:`perfsuite.augment.checks`);
  pixels where the image shows another label than the mask, away from
  region boundaries, are image/mask pairs the mix broke;
* property (masks, GPU augmentation): the pipeline's augmentation goes through
  :func:`perfsuite.augment.checks.check_example` on this batch's masks; each
  failing step counts one, with the checker's message. A job's declared
  ``flip_pairs`` (left/right labels) go with it, so a flip that swaps them
  passes and a flip that forgets the swap fails.

``label_violations`` is their sum; ``detail`` keeps each part, the first
example and the property message. The checks run unobserved (every probe's
modes disabled), so the probe's own reads and ops are not counted as the step's.
Keypoint and image-only targets have no labels: unavailable.

For a user's job (perfsuite.Job) the probe sees what the step passes to the
loss through the one documented hook, ``Job(criterion=...)``: a forward
pre-hook on that loss module, in observed steps only, checks its target
against ``num_classes``/``ignore_index`` (out of set), and, for masks with a
declared ``gpu_transform``, that transform's properties on those masks.
Without a criterion or num_classes, ``label_violations`` is unavailable with
that reason; a step that never calls the criterion is reported unchecked,
never "0 violations".
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

from perfsuite.core.results import Metric
from perfsuite.probes.base import Probe, RunContext, WindowTimings, unobserved


class LabelProbe(Probe):
    """Checks the targets that reach the loss against the labels the loader produced."""

    name = "labels"

    def __init__(self) -> None:
        self._ctx: RunContext | None = None
        self._observed = 0
        self.counts = {"out_of_set": 0, "invented": 0, "unpaired": 0, "property": 0}
        self.examples: list[str] = []
        self.skipped: list[str] = []
        self.unchecked: list[str] = []

    def setup(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._observed = 0
        self.counts = dict.fromkeys(self.counts, 0)
        self.examples, self.skipped, self.unchecked = [], [], []

    def _kind(self) -> str:
        assert self._ctx is not None, "setup() first"
        return self._ctx.workload.target_kind

    def _user_job(self) -> Any:
        """The user's job when this run is one (not a reference workload's pipeline), else None."""
        job = self._ctx.job if self._ctx is not None else None
        return job if job is not None and not job.reference else None

    def _unavailable_for_job(self) -> str | None:
        job = self._user_job()
        if job is None:
            return None
        j = job.job
        if self._ctx is not None and "script" in self._ctx.shared:  # perfsuite exec / perfsuite.Script: its terms
            if j.criterion is None:
                return (
                    f"no loss module was found in {j.name!r}, so the targets that reach its loss cannot be seen; "
                    "compute the loss with an nn.Module such as nn.CrossEntropyLoss, or name one of several with "
                    "--criterion (perfsuite.Script(criterion=...))"
                )
            if j.num_classes is None:
                return (
                    "no class count was given, so the targets have no class set to be checked against; pass "
                    "--num-classes N (perfsuite.Script(num_classes=N))"
                )
            return None
        if j.criterion is None:
            return (
                f"job {j.name!r} has no loss module perfsuite can hook, so it cannot see the targets that reach "
                "its loss; pass Job(criterion=your_loss_module, num_classes=N, ignore_index=...) and call that "
                "criterion in your step (a script under perfsuite exec: compute the loss with an nn.Module such "
                "as nn.CrossEntropyLoss, or name one of several with --criterion)"
            )
        if j.num_classes is None:
            return (
                f"job {j.name!r} declares no num_classes, so its targets have no class set to be checked "
                "against; pass Job(num_classes=N, ignore_index=...) (perfsuite exec: --num-classes N)"
            )
        return None

    @contextlib.contextmanager
    def _observe_job(self, job: Any) -> Iterator[None]:
        """A user's job: check the target its step passes to the declared criterion (a forward pre-hook)."""
        step = self._observed
        seen = []

        def hook(module: Any, args: Any, kwargs: Any) -> None:
            import torch

            target = args[1] if len(args) > 1 else kwargs.get("target")
            seen.append(True)
            with unobserved(), torch.no_grad():
                try:
                    if not isinstance(target, torch.Tensor):
                        raise TypeError(
                            f"the criterion's second argument is a {type(target).__name__}, not a target tensor"
                        )
                    self._check(None, target, step)
                except Exception as exc:  # noqa: BLE001 - a probe reports, it never breaks the run
                    self.unchecked.append(f"targets not checked at step {step}: {type(exc).__name__}: {exc}")

        handle = job.job.criterion.register_forward_pre_hook(hook, with_kwargs=True)
        try:
            yield
        finally:
            handle.remove()
            if not seen:
                self.unchecked.append(
                    f"step {step} never called the declared criterion "
                    f"{type(job.job.criterion).__name__}: its targets were not checked"
                )
            self._observed += 1

    @contextlib.contextmanager
    def observe(self) -> Iterator[None]:
        if self._ctx is None or self._kind() not in ("mask", "label"):
            yield
            return
        job = self._user_job()
        if job is not None:
            if self._unavailable_for_job() is not None:
                yield
            else:
                with self._observe_job(job):
                    yield
            return
        pipeline = self._ctx.pipeline
        original = pipeline.to_device
        step = self._observed

        @functools.wraps(original)
        def checked(batch: Any) -> Any:
            x, y = original(batch)
            import torch

            with unobserved(), torch.no_grad():
                try:
                    self._check(batch, y, step)
                except Exception as exc:  # noqa: BLE001 - a probe reports, it never breaks the run
                    self.unchecked.append(f"targets not checked at step {step}: {type(exc).__name__}: {exc}")
            return x, y

        shadowed = vars(pipeline).get("to_device")  # a fault may have replaced it already
        pipeline.to_device = checked  # instance attribute: shadows the method for this step only
        try:
            yield
        finally:
            if shadowed is None:
                del pipeline.to_device
            else:
                pipeline.to_device = shadowed
            self._observed += 1

    # -- the checks -----------------------------------------------------------------------
    def _note(self, text: str) -> None:
        if len(self.examples) < 3:
            self.examples.append(text)

    def _check(self, batch: Any, y: Any, step: int) -> None:
        import torch

        assert self._ctx is not None
        wl = self._ctx.workload
        num_classes = int(wl.num_classes or 0)
        ignore = wl.ignore_index
        target = y.detach()
        valid = torch.arange(num_classes, device=target.device)
        if ignore is not None:
            valid = torch.cat([valid, torch.tensor([ignore], device=target.device)])
        bad = ~torch.isin(target.long(), valid)
        n_bad = int(bad.sum())
        if n_bad:
            self.counts["out_of_set"] += n_bad
            values = sorted(torch.unique(target[bad]).tolist())[:5]
            allowed = f"0..{num_classes - 1}" + (f" or ignore {ignore}" if ignore is not None else "")
            self._note(f"step {step}: {n_bad} target value(s) {values} outside {allowed}")
        if self._kind() != "mask":
            return
        if batch is None:  # a user's job: the target reaching its loss, no raw batch to compare with
            job = self._user_job()
            if job is not None and job.job.gpu_transform is not None:
                fill = ignore if ignore is not None else 255
                masks = target.long().clamp(0, 255).to("cpu", torch.uint8).numpy()
                self._check_property(
                    job.job.gpu_transform,
                    masks,
                    step,
                    num_classes=num_classes,
                    ignore=fill,
                    fill=fill,
                    flip_pairs=tuple(getattr(wl, "flip_pairs", None) or ()),
                )
            return
        self._check_masks(batch[1], target, step)

    def _check_masks(self, raw: Any, target: Any, step: int) -> None:
        import torch

        assert self._ctx is not None
        pipeline = self._ctx.pipeline
        wl = self._ctx.workload
        fill = wl.fill
        extra = {v for v in (wl.ignore_index, fill) if v is not None}
        raw = raw.to(target.device).long()
        mixes = pipeline.batch_mix is not None
        batch_labels = set(torch.unique(raw).tolist()) | extra
        for i in range(target.shape[0]):
            allowed = batch_labels if mixes else set(torch.unique(raw[i]).tolist()) | extra
            invented = ~torch.isin(target[i].long(), torch.tensor(sorted(allowed), device=target.device))
            n = int(invented.sum())
            if n:
                self.counts["invented"] += n
                labels = sorted(torch.unique(target[i][invented]).tolist())[:5]
                self._note(
                    f"step {step}, sample {i}: {n} pixel(s) labelled {labels}, which its input "
                    f"{'batch' if mixes else 'mask'} did not hold"
                )
        masks = raw.to("cpu", torch.uint8).numpy()
        if mixes:
            self._check_pairing(pipeline.batch_mix, masks, step)
        if pipeline.gpu_augment is not None:
            self._check_property(
                pipeline.gpu_augment,
                masks,
                step,
                num_classes=int(wl.num_classes or 0),
                ignore=wl.ignore_index if wl.ignore_index is not None else fill,
                fill=fill,
                flip_pairs=wl.flip_pairs,
            )

    def _check_pairing(self, mix: Any, masks: Any, step: int) -> None:
        """Run the batch mix on images painted from the masks; count pixels whose colour is not their label."""
        import numpy as np

        from perfsuite.augment.checks import STRICT_TOL, TorchBatched, decode, encode, palette_for, uniform
        from perfsuite.errors import AugmentationError

        assert self._ctx is not None
        try:
            palette = palette_for(masks)
        except AugmentationError as exc:
            self.skipped.append(f"pairing not checked at step {step}: {exc}")
            return
        out = TorchBatched(mix, device=self._ctx.device)(encode(masks, palette), masks, seed=step)
        shown, dist = decode(out.images, palette)
        skip = [v for v in (self._ctx.workload.ignore_index,) if v is not None]
        unpaired = 0
        for i in range(out.masks.shape[0]):
            keep = uniform(out.masks[i], 1) & ~np.isin(out.masks[i], skip)
            wrong = keep & ((shown[i] != out.masks[i]) | (dist[i] > STRICT_TOL))
            n = int(wrong.sum())
            if n and unpaired == 0:
                y, x = (int(v[0]) for v in np.nonzero(wrong))
                shows = (
                    f"label {shown[i][y, x]}"
                    if dist[i][y, x] <= STRICT_TOL
                    else f"a blend of colours ({dist[i][y, x]:.0f} from label {shown[i][y, x]}'s)"
                )
                self._note(
                    f"step {step}, sample {i}: after the batch mix the mask says label "
                    f"{out.masks[i][y, x]} where the image shows {shows} ({n} pixel(s), first at y={y}, "
                    f"x={x}): images moved without their masks"
                )
            unpaired += n
        self.counts["unpaired"] += unpaired

    def _check_property(
        self,
        augment: Any,
        masks: Any,
        step: int,
        *,
        num_classes: int,
        ignore: int,
        fill: int,
        flip_pairs: tuple[tuple[int, int], ...] = (),
    ) -> None:
        """The augmentation's properties on this batch's masks; ``flip_pairs`` are the WORKLOAD's (what its labels
        mean), never the augmentation's own, so a flip that forgets the swap is caught."""
        from perfsuite.augment.checks import Declared, PropertyViolation, TorchBatched, check_example
        from perfsuite.augment.labels import LabelSpace
        from perfsuite.errors import AugmentationError

        assert self._ctx is not None
        flip_map = LabelSpace.declare(num_classes, ignore, fill, "int64", flip_pairs or None).flip_map
        declared = Declared(
            num_classes=num_classes, ignore_index=ignore, fill=fill, photometric=True, flip_map=flip_map
        )
        try:
            check_example(TorchBatched(augment, device=self._ctx.device), masks, step, declared)
        except PropertyViolation as exc:
            self.counts["property"] += 1
            self._note(f"step {step}: property check failed: {exc}")
        except AugmentationError as exc:  # e.g. more labels in one batch than the checker's palette
            self.skipped.append(f"property not checked at step {step}: {exc}")

    def metrics(self, timings: WindowTimings) -> list[Metric]:
        kind = self._kind() if self._ctx is not None else "none"
        if kind not in ("mask", "label"):
            return [
                Metric.unavailable(
                    "label_violations", f"target kind {kind!r} has no class labels to check", "violations"
                )
            ]
        why = self._unavailable_for_job()
        if why is not None:
            return [Metric.unavailable("label_violations", why, "violations")]
        if self._observed == 0:
            return [
                Metric.unavailable(
                    "label_violations",
                    "observe_steps=0: no step was observed, so targets were not checked",
                    "violations",
                )
            ]
        detail: dict[str, Any] = {**self.counts, "observed_steps": self._observed, "examples": list(self.examples)}
        if self.skipped:
            detail["skipped"] = list(self.skipped)
        job = self._user_job()
        if job is not None:
            detail["checked"] = (
                f"targets passed to {type(job.job.criterion).__name__} against classes "
                f"0..{job.job.num_classes - 1}"
                + (f" and ignore_index {job.job.ignore_index}" if job.job.ignore_index is not None else "")
            )
        if self.unchecked:
            detail["unchecked"] = list(self.unchecked)
            if len(self.unchecked) >= self._observed and not any(self.counts.values()):
                return [Metric.unavailable("label_violations", self.unchecked[0], "violations")]
        return [Metric("label_violations", sum(self.counts.values()), "violations", detail=detail)]
