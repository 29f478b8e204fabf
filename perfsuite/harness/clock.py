"""The device side of a run's clock: synchronising, per-step clocks, and batches kept on the device.

Shared by the runner's loop (:mod:`perfsuite.harness.runner`) and a script's
(:mod:`perfsuite.harness.script.drive`), so both time a step the same way.
"""

from __future__ import annotations

import time
from typing import Any


def synchronize(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


class StepClock:
    """Per-step durations: CUDA events on a GPU (no sync until the end), host clock on the CPU."""

    def __init__(self, device: Any) -> None:
        import torch

        self.cuda = device.type == "cuda"
        self._events: list[Any] = []
        self._host: list[float] = []
        self._event_cls: Any = torch.cuda.Event if self.cuda else None

    def mark(self) -> None:
        if self.cuda:
            event = self._event_cls(enable_timing=True)
            event.record()
            self._events.append(event)
        else:
            self._host.append(time.perf_counter())

    def discard_last(self) -> None:
        """Drop the last mark (a script's boundary that turned out not to be one: its loader's epoch ended)."""
        (self._events if self.cuda else self._host).pop()

    def durations_ms(self) -> list[float]:
        """Read after the window's closing synchronisation."""
        if self.cuda:
            return [a.elapsed_time(b) for a, b in zip(self._events, self._events[1:])]
        return [(b - a) * 1e3 for a, b in zip(self._host, self._host[1:])]


def mode_depth() -> tuple[int, int]:
    """How many torch function and dispatch modes are active: a probe must leave none in the window."""
    import torch

    return torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack()


def on_device(batch: Any, device: Any) -> Any:
    """The batch with every tensor moved to the device once (tuple, list and dict batches)."""
    import torch

    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: on_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(on_device(v, device) for v in batch)
    return batch


def clone_batch(batch: Any) -> Any:
    """A fresh copy per step, so a step that works in place on its input (``x.div_(255)``) sees the same data."""
    import torch

    if isinstance(batch, torch.Tensor):
        return batch.clone()
    if isinstance(batch, dict):
        return {k: clone_batch(v) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(clone_batch(v) for v in batch)
    return batch


def paired_ms(starts: StepClock, ends: StepClock) -> list[float]:
    """Durations from each mark of ``starts`` to the same mark of ``ends`` (read after a synchronisation)."""
    if starts.cuda:
        return [a.elapsed_time(b) for a, b in zip(starts._events, ends._events)]
    return [(b - a) * 1e3 for a, b in zip(starts._host, ends._host)]
