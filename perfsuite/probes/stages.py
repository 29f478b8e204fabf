"""The loader's stages replayed after the window: CPU time per sample of each, on the same indices in every run.

The window's figure (:mod:`perfsuite.probes.loader`) says what the loader's
processes spent; it cannot say on what, because nothing runs inside the workers.
After the window, before any probe instruments, this module runs the loader's
own code again in the training process, one batch at a time, and times each
stage with the thread's CPU clock (``time.thread_time_ns``: user + system of this
thread only, so neither waiting nor other threads count):

* ``__getitem__``: the Dataset's item, read and decode included; when the
  Dataset holds its per-sample transform as an attribute (``transform``,
  ``transforms``, ``augment``, ``target_transform``, ``joint_transform``, the
  torchvision and perfsuite conventions), that callable is timed apart as
  ``transform`` and ``__getitem__`` keeps the rest (reading and decoding);
* ``collate_fn``: the loader's collate on the batch's samples;
* ``pin_memory``: on CUDA with ``pin_memory=True``, pinning the batch.

Every run replays the same indices (a fixed permutation) with the Python,
NumPy and torch generators seeded per batch, on a copy of the Dataset, with one
intra-op thread (as a worker has); the generators' states and the thread count
are restored afterwards, so the observed steps see what they would have seen.
An IterableDataset has no indices: its stream is replayed from its start on a deep
copy, batch after batch (:class:`Draws`), the same samples in every run where the
stream is deterministic given those seeds; its ``__iter__`` is the ``__getitem__`` stage.

Each batch is replayed ``repeats`` times and, for each sample and for the collate,
the fastest of the repeats kept (a short interval is seldom preempted), and beside it a
fixed calibration kernel (a miniature image loader: read, decode and wrap
five small PNG files) is timed the same way: on a shared CPU the cost of the same instructions
moves with what runs beside them (an SMT sibling, the caches), so verdicts
compare per-batch costs in units of the calibration measured at that moment
(:attr:`perfsuite.core.metrics.MetricSpec.scale_by`).

On a host with cores to spare (:func:`perfsuite.core.forked.processes`) and a replay estimated at a second of
CPU or more, the batches are dealt to forked children, one core each, each timing its batches and its own
calibration as above and sending back the timings and the batch's shapes and dtypes; pinning and the device
copy (CUDA only, which a forked child cannot use) are timed here on a batch of the same bytes. At full scale
this cut the replay's longest process to a fifth of its CPU (docs/phases.md).
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import random
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

TRANSFORM_ATTRS = ("transform", "transforms", "augment", "target_transform", "joint_transform")
STAGES = ("__getitem__", "transform", "collate_fn", "pin_memory")
MIN_BATCHES = 5  # the timing rule's fewest samples per side
PARALLEL_MIN_S = 1.0  # the replay's estimated CPU seconds below which forking children would not pay for itself
REPLAY_BATCHES = 16  # batches replayed per run: 8 left a +20% change undecided in 1 pair in 10 (docs/loader.md)


@dataclass
class Replay:
    """Per replayed batch: CPU ms per sample (all stages), the calibration's ms, and each stage's ms per sample."""

    batch_size: int
    per_batch_ms: list[float] = field(default_factory=list)
    cal_ms: list[float] = field(default_factory=list)
    stages: dict[str, list[float]] = field(default_factory=dict)
    code: dict[str, str] = field(default_factory=dict)  # stage -> the user's callable that runs it
    h2d_ms: list[float] = field(default_factory=list)  # CUDA only: wall time of the batch's host->device copy
    repeats: int = 1
    cpu_s: float = 0.0  # the replay's own CPU time, its children's included (what the ledger costs after the window)
    processes: int = 1  # the processes that timed the batches (forked children on a host with cores to spare)
    share_cpu_s: list[float] = field(default_factory=list)  # each child's CPU seconds: the longest bounds the wall
    sampler: str = ""  # where the replay's indices differ from the loader's own sampler, why that is


def _qualname(obj: Any) -> str:
    fn = getattr(obj, "__func__", obj)
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    module = getattr(fn, "__module__", None) or type(fn).__module__
    return f"{module}.{name}" if module and module != "builtins" else str(name)


class _Timed:
    """A callable that adds its thread CPU time to a counter: wraps a transform on the Dataset's copy only."""

    def __init__(self, fn: Callable[..., Any], counter: list[int]) -> None:
        self.fn, self.counter = fn, counter

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.thread_time_ns()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.counter[0] += time.thread_time_ns() - t0


