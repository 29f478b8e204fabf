"""Exact loader counters: the loader's *work* per sample, by stage, counted in a replay after the window.

CPU time per sample (:mod:`perfsuite.probes.loader`) moves with the machine; the work does not. After the
timing replay this probe runs the loader's code once more, in the training process, on the same fixed
indices with the same seeded generators (:func:`perfsuite.probes.stages.replay_plan`; an IterableDataset's
stream from its start, :class:`perfsuite.probes.stages.Draws`), and counts, per stage (``__getitem__``, its
``transform`` where the Dataset holds one, ``collate_fn``):

* **calls**: Python calls by callable and C calls by name (``sys.setprofile`` on this thread only), e.g.
  ``__getitem__: PIL.Image.Image.resize``; a changed count names the callable that changed;
* **decoded pixels**: width x height of every PIL image decoded (``ImageFile.load`` with tiles to decode);
* **read bytes**: bytes this thread read from files, pipes and sockets (``rchar`` of ``/proc/thread-self/io``);
* **blocking calls**: the calls among them that wait (``time.sleep``, file and socket reads, lock waits);
* **allocated bytes**: the peak of Python and NumPy allocations above the stage's start (``tracemalloc``;
  torch's own allocator is not traced); *noisy*: it moved by up to 3% between fresh processes (what the
  interpreter's free lists hold depends on the process's history), so it is never judged exactly;
* **output**: the bytes, dtypes and shapes leaving each stage (``ndarray uint8 64x64``);
* **off-CPU time**: wall minus thread CPU per stage, the one *noisy* figure (a sleep or a slow read).

Calls, blocking calls and decoded pixels are also kept by call site (``detail["sites"]``, per sample): the
innermost line of the user's own code (not torch's, perfsuite's, the standard library's or an installed
package's: :meth:`perfsuite.probes.sites.Sites.find_users`), with what that line called, so a resize added to
``__getitem__`` is named ``PIL.Image.Image.resize at face_dataset.py:47`` and a sleeping collate
``time.sleep at train.py:30``. Read bytes are kept by site too, each read call's own (``rchar`` around it;
reads no Python-level call makes, such as a memory map's, are the stage's only). Allocated and output bytes
stay by stage: they are measured between a stage's edges, not per call.

The batches are run once uncounted first (lazy imports, per-process caches), then counted twice with the calls
profiled, then once more with the allocations traced and no profiler (so the allocations are the loader's own,
not the profiler's bookkeeping's, and neither slows the other: :data:`PASSES`), each pass on a fresh copy of
the Dataset (a generator the Dataset holds starts each pass where the original's is);
a counter that differs between the two counted passes is reported *unavailable*, naming what moved
(a generator nobody seeds, a clock read in a loop), never judged exactly. The garbage collector is off
while counting (a finaliser running at a collection would count), and the generators and torch's thread
count are restored afterwards. The counts depend on the code, the data and
the library versions (Python, Pillow and its codecs, NumPy, torch, torchvision): those are recorded in each
metric's ``detail["libraries"]``, and a difference makes a comparison *inconclusive*, never a regression.
``tests/unit/test_loadercount.py`` checks that repeated replays, in this process and in fresh ones, agree.

On a host with cores to spare (:func:`perfsuite.core.forked.processes`: 4 usable or more, a GPU runner's) the
count runs in forked children, started before the ledger's replay and collected after it, so the two overlap
instead of adding up while the GPU waits: the first counted pass in one child, the allocations' pass and the
second counted pass in another (:data:`SPLIT_PASSES`), each after its own uncounted pass. The counts are the
same (``tests/unit/test_forked.py``); ``detail["counted_in"]`` says where they were made. Elsewhere the count
runs all its passes in one forked child, after the replay.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfsuite.core.results import Metric
from perfsuite.probes.base import Probe, RunContext, WindowTimings
from perfsuite.probes.sites import Sites, site_counts, site_detail
from perfsuite.probes.stages import TRANSFORM_ATTRS, CannotCopy, Draws, _copy, _isolated, replay_plan

COUNT_BATCHES = 2  # batches counted per run: counts do not need many
# C callables that wait for something other than this thread's CPU: their calls are the "blocking" count.
BLOCKING = frozenset(
    {
        "time.sleep",
        "select.select",
        "select.poll.poll",
        "select.epoll.poll",
        "posix.read",
        "posix.pread",
        "posix.readv",
        "posix.waitpid",
        "_io.FileIO.read",
        "_io.FileIO.readinto",
        "_io.FileIO.readall",
        "_io.BufferedReader.read",
        "_io.BufferedReader.read1",
        "_io.BufferedReader.readinto",
        "_io.BufferedReader.readline",
        "_io.BufferedReader.peek",
        "_io.TextIOWrapper.read",
        "_io.TextIOWrapper.readline",
        "_thread.lock.acquire",
        "_thread.RLock.acquire",
        "_socket.socket.recv",
        "_socket.socket.recv_into",
        "_socket.socket.recvfrom",
        "_socket.socket.accept",
        "_socket.socket.connect",
        "_ssl._SSLSocket.read",
    }
)
# The blocking calls that read: the bytes each returns are charged to its site (read_sites).
READS = frozenset(name for name in BLOCKING if ".read" in name or ".recv" in name or name.endswith(".pread"))
LIBRARIES = ("Pillow", "numpy", "torch", "torchvision")


def library_versions() -> dict[str, str | None]:
    """The versions the counts depend on: Python (minor), Pillow and its codecs, NumPy, torch, torchvision."""
    from importlib import metadata

    out: dict[str, str | None] = {"python": f"{sys.version_info[0]}.{sys.version_info[1]}"}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    with contextlib.suppress(Exception):  # Pillow absent or without the feature table
        from PIL import features

        for codec in ("zlib", "libjpeg_turbo", "jpg", "libpng"):
            version = features.version(codec)
            if version:
                out[f"Pillow:{codec}"] = str(version)
    return out


def _rchar_reader() -> Callable[[], int] | None:
    """A reader of this thread's ``rchar`` that leaves its own read out of the next figure; None without /proc."""
    path = "/proc/thread-self/io"
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    last = [0]

    def read() -> int:
        text = os.pread(fd, 4096, 0)
        # The kernel counts a read after it returns: the next figure holds this one's bytes; leave them out.
        value = int(text.split(b"rchar:", 1)[1].split(b"\n", 1)[0]) - last[0]
        last[0] += len(text)
        return value

    read.fd = fd  # type: ignore[attr-defined]
    return read


