"""syncs_per_step: the host-device synchronisations a training step forces, with call sites.

Seed 003 read ``.item()`` every step; each read stalls the host until the GPU
has drained its queue, so the GPU idles while the next step is launched. This
probe counts such operations in the observed steps (never in the measured
window) and says where each comes from: "Tensor.item at train.py:97, 1/step".

Two sources, merged per call site:

* Op level, any device: a TorchFunctionMode sees every sync-forcing tensor
  operation (``.item()``, ``.tolist()``, ``.cpu()``, ``.numpy()``, ``bool()``
  / ``if tensor``, ``int()``, ``nonzero``, ``unique``, boolean-mask indexing,
  ...). An operation counts when its tensor is on the device
  (:mod:`perfsuite.probes.residency`): on CUDA, the tensor's own device; on a
  CPU run, where nothing is a real sync, the tensors a GPU run of the same code
  would hold on the device (the model's, the batch after ``.to(device)``, and
  everything computed from them), so the signal exists in CPU CI. A read inside
  torch counts too, at the step's line that called into torch
  (``clip_grad_norm_(error_if_nonfinite=True)`` checks the norm on the host),
  while reads of host tensors do not (the optimizer's CPU step counter, a
  ``.numpy()`` of the loader's batch). ``.to(device)`` is never counted on a CPU
  run: it cannot be told apart from the host-to-device copy a GPU run makes.
* CUDA only: the profiler's CUDA runtime synchronisation calls inside the
  observed steps (cudaStreamSynchronize, cudaDeviceSynchronize, ...), which
  also catch explicit ``torch.cuda.synchronize()`` and copies that the op
  level cannot see, plus the sites of ``torch.cuda.set_sync_debug_mode``
  warnings. The runtime count is the floor of the total; syncs it has that no
  site accounts for are reported as one unattributed entry. A blocking
  host-to-device copy (``non_blocking=False``) synchronises the stream and is
  counted there, as it should be; the CPU count cannot see it.

A call site is the first frame outside torch and outside perfsuite's harness
(runner.py, job.py, probes/): the step's own code, e.g. the user's train.py
line that reads ``loss.item()``, or perfsuite/harness/pipeline.py for the reference
workloads' ``loss.item()``.

While observing, a no-op TorchDispatchMode is also pushed: torch.compile does
not compile (nor look up compiled code) under a dispatch mode, so a compiled
model runs eagerly in observed steps instead of recompiling for the probe's
function mode. Eager execution issues the same sync-forcing operations.
Observed steps come after the measured window (see probes/base.py), since
a dispatch mode leaves compiled code unused until torch._dynamo.reset().

Work done every N steps (predictions read back every 10 steps) is counted per
site and step, and reported with its period ("every 10 steps") and an exact
rate (0.1/step) however the watched steps fall (:mod:`perfsuite.probes.periods`).
The probe also watches the period scan (``scan()``), the cheap steps before the
observed ones in which it alone looks for such work, and tells the runner which
upcoming steps carry it (``periodic()``) so the observed steps can be steady ones.
"""

from __future__ import annotations

import contextlib
import re
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from perfsuite.core.results import Metric
from perfsuite.probes.base import PROBE_MARK, Probe, RunContext, WindowTimings
from perfsuite.probes.periods import Rate, rate
from perfsuite.probes.residency import Residency, destination, residency_for
from perfsuite.probes.sites import Sites as _Sites
from perfsuite.probes.sites import by_identity
from perfsuite.probes.synckinds import KIND_ROW, SyncKind

# Tensor methods / torch functions that force a sync; value: when the call does.
# __repr__/__format__: print(loss) or f"{loss:.3f}" reads the value (torch then reads it with modes off).
_ALWAYS = (
    "item",
    "tolist",
    "cpu",
    "numpy",
    "__bool__",
    "__int__",
    "__float__",
    "__index__",
    "__repr__",
    "__format__",
    "nonzero",
    "unique",
    "unique_consecutive",
    "masked_select",
    "argwhere",
    "bincount",
)
_TORCH_FUNCS = ("nonzero", "unique", "unique_consecutive", "masked_select", "argwhere", "bincount")
CUDA_SYNC_CALLS = (
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventSynchronize",
    "cudaMemcpy",
    "cudaMemcpy2D",
    "cudaMemcpyFromSymbol",
)
OBSERVED_MARK = "perfsuite.observed_step"
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")  # "<built-in method item of Tensor object at 0x7f..>": one name per op


