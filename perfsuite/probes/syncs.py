"""syncs_per_step: the host-device synchronisations a training step forces, with call sites.

Seed 003 read ``.item()`` every step; each read stalls the host until the GPU
has drained its queue, so the GPU idles while the next step is launched. This
probe counts such operations in the observed steps (never in the measured
window) and says where each comes from: "Tensor.item at train.py:97, 1/step".

Two sources, merged per call site:

* Op level, any device: a TorchFunctionMode sees every sync-forcing tensor
  operation (``.item()``, ``.tolist()``, ``.cpu()``, ``.numpy()``, ``bool()``
  / ``if tensor``, ``int()``, ``nonzero``, ``unique``, boolean-mask indexing,
  ...). On CUDA an operation counts when its tensor is on the device. On the
  CPU, where nothing is a real sync, an operation counts when the step's own
  code issued it (so the signal exists in CPU CI); the same calls made inside
  torch (the optimizer reading its CPU step counter) are not counted, and
  ``.to(device)`` is never counted there because it cannot be told apart from
  the host-to-device copy that the GPU run would make.
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
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from perfsuite.core.results import Metric
from perfsuite.probes.base import Probe, RunContext, WindowTimings

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
# torch files that only route a call to its implementation: a call passing only through
# these was issued by the caller itself.
_PLUMBING = frozenset(
    os.path.join(*p.split("/"))
    for p in ("overrides.py", "_tensor.py", "functional.py", "_jit_internal.py", "utils/_device.py")
)
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


class _Sites:
    """Where calls come from: the first frame outside torch and perfsuite's harness."""

    def __init__(self) -> None:
        import torch

        import perfsuite.probes as probes_pkg

        self.torch_dir = os.path.dirname(torch.__file__) + os.sep
        self.harness = (
            os.path.dirname(probes_pkg.__file__) + os.sep,
            os.path.join(os.path.dirname(os.path.dirname(probes_pkg.__file__)), "harness", "runner.py"),
            os.path.join(os.path.dirname(os.path.dirname(probes_pkg.__file__)), "jobs", "contract.py"),
            os.path.dirname(warnings.__file__) + os.sep + "warnings.py",
            contextlib.__file__,
        )

    def find(self, frame: Any) -> tuple[str, bool]:
        """(site "path:line", issued directly by that site rather than by torch internals)."""
        direct = True
        while frame is not None:
            path = frame.f_code.co_filename
            if path.startswith(self.torch_dir):
                if path[len(self.torch_dir) :] not in _PLUMBING:
                    direct = False
            elif not path.startswith(self.harness):
                return f"{_short(path)}:{frame.f_lineno}", direct
            frame = frame.f_back
        return "<unknown>", direct


def _short(path: str) -> str:
    rel = os.path.relpath(path) if os.path.isabs(path) else path
    return path if rel.startswith("..") else rel


def _op_counter(
    ops: dict[Callable[..., Any], tuple[str, Callable[..., bool]]],
    sites: _Sites,
    cuda: bool,
    counts: Counter[tuple[str, str]],
) -> Any:
    """A TorchFunctionMode that adds (op, site) to ``counts`` for each sync-forcing call."""
    import torch
    from torch.overrides import TorchFunctionMode

    class SyncOpCounter(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            entry = ops.get(func)
            if entry is not None and args and isinstance(args[0], torch.Tensor) and entry[1](args, kwargs):
                site, direct = sites.find(sys._getframe(1))
                # On the CPU, .to(device) is the host-to-device copy of a GPU run: never a sync.
                if (args[0].device.type != "cpu") if cuda else (direct and func is not torch.Tensor.to):
                    counts[(entry[0], site)] += 1
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
                self.warned[("sync (debug mode)", self.sites.find(sys._getframe(1))[0])] += 1
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
    """Counts sync-forcing operations per observed step, with their call sites."""

    name = "syncs"

    def __init__(self) -> None:
        self._ctx_steps = 0
        self._cuda = False
        self._observed = 0
        self._counts: Counter[tuple[str, str]] = Counter()
        self._trace: _CudaTrace | None = None
        self._ops: dict[Callable[..., Any], tuple[str, Callable[..., bool]]] = {}
        self._sites: _Sites | None = None

    def setup(self, ctx: RunContext) -> None:
        self._ctx_steps = ctx.observe_steps
        self._cuda = ctx.device.startswith("cuda")
        self._observed = 0
        self._counts = Counter()
        self._ops, self._sites = _sync_ops(), _Sites()
        self._trace = _CudaTrace(self._sites) if self._cuda else None

    @contextlib.contextmanager
    def observe(self) -> Iterator[None]:
        assert self._sites is not None, "setup() first"
        if self._trace is not None and self._observed == 0:
            self._trace.begin()
        with contextlib.ExitStack() as stack:
            if self._trace is not None:
                stack.enter_context(self._trace.step())
            stack.enter_context(_eager_shield())
            stack.enter_context(_op_counter(self._ops, self._sites, self._cuda, self._counts))
            yield
        self._observed += 1
        if self._trace is not None and self._observed >= self._ctx_steps:
            self._trace.end()

    def finish(self) -> None:
        if self._trace is not None:
            self._trace.end()

    def metrics(self, timings: WindowTimings) -> list[Metric]:
        k = self._observed
        if k == 0:
            return [
                Metric.unavailable(
                    "syncs_per_step", "observe_steps=0: no step was observed, so syncs were not counted", "syncs/step"
                )
            ]
        per_site: Counter[tuple[str, str]] = Counter(self._counts)
        detail: dict[str, Any] = {"observed_steps": k}
        if self._trace is not None:
            # One sync seen by both the op counter and debug mode is one sync: take the larger per site.
            by_site = Counter(site for _, site in per_site.elements())
            for (op, site), n in self._trace.warned.items():
                if n > by_site[site]:
                    per_site[(op, site)] += n - by_site[site]
            runtime = sum(self._trace.runtime.values())
            missing = runtime - sum(per_site.values())
            if missing > 0:
                calls = ", ".join(f"{name} x{n}" for name, n in self._trace.runtime.most_common())
                per_site[(f"unattributed CUDA sync ({calls})", "<unknown>")] += missing
            detail["cuda_runtime_syncs"] = dict(self._trace.runtime)
            if self._trace.error:
                detail["cuda_trace"] = self._trace.error
        sites = [{"op": op, "site": site, "per_step": n / k} for (op, site), n in per_site.most_common()]
        detail["sites"] = sites
        total = sum(per_site.values())
        return [Metric("syncs_per_step", total / k, "syncs/step", detail=detail)]