def _c_name(fn: Any) -> str:
    """``time.sleep``, ``_io.BufferedReader.read``: a C callable's module and qualified name."""
    module = getattr(fn, "__module__", None)
    if not module:
        owner = getattr(fn, "__self__", None)
        module = type(owner).__module__ if owner is not None else "?"
    return f"{module}.{getattr(fn, '__qualname__', None) or getattr(fn, '__name__', '?')}"


def describe(obj: Any, depth: int = 0) -> str:
    """``tuple(Tensor uint8 1x64x64, Tensor int64 -)``: the types, dtypes and shapes of a stage's output."""
    if depth > 3:
        return "..."
    shape = getattr(obj, "shape", None)
    dtype = getattr(obj, "dtype", None)
    if shape is not None and dtype is not None:
        dims = "x".join(str(int(d)) for d in shape) or "-"
        return f"{type(obj).__name__} {str(dtype).replace('torch.', '')} {dims}"
    if isinstance(obj, (tuple, list)):
        inner = ", ".join(describe(v, depth + 1) for v in obj[:8])
        return f"{type(obj).__name__}({inner}{', ...' if len(obj) > 8 else ''})"
    if isinstance(obj, Mapping):
        inner = ", ".join(f"{k}: {describe(v, depth + 1)}" for k, v in list(obj.items())[:8])
        return f"dict({inner})"
    size = getattr(obj, "size", None)
    mode = getattr(obj, "mode", None)
    if isinstance(mode, str) and isinstance(size, tuple):  # a PIL image
        return f"PIL {mode} {'x'.join(str(s) for s in size)}"
    return type(obj).__name__


