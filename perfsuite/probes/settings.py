"""The process-wide settings the seeds' fixes set, and where the loader was built, for the settings judge.

A Result records its loader's settings as knobs (``num_workers``, ``pin_memory``, ...). What a user's script
sets outside the loader is not a knob perfsuite applied, so it is read here as the run had it, once the
script has reached its first batch: cuDNN's autotuner and TF32 flags, float32 matmul precision and the
intra-op thread count, into ``Result.environment["settings"]``, beside the line that built the training
DataLoader (seen by the harness's constructor hook, :func:`perfsuite.probes.sites.built_at`). The judge
(:mod:`perfsuite.judge.settings`) compares them between base and head.
"""

from __future__ import annotations

from typing import Any

from perfsuite.probes.base import Probe, RunContext
from perfsuite.probes.sites import built_at


def read_flags() -> dict[str, Any]:
    """The process-wide switches as they are now (torch's backends; readable on any build)."""
    import torch

    return {
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "tf32": bool(torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32),
        "float32_matmul_precision": str(torch.get_float32_matmul_precision()),
        "intra_op_threads": int(torch.get_num_threads()),
    }


class SettingsProbe(Probe):
    """Reads the process's switches at the first measured step and where the training loader was built."""

    name = "settings"

    def __init__(self) -> None:
        self._ctx: RunContext | None = None
        self._read: dict[str, Any] = {}

    def setup(self, ctx: RunContext) -> None:
        self._ctx, self._read = ctx, {}

    def start(self) -> None:
        """At the window's start: the script has set its switches by its first batch."""
        self._read = read_flags()
        job = getattr(self._ctx, "job", None)
        where = built_at(getattr(job, "loader", None)) if job is not None else {}
        if where:
            self._read["loader_built_at"] = where

    def environment(self) -> dict[str, Any]:
        return {"settings": dict(self._read)} if self._read else {}