_CAL_FILE: str | None = None
CAL_SAMPLES = 5  # samples the miniature loader reads per timing
CAL_LOOP = 1500  # iterations of its pure-Python bookkeeping


def _cal_file() -> str:
    """A 32x32 grayscale PNG on disk, the miniature loader's data: one file in perfsuite's cache folder, written
    once (atomically) and reused by every process, so no process that dies without its exit handlers (a killed
    rank, a worker) leaves a copy in the temp folder; a temporary file removed at exit where the cache is not
    writable."""
    global _CAL_FILE
    if _CAL_FILE is None or not os.path.exists(_CAL_FILE):
        import io

        import numpy as np
        from PIL import Image

        from perfsuite.core import tmpfiles
        from perfsuite.jobs.workloads.data import default_cache_dir

        buf = io.BytesIO()
        pixels = np.random.default_rng(20).integers(0, 256, (32, 32), dtype=np.uint8)
        Image.fromarray(pixels).save(buf, format="PNG")
        path = default_cache_dir() / "calibration-32x32.png"
        try:
            if not path.is_file() or path.read_bytes() != buf.getvalue():
                tmpfiles.write_bytes_atomic(path, buf.getvalue())
            _CAL_FILE = str(path)
        except OSError:  # a read-only home: a temporary, removed at exit
            import atexit

            fd, name = tempfile.mkstemp(prefix="perfsuite-calibration-", suffix=".png")
            with os.fdopen(fd, "wb") as out:
                out.write(buf.getvalue())
            atexit.register(_remove, name)
            _CAL_FILE = name
    return _CAL_FILE


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _miniature_loader(path: str) -> None:
    """Five samples of what an image Dataset does, then a collate's Python bookkeeping."""
    import numpy as np
    import torch
    from PIL import Image

    for k in range(CAL_SAMPLES):
        with Image.open(path) as img:  # open and read the file: system calls, as a Dataset's read is
            pixels = np.array(img.convert("L"))  # decode (zlib inflate), then a NumPy copy
        image = torch.from_numpy(pixels[None]).float()  # the per-sample torch calls, whose dispatch is CPU
        torch.tensor(k, dtype=torch.int64)
        del image
    counts: dict[int, int] = {}
    for i in range(CAL_LOOP):
        counts[i % 97] = counts.get(i % 97, 0) + i


def calibrate(parts: int = 3) -> int:
    """Thread CPU ns of a fixed miniature image loader (:func:`_miniature_loader`).

    Why this work: the calibration divides out how fast this core runs the loader's kind of work now,
    and a kernel of one kind tracks it poorly. Measured on this project's 2-core VM, a JPEG decode plus
    a sort left run-to-run moves of 6-7% (sd of log) in a calibrated loader, and moved on its own where
    the loader did not; reading, decoding and wrapping small files as a Dataset does (system calls,
    zlib, NumPy, torch's dispatch, the interpreter) left 2.6-4.9% (docs/loader.md, "Which calibration").
    Done ``parts`` times, each timed alone and the fastest kept (x ``parts``), as the replay keeps the
    fastest copy of each sample: short intervals, seldom preempted.
    """
    path = _cal_file()
    best = -1
    for _ in range(parts):
        t0 = time.thread_time_ns()
        _miniature_loader(path)
        spent = time.thread_time_ns() - t0
        best = spent if best < 0 else min(best, spent)
    return best * parts


@contextlib.contextmanager
def _isolated(seed: int | None = None) -> Iterator[Callable[[int], None]]:
    """Save the global generators and torch's thread count; yield a reseeder; restore everything."""
    import numpy as np
    import torch

    py, npy, th, threads = random.getstate(), np.random.get_state(), torch.get_rng_state(), torch.get_num_threads()

    def reseed(k: int) -> None:
        random.seed(k)
        np.random.seed(k % 2**32)
        torch.manual_seed(k)

    try:
        torch.set_num_threads(1)  # what a DataLoader worker runs with
        yield reseed
    finally:
        random.setstate(py)
        np.random.set_state(npy)
        torch.set_rng_state(th)
        torch.set_num_threads(threads)