def nbytes(obj: Any, depth: int = 0) -> int:
    """Bytes held by the arrays and tensors of a stage's output (PIL images: width x height x bands)."""
    if depth > 3:
        return 0
    if hasattr(obj, "nbytes") and hasattr(obj, "dtype"):
        return int(obj.nbytes)
    if hasattr(obj, "element_size") and hasattr(obj, "numel"):
        return int(obj.element_size() * obj.numel())
    if isinstance(obj, (tuple, list)):
        return sum(nbytes(v, depth + 1) for v in obj)
    if isinstance(obj, Mapping):
        return sum(nbytes(v, depth + 1) for v in obj.values())
    bands = getattr(obj, "getbands", None)
    size = getattr(obj, "size", None)
    if callable(bands) and isinstance(size, tuple) and len(size) == 2:
        return int(size[0] * size[1] * len(bands()))
    return 0


@dataclass
class Counts:
    """Totals over the counted samples, by stage (and by ``stage: callable`` for calls)."""

    samples: int
    stages: list[str]
    code: dict[str, str] = field(default_factory=dict)
    calls: Counter[str] = field(default_factory=Counter)  # "stage: callable" -> calls
    blocking: Counter[str] = field(default_factory=Counter)  # "stage: callable" -> calls that wait
    pixels: Counter[str] = field(default_factory=Counter)  # stage -> decoded pixels
    read_bytes: Counter[str] = field(default_factory=Counter)  # stage -> bytes read
    alloc_bytes: Counter[str] = field(default_factory=Counter)  # stage -> peak traced bytes above the start
    out_bytes: Counter[str] = field(default_factory=Counter)  # stage -> bytes of the stage's output
    formats: dict[str, set[str]] = field(default_factory=dict)  # stage -> descriptions of its outputs
    wall_ns: Counter[str] = field(default_factory=Counter)
    cpu_ns: Counter[str] = field(default_factory=Counter)
    read_why: str | None = None  # why read bytes are unavailable
    moved: dict[str, str] = field(default_factory=dict)  # metric -> what differed between two counted passes
    cost_s: float = 0.0  # the counting replay's own CPU time
    pass_cpu_s: list[float] = field(default_factory=list)  # each pass's CPU seconds, in PASSES' order
    counted_in: str = "this process"  # or "2 forked child(ren)" (perfsuite.core.forked); why not, where one failed
    # (what the user's line called, its site) -> calls, blocking calls, decoded pixels (Sites.find_users)
    call_sites: Counter[tuple[str, str]] = field(default_factory=Counter)
    blocking_sites: Counter[tuple[str, str]] = field(default_factory=Counter)
    pixel_sites: Counter[tuple[str, str]] = field(default_factory=Counter)
    read_sites: Counter[tuple[str, str]] = field(default_factory=Counter)  # bytes each read call returned
    sites: Any = None  # the Sites that found them (their identities), not kept in the Result


