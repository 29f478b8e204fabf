"""Where an observed step's time goes: host syncs (with their call sites) and host->device copies, timed.

``perfsuite doctor`` adds this probe to its runs; it is not one of the default
probes. In each observed step (after the window, never in it) a
TorchFunctionMode times every call the sync probe counts as a sync
(:mod:`perfsuite.probes.syncs`: ``.item()``, ``.cpu()``, ``bool(tensor)``, ...)
and every ``.to()``/``.cuda()`` that moves a host tensor to a CUDA device, with
the host clock, and keeps when each happened within its step. On a CPU run a
sync waits for nothing and there is no device copy, so both read near zero: the
doctor says so rather than inventing a GPU's cost.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from perfsuite.probes.base import Probe, RunContext


@dataclass
class ObservedStep:
    """One observed step: its host wall time, and each sync and copy as (start ms in the step, ms, label)."""

    wall_ms: float = 0.0
    syncs: list[tuple[float, float, str]] = field(default_factory=list)  # (start, duration, "op at site")
    copies: list[tuple[float, float, str]] = field(default_factory=list)

    @property
    def sync_ms(self) -> float:
        return sum(d for _, d, _ in self.syncs)

    @property
    def copy_ms(self) -> float:
        return sum(d for _, d, _ in self.copies)


class StepLedgerProbe(Probe):
    """Times syncs and device copies inside the observed steps (see the module docstring)."""

    name = "stepledger"

    def __init__(self) -> None:
        self.steps: list[ObservedStep] = []
        self._cuda = False

    def setup(self, ctx: RunContext) -> None:
        self.steps = []
        self._cuda = ctx.device.startswith("cuda")

    @contextlib.contextmanager
    def observe(self) -> Iterator[None]:
        import torch
        from torch.overrides import TorchFunctionMode

        from perfsuite.probes.syncs import _Sites, _sync_ops

        ops, sites, cuda = _sync_ops(), _Sites(), self._cuda
        step = ObservedStep()
        start = time.perf_counter()

        def moves_to_cuda(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
            if func not in (torch.Tensor.to, torch.Tensor.cuda) or not args or not isinstance(args[0], torch.Tensor):
                return False
            if args[0].device.type != "cpu":
                return False
            if func is torch.Tensor.cuda:
                return True
            target = kwargs.get("device", args[1] if len(args) > 1 else None)
            return (isinstance(target, (str, torch.device)) and str(target).startswith("cuda")) or (
                isinstance(target, torch.Tensor) and target.device.type == "cuda"
            )

        class Timer(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                entry = ops.get(func)
                is_sync = bool(entry and args and isinstance(args[0], torch.Tensor) and entry[2](args, kwargs))
                is_copy = cuda and moves_to_cuda(func, args, kwargs)
                if not (is_sync or is_copy):
                    return func(*args, **kwargs)
                site, direct = sites.find(sys._getframe(1))
                if is_sync and not is_copy:  # the sync probe's rule: on the CPU, only what the step's code issues
                    keep = args[0].device.type != "cpu" if cuda else (direct and func is not torch.Tensor.to)
                    if not keep:
                        return func(*args, **kwargs)
                t0 = time.perf_counter()
                out = func(*args, **kwargs)
                t1 = time.perf_counter()
                assert entry is not None or is_copy
                record = ((t0 - start) * 1e3, (t1 - t0) * 1e3, f"{entry[0] if is_sync and entry else 'copy'} at {site}")
                (step.syncs if is_sync else step.copies).append(record)
                return out

        with Timer():
            yield
        step.wall_ms = (time.perf_counter() - start) * 1e3
        self.steps.append(step)

    def summary(self) -> dict[str, Any]:
        """Per observed step on average: wall, sync and copy ms, and the sync sites with their ms per step."""
        n = len(self.steps)
        if n == 0:
            return {"observed_steps": 0}
        by_site: dict[str, float] = {}
        for s in self.steps:
            for _, ms, label in s.syncs:
                by_site[label] = by_site.get(label, 0.0) + ms / n
        return {
            "observed_steps": n,
            "wall_ms": sum(s.wall_ms for s in self.steps) / n,
            "sync_ms": sum(s.sync_ms for s in self.steps) / n,
            "copy_ms": sum(s.copy_ms for s in self.steps) / n,
            "syncs_per_step": sum(len(s.syncs) for s in self.steps) / n,
            "sync_sites": dict(sorted(by_site.items(), key=lambda kv: -kv[1])),
            "steps": [
                {"wall_ms": s.wall_ms, "syncs": [list(x) for x in s.syncs], "copies": [list(x) for x in s.copies]}
                for s in self.steps
            ],
        }