def _copy(dataset: Any) -> Any:
    """A copy to replay on (the training loader's own Dataset is never touched); why not, where none can be made.

    An IterableDataset gets a deep copy or none: a shallow one would share what the stream reads from (an open
    file, a generator), and iterating it would move the training loader's own stream on."""
    try:
        return copy.deepcopy(dataset)
    except Exception as exc:  # noqa: BLE001 - a Dataset holding a file handle or a lock: time a shallow copy instead
        if is_stream(dataset):
            return CannotCopy(f"{type(exc).__name__}: {exc}; a shallow copy would share the stream it reads")
        try:
            return copy.copy(dataset)
        except Exception as exc:  # noqa: BLE001 - neither copy works: say so, replay nothing
            return CannotCopy(f"{type(exc).__name__}: {exc}")


def is_stream(dataset: Any) -> bool:
    """An IterableDataset: its samples come from iterating it, not by index."""
    from torch.utils.data import IterableDataset

    return isinstance(dataset, IterableDataset)


class Draws:
    """Where a replay's samples come from, the same in every run: a map-style Dataset's fixed permutation of its
    indices (batch ``b``'s ``k``-th sample is the same index in every pass), or an IterableDataset's stream from
    its start, a fresh iterator on the copy each pass (begun again where the stream ends, as an epoch is), drawn
    batch after batch. Its ``get_worker_info()`` is None here, as with ``num_workers=0``: a stream that shards by
    worker yields all of its samples, whose cost per sample is what is counted."""

    def __init__(self, dataset: Any, per_batch: int, seed: int) -> None:
        import numpy as np

        self.per_batch = per_batch
        self.stream = is_stream(dataset)
        self.order = None if self.stream else np.random.default_rng(seed).permutation(len(dataset))
        self._clone: Any = None
        self._it: Iterator[Any] | None = None

    def begin(self, clone: Any) -> None:
        """A pass over ``clone`` begins: a stream from its start."""
        self._clone, self._it = clone, (iter(clone) if self.stream else None)

    def first_batch(self) -> int:
        """The samples of the first batch, a Dataset shorter than a batch counted once each."""
        return self.per_batch if self.order is None else min(self.per_batch, len(self.order))

    def key(self, b: int, k: int) -> int | None:
        """The index of sample ``k`` of batch ``b``; None for a stream (its samples come by :meth:`next`). Worked
        out before a sample's timing or count begins, so neither includes it."""
        if self.order is None:
            return None
        return int(self.order[(b * self.per_batch + k) % len(self.order)])

    def next(self) -> Any:
        """A stream's next sample, begun again from its start where it ends."""
        assert self._it is not None, "begin() a pass first"
        try:
            return next(self._it)
        except StopIteration:
            self._it = iter(self._clone)
        try:
            return next(self._it)
        except StopIteration:
            raise ValueError(f"{type(self._clone).__name__} yielded no sample from a fresh iterator") from None

    def take(self, clone: Any, b: int, k: int) -> Any:
        """Sample ``k`` of batch ``b`` (a stream's next: its batches are drawn in order, once a pass)."""
        key = self.key(b, k)
        return clone[key] if key is not None else self.next()


@dataclass
class CannotCopy:
    """Why a Dataset could not be copied for the replay."""

    why: str


def replay_plan(loader: Any, batch_size: int) -> tuple[Any, Callable[..., Any] | None, int] | str:
    """(dataset, collate_fn, samples per batch), or why the loader cannot be replayed."""
    from torch.utils.data import DataLoader, IterableDataset

    if not isinstance(loader, DataLoader):
        return f"the loader is a {type(loader).__name__}, not a torch DataLoader: its stages cannot be told apart"
    dataset = loader.dataset
    name = type(dataset).__name__
    if not isinstance(dataset, IterableDataset):
        try:
            n = len(dataset)  # type: ignore[arg-type]
        except TypeError:
            return f"stage __getitem__ not replayed: {name} has no len(), so its samples cannot be replayed by index"
        if n == 0:
            return f"{name} is empty"
    per_batch = loader.batch_size if loader.batch_size is not None else (batch_size or 1)
    collate = loader.collate_fn if (loader.batch_size is not None or loader.batch_sampler is not None) else None
    return dataset, collate, int(per_batch)


STREAM_NOTE = (
    "an IterableDataset: its stream replayed from its start on a copy, batch after batch, with get_worker_info() "
    "None (as with num_workers=0), the same samples in every run where the stream is"
)


def item_code(dataset: Any) -> str:
    """The callable that makes one sample: ``Dataset.__getitem__``, or an IterableDataset's ``__iter__``."""
    return f"{_qualname(type(dataset))}.{'__iter__' if is_stream(dataset) else '__getitem__'}"