class _Tally:
    """The profile function and the stage accounting of one counted replay."""

    def __init__(self, counts: Counts, rchar: Callable[[], int] | None, skip: set[Any], sites: Any) -> None:
        from PIL import ImageFile

        self.c, self.rchar, self.skip, self.sites = counts, rchar, skip, sites
        self.quiet = {Draws.next.__code__}  # a stream's draw: its calls (next, iter) are the replay's, not the loader's
        counts.sites = sites
        self._reading: list[tuple[Any, tuple[str, str], int]] = []  # read calls under way: (callable, site, rchar)
        self.load_code = ImageFile.ImageFile.load.__code__
        self.stack: list[str] = []
        self.on = False
        self._mark: tuple[int, int, int, int] = (0, 0, 0, 0)

    def profile(self, frame: Any, event: str, arg: Any) -> None:
        if not self.on or not self.stack:
            return
        stage = self.stack[-1]
        if event == "call":
            code = frame.f_code
            if code in self.skip:
                return
            name = f"{frame.f_globals.get('__name__', '?')}.{code.co_qualname}"
            self.c.calls[f"{stage}: {name}"] += 1
            site, called = self.sites.find_users(frame.f_back, name)
            where = (called, site)
            self.c.call_sites[where] += 1
            if code is self.load_code:
                image = frame.f_locals.get("self")
                if getattr(image, "tile", None):
                    w, h = image.size
                    self.c.pixels[stage] += int(w) * int(h)
                    self.c.pixel_sites[where] += int(w) * int(h)
        elif event == "c_call":
            if frame.f_code in self.quiet:
                return
            name = _c_name(arg)
            self.c.calls[f"{stage}: {name}"] += 1
            site, called = self.sites.find_users(frame, name)
            self.c.call_sites[(called, site)] += 1
            if name in BLOCKING:
                self.c.blocking[f"{stage}: {name}"] += 1
                self.c.blocking_sites[(name if called == name else f"{called} ({name})", site)] += 1
                if name in READS and self.rchar is not None:  # its bytes, charged at its return
                    self._reading.append((arg, (called, site), self.rchar()))
        elif event in ("c_return", "c_exception") and self._reading and self._reading[-1][0] is arg:
            _, where, before = self._reading.pop()
            if self.rchar is not None:
                self.c.read_sites[where] += self.rchar() - before

    def _now(self) -> tuple[int, int, int, int]:
        import tracemalloc

        rchar = self.rchar() if self.rchar is not None else 0
        tracemalloc.reset_peak()
        return (time.perf_counter_ns(), time.thread_time_ns(), rchar, tracemalloc.get_traced_memory()[0])

    def _close(self) -> None:
        """Charge what happened since the last mark to the stage on top of the stack."""
        import tracemalloc

        if not self.stack:
            return
        stage = self.stack[-1]
        wall, cpu, rchar, traced = self._mark
        peak = tracemalloc.get_traced_memory()[1]
        self.c.wall_ns[stage] += time.perf_counter_ns() - wall
        self.c.cpu_ns[stage] += time.thread_time_ns() - cpu
        if self.rchar is not None:
            self.c.read_bytes[stage] += self.rchar() - rchar
        self.c.alloc_bytes[stage] += max(0, peak - traced)

    def enter(self, name: str) -> None:
        """Charge what ran so far to the current stage, then count into ``name``."""
        was, self.on = self.on, False  # the accounting itself is not counted
        self._close()
        self.stack.append(name)
        self._mark = self._now()
        self.on = was

    def leave(self) -> None:
        """Charge the stage on top, then go back to the one below."""
        was, self.on = self.on, False
        self._close()
        self.stack.pop()
        self._mark = self._now()
        self.on = was

    def output(self, stage: str, obj: Any) -> None:
        was, self.on = self.on, False
        self.c.out_bytes[stage] += nbytes(obj)
        self.c.formats.setdefault(stage, set()).add(describe(obj))
        self.on = was


class _Staged:
    """The Dataset copy's transform, counted as its own stage (and its output described)."""

    def __init__(self, fn: Callable[..., Any], tally: list[_Tally | None]) -> None:
        self.fn, self.tally = fn, tally

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tally = self.tally[0]
        if tally is None or not tally.on:
            return self.fn(*args, **kwargs)
        tally.enter("transform")
        try:
            out = self.fn(*args, **kwargs)
        finally:
            tally.leave()
        tally.output("transform", out)
        return out


def _staged_copy(dataset: Any, holder: list[_Tally | None]) -> tuple[Any, list[str]]:
    """A fresh copy of the Dataset (its generators and caches as the original holds them), transforms staged."""
    clone = _copy(dataset)
    if isinstance(clone, CannotCopy):
        return clone, []
    staged = []
    for attr in TRANSFORM_ATTRS:
        fn = getattr(clone, attr, None)
        if callable(fn) and not isinstance(fn, type):
            try:
                setattr(clone, attr, _Staged(fn, holder))
                staged.append(attr)
            except (AttributeError, TypeError):
                continue
    return clone, staged


