"""Exact cost counters: the work a step does, counted in the observed steps, identical on any machine.

A change that makes a step do more work changes these numbers exactly, even
where its time cost drowns in a CPU runner's noise:

* ops_per_step: aten operations dispatched per step (a TorchDispatchMode
  sees each operation once, after autograd), with counts by operation name
  in ``detail["by"]`` so a regression names its top movers (an NCHW model fed
  a channels_last input pays a layout copy before every convolution).
* h2d_bytes_per_step: bytes the step's own code moves host->device, by dtype
  in ``detail["by"]``: ``Tensor.to(device)``/``.cuda()`` of a host tensor,
  ``copy_`` of a host tensor into a device tensor, and ``torch.tensor``/
  ``torch.as_tensor``/``torch.asarray`` given ``device=`` (the data comes from
  the host). Masks shipped as int64 instead of uint8 copy 8x the bytes.
  Factories that only allocate (``torch.zeros(n, device=d)``) copy no host data
  and are not counted; nor are copies that stay on the host (``.to(float32)``,
  a read-back ``.cpu()``) or calls issued inside torch itself. On a CPU run
  "host" and "device" are where a GPU run would hold each tensor
  (:mod:`perfsuite.probes.residency`), so the count is the GPU run's.
* flops_per_step: floating-point operations, from torch's own formulas
  (``torch.utils.flop_counter.flop_registry``) applied per dispatched op. Not
  ``FlopCounterMode``: it registers *global* module hooks, under which
  ``torch.compile(module)`` warns at the user's ``model(x)`` and fires hooks
  twice; this probe registers no global hook.
* input_format: the dtype and memory format of the model's first input and
  of its parameters, e.g. ``input float32 channels_last; params float32
  contiguous``. Any change is reported (float64 inputs, a layout mismatch).

Each count is also kept by call site (``detail["sites"]``, per step): the
first frame outside torch and perfsuite's harness, as the sync probe finds it
(:mod:`perfsuite.probes.sites`), so ``aten::zero_`` from a
``zero_grad(set_to_none=False)`` is named at that line, an ``int64`` copy at
the ``.to(device)`` that makes it, the input format at the ``model(x)`` call.
``detail["by_site"]`` holds the same counts under line-free labels (what the
committed exact file keeps). A backward's ops are the ``loss.backward()``
line's; on CUDA, where autograd runs them on its own thread, ``<unknown>``.

Counting needs dispatch modes, so like every instrumenting probe this one
only watches the observed steps, after the measured window. A copy made with
``non_blocking=True`` on a CPU run is a plain host copy: the probe says so in
a note (a GPU run's overlap cannot show here).
"""

from __future__ import annotations

import contextlib
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

from perfsuite.core.results import Metric
from perfsuite.probes.base import Probe, RunContext, WindowTimings
from perfsuite.probes.residency import destination, residency_for
from perfsuite.probes.sites import Sites, site_counts, site_detail


def memory_format(t: Any) -> str:
    """``contiguous``, ``channels_last`` or ``strided`` (neither): how a 4-d tensor is laid out."""
    import torch

    if t.is_contiguous():
        return "contiguous"
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last):
        return "channels_last"
    return "strided"


def describe_format(x: Any, model: Any) -> str:
    """``input float32 contiguous; params float32 contiguous`` (4-d parameters decide the params' layout)."""
    params = list(model.parameters()) if model is not None else []
    dtypes = sorted({str(p.dtype).replace("torch.", "") for p in params}) or ["none"]
    layouts = sorted({memory_format(p) for p in params if p.dim() == 4}) or ["contiguous"]
    return (
        f"input {str(x.dtype).replace('torch.', '')} {memory_format(x)}; params {'/'.join(dtypes)} {'/'.join(layouts)}"
    )


DATA_FACTORIES = ("tensor", "as_tensor", "asarray")  # torch functions that copy host data to the device given