def _sampler_note(loader: Any) -> str:
    """A sampler of the user's own (it may hold state: an epoch, a position, buckets) is not replayed: say so."""
    from torch.utils.data import BatchSampler, RandomSampler, SequentialSampler

    if is_stream(loader.dataset):
        return STREAM_NOTE

    own = [
        type(s).__name__
        for s in (getattr(loader, "sampler", None), getattr(loader, "batch_sampler", None))
        if s is not None and not isinstance(s, (RandomSampler, SequentialSampler, BatchSampler))
    ]
    if not own:
        return ""
    return (
        f"the loader's {' and '.join(own)} was not replayed (it may hold state: an epoch, a position): the stages "
        "ran on a fixed permutation of the Dataset's indices, in batches of the loader's size, the same in every run"
    )


def replay(
    loader: Any,
    batch_size: int,
    device: Any = None,
    batches: int = REPLAY_BATCHES,
    repeats: int = 3,
    budget_s: float = 2.0,
    seed: int = 0,
) -> Replay | str:
    """Replay the loader's stages on ``batches`` fixed batches of indices; a Replay, or why it could not.

    Stops early once ``budget_s`` of CPU has been spent and at least
    :data:`MIN_BATCHES` batches are timed (a heavy Dataset at full scale).
    """

    plan = replay_plan(loader, batch_size)
    if isinstance(plan, str):
        return plan
    dataset, collate, per_batch = plan
    cuda = device is not None and str(device).startswith("cuda")
    pin = bool(getattr(loader, "pin_memory", False)) and cuda
    clone = _copy(dataset)
    if isinstance(clone, CannotCopy):
        return (
            f"stage __getitem__ not replayed: {type(dataset).__name__} could not be copied ({clone.why}), and the "
            "replay runs on a copy only, never on the training loader's own Dataset"
        )
    transform_ns = [0]
    timed = []
    for attr in TRANSFORM_ATTRS:
        fn = getattr(clone, attr, None)
        if callable(fn) and not isinstance(fn, type):
            try:
                setattr(clone, attr, _Timed(fn, transform_ns))
                timed.append(attr)
            except (AttributeError, TypeError):  # a read-only property: leave it inside __getitem__
                continue
    out = Replay(per_batch, repeats=repeats, sampler=_sampler_note(loader))
    out.code["__getitem__"] = item_code(dataset)
    if timed:
        out.code["transform"] = ", ".join(f"{type(dataset).__qualname__}.{a}" for a in timed)
    if collate is not None:
        out.code["collate_fn"] = _qualname(collate)
    if pin:
        out.code["pin_memory"] = "DataLoader(pin_memory=True)"
    for name in ("__getitem__", *(("transform",) if timed else ()), *(("collate_fn",) if collate else ())):
        out.stages[name] = []
    if pin:
        out.stages["pin_memory"] = []
    draws = Draws(dataset, per_batch, seed)
    started = time.thread_time()
    timer = _BatchTimer(clone, collate, draws, repeats, seed, transform_ns)
    with _isolated() as reseed:
        reseed(seed)  # one untimed pass first: lazy imports, first-touch allocations, cold caches
        draws.begin(clone)
        first = [draws.take(clone, 0, k) for k in range(draws.first_batch())]
        if collate is not None:
            collate(first)
        calibrate(1)
        timer.reseed = reseed
        shares = _shares(batches, time.thread_time() - started, repeats, budget_s)
        from_children = _in_children(timer, shares) if len(shares) > 1 and not draws.stream else None
        if draws.stream:  # a stream's batches come in order: each repeat draws them all again from its start
            for t in timer.stream(batches, pin, budget_s, started):
                _add(out, t, per_batch, collate is not None, pin)
                if cuda:
                    out.h2d_ms.append(_copy_ms(t.batch, device))
        elif from_children is not None:
            timed_batches, out.share_cpu_s = from_children
            out.processes = len(shares)
            out.cpu_s += sum(out.share_cpu_s)
            for t in timed_batches:
                if pin:  # the children cannot pin (CUDA in a forked child): the same bytes, pinned here
                    t.stage_ns["pin_memory"], batch = _pin_ns(t.spec, repeats)
                _add(out, t, per_batch, collate is not None, pin)
                if cuda:
                    out.h2d_ms.append(_copy_ms(batch if pin else _like(t.spec), device))
        else:
            for b in range(batches):
                t = timer.time(b, pin)
                _add(out, t, per_batch, collate is not None, pin)
                if cuda:
                    out.h2d_ms.append(_copy_ms(t.batch, device))
                if time.thread_time() - started > budget_s and b + 1 >= MIN_BATCHES:
                    break
    out.cpu_s += time.thread_time() - started
    return out