def _one_pass(
    clone: Any, collate: Any, draws: Draws, batches: int, seed: int, reseed: Any, tally: _Tally | None
) -> None:
    """The batches once, counted into ``tally`` (None: uncounted, to warm what the counted passes use)."""
    draws.begin(clone)
    for b in range(batches):
        reseed(seed * 1_000_003 + b)
        samples = []
        for k in range(draws.per_batch):
            key = draws.key(b, k)  # an index, worked out before the count; a stream's next sample is drawn in it
            if tally is not None:
                tally.enter("__getitem__")
                sample = clone[key] if key is not None else draws.next()
                tally.leave()
                tally.output("__getitem__", sample)
            else:
                sample = clone[key] if key is not None else draws.next()
            samples.append(sample)
        if collate is None:
            continue
        if tally is not None:
            tally.enter("collate_fn")
            batch = collate(samples)
            tally.leave()
            tally.output("collate_fn", batch)
        else:
            collate(samples)
        del samples


# Pillow's own preinit() order: the formats a fresh process knows first, tried in this order by Image.open
PIL_FIRST_FORMATS = ("BMP", "GIF", "JPEG", "PPM", "PNG")


@contextlib.contextmanager
def canonical_image_formats() -> Iterator[None]:
    """Every PIL format registered, tried in one fixed order while the loader's work is counted.

    ``Image.open`` asks each known format in turn whether the file is its own (``BmpImagePlugin._accept``, ...),
    in the order the plugins were *imported*. That order depends on what else the process imported first: on
    an H100 image two sessions counted 0 and 2 ``_accept`` calls per sample for the same PNG files. Pillow's
    order is kept for its first five formats and the rest follow by name; the process's own order (with any
    plugin ``Image.init()`` imported added at the end) is put back afterwards.
    """
    try:
        from PIL import Image
    except ImportError:  # no Pillow: nothing to order
        yield
        return
    before = list(Image.ID)
    Image.init()
    known = list(Image.ID)
    rank = {name: i for i, name in enumerate(PIL_FIRST_FORMATS)}
    Image.ID[:] = sorted(known, key=lambda name: (rank.get(name, len(rank)), name))
    try:
        yield
    finally:
        Image.ID[:] = before + [name for name in known if name not in before]


# The passes over the batches: (counted, allocations traced, calls profiled). One plain pass first (lazy imports,
# per-process caches); two with the calls profiled, compared to find the counters that do not repeat; one with
# the allocations traced and no profiler, so neither pays for the other: tracemalloc under sys.setprofile traced
# the tally's own bookkeeping too, 60 times the plain pass's CPU for gray_classifier at smoke scale.
Pass = tuple[bool, bool, bool]
PASSES: tuple[Pass, ...] = ((False, False, False), (True, False, True), (True, False, True), (True, True, False))
# The same passes split between two processes (perfsuite.core.forked), for the longer to take less than the four:
# in one, the uncounted pass and the first counted one; in the other, the uncounted pass, the allocations' pass and
# the second counted one, which so starts one pass of the same work after the first, as it does in one process
# (where a generator nobody seeds has moved on by then, and the two counts differ: what they are compared for).
SPLIT_PASSES: tuple[tuple[Pass, ...], ...] = ((PASSES[0], PASSES[1]), (PASSES[0], PASSES[3], PASSES[2]))


@dataclass
class Passes:
    """What some passes counted, in their order: the counts of those whose calls were profiled, of those whose
    allocations were traced, their CPU seconds per pass (uncounted passes included), and in all."""

    calls: list[Counts] = field(default_factory=list)
    allocs: list[Counts] = field(default_factory=list)
    pass_cpu_s: list[float] = field(default_factory=list)
    cost_s: float = 0.0


def combine(parts: Sequence[Passes | str]) -> Counts | str:
    """One count from the passes of one process or of several (in :data:`SPLIT_PASSES`' order); why not, where one
    could not count. The first counted pass's counts, the counters that moved between the two counted passes
    (``Counts.moved``), the first traced pass's allocations."""
    for part in parts:
        if isinstance(part, str):
            return part
    done = [p for p in parts if not isinstance(p, str)]
    calls = [c for p in done for c in p.calls]
    allocs = [c for p in done for c in p.allocs]
    first = calls[0] if calls else allocs[0]
    if len(calls) >= 2:
        first.moved = _moved(calls[0], calls[1])
    if allocs:
        first.alloc_bytes = allocs[0].alloc_bytes
    first.cost_s = sum(p.cost_s for p in done)
    first.pass_cpu_s = [x for p in done for x in p.pass_cpu_s]
    return first


