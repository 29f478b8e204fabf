"""graph_breaks, recompiles, compile_s on planted tiny models (backend="eager": dynamo's counting, no C++ build)."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn

from perfsuite.core.knobs import Knobs
from perfsuite.probes.base import WindowTimings
from perfsuite.probes.compile import CompileProbe

TIMINGS = WindowTimings(start_s=0.0, end_s=1.0, steps=2, batch_size=1)


class TwoLayer(nn.Module):
    def __init__(self, planted_break: bool) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 2)
        self.planted_break = planted_break

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.a(x))
        if self.planted_break:
            torch._dynamo.graph_break()
        return self.b(x)


def _measure(model: nn.Module, inputs: list[torch.Tensor], compile: str | None = "default") -> dict:
    probe = CompileProbe()
    probe.setup(SimpleNamespace(knobs=Knobs.from_flat(compile=compile), device="cpu", observe_steps=0))
    compiled = torch.compile(model, backend="eager") if compile else model
    for x in inputs:
        compiled(x).sum().backward()
    probe.stop()
    return {m.name: m for m in probe.metrics(TIMINGS)}


def test_one_planted_graph_break_is_one_break_with_its_reason() -> None:
    m = _measure(TwoLayer(planted_break=True), [torch.randn(3, 4)] * 3)
    assert m["graph_breaks"].value == 1
    [reason] = m["graph_breaks"].detail["reasons"]
    assert "graph_break()" in reason["reason"] and reason["count"] == 1
    assert m["graph_breaks"].detail["graphs"] == 2


def test_a_clean_model_has_zero_breaks_and_zero_recompiles() -> None:
    m = _measure(TwoLayer(planted_break=False), [torch.randn(3, 4)] * 3)
    assert m["graph_breaks"].value == 0 and m["graph_breaks"].detail["reasons"] == []
    assert m["recompiles"].value == 0
    assert m["compile_s"].value > 0


def test_a_changed_input_shape_is_one_recompile_with_its_reason() -> None:
    m = _measure(TwoLayer(planted_break=False), [torch.randn(3, 4), torch.randn(5, 4)])
    assert m["recompiles"].value == 1
    assert "size" in m["recompiles"].detail["reasons"][0]["reason"]


def test_an_uncompiled_run_reports_unavailable_not_zero() -> None:
    m = _measure(TwoLayer(planted_break=True), [torch.randn(3, 4)], compile=None)
    for name in ("graph_breaks", "recompiles", "compile_s"):
        assert m[name].value is None and m[name].reason == "compile=None: nothing compiled"


def test_a_break_is_named_at_its_line_and_a_recompile_at_its_frames_first_line() -> None:
    import inspect

    source, first = inspect.getsourcelines(TwoLayer.forward)
    breaking = first + next(i for i, text in enumerate(source) if "graph_break()" in text)
    m = _measure(TwoLayer(planted_break=True), [torch.randn(3, 4)])
    [site] = m["graph_breaks"].detail["sites"]
    assert site["site"].endswith(f"test_probe_compile.py:{breaking}") and site["per_step"] == 1
    assert (site["op"], site["code"]) == ("forward", "torch._dynamo.graph_break()")
    m = _measure(TwoLayer(planted_break=False), [torch.randn(3, 4), torch.randn(5, 4)])
    [site] = m["recompiles"].detail["sites"]
    assert site["op"] == "forward" and site["site"].endswith(f":{first}")