@dataclass
class _BatchTimes:
    """One replayed batch's timings: per sample (total ns, of which transform ns), the fastest repeat of each; the
    collate's and the pinning's ns; the calibration's; the batch (in this process) or its tensors' shapes and
    dtypes (from a child)."""

    index: int
    items: list[tuple[int, int]]
    stage_ns: dict[str, int]
    cal_ns: int
    batch: Any = None
    spec: Any = None


class _BatchTimer:
    """Times batch ``b`` of the fixed draws: its samples, collate (and pinning), ``repeats`` times, the fastest of
    each kept; a stream's batches all together, each repeat from its start (:meth:`stream`)."""

    def __init__(
        self, clone: Any, collate: Any, draws: Draws, repeats: int, seed: int, transform_ns: list[int]
    ) -> None:
        self.clone, self.collate, self.draws, self.per_batch = clone, collate, draws, draws.per_batch
        self.repeats, self.seed, self.transform_ns = repeats, seed, transform_ns
        self.reseed: Callable[[int], None] = lambda k: None

    def time(self, b: int, pin: bool) -> _BatchTimes:
        best: _BatchTimes | None = None
        for _ in range(self.repeats):
            best = _faster(best, self._once(b, pin))
        assert best is not None
        return best

    def stream(self, batches: int, pin: bool, budget_s: float, started: float) -> list[_BatchTimes]:
        """A stream's batches, each repeat a pass from its start (its batches cannot be drawn alone); the first
        pass stops at the budget's share once :data:`MIN_BATCHES` are timed, and the later ones draw as many."""
        best: list[_BatchTimes] = []
        for r in range(self.repeats):
            self.draws.begin(self.clone)
            for b in range(batches if r == 0 else len(best)):
                once = self._once(b, pin)
                if r == 0:
                    best.append(once)
                    over = time.thread_time() - started > budget_s / self.repeats
                    if over and b + 1 >= MIN_BATCHES:
                        break
                else:
                    best[b] = _faster(best[b], once)
        return best

    def _once(self, b: int, pin: bool) -> _BatchTimes:
        """Batch ``b`` once: each sample's ns (of which its transform's), the collate's, the pinning's, and the
        calibration beside them."""
        self.reseed(self.seed * 1_000_003 + b)
        samples, items = [], []
        for k in range(self.per_batch):
            key = self.draws.key(b, k)
            self.transform_ns[0] = 0
            t0 = time.thread_time_ns()
            samples.append(self.clone[key] if key is not None else self.draws.next())
            items.append((time.thread_time_ns() - t0, self.transform_ns[0]))
        t1 = time.thread_time_ns()
        batch = self.collate(samples) if self.collate is not None else samples
        t2 = time.thread_time_ns()
        if pin:
            from torch.utils.data._utils.pin_memory import pin_memory as pin_batch

            batch = pin_batch(batch)
        t3 = time.thread_time_ns()
        return _BatchTimes(b, items, {"collate_fn": t2 - t1, "pin_memory": t3 - t2}, calibrate(), batch=batch)

    def share(self, batches: list[int]) -> tuple[list[_BatchTimes], float]:
        """A child's share: its batches timed, each sent back with its tensors' shapes and dtypes, not the batch;
        and the child's CPU seconds."""
        started = time.thread_time()
        out = []
        for b in batches:
            t = self.time(b, pin=False)
            t.spec, t.batch = _spec(t.batch), None
            out.append(t)
        return out, time.thread_time() - started


def _faster(best: _BatchTimes | None, new: _BatchTimes) -> _BatchTimes:
    """Per unit of work (each sample, the collate, the pinning) and for the calibration, the faster of two repeats
    of one batch: a short interval is seldom preempted, and the fastest copy is the one least disturbed by what
    shares the core. The batch is the later one's."""
    if best is None:
        return new
    items = [min(a, b, key=lambda x: x[0]) for a, b in zip(best.items, new.items)]
    stage_ns = {name: min(ns, new.stage_ns[name]) for name, ns in best.stage_ns.items()}
    return _BatchTimes(new.index, items, stage_ns, min(best.cal_ns, new.cal_ns), batch=new.batch)


