"""What one rank of a DDP job records for the job-wide figures: when it reached each collective, what it sampled.

Run on every rank by perfsuite.harness.ranks.main (never in a one-process run).
Three records, each passive in the measured window:

* **Phases of each step** (for the straggler). A rank that is late makes the
  others wait at the step's next collective: the buffer broadcast at the
  start of DDP's forward (when the model has buffers), then the first
  gradient bucket's all-reduce. The probe timestamps, on this rank's own
  clock, DDP's forward entry (a forward pre-hook on the wrapper), the inner
  module's forward start (after the broadcast), the first gradient bucket
  reaching the all-reduce, the last bucket reaching it and its all-reduce
  completing (a DDP communication hook that is torch's own ``allreduce_hook``
  plus timestamps). With the runner's step start and fetch time this splits each
  step into *busy* phases (loader, host preparation, forward and backward up
  to the first bucket, after the backward: the optimizer step and logging)
  and *waits* (inside collectives). Only durations on one clock are kept, so
  ranks on different hosts compare as well as ranks on one.
* **The sampled indices of each epoch**: the loader's batch sampler is
  wrapped in a recorder that passes every batch of indices through unchanged
  and keeps a digest and a count per epoch (an epoch that repeats an earlier
  one's order means ``set_epoch`` was not called).
* **Unused parameters** (observed steps only): a post-accumulate-grad hook on
  each parameter says which ones got a gradient; ``find_unused_parameters=True``
  with none unused is a graph walk after every forward for nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from perfsuite.core.results import Metric
from perfsuite.probes.base import Probe, RunContext, WindowTimings

# The busy phases of a step, in the order a step runs them; "after backward" is the previous step's tail.
PHASES = ("loader", "host prep", "forward+backward", "after backward")
PHASE_KEYS = {p: "phase_" + p.replace(" ", "_").replace("+", "_") + "_ms" for p in PHASES}


def find_ddp(model: Any) -> Any:
    """The DistributedDataParallel module of a job, or None."""
    from torch.nn.parallel import DistributedDataParallel

    return model if isinstance(model, DistributedDataParallel) else None


@dataclass
class EpochRecord:
    """One pass over the sampler: how many samples it drew, a digest of their order, whether it ran out."""

    count: int = 0
    complete: bool = False
    _hash: Any = field(default_factory=lambda: hashlib.blake2b(digest_size=16))

    def add(self, item: Any) -> None:
        if isinstance(item, (list, tuple)):
            self.count += len(item)
        else:
            self.count += 1
        self._hash.update(repr(item).encode())
        self._hash.update(b";")

    @property
    def digest(self) -> str:
        return self._hash.hexdigest()


class _RecordingSampler:
    """The loader's (batch) sampler, passed through unchanged, each pass recorded."""

    def __init__(self, inner: Any, epochs: list[EpochRecord]) -> None:
        self._inner = inner
        self._epochs = epochs

    def __iter__(self) -> Iterator[Any]:
        record = EpochRecord()
        self._epochs.append(record)
        for item in self._inner:
            record.add(item)
            yield item
        record.complete = True

    def __len__(self) -> int:
        return len(self._inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def install_recorder(loader: Any, epochs: list[EpochRecord]) -> tuple[str | None, Any]:
    """Wrap ``loader``'s index sampler in a recorder; (why it could not, or None; how to undo it)."""
    from torch.utils.data import DataLoader, IterableDataset

    if not isinstance(loader, DataLoader):
        return f"the loader is a {type(loader).__name__}, not a torch DataLoader: its sampled indices are unseen", None
    if isinstance(loader.dataset, IterableDataset):
        return "the loader reads an IterableDataset: it has no sampler, each rank's shard is the dataset's own", None
    attr = "batch_sampler" if loader.batch_sampler is not None else "sampler"
    inner = getattr(loader, attr)
    # DataLoader refuses to re-set its sampler attributes after __init__; the recorder yields the same items.
    object.__setattr__(loader, attr, _RecordingSampler(inner, epochs))

    def undo() -> None:
        object.__setattr__(loader, attr, inner)

    return None, undo


def shuffles(loader: Any) -> str | None:
    """None if the loader's sampler draws a new order per epoch when asked; else why the same order is by design."""
    from torch.utils.data import SequentialSampler
    from torch.utils.data.distributed import DistributedSampler

    sampler = getattr(loader, "sampler", None)
    if isinstance(sampler, SequentialSampler):
        return "the loader does not shuffle (SequentialSampler): the same order every epoch is by design"
    if isinstance(sampler, DistributedSampler) and not sampler.shuffle:
        return "the DistributedSampler has shuffle=False: the same order every epoch is by design"
    return None


class RankProbe(Probe):
    """Per-step phases around DDP's collectives, per-epoch sampled orders, unused parameters (module docstring)."""

    name = "ranks"

    def __init__(self) -> None:
        self.epochs: list[EpochRecord] = []
        self.phases: dict[str, list[float]] = {}
        self.sync_forward: bool | None = None
        self.straggler_reason: str | None = None
        self.sampler_reason: str | None = None
        self.order_reason: str | None = None
        self.dataset_len: int | None = None
        self.workers = 0
        self._ddp: Any = None
        self._handles: list[Any] = []
        self._undo: Any = None
        self._events: dict[str, list[float]] = {
            "fwd_enter": [],
            "fwd_inner": [],
            "bucket_first": [],
            "bucket_last": [],
            "done": [],
        }
        self._new_iteration = True
        self._unused: list[int] = []
        self._find_unused = False
        # Optional: a shared counter array [forwards, gradient all-reduces] the supervising process can read while
        # this rank hangs (perfsuite.harness.ranks.main maps it to a file), to tell who the others wait for.
        self.progress: Any = None

    # -- setup: hooks that only timestamp, and the sampler recorder ------------------------------------------

    def setup(self, ctx: RunContext) -> None:
        import torch

        job = ctx.job
        loader = job.loader if job is not None else None
        self.workers = int(getattr(loader, "num_workers", 0) or 0)
        try:
            self.dataset_len = len(loader.dataset)  # type: ignore[union-attr]
        except (TypeError, AttributeError):
            self.dataset_len = None
        self.sampler_reason, self._undo = install_recorder(loader, self.epochs)
        self.order_reason = self.sampler_reason or shuffles(loader)
        ddp = find_ddp(job.model if job is not None else None)
        if ddp is None:
            self.straggler_reason = (
                "the job's model is not a DistributedDataParallel module, so its gradient all-reduce is not seen"
            )
            return
        self._ddp = ddp
        self._find_unused = bool(ddp.find_unused_parameters)
        self.sync_forward = bool(ddp.broadcast_buffers) and any(True for _ in ddp.module.buffers())
        try:  # a lambda: DDP refuses a hook whose bucket annotation is not dist.GradBucket (ours are strings)
            ddp.register_comm_hook(ddp.process_group, lambda group, bucket: self._comm_hook(group, bucket))
        except RuntimeError as exc:  # the job registered its own hook: perfsuite does not replace it
            self.straggler_reason = f"the job's DDP model already has a communication hook ({exc})"
            return

        def enter(module: Any, args: Any) -> None:
            if torch.is_grad_enabled():
                self._events["fwd_enter"].append(time.perf_counter())
                if self.progress is not None:
                    self.progress[0] += 1

        def inner(module: Any, args: Any) -> None:
            if torch.is_grad_enabled():
                self._events["fwd_inner"].append(time.perf_counter())

        self._handles = [ddp.register_forward_pre_hook(enter), ddp.module.register_forward_pre_hook(inner)]

    def _comm_hook(self, process_group: Any, bucket: Any) -> Any:
        """torch's default all-reduce (``default_hooks.allreduce_hook``), timestamped: the first and last bucket's
        arrival, and the last bucket's completion."""
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        now = time.perf_counter()
        if self._new_iteration:
            self._events["bucket_first"].append(now)
            self._new_iteration = False
            if self.progress is not None:
                self.progress[1] += 1
        future = allreduce_hook(process_group, bucket)
        if not bucket.is_last():
            return future
        self._events["bucket_last"].append(now)
        self._new_iteration = True
        done = self._events["done"]

        def completed(fut: Any) -> Any:
            done.append(time.perf_counter())
            return fut.value()

        return future.then(completed)

    # -- observed steps: which parameters got a gradient ------------------------------------------------------

    @contextlib.contextmanager
    def _watch_grads(self) -> Iterator[None]:
        params = [p for p in self._ddp.module.parameters() if p.requires_grad]
        seen: set[int] = set()
        handles = [p.register_post_accumulate_grad_hook(lambda t: seen.add(id(t))) for p in params]
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()
        self._unused.append(sum(1 for p in params if id(p) not in seen))

    def observe(self) -> contextlib.AbstractContextManager[Any]:
        return self._watch_grads() if self._ddp is not None else contextlib.nullcontext()

    def finish(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        if self._undo is not None:
            self._undo()
            self._undo = None

    # -- after the run ----------------------------------------------------------------------------------------

    def metrics(self, timings: WindowTimings) -> list[Metric]:
        self.phases = {}
        if self.straggler_reason is None:
            self.phases, why = step_phases(timings, self._events, bool(self.sync_forward))
            self.straggler_reason = why
        return [self._orders(), self._unused_search()]

    def _orders(self) -> Metric:
        if self.order_reason:
            return Metric.unavailable("repeated_epoch_orders", self.order_reason, "epochs")
        done = [e for e in self.epochs if e.complete]
        if len(done) < 2:
            return Metric.unavailable(
                "repeated_epoch_orders",
                f"{len(done)} complete epoch(s) drawn in the run: two are needed to compare their orders; "
                "run more steps or use a smaller dataset",
                "epochs",
            )
        digests = [e.digest for e in done]
        repeats = sum(1 for i, d in enumerate(digests) if d in digests[:i])
        return Metric(
            "repeated_epoch_orders",
            repeats,
            "epochs",
            detail={"epochs": len(done), "distinct_orders": len(set(digests)), "samples_per_epoch": done[0].count},
        )

    def _unused_search(self) -> Metric:
        if self._ddp is None:
            return Metric.unavailable("ddp_unused_search", self.straggler_reason or "no DDP model")
        if not self._unused:
            return Metric.unavailable(
                "ddp_unused_search", "no observed step: which parameters get gradients is seen there only"
            )
        needless = self._find_unused and max(self._unused) == 0
        return Metric(
            "ddp_unused_search",
            needless,
            "",
            detail={"find_unused_parameters": self._find_unused, "unused_per_observed_step": list(self._unused)},
        )

    def epoch_samples(self) -> int | None:
        """Samples this rank drew in its first complete epoch (None before one completed)."""
        done = [e for e in self.epochs if e.complete]
        return done[0].count if done else None


def step_phases(
    timings: WindowTimings, events: dict[str, list[float]], sync_forward: bool
) -> tuple[dict[str, list[float]], str | None]:
    """Per measured step: each busy phase (ms) and the waits at its collectives, from one rank's timestamps.

    Returns (series by key, None) or ({}, why not). The window must hold exactly one DDP forward and one
    gradient all-reduce per step (a step that accumulates gradients over several batches does not).
    """
    starts = timings.step_start_s
    n = len(starts)
    if n == 0 or len(timings.fetch_s) != n or len(timings.host_step_s) != n:
        return {}, "the runner recorded no per-step start times in the window"
    ends = [s + h for s, h in zip(starts, timings.host_step_s)]
    per_step: dict[str, list[list[float]]] = {k: [[] for _ in range(n)] for k in events}
    for key, times in events.items():
        i = 0
        for t in times:
            while i < n and t > ends[i]:
                i += 1
            if i == n:
                break
            if t >= starts[i]:
                per_step[key][i].append(t)
    counts = {k: sorted({len(v) for v in steps}) for k, steps in per_step.items()}
    if any(c != [1] for c in counts.values()):
        return {}, (
            "each measured step must run one DDP forward and one gradient all-reduce; seen per step: "
            + ", ".join(f"{k} {'/'.join(map(str, c))}" for k, c in counts.items())
            + " (gradient accumulation with no_sync, or a step without backward)"
        )
    one = {k: [steps[0] for steps in v] for k, v in per_step.items()}
    out: dict[str, list[float]] = {key: [] for key in PHASE_KEYS.values()}
    out.update({"first_bucket_ms": [], "wait_forward_ms": [], "wait_allreduce_ms": []})
    for i in range(n):
        fetched = starts[i] + timings.fetch_s[i]
        out[PHASE_KEYS["loader"]].append(timings.fetch_s[i] * 1e3)
        out[PHASE_KEYS["host prep"]].append((one["fwd_enter"][i] - fetched) * 1e3)
        out["wait_forward_ms"].append((one["fwd_inner"][i] - one["fwd_enter"][i]) * 1e3)
        # Without a buffer broadcast the forward entry is no collective: the busy run continues to the buckets.
        compute_from = one["fwd_inner"][i] if sync_forward else one["fwd_enter"][i]
        # Buckets are all-reduced asynchronously while the backward goes on; the backward waits for them only
        # after its last bucket, so the busy run ends at the last bucket's arrival (the first's, with one bucket).
        out[PHASE_KEYS["forward+backward"]].append((one["bucket_last"][i] - compute_from) * 1e3)
        out["first_bucket_ms"].append((one["bucket_first"][i] - compute_from) * 1e3)
        out["wait_allreduce_ms"].append((one["done"][i] - one["bucket_last"][i]) * 1e3)
        # The tail of the previous step delays this one; the window's first step has none measured.
        tail = (ends[i - 1] - one["done"][i - 1]) * 1e3 if i > 0 else 0.0
        out[PHASE_KEYS["after backward"]].append(tail)
    return {k: [max(0.0, v) for v in vs] for k, vs in out.items()}, None