def _has_bool_index(index: Any) -> bool:
    import torch

    items = index if isinstance(index, (tuple, list)) else (index,)
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in items)


def _to_host(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Does ``Tensor.to(...)`` name the CPU as its destination?"""
    import torch

    for arg in (*args[1:], kwargs.get("device")):
        if isinstance(arg, (str, torch.device)):
            return torch.device(arg).type == "cpu"
        if isinstance(arg, torch.Tensor):
            return arg.device.type == "cpu"
    return False


_DATA_DEPENDENT = frozenset(("nonzero", "unique", "unique_consecutive", "masked_select", "argwhere", "bincount"))
_HOST_COPIES = frozenset(("cpu",))
OpRule = tuple[str, SyncKind, Callable[..., bool]]


def _sync_ops() -> dict[Callable[..., Any], OpRule]:
    """func -> (op name, kind, does this call force a sync?), for operations on a device tensor."""
    import torch

    always: Callable[..., bool] = lambda args, kwargs: True  # noqa: E731

    def kind_of(name: str) -> SyncKind:
        if name in _DATA_DEPENDENT:
            return SyncKind.DATA_DEPENDENT
        return SyncKind.DEVICE_TO_HOST if name in _HOST_COPIES else SyncKind.READ

    ops: dict[Callable[..., Any], OpRule] = {}
    for name in _ALWAYS:
        ops[getattr(torch.Tensor, name)] = (f"Tensor.{name}", kind_of(name), always)
    for name in _TORCH_FUNCS:
        ops[getattr(torch, name)] = (f"torch.{name}", kind_of(name), always)
    dd = SyncKind.DATA_DEPENDENT
    ops[torch.Tensor.__getitem__] = ("Tensor.__getitem__[bool mask]", dd, lambda a, k: _has_bool_index(a[1]))
    ops[torch.Tensor.__setitem__] = ("Tensor.__setitem__[bool mask]", dd, lambda a, k: _has_bool_index(a[1]))
    ops[torch.where] = ("torch.where(cond)", dd, lambda a, k: len(a) + len(k) == 1)
    for owner, label in ((torch, "torch"), (torch.Tensor, "Tensor")):
        ops[owner.repeat_interleave] = (
            f"{label}.repeat_interleave",
            dd,
            lambda a, k: len(a) > 1 and isinstance(a[1], torch.Tensor) and k.get("output_size") is None,
        )
    ops[torch.Tensor.to] = ("Tensor.to(cpu)", SyncKind.DEVICE_TO_HOST, _to_host)
    return ops


def _non_blocking(args: tuple[Any, ...], kwargs: dict[str, Any], first: int = 1) -> bool:
    """``non_blocking`` of a ``Tensor.to``/``.cuda``/``copy_`` call: the keyword, or the first bool positional."""
    if "non_blocking" in kwargs:
        return bool(kwargs["non_blocking"])
    return next((bool(a) for a in args[first:] if isinstance(a, bool)), False)


# torch functions that build a tensor from their first argument (Python data, NumPy, a host tensor): with
# device=<the device>, a blocking host-to-device copy (torch copies with non_blocking=False).
_FROM_DATA = ("tensor", "as_tensor", "asarray")


class _CopyRules:
    """Which copies in a step make the host wait (:mod:`perfsuite.probes.synckinds`): the host-to-device copies
    that are blocking or from pageable memory, tensors built on the device from host data, and device-to-host
    copies into pageable memory. Decided from where each tensor would live and whether it would be pinned."""

    def __init__(self, residency: Residency) -> None:
        import torch

        self.residency = residency
        self.to, self.cuda, self.copy_ = torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.copy_
        self.new_tensor = torch.Tensor.new_tensor
        self.from_data = {getattr(torch, name): f"torch.{name}" for name in _FROM_DATA}
        self.tensor_type = torch.Tensor

    def classify(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, SyncKind] | None:
        """(op, kind) when this call, made by the step, would make the host wait for a copy; else None."""
        res, tensor = self.residency, self.tensor_type
        source = args[0] if args and isinstance(args[0], tensor) else None
        if func is self.to or func is self.cuda:
            if source is None or res.on_device(source) or source.numel() == 0:
                return None
            if func is self.to:
                dest = destination(args, kwargs)
                if dest is None or not self._to_device(dest):
                    return None
            op = "Tensor.to" if func is self.to else "Tensor.cuda"
            return self._h2d(op, source, _non_blocking(args, kwargs))
        if func is self.copy_ and source is not None and len(args) > 1 and isinstance(args[1], tensor):
            src = args[1]
            if src.numel() == 0:
                return None
            nb = _non_blocking(args, kwargs, first=2)
            dst_dev, src_dev = res.on_device(source), res.on_device(src)
            if dst_dev and not src_dev:
                return self._h2d("Tensor.copy_", src, nb)
            if src_dev and not dst_dev and not (nb and res.is_pinned(source)):
                return ("Tensor.copy_", SyncKind.DEVICE_TO_HOST)
            return None
        if func in self.from_data and "device" in kwargs and self._to_device(kwargs["device"]):
            data = args[0] if args else kwargs.get("data")
            if isinstance(data, tensor) and res.on_device(data):
                return None
            return (self.from_data[func], SyncKind.BLOCKING_COPY)
        if func is self.new_tensor and source is not None and res.on_device(source):
            dev = kwargs.get("device")
            if dev is None or self._to_device(dev):
                return ("Tensor.new_tensor", SyncKind.BLOCKING_COPY)
        return None

    def _to_device(self, where: Any) -> bool:
        res = self.residency
        if res.cuda:
            import torch

            try:
                return torch.device(where).type != "cpu"
            except (TypeError, RuntimeError):
                return False
        return res.is_run_device(where)

    def _h2d(self, op: str, src: Any, non_blocking: bool) -> tuple[str, SyncKind] | None:
        if not non_blocking:
            return (op, SyncKind.BLOCKING_COPY)
        if self.residency.is_pinned(src) and src.is_contiguous():
            return None  # the one asynchronous host-to-device copy
        return (op, SyncKind.PAGEABLE_COPY)


Counts = Counter[tuple[str, str, str]]  # (kind, op, site) -> calls


def _op_counter(
    ops: dict[Callable[..., Any], OpRule],
    sites: _Sites,
    residency: Residency,
    counts: Counts,
) -> Any:
    """A TorchFunctionMode that adds (kind, op, site) to ``counts`` for each call that would make the host wait:
    a sync-forcing operation on a device tensor, or a copy that blocks (:class:`_CopyRules`)."""
    import torch
    from torch.overrides import TorchFunctionMode

    copies = _CopyRules(residency)

    class SyncOpCounter(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            entry = ops.get(func)
            # On the CPU, .to(device) is the host-to-device copy of a GPU run: never a read.
            if (
                entry is not None
                and args
                and isinstance(args[0], torch.Tensor)
                and entry[2](args, kwargs)
                and residency.on_device(args[0])
                and (residency.cuda or func is not torch.Tensor.to)
            ):
                counts[(entry[1].value, entry[0], sites.find(sys._getframe(1))[0])] += 1
            else:
                copy = copies.classify(func, args, kwargs)
                if copy is not None:
                    site, direct = sites.find(sys._getframe(1))
                    if direct:  # the step's own copy (torch's own code names the host when it means it)
                        counts[(copy[1].value, copy[0], site)] += 1
            return func(*args, **kwargs)

    return SyncOpCounter()


def _explicit_targets() -> list[tuple[Any, str, str]]:
    """(owner, attribute, label) of every explicit wait for the device that torch offers."""
    import torch

    found: list[tuple[Any, str, str]] = [
        (torch.cuda, "synchronize", "torch.cuda.synchronize"),
        (getattr(torch, "accelerator", None), "synchronize", "torch.accelerator.synchronize"),
    ]
    for owner, label in ((torch.cuda, "torch.cuda"), (torch, "torch")):
        for cls in ("Event", "Stream"):
            klass = getattr(owner, cls, None)
            if klass is not None:
                found.append((klass, "synchronize", f"{label}.{cls}.synchronize"))
    return [(owner, attr, label) for owner, attr, label in found if owner is not None and hasattr(owner, attr)]


@contextlib.contextmanager
def _explicit_syncs(sites: _Sites, counts: Counts) -> Iterator[None]:
    """Count explicit waits (``torch.cuda.synchronize()``, ``event.synchronize()``, ...) at the line that calls
    them, then make the call as it was: on a CPU build it raises as it would have without perfsuite. They are
    plain Python functions, not tensor operations, so no torch mode sees them; the attributes are replaced for
    the observed step only (a name imported before, ``from torch.cuda import synchronize``, is not seen)."""
    import functools

    replaced: list[tuple[Any, str, Any]] = []

    def counting(original: Any, label: str) -> Any:
        @functools.wraps(original)
        def wait(*args: Any, **kwargs: Any) -> Any:
            site = sites.find(sys._getframe(1))[0]
            if not sites.issued_by_probe(sys._getframe(1)):
                counts[(SyncKind.EXPLICIT.value, label, site)] += 1
            return original(*args, **kwargs)

        return wait

    try:
        for owner, attr, label in _explicit_targets():
            original = owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr)
            if original is None:
                continue
            try:
                setattr(owner, attr, counting(original, label))
            except (AttributeError, TypeError):  # a C type that refuses: its waits are seen on CUDA only
                continue
            replaced.append((owner, attr, original))
        yield
    finally:
        for owner, attr, original in reversed(replaced):
            setattr(owner, attr, original)


def _eager_shield() -> Any:
    """A no-op TorchDispatchMode: keeps torch.compile from recompiling under the function mode."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class EagerShield(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    return EagerShield()


class _CudaTrace:
    """CUDA only: the runtime's synchronisation calls in the observed steps, each at the step's line that issued it.

    The profiler runs across all observed steps with Python stacks; each step is
    marked with a record_function range and only sync calls inside a mark are
    counted, so the profiler's own synchronisation at exit is not the workload's.
    A call inside a probe's own mark (:func:`perfsuite.probes.base.unobserved`: a
    label check, the loader's fetch) is the measurement's, not the step's. Each
    remaining call is placed at the first frame outside torch and perfsuite of the
    operation that made it; sync-debug-mode warnings are kept as a second witness.
    """

    def __init__(self, sites: _Sites) -> None:
        self.sites = sites
        self.runtime: Counter[str] = Counter()
        self.warned: Counter[str] = Counter()  # sync-debug-mode warnings by site
        self.ops: Counter[str] = Counter()  # runtime sync calls by the operations that made them
        self.probes_own = 0  # syncs that perfsuite's probes issued themselves, left out of the count
        self.error: str | None = None
        self._prof: Any = None

    def begin(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        try:
            self._prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            self._prof.__enter__()
        except Exception as exc:  # noqa: BLE001 - no CUPTI: the op-level count still stands
            self._prof, self.error = None, f"CUDA profiler unavailable: {exc}"

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        import torch

        previous = torch.cuda.get_sync_debug_mode()
        original = warnings.showwarning

        def record(message, category, filename, lineno, file=None, line=None):
            if "synchroniz" in str(message):
                frame = sys._getframe(1)
                if not self.sites.issued_by_probe(frame):
                    self.warned[self.sites.find(frame)[0]] += 1
            else:
                original(message, category, filename, lineno, file, line)

        with warnings.catch_warnings(), torch.profiler.record_function(OBSERVED_MARK):
            warnings.filterwarnings("always", message=".*synchroniz")
            warnings.showwarning = record
            torch.cuda.set_sync_debug_mode("warn")
            try:
                yield
            finally:
                torch.cuda.set_sync_debug_mode(previous)

    def end(self) -> None:
        if self._prof is None:
            return
        prof, self._prof = self._prof, None
        try:
            prof.__exit__(None, None, None)
            events = list(prof.events())
        except Exception as exc:  # noqa: BLE001
            self.error = f"CUDA profiler failed: {exc}"
            return
        # On the step's own thread only: the loader's pinning thread runs beside it
        marks = [(e.thread, e.time_range) for e in events if e.name == OBSERVED_MARK]
        probes = [(e.thread, e.time_range) for e in events if e.name == PROBE_MARK]

        def inside(event: Any, ranges: list[tuple[int, Any]]) -> bool:
            start = event.time_range.start
            return any(thread == event.thread and r.start <= start <= r.end for thread, r in ranges)

        for e in events:
            if e.name not in CUDA_SYNC_CALLS or not inside(e, marks):
                continue
            if inside(e, probes):
                self.probes_own += 1  # a probe's own work (a label check), or the loader's fetch
                continue
            self.runtime[e.name] += 1
            self.ops[self._ops_of(e)] += 1

    def _ops_of(self, event: Any) -> str:
        """The operations that made a runtime call (``aten::copy_ < aten::_to_copy``): the profiler's enclosing
        events, which name the operation but not the line (its Python stacks, on torch 2.11 on an H200, were not
        linked to the operations and slowed a full-scale step past its deadline)."""
        names: list[str] = []
        parent = getattr(event, "cpu_parent", None)
        while parent is not None and len(names) < 2:
            names.append(_ADDRESS.sub("", str(parent.name)))
            parent = getattr(parent, "cpu_parent", None)
        return " < ".join(names) or "?"


class SyncProbe(Probe):
    """Counts what would make the host wait for the device, per observed step, by kind, with call sites and
    periods."""

    name = "syncs"
    scans = True

    def __init__(self) -> None:
        self._ctx_steps = 0
        self._cuda = False
        self._full: list[Counts] = []  # per observed step
        self._scanned: list[Counts] = []  # per period-scan step
        self._trace: _CudaTrace | None = None
        self._ops: dict[Callable[..., Any], OpRule] = {}
        self._sites: _Sites | None = None
        self._residency: Residency | None = None

    def setup(self, ctx: RunContext) -> None:
        self._ctx_steps = ctx.observe_steps
        self._cuda = ctx.device.startswith("cuda")
        self._full, self._scanned = [], []
        self._ops, self._sites = _sync_ops(), _Sites()
        self._residency = residency_for(ctx)
        self._trace = _CudaTrace(self._sites) if self._cuda else None

    @contextlib.contextmanager
    def _watch(self, counts: Counts, trace: bool) -> Iterator[None]:
        assert self._sites is not None and self._residency is not None, "setup() first"
        with contextlib.ExitStack() as stack:
            if trace and self._trace is not None:
                stack.enter_context(self._trace.step())
            stack.enter_context(_eager_shield())
            stack.enter_context(self._residency.tracking())
            stack.enter_context(_op_counter(self._ops, self._sites, self._residency, counts))
            stack.enter_context(_explicit_syncs(self._sites, counts))
            yield

    @contextlib.contextmanager
    def observe(self) -> Iterator[None]:
        if self._trace is not None and not self._full:
            self._trace.begin()
        counts: Counts = Counter()
        with self._watch(counts, trace=True):
            yield
        self._full.append(counts)
        if self._trace is not None and len(self._full) >= self._ctx_steps:
            self._trace.end()

    @contextlib.contextmanager
    def scan(self) -> Iterator[None]:
        """A period-scan step: the op-level count only (no CUDA profiler), kept apart from the observed steps."""
        counts: Counts = Counter()
        with self._watch(counts, trace=False):
            yield
        self._scanned.append(counts)

    def _rates(self) -> dict[tuple[str, str, str], Rate]:
        """Each (kind, op, site)'s rate over the scan when there was one, else over the observed steps."""
        steps = self._scanned or self._full
        keys = sorted({key for step in steps for key in step})
        return {key: rate([step[key] for step in steps]) for key in keys}

    def periodic(self) -> list[tuple[int, int]]:
        out = []
        for r in self._rates().values() if self._scanned else ():
            if r.periodic and r.offset is not None and r.every is not None:
                out.append((r.every, r.offset))
        return sorted(set(out))

    def finish(self) -> None:
        if self._trace is not None:
            self._trace.end()

    def metrics(self, timings: WindowTimings) -> list[Metric]:
        k = len(self._full)
        if k == 0 and not self._scanned:
            return [
                Metric.unavailable(
                    "syncs_per_step", "observe_steps=0: no step was observed, so syncs were not counted", "syncs/step"
                )
            ]
        rates = self._rates()
        per_site: dict[tuple[str, str, str], float] = {key: r.per_step for key, r in rates.items()}
        detail: dict[str, Any] = {"observed_steps": k}
        if self._scanned:
            detail["watched_steps"] = len(self._scanned)
        if self._trace is not None and k:
            self._add_runtime(per_site, k, detail)
        sites = []
        for (kind, op, site), per_step in sorted(per_site.items(), key=lambda kv: (-kv[1], kv[0])):
            entry: dict[str, Any] = {"kind": kind, "op": op, "site": site, "per_step": per_step}
            entry.update(self._sites.identity(site) if self._sites is not None else {})
            r = rates.get((kind, op, site))
            if r is not None and r.every != 1:
                entry["every"] = r.every
                entry["seen"] = r.describe()
            sites.append(entry)
        detail["sites"] = sites
        kinds: Counter[str] = Counter()
        for entry in sites:
            kinds[entry["kind"]] += entry["per_step"]
        detail["kinds"] = {kind: kinds[kind] for kind in sorted(kinds, key=lambda name: (-kinds[name], name))}
        detail["by"] = by_identity(sites)  # line-free: the committed exact file's breakdown
        return [Metric("syncs_per_step", sum(per_site.values()), "syncs/step", detail=detail)]

    def _add_runtime(self, per_site: dict[tuple[str, str, str], float], k: int, detail: dict[str, Any]) -> None:
        """CUDA: the runtime's own sync calls in the observed steps (the ground truth) against the waits the rules
        counted that are runtime calls (every kind but the pageable copy: a staging copy is no call). Calls beyond
        them become one ``CUDA runtime sync`` entry, named by the operations that made them, at the line where sync
        debug mode warned beyond the rules' count if it did (the profiler names operations, not lines). Fewer calls
        than counted is recorded as ``rules_not_seen``: the rules' count stands, and the sync truth table
        (scripts/sync_truth.py) shows the difference."""
        assert self._trace is not None
        trace = self._trace
        counted: Counter[str] = Counter()
        for step in self._full:
            for (kind, _, site), n in step.items():
                if KIND_ROW[SyncKind(kind)].runtime_call:
                    counted[site] += n
        runtime = sum(trace.runtime.values())
        if runtime > sum(counted.values()):
            warned = [(n - counted[site], site) for site, n in trace.warned.items() if n > counted[site]]
            site = max(warned)[1] if warned else "<unknown>"
            ops = ", ".join(op for op, _ in trace.ops.most_common(2)) or "?"
            calls = ", ".join(f"{name} x{n}" for name, n in trace.runtime.most_common())
            key = (SyncKind.RUNTIME.value, f"runtime ({calls}; {ops})", site)
            per_site[key] = per_site.get(key, 0.0) + (runtime - sum(counted.values())) / k
        elif runtime < sum(counted.values()):
            detail["rules_not_seen"] = (sum(counted.values()) - runtime) / k
        detail["cuda_runtime_syncs"] = dict(trace.runtime)
        detail["cuda_runtime_per_step"] = runtime / k
        detail["cuda_runtime_ops"] = {op: n / k for op, n in trace.ops.most_common(12)}
        detail["cuda_debug_mode_sites"] = {site: n / k for site, n in sorted(trace.warned.items())}
        if trace.probes_own:  # the probes' own work (label checks, the loader's fetch): not the step's
            detail["probes_own_syncs"] = trace.probes_own
        if trace.error:
            detail["cuda_trace"] = trace.error