def _add(out: Replay, t: _BatchTimes, per_batch: int, collated: bool, pin: bool) -> None:
    split = {
        "__getitem__": sum(total - tr for total, tr in t.items),
        "transform": sum(tr for _, tr in t.items),
        "collate_fn": t.stage_ns["collate_fn"] if collated else 0,
        "pin_memory": t.stage_ns["pin_memory"] if pin else 0,
    }
    out.per_batch_ms.append(sum(split.values()) / 1e6 / per_batch)
    out.cal_ms.append(t.cal_ns / 1e6)
    for name in out.stages:
        out.stages[name].append(max(0, split[name]) / 1e6 / per_batch)


def _shares(batches: int, first_s: float, repeats: int, budget_s: float) -> list[list[int]]:
    """The batches each process times: one share (this process, the budget checked as it goes) unless the host has
    processes to spare (:func:`perfsuite.core.forked.processes`) and the replay would take a second of CPU or
    more; then as many batches as the budget holds (at least :data:`MIN_BATCHES`, estimated from the untimed
    pass), dealt round-robin to one child per spare process beyond the training process and the loader count's
    two children."""
    from perfsuite.core import forked

    per_batch_s = max(first_s, 1e-6) * (repeats + 1)  # the samples and collate, and about as much calibration
    needed = min(batches, max(MIN_BATCHES, math.ceil(budget_s / per_batch_s)))
    spare = forked.processes() - 3  # this process, and the loader count's two children beside the replay
    if spare < 2 or needed * per_batch_s < PARALLEL_MIN_S:
        return [list(range(batches))]
    k = min(spare, needed)
    return [list(range(j, needed, k)) for j in range(k)]


def _in_children(timer: _BatchTimer, shares: list[list[int]]) -> tuple[list[_BatchTimes], list[float]] | None:
    """The shares timed in forked children, in batch order, and each child's CPU seconds; None where a child failed
    (then this process times them all)."""
    from perfsuite.core.forked import ChildFailed, Forked

    children: list[Forked[tuple[list[_BatchTimes], float]]] = []
    try:
        children = [Forked(timer.share, share) for share in shares]
        got = [child.result() for child in children]
    except (ChildFailed, OSError):
        return None
    finally:
        for child in children:
            child.cancel()
    timed = sorted((t for batch_times, _ in got for t in batch_times), key=lambda t: t.index)
    return timed, [round(cpu_s, 4) for _, cpu_s in got]


def _spec(batch: Any) -> Any:
    """The batch's structure with each tensor replaced by its (shape, dtype): what pinning and copying it cost."""
    import torch

    if isinstance(batch, torch.Tensor):
        return ("tensor", tuple(batch.shape), str(batch.dtype).removeprefix("torch."))
    if isinstance(batch, dict):
        return {k: _spec(v) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return [_spec(v) for v in batch]
    return None


def _like(spec: Any) -> Any:
    """A batch of zeros with ``spec``'s structure, shapes and dtypes (written, so its pages are real)."""
    import torch

    if isinstance(spec, tuple) and spec and spec[0] == "tensor":
        return torch.zeros(spec[1], dtype=getattr(torch, spec[2]))
    if isinstance(spec, dict):
        return {k: _like(v) for k, v in spec.items()}
    if isinstance(spec, list):
        return [_like(v) for v in spec]
    return spec


def _pin_ns(spec: Any, repeats: int) -> tuple[int, Any]:
    """The fastest of ``repeats`` pinnings of a batch of ``spec``'s bytes, and the last pinned batch."""
    from torch.utils.data._utils.pin_memory import pin_memory as pin_batch

    batch, best = _like(spec), -1
    pinned: Any = None
    for _ in range(repeats):
        t0 = time.thread_time_ns()
        pinned = pin_batch(batch)
        spent = time.thread_time_ns() - t0
        best = spent if best < 0 else min(best, spent)
    return best, pinned


def _copy_ms(batch: Any, device: Any) -> float:
    """Wall ms of moving a pinned batch to the device (a DMA copy: wall time, not CPU time)."""
    import torch

    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    _move(batch, device)
    torch.cuda.synchronize(device)
    return (time.perf_counter() - t0) * 1e3


def _move(batch: Any, device: Any) -> Any:
    import torch

    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: _move(v, device) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return [_move(v, device) for v in batch]
    return batch