def count(loader: Any, batch_size: int, batches: int = COUNT_BATCHES, seed: int = 0) -> Counts | str:
    """Count the loader's work on ``batches`` fixed batches, all of :data:`PASSES` in this process; Counts, or why
    not (see :func:`count_passes`)."""
    return combine([count_passes(loader, batch_size, batches, seed, PASSES)])


def count_passes(
    loader: Any, batch_size: int, batches: int = COUNT_BATCHES, seed: int = 0, passes: Sequence[Pass] = PASSES
) -> Passes | str:
    """Run ``passes`` over ``batches`` fixed batches and keep what the counted ones counted; or why not.

    :data:`PASSES`, each on a fresh copy of the Dataset (so a generator the Dataset holds starts each pass where
    the original is): one uncounted (imports, per-process caches), two counted, one for the allocations alone.
    What differs between the two counted passes is not reproducible (a generator nobody seeds, a clock read in a
    loop): :func:`combine` says which in ``Counts.moved``, and those counters are reported unavailable, never
    judged exactly.
    """
    import tracemalloc

    plan = replay_plan(loader, batch_size)
    if isinstance(plan, str):
        return plan
    dataset, collate, per_batch = plan
    holder: list[_Tally | None] = [None]
    draws = Draws(dataset, per_batch, seed)
    rchar = _rchar_reader()
    sites = Sites()
    done = Passes()
    skip = {_Staged.__call__.__code__, *_own_codes()}
    started = time.thread_time()
    traced_before = tracemalloc.is_tracing()
    gc_before = gc.isenabled()
    old_profile = sys.getprofile()
    tally: _Tally | None = None
    try:
        with _isolated() as reseed, canonical_image_formats():
            for is_counted, traced, profiled in passes:
                pass_started = time.thread_time()
                clone, staged = _staged_copy(dataset, holder)
                if isinstance(clone, CannotCopy):
                    return (
                        f"not counted: {type(dataset).__name__} could not be copied ({clone.why}), and the count runs "
                        "on a copy only, never on the training loader's own Dataset"
                    )
                if not is_counted:
                    _one_pass(clone, collate, draws, batches, seed, reseed, None)
                    done.pass_cpu_s.append(round(time.thread_time() - pass_started, 4))
                    continue
                stages = ["__getitem__", *(["transform"] if staged else [])]
                out = Counts(samples=per_batch * batches, stages=stages + (["collate_fn"] if collate else []))
                item = "__iter__" if draws.stream else "__getitem__"
                out.code["__getitem__"] = f"{type(dataset).__module__}.{type(dataset).__qualname__}.{item}"
                if staged:
                    out.code["transform"] = ", ".join(f"{type(dataset).__qualname__}.{a}" for a in staged)
                if collate is not None:
                    name = getattr(collate, "__qualname__", type(collate).__qualname__)
                    out.code["collate_fn"] = f"{getattr(collate, '__module__', '?')}.{name}"
                if rchar is None:
                    out.read_why = "/proc/thread-self/io is not readable here (Linux only)"
                tally = _Tally(out, rchar, skip, sites)
                gc.collect()
                gc.disable()
                if traced and not traced_before:
                    tracemalloc.start()
                holder[0] = tally
                if profiled:
                    sys.setprofile(tally.profile)
                tally.on = True
                try:
                    _one_pass(clone, collate, draws, batches, seed, reseed, tally)
                finally:
                    tally.on = False
                    sys.setprofile(old_profile)
                    holder[0] = None
                    if traced and not traced_before:
                        tracemalloc.stop()
                    if gc_before:
                        gc.enable()
                (done.calls if profiled else done.allocs).append(out)
                done.pass_cpu_s.append(round(time.thread_time() - pass_started, 4))
    finally:
        if tally is not None:
            tally.on = False
        sys.setprofile(old_profile)
        holder[0] = None
        if not traced_before and tracemalloc.is_tracing():
            tracemalloc.stop()
        if gc_before:
            gc.enable()
        if rchar is not None:
            os.close(rchar.fd)  # type: ignore[attr-defined]
    done.cost_s = time.thread_time() - started
    return done


