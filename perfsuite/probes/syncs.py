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
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from perfsuite.core.results import Metric
from perfsuite.probes.base import Probe, RunContext, WindowTimings
from perfsuite.probes.periods import Rate, rate
from perfsuite.probes.residency import Residency, residency_for
from perfsuite.probes.sites import Sites as _Sites
from perfsuite.probes.sites import by_identity

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


def _sync_ops() -> dict[Callable[..., Any], tuple[str, Callable[..., bool]]]:
    """func -> (op name, does this call force a sync?)."""
    import torch

    always: Callable[..., bool] = lambda args, kwargs: True  # noqa: E731
    ops: dict[Callable[..., Any], tuple[str, Callable[..., bool]]] = {}
    for name in _ALWAYS:
        ops[getattr(torch.Tensor, name)] = (f"Tensor.{name}", always)
    for name in _TORCH_FUNCS:
        ops[getattr(torch, name)] = (f"torch.{name}", always)
    ops[torch.Tensor.__getitem__] = ("Tensor.__getitem__[bool mask]", lambda a, k: _has_bool_index(a[1]))
    ops[torch.Tensor.__setitem__] = ("Tensor.__setitem__[bool mask]", lambda a, k: _has_bool_index(a[1]))
    ops[torch.where] = ("torch.where(cond)", lambda a, k: len(a) + len(k) == 1)
    for owner, label in ((torch, "torch"), (torch.Tensor, "Tensor")):
        ops[owner.repeat_interleave] = (
            f"{label}.repeat_interleave",
            lambda a, k: len(a) > 1 and isinstance(a[1], torch.Tensor) and k.get("output_size") is None,
        )
    ops[torch.Tensor.to] = ("Tensor.to(cpu)", _to_host)
    return ops