class CostProbe(Probe):
    """Counts ops, host->device bytes and FLOPs per observed step, and the model's input format."""

    name = "cost"

    def __init__(self) -> None:
        self._ctx: RunContext | None = None
        self._residency: Any = None
        self._observed = 0
        self.ops: Counter[str] = Counter()
        self.h2d: Counter[str] = Counter()
        self.flops = 0
        self.formats: list[str] = []
        self.non_blocking = 0
        self._sites: Sites | None = None
        # (op or dtype or format, site) -> total over the observed steps
        self.op_sites: Counter[tuple[str, str]] = Counter()
        self.h2d_sites: Counter[tuple[str, str]] = Counter()
        self.flop_sites: Counter[tuple[str, str]] = Counter()
        self.format_sites: Counter[tuple[str, str]] = Counter()
        self.copy_modes: Counter[tuple[bool, str]] = Counter()  # (non_blocking, site) of the step's own .to/.cuda

    def setup(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._residency = residency_for(ctx)
        self._observed, self.flops, self.non_blocking = 0, 0, 0
        self.ops, self.h2d, self.formats = Counter(), Counter(), []
        self._sites = Sites()
        self.op_sites, self.h2d_sites, self.flop_sites, self.format_sites = Counter(), Counter(), Counter(), Counter()
        self.copy_modes = Counter()

    def _modes(self) -> tuple[Any, Any]:
        import torch
        from torch.overrides import TorchFunctionMode
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils.flop_counter import flop_registry

        assert self._ctx is not None and self._sites is not None
        probe, sites, residency = self, self._sites, self._residency
        factories = {getattr(torch, name) for name in DATA_FACTORIES if hasattr(torch, name)}

        def count(tensor: Any, site: str) -> None:
            dtype, n = str(tensor.dtype).replace("torch.", ""), tensor.numel() * tensor.element_size()
            probe.h2d[dtype] += n
            probe.h2d_sites[(dtype, site)] += n

        def from_step() -> tuple[str, bool]:
            return sites.find(sys._getframe(2))  # (site, issued by the step's code rather than inside torch)

        class CopyCount(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                host: Any = None  # the host tensor this call copies to the device, if it does
                if func in (torch.Tensor.to, torch.Tensor.cuda) and args and isinstance(args[0], torch.Tensor):
                    dest = "cuda" if func is torch.Tensor.cuda else destination(args, kwargs)
                    if dest is not None and residency.is_run_device(dest) and not residency.on_device(args[0]):
                        host = args[0]
                    if kwargs.get("non_blocking") and not residency.cuda:
                        probe.non_blocking += 1
                elif (
                    func is torch.Tensor.copy_
                    and len(args) > 1
                    and isinstance(args[1], torch.Tensor)
                    and residency.on_device(args[0])
                    and not residency.on_device(args[1])
                ):
                    host = args[1]
                out = func(*args, **kwargs)
                if host is not None:
                    site, direct = from_step()
                    if direct:
                        count(host, site)
                        if func is not torch.Tensor.copy_:
                            probe.copy_modes[(bool(kwargs.get("non_blocking")), site)] += 1
                elif (
                    func in factories
                    and residency.is_run_device(kwargs.get("device", "meta"))
                    and not (args and isinstance(args[0], torch.Tensor) and residency.on_device(args[0]))
                    and isinstance(out, torch.Tensor)
                ):
                    site, direct = from_step()
                    if direct:
                        count(out, site)
                return out

        class OpCount(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                out = func(*args, **kwargs)
                packet = func.overloadpacket
                probe.ops[packet.__name__] += 1
                site = sites.find(sys._getframe(1))[0]
                probe.op_sites[(f"aten::{packet.__name__}", site)] += 1
                formula = flop_registry.get(packet)
                if formula is not None:
                    flops = int(formula(*args, **kwargs, out_val=out))
                    probe.flops += flops
                    if flops:
                        probe.flop_sites[(f"aten::{packet.__name__}", site)] += flops
                return out

        return CopyCount(), OpCount()

    @contextlib.contextmanager
    def observe(self) -> Iterator[None]:
        assert self._ctx is not None
        model = getattr(self._ctx.pipeline, "model", None)
        hook = None
        if model is not None and hasattr(model, "register_forward_pre_hook"):

            def record(module: Any, args: Any) -> None:
                import torch

                first = next((a for a in args if isinstance(a, torch.Tensor)), None)
                if first is not None and not self.formats[self._observed :]:
                    self.formats.append(describe_format(first, module))
                    if self._sites is not None:  # the model(x) line: where the input arrives in this format
                        self.format_sites[(self.formats[-1], self._sites.find(sys._getframe(1))[0])] += 1

            hook = model.register_forward_pre_hook(record)  # this module's own hook, for observed steps only
        copies, ops = self._modes()
        try:
            with self._residency.tracking(), ops, copies:
                yield
        finally:
            if hook is not None:
                hook.remove()
        self._observed += 1

    def _copies(self, k: int) -> list[dict[str, Any]]:
        """The step's own ``.to(device)``/``.cuda()`` copies by site, with their ``non_blocking`` (a setting)."""
        out = []
        for (non_blocking, site), n in sorted(self.copy_modes.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            entry = {"site": site, "non_blocking": non_blocking, "per_step": n / k}
            entry.update(self._sites.identity(site) if self._sites is not None else {})
            out.append(entry)
        return out

    def notes(self) -> list[str]:
        if not self.non_blocking:
            return []
        return [
            f"non_blocking=True on {self.non_blocking} copies per {self._observed} observed step(s) of a CPU run: "
            "here they are plain host copies; on CUDA, from pinned memory (pin_memory=True), they overlap with "
            "compute, so this run's copy cost is not the GPU run's"
        ]

    def metrics(self, timings: WindowTimings) -> list[Metric]:
        k = self._observed
        if k == 0:
            why = "observe_steps=0: no step was observed, so its work was not counted"
            return [
                Metric.unavailable(n, why)
                for n in ("ops_per_step", "h2d_bytes_per_step", "flops_per_step", "input_format")
            ]
        by_op = {name: n / k for name, n in sorted(self.ops.items(), key=lambda kv: (-kv[1], kv[0]))}
        by_dtype = {name: n / k for name, n in sorted(self.h2d.items())}

        def sites(counts: Counter[tuple[str, str]]) -> dict[str, Any]:
            return site_detail(site_counts(counts, k, self._sites))

        out = [
            Metric(
                "ops_per_step",
                sum(self.ops.values()) / k,
                "ops/step",
                detail={"by": by_op, "observed_steps": k, **sites(self.op_sites)},
            ),
            Metric(
                "h2d_bytes_per_step",
                sum(self.h2d.values()) / k,
                "bytes/step",
                detail={"by": by_dtype, "observed_steps": k, **sites(self.h2d_sites), "copies": self._copies(k)},
            ),
            Metric(
                "flops_per_step", self.flops / k, "FLOP/step", detail={"observed_steps": k, **sites(self.flop_sites)}
            ),
        ]
        formats = sorted(set(self.formats))
        if formats:
            detail = {"observed_steps": k, **sites(self.format_sites)}
            out.append(Metric("input_format", " | ".join(formats), detail=detail))
        else:
            out.append(
                Metric.unavailable(
                    "input_format",
                    "the model's forward was not seen in the observed steps (no pipeline.model with forward hooks)",
                )
            )
        return out