def _moved(a: Counts, b: Counts) -> dict[str, str]:
    """Per exact counter, what differed between two counted passes of the same indices (empty: nothing)."""
    n = max(1, a.samples)
    out: dict[str, str] = {}
    for metric, field_name in EXACT_FIELDS.items():
        x, y = getattr(a, field_name), getattr(b, field_name)
        if x != y:
            keys = sorted(set(x) | set(y), key=lambda k: -abs(y.get(k, 0) - x.get(k, 0)))
            out[metric] = ", ".join(f"{k} {x.get(k, 0) / n:.4g} -> {y.get(k, 0) / n:.4g}" for k in keys[:3])
    if a.formats != b.formats:
        out["loader_output_format"] = "the shapes or dtypes leaving a stage"
    return out


def _own_codes() -> set[Any]:
    """This module's code objects that run between a stage's calls (the accounting is not the loader's work)."""
    return {_Tally.enter.__code__, _Tally.leave.__code__, _Tally.output.__code__, Draws.next.__code__}


# --------------------------------------------------------------------------- metrics

METRICS = (
    "loader_calls_per_sample",
    "loader_decoded_pixels_per_sample",
    "loader_read_bytes_per_sample",
    "loader_blocking_calls_per_sample",
    "loader_alloc_bytes_per_sample",
    "loader_output_bytes_per_sample",
    "loader_output_format",
    "loader_offcpu_ms_per_sample",
)


EXACT_FIELDS = {
    "loader_calls_per_sample": "calls",
    "loader_decoded_pixels_per_sample": "pixels",
    "loader_read_bytes_per_sample": "read_bytes",
    "loader_blocking_calls_per_sample": "blocking",
    "loader_output_bytes_per_sample": "out_bytes",
}


def _per(counter: Mapping[str, int], n: int) -> dict[str, float]:
    return {k: round(v / n, 4) for k, v in sorted(counter.items()) if v}


def to_metrics(c: Counts, libraries: Mapping[str, Any]) -> list[Metric]:
    """The counters as metrics: per sample, ``detail["by"]`` stage (or ``stage: callable``)."""
    n = max(1, c.samples)
    common = {"libraries": dict(libraries), "samples": c.samples, "code": dict(c.code), "stages": list(c.stages)}

    def exact(
        name: str, unit: str, counter: Mapping[str, int], at: Mapping[tuple[str, str], int] | None = None
    ) -> Metric:
        if name in c.moved:
            return Metric.unavailable(name, _not_reproducible(c.moved[name]), unit)
        by = _per(counter, n)
        sites = site_detail(site_counts(at, n, c.sites, per="sample")) if at is not None else {}
        return Metric(name, round(sum(counter.values()) / n, 4), unit, detail={**common, "by": by, **sites})

    calls = Counter(c.calls)
    out = [
        exact("loader_calls_per_sample", "calls/sample", calls, c.call_sites),
        exact("loader_decoded_pixels_per_sample", "pixels/sample", c.pixels, c.pixel_sites),
    ]
    if c.read_why is None:
        out.append(exact("loader_read_bytes_per_sample", "bytes/sample", c.read_bytes, c.read_sites))
    else:
        out.append(Metric.unavailable("loader_read_bytes_per_sample", c.read_why, "bytes/sample"))
    out += [
        exact("loader_blocking_calls_per_sample", "calls/sample", c.blocking, c.blocking_sites),
        exact("loader_alloc_bytes_per_sample", "bytes/sample", c.alloc_bytes),
        exact("loader_output_bytes_per_sample", "bytes/sample", c.out_bytes),
    ]
    formats = "; ".join(f"{s} -> {' | '.join(sorted(c.formats[s]))}" for s in c.stages if s in c.formats)
    if "loader_output_format" in c.moved:
        out.append(Metric.unavailable("loader_output_format", _not_reproducible(c.moved["loader_output_format"])))
    else:
        out.append(Metric("loader_output_format", formats, "", detail=dict(common)))
    off = {s: max(0, c.wall_ns[s] - c.cpu_ns[s]) / 1e6 / n for s in c.stages}
    out.append(
        Metric(
            "loader_offcpu_ms_per_sample",
            sum(off.values()),
            "ms/sample",
            detail={
                **common,
                "by": {k: round(v, 4) for k, v in off.items()},
                "counting_cpu_s": c.cost_s,
                "counting_pass_cpu_s": list(c.pass_cpu_s),
                "counted_in": c.counted_in,
            },
        )
    )
    return out