def _op_counter(
    ops: dict[Callable[..., Any], tuple[str, Callable[..., bool]]],
    sites: _Sites,
    residency: Residency,
    counts: Counter[tuple[str, str]],
) -> Any:
    """A TorchFunctionMode that adds (op, site) to ``counts`` for each sync-forcing call on a device tensor."""
    import torch
    from torch.overrides import TorchFunctionMode

    class SyncOpCounter(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            entry = ops.get(func)
            # On the CPU, .to(device) is the host-to-device copy of a GPU run: never a sync.
            if (
                entry is not None
                and args
                and isinstance(args[0], torch.Tensor)
                and entry[1](args, kwargs)
                and residency.on_device(args[0])
                and (residency.cuda or func is not torch.Tensor.to)
            ):
                counts[(entry[0], sites.find(sys._getframe(1))[0])] += 1
            return func(*args, **kwargs)

    return SyncOpCounter()


def _eager_shield() -> Any:
    """A no-op TorchDispatchMode: keeps torch.compile from recompiling under the function mode."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class EagerShield(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    return EagerShield()


class _CudaTrace:
    """CUDA only: runtime sync calls from the profiler, and sync-debug-mode warning sites.

    The profiler runs across all observed steps; each step is marked with a
    record_function range and only sync calls inside a mark are counted, so
    the profiler's own synchronisation at exit is not the workload's.
    """

    def __init__(self, sites: _Sites) -> None:
        self.sites = sites
        self.runtime: Counter[str] = Counter()
        self.warned: Counter[tuple[str, str]] = Counter()
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
                if self.sites.issued_by_probe(frame):
                    self.probes_own += 1  # the measurement's own read, not the step's
                else:
                    self.warned[("sync (debug mode)", self.sites.find(frame)[0])] += 1
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
        marks = [e.time_range for e in events if e.name == OBSERVED_MARK]
        for e in events:
            if e.name in CUDA_SYNC_CALLS and any(m.start <= e.time_range.start <= m.end for m in marks):
                self.runtime[e.name] += 1


class SyncProbe(Probe):
    """Counts sync-forcing operations per observed step, with their call sites and periods."""

    name = "syncs"
    scans = True

    def __init__(self) -> None:
        self._ctx_steps = 0
        self._cuda = False
        self._full: list[Counter[tuple[str, str]]] = []  # per observed step
        self._scanned: list[Counter[tuple[str, str]]] = []  # per period-scan step
        self._trace: _CudaTrace | None = None
        self._ops: dict[Callable[..., Any], tuple[str, Callable[..., bool]]] = {}
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
    def _watch(self, counts: Counter[tuple[str, str]], trace: bool) -> Iterator[None]:
        assert self._sites is not None and self._residency is not None, "setup() first"
        with contextlib.ExitStack() as stack:
            if trace and self._trace is not None:
                stack.enter_context(self._trace.step())
            stack.enter_context(_eager_shield())
            stack.enter_context(self._residency.tracking())
            stack.enter_context(_op_counter(self._ops, self._sites, self._residency, counts))
            yield

    @contextlib.contextmanager
    def observe(self) -> Iterator[None]:
        if self._trace is not None and not self._full:
            self._trace.begin()
        counts: Counter[tuple[str, str]] = Counter()
        with self._watch(counts, trace=True):
            yield
        self._full.append(counts)
        if self._trace is not None and len(self._full) >= self._ctx_steps:
            self._trace.end()

    @contextlib.contextmanager
    def scan(self) -> Iterator[None]:
        """A period-scan step: the op-level count only (no CUDA profiler), kept apart from the observed steps."""
        counts: Counter[tuple[str, str]] = Counter()
        with self._watch(counts, trace=False):
            yield
        self._scanned.append(counts)

    def _rates(self) -> dict[tuple[str, str], Rate]:
        """Each (op, site)'s rate over the scan when there was one, else over the observed steps."""
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
        per_site: dict[tuple[str, str], float] = {key: r.per_step for key, r in rates.items()}
        detail: dict[str, Any] = {"observed_steps": k}
        if self._scanned:
            detail["watched_steps"] = len(self._scanned)
        if self._trace is not None and k:
            # One sync seen by both the op counter and debug mode is one sync: take the larger per site.
            full: Counter[tuple[str, str]] = Counter()
            for step in self._full:
                full.update(step)
            by_site = Counter(site for _, site in full.elements())
            for (op, site), n in self._trace.warned.items():
                if n > by_site[site]:
                    per_site[(op, site)] = per_site.get((op, site), 0.0) + (n - by_site[site]) / k
            runtime = sum(self._trace.runtime.values())
            attributed = sum(max(0, n - by_site[s]) for (_, s), n in self._trace.warned.items())
            missing = runtime - sum(full.values()) - attributed - self._trace.probes_own
            if missing > 0:
                calls = ", ".join(f"{name} x{n}" for name, n in self._trace.runtime.most_common())
                per_site[(f"unattributed CUDA sync ({calls})", "<unknown>")] = missing / k
            detail["cuda_runtime_syncs"] = dict(self._trace.runtime)
            if self._trace.probes_own:  # the probes' own reads as their watchers closed: not the step's
                detail["probes_own_syncs"] = self._trace.probes_own
            if self._trace.error:
                detail["cuda_trace"] = self._trace.error
        sites = []
        for (op, site), per_step in sorted(per_site.items(), key=lambda kv: (-kv[1], kv[0])):
            entry: dict[str, Any] = {"op": op, "site": site, "per_step": per_step}
            entry.update(self._sites.identity(site) if self._sites is not None else {})
            r = rates.get((op, site))
            if r is not None and r.every != 1:
                entry["every"] = r.every
                entry["seen"] = r.describe()
            sites.append(entry)
        detail["sites"] = sites
        detail["by"] = by_identity(sites)  # line-free: the committed exact file's breakdown
        return [Metric("syncs_per_step", sum(per_site.values()), "syncs/step", detail=detail)]
