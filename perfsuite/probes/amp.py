"""amp_engaged and amp_lowp_frac: did mixed precision actually happen?

Seed 003's config said ``amp: true``, the code compared it with ``'bf16'``,
and the model trained in FP32 for weeks with nothing to show it. This probe
looks at what the forward pass computed in the observed steps:

* amp_lowp_frac: of the matmul/convolution outputs of the forward pass (aten
  mm, addmm, bmm, baddbmm, convolution, ..., seen by a TorchDispatchMode, so
  functional calls count as well as nn.Linear/nn.Conv), the fraction in
  bfloat16/float16. 0.0 for a silent-FP32 configuration.
* amp_engaged: autocast was enabled for the run's device while the forward
  ran (seen by a TorchFunctionMode, since autocast has already been applied
  when an op reaches the dispatch mode) AND produced low-precision outputs.

* grad_scaler_bf16: GradScaler.scale calls per observed step when the forward's
  low-precision outputs were bfloat16. bf16 has fp32's exponent range, so loss
  scaling only adds work (unscale, inf checks, and a host read of found_inf).

Only forward ops with grad enabled are counted: backward ops inherit their
dtypes, and no-grad work such as GPU augmentation (small FP32 matrix maths in
Kornia) is not the model. Under the dispatch mode torch.compile runs the model
eagerly, so for a compiled model this reports eager autocast's dtypes, which
are the ones the compiled graph was traced with; compiled caches are untouched.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from perfsuite.core.results import Metric
from perfsuite.probes.base import Probe, RunContext, WindowTimings

MATMUL_CONV_OPS = frozenset(
    (
        "mm",
        "addmm",
        "bmm",
        "baddbmm",
        "matmul",
        "linear",
        "convolution",
        "_convolution",
        "conv2d",
        "conv1d",
        "conv3d",
        "cudnn_convolution",
        "mkldnn_convolution",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
    )
)


class AmpProbe(Probe):
    """Counts forward matmul/conv outputs by dtype in observed steps, and whether autocast was on."""

    name = "amp"

    def __init__(self) -> None:
        self._device_type = "cpu"
        self._observed = 0
        self.lowp = 0
        self.total = 0
        self.dtypes: dict[str, int] = {}
        self.autocast_calls = 0
        self.scale_calls = 0

    def setup(self, ctx: RunContext) -> None:
        self._device_type = ctx.device.split(":")[0]
        self._observed = self.lowp = self.total = self.autocast_calls = self.scale_calls = 0
        self.dtypes = {}

    def _modes(self) -> tuple[Any, Any]:
        import torch
        from torch.overrides import TorchFunctionMode
        from torch.utils._python_dispatch import TorchDispatchMode

        probe, device_type = self, self._device_type
        low = (torch.bfloat16, torch.float16)

        class AutocastWatch(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                if torch.is_autocast_enabled(device_type):
                    probe.autocast_calls += 1
                return func(*args, **(kwargs or {}))

        class DtypeCount(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                if (
                    func.overloadpacket.__name__ in MATMUL_CONV_OPS
                    and torch.is_grad_enabled()
                    and torch._C._current_autograd_node() is None
                ):
                    first = out[0] if isinstance(out, (tuple, list)) else out
                    if isinstance(first, torch.Tensor) and first.is_floating_point():
                        name = str(first.dtype).replace("torch.", "")
                        probe.dtypes[name] = probe.dtypes.get(name, 0) + 1
                        probe.total += 1
                        probe.lowp += first.dtype in low
                return out

        return AutocastWatch(), DtypeCount()

    @contextlib.contextmanager
    def _scale_watch(self) -> Iterator[None]:
        """Count enabled GradScaler.scale calls (the class method, patched for this step only)."""
        import torch

        cls = torch.amp.GradScaler
        original = cls.scale
        probe = self

        def scale(scaler: Any, outputs: Any) -> Any:
            if scaler.is_enabled():
                probe.scale_calls += 1
            return original(scaler, outputs)

        cls.scale = scale  # type: ignore[method-assign,assignment]
        try:
            yield
        finally:
            cls.scale = original  # type: ignore[method-assign]

    @contextlib.contextmanager
    def observe(self) -> Iterator[None]:
        watch, count = self._modes()
        with self._scale_watch(), count, watch:
            yield
        self._observed += 1

    def metrics(self, timings: WindowTimings) -> list[Metric]:
        if self._observed == 0:
            why = "observe_steps=0: no step was observed, so output dtypes were not seen"
            return [
                Metric.unavailable("amp_engaged", why),
                Metric.unavailable("amp_lowp_frac", why, "fraction"),
                Metric.unavailable("grad_scaler_bf16", why, "calls/step"),
            ]
        if self.total == 0:
            why = "the observed forward passes ran no matmul or convolution"
            return [
                Metric.unavailable("amp_engaged", why),
                Metric.unavailable("amp_lowp_frac", why, "fraction"),
                Metric.unavailable("grad_scaler_bf16", why, "calls/step"),
            ]
        autocast_on = self.autocast_calls > 0
        detail = {
            "outputs": self.total,
            "dtypes": dict(self.dtypes),
            "autocast_enabled": autocast_on,
            "observed_steps": self._observed,
        }
        bf16_only = self.dtypes.get("bfloat16", 0) > 0 and not self.dtypes.get("float16", 0)
        misuse = self.scale_calls / self._observed if bf16_only else 0.0
        return [
            Metric("amp_engaged", autocast_on and self.lowp > 0, detail=detail),
            Metric("amp_lowp_frac", self.lowp / self.total, "fraction", detail=detail),
            Metric(
                "grad_scaler_bf16",
                misuse,
                "calls/step",
                detail={"scale_calls": self.scale_calls, "observed_steps": self._observed},
            ),
        ]