def _not_reproducible(what: str) -> str:
    return (
        f"not reproducible: two counts of the same indices in this run differ ({what}); the loader's work depends "
        "on something the replay does not fix (a generator nobody seeds, a clock, a cache), so it is not judged "
        "exactly"
    )


class LoaderCountProbe(Probe):
    """Counts the loader's work per sample, by stage, in a replay after the window (see the module docstring)."""

    name = "loadercount"

    def __init__(self, batches: int = COUNT_BATCHES) -> None:
        self.batches = batches
        self._ctx: RunContext | None = None
        self._counts: Counts | str | None = None
        self._child: tuple[Any, ...] | None = None  # the count's forked children (perfsuite.core.forked.Forked)

    def setup(self, ctx: RunContext) -> None:
        self._ctx, self._counts, self._child = ctx, None, None

    def begin_after_window(self) -> None:
        """On a host with cores to spare, the count starts in forked children now, beside the ledger's replay."""
        from perfsuite.core import forked

        if self._ctx is not None and self._ctx.job is not None and forked.processes() >= 3:
            self._child = self._fork(SPLIT_PASSES)

    def after_window(self) -> None:
        """The count, always in a fresh forked child where this platform forks (so a generator keyed on the
        process, as a worker-aware augmentation's is, starts from its seed: the same count whatever the window
        drew and whatever ``num_workers`` is); in this process where it cannot."""
        from perfsuite.core import forked

        ctx = self._ctx
        if ctx is None or ctx.job is None:
            self._counts = "no job to replay"
            return
        children, self._child = self._child, None
        where = "this process (this platform does not fork)"
        if children is None and forked.available():
            children = self._fork((PASSES,))
            where = "this process (no child process could be started)"
        if children is not None:
            try:
                got = [child.result() for child in children]
                self._counts = combine(got)
                if isinstance(self._counts, Counts):
                    self._counts.counted_in = f"{len(got)} forked child process(es)"
                return
            except forked.ChildFailed as exc:  # a Dataset that cannot run in a forked child: counted here instead
                where = f"this process (the forked child failed: {str(exc).splitlines()[0]})"
            finally:
                for child in children:
                    child.cancel()
        try:
            self._counts = count(ctx.job.loader, ctx.batch_size, batches=self.batches)
            if isinstance(self._counts, Counts):
                self._counts.counted_in = where
        except Exception as exc:  # noqa: BLE001 - the user's Dataset outside its worker: report, never fail the run
            self._counts = (
                f"counting the loader's stages in the training process raised {type(exc).__name__}: {exc} "
                "(a Dataset that only works inside a DataLoader worker?)"
            )

    def _fork(self, split: Sequence[Sequence[Pass]]) -> tuple[Any, ...] | None:
        """One forked child per group of passes, counting; None where this process cannot fork now."""
        from perfsuite.core import forked

        assert self._ctx is not None and self._ctx.job is not None
        loader, size = self._ctx.job.loader, self._ctx.batch_size
        children: list[Any] = []
        try:
            for passes in split:
                children.append(forked.Forked(count_passes, loader, size, self.batches, 0, passes))
        except OSError:  # a process limit: counted in this process
            for child in children:
                child.cancel()
            return None
        return tuple(children)

    def finish(self) -> None:
        for child in self._child or ():  # the run failed between starting the count and collecting it
            child.cancel()
        self._child = None

    def metrics(self, timings: WindowTimings) -> list[Metric]:
        c = self._counts
        if not isinstance(c, Counts):
            why = c if isinstance(c, str) else "the loader's stages were not counted"
            from perfsuite.core import metrics as registry

            return [Metric.unavailable(name, why, registry.get(name).unit) for name in METRICS]
        return to_metrics(c, library_versions())
