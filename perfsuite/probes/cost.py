"""Exact cost counters: the work a step does, counted in the observed steps, identical on any machine.

A change that makes a step do more work changes these numbers exactly, even
where its time cost drowns in a CPU runner's noise:

* ops_per_step: aten operations dispatched per step (a TorchDispatchMode
  sees each operation once, after autograd), with counts by operation name
  in ``detail["by"]`` so a regression names its top movers (an NCHW model fed
  a channels_last input pays a layout copy before every convolution).
* h2d_bytes_per_step: bytes the step's own code moves host->device with
  ``Tensor.to(device)``/``.cuda()``/``copy_``, by dtype in ``detail["by"]``.
  Masks shipped as int64 instead of uint8 copy 8x the bytes. On a CPU run the
  same calls are counted (a CPU tensor ``.to`` the run's device): they are the
  copies a GPU run makes; calls issued inside torch itself are not the step's.
  A ``.to("cpu")`` that reads back a CPU tensor is counted there too; on CUDA
  only real CPU->CUDA copies count.
* flops_per_step: ``torch.utils.flop_counter.FlopCounterMode``'s total.
* input_format: the dtype and memory format of the model's first input and
  of its parameters, e.g. ``input float32 channels_last; params float32
  contiguous``. Any change is reported (float64 inputs, a layout mismatch).

Counting needs dispatch modes, so like every instrumenting probe this one
only watches the observed steps, after the measured window.
"""

from __future__ import annotations

import contextlib
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

from perfsuite.core.results import Metric
from perfsuite.probes.base import Probe, RunContext, WindowTimings


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


class CostProbe(Probe):
    """Counts ops, host->device bytes and FLOPs per observed step, and the model's input format."""

    name = "cost"

    def __init__(self) -> None:
        self._ctx: RunContext | None = None
        self._observed = 0
        self.ops: Counter[str] = Counter()
        self.h2d: Counter[str] = Counter()
        self.flops = 0
        self.formats: list[str] = []
        self.flop_error: str | None = None

    def setup(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._observed, self.flops, self.flop_error = 0, 0, None
        self.ops, self.h2d, self.formats = Counter(), Counter(), []

    def _modes(self) -> tuple[Any, Any]:
        import torch
        from torch.overrides import TorchFunctionMode
        from torch.utils._python_dispatch import TorchDispatchMode

        from perfsuite.probes.syncs import _Sites

        assert self._ctx is not None
        probe, sites = self, _Sites()
        run_device = torch.device(self._ctx.device)
        on_cuda = run_device.type == "cuda"

        def moved(src: Any, dst: Any) -> None:
            if not isinstance(src, torch.Tensor) or src.device.type != "cpu" or dst is None:
                return
            if torch.device(dst).type != run_device.type:
                return
            if not sites.find(sys._getframe(2))[1]:  # issued inside torch, not by the step's code
                return
            probe.h2d[str(src.dtype).replace("torch.", "")] += src.numel() * src.element_size()

        def destination(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            for arg in (*args[1:], kwargs.get("device")):
                if isinstance(arg, (str, torch.device)):
                    return arg
                if isinstance(arg, torch.Tensor):
                    return arg.device
            return None

        class CopyCount(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                if func is torch.Tensor.to and args:
                    moved(args[0], destination(args, kwargs))
                elif func is torch.Tensor.cuda and args and on_cuda:
                    moved(args[0], "cuda")
                elif func is torch.Tensor.copy_ and len(args) > 1 and isinstance(args[0], torch.Tensor):
                    moved(args[1], args[0].device if on_cuda else None)
                return func(*args, **kwargs)

        class OpCount(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                probe.ops[func.overloadpacket.__name__] += 1
                return func(*args, **(kwargs or {}))

        return CopyCount(), OpCount()

    @contextlib.contextmanager
    def observe(self) -> Iterator[None]:
        from torch.utils.flop_counter import FlopCounterMode

        assert self._ctx is not None
        model = getattr(self._ctx.pipeline, "model", None)
        hook = None
        if model is not None and hasattr(model, "register_forward_pre_hook"):

            def record(module: Any, args: Any) -> None:
                import torch

                first = next((a for a in args if isinstance(a, torch.Tensor)), None)
                if first is not None and not self.formats[self._observed :]:
                    self.formats.append(describe_format(first, module))

            hook = model.register_forward_pre_hook(record)
        copies, ops = self._modes()
        flop_counter = FlopCounterMode(display=False)
        try:
            with flop_counter, ops, copies:
                yield
        finally:
            if hook is not None:
                hook.remove()
        self.flops += int(flop_counter.get_total_flops())
        self._observed += 1

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
        out = [
            Metric("ops_per_step", sum(self.ops.values()) / k, "ops/step", detail={"by": by_op, "observed_steps": k}),
            Metric(
                "h2d_bytes_per_step",
                sum(self.h2d.values()) / k,
                "bytes/step",
                detail={"by": by_dtype, "observed_steps": k},
            ),
            Metric("flops_per_step", self.flops / k, "FLOP/step", detail={"observed_steps": k}),
        ]
        formats = sorted(set(self.formats))
        if formats:
            out.append(Metric("input_format", " | ".join(formats), detail={"observed_steps": k}))
        else:
            out.append(
                Metric.unavailable(
                    "input_format",
                    "the model's forward was not seen in the observed steps (no pipeline.model with forward hooks)",
                )
            )
        return out
