"""Exact cost counters on planted steps: ops, host->device bytes with dtypes, FLOPs, input format, GradScaler+bf16."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from perfsuite.core.knobs import Knobs
from perfsuite.probes.amp import AmpProbe
from perfsuite.probes.base import WindowTimings
from perfsuite.probes.cost import CostProbe, describe_format

TIMINGS = WindowTimings(start_s=0.0, end_s=1.0, steps=2, batch_size=1)


def _measure(step, model=None, steps: int = 2, probe=None):  # type: ignore[no-untyped-def]
    probe = probe or CostProbe()
    probe.setup(
        SimpleNamespace(device="cpu", observe_steps=steps, knobs=Knobs(), pipeline=SimpleNamespace(model=model))
    )
    for _ in range(steps):
        with probe.observe():
            step()
    probe.finish()
    return {m.name: m for m in probe.metrics(TIMINGS)}


def test_ops_per_step_counts_each_dispatched_op_with_names() -> None:
    a, b = torch.ones(3), torch.ones(3)
    m = _measure(lambda: (a + b, a * b, a * b))
    assert m["ops_per_step"].value == 3.0
    assert m["ops_per_step"].detail["by"] == {"mul": 2.0, "add": 1.0}


def test_host_to_device_bytes_are_counted_by_dtype_from_the_steps_own_to_calls() -> None:
    images = torch.zeros(4, 3, 8, 8, dtype=torch.uint8)
    masks = torch.zeros(4, 8, 8, dtype=torch.int64)

    def step() -> None:
        images.to("cpu", non_blocking=True)
        masks.to(torch.device("cpu"))
        masks.to(torch.float32)  # a dtype change, no device: not a copy to the device

    m = _measure(step)
    assert m["h2d_bytes_per_step"].value == 4 * 3 * 8 * 8 + 4 * 8 * 8 * 8
    assert m["h2d_bytes_per_step"].detail["by"] == {"int64": 2048.0, "uint8": 768.0}


def test_flops_per_step_are_the_flop_counters_total() -> None:
    model = nn.Linear(4, 3, bias=False)
    x = torch.randn(2, 4)
    with torch.no_grad():
        m = _measure(lambda: model(x), model=model)
    assert m["flops_per_step"].value == 2 * 2 * 4 * 3  # one (2x4)@(4x3) matmul


def test_input_format_names_dtype_and_layout_of_input_and_parameters() -> None:
    model = nn.Conv2d(3, 4, 3)
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        plain = _measure(lambda: model(x), model=model)["input_format"].value
        last = _measure(lambda: model(x.contiguous(memory_format=torch.channels_last)), model=model)
    assert plain == "input float32 contiguous; params float32 contiguous"
    assert last["input_format"].value == "input float32 channels_last; params float32 contiguous"
    assert describe_format(x.double(), model).startswith("input float64 contiguous")


def test_no_observed_step_means_unavailable_not_zero() -> None:
    m = _measure(lambda: None, steps=0)
    assert all(v.value is None and "observe_steps=0" in v.reason for v in m.values())


@pytest.mark.parametrize("dtype,expected", [(torch.bfloat16, 1.0), (torch.float16, 0.0)])
def test_grad_scaler_with_bf16_is_a_finding_and_with_fp16_is_not(dtype, expected) -> None:
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    x = torch.randn(3, 4)

    def step() -> None:
        with torch.autocast("cpu", dtype=dtype):
            loss = model(x).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    probe = AmpProbe()
    probe.setup(SimpleNamespace(device="cpu", observe_steps=2, knobs=Knobs()))
    for _ in range(2):
        with probe.observe():
            step()
    metrics = {m.name: m for m in probe.metrics(TIMINGS)}
    assert metrics["grad_scaler_bf16"].value == expected
    assert metrics["grad_scaler_bf16"].detail["scale_calls"] == 2
    assert torch.amp.GradScaler.scale.__name__ == "scale" and "probe" not in torch.amp.GradScaler.scale.__qualname__


def test_a_probes_own_work_is_not_counted_as_the_steps() -> None:
    from perfsuite.probes.base import unobserved

    a = torch.ones(3)

    def step() -> None:
        a + a
        with unobserved():
            a * a  # what the label probe does with the targets

    assert _measure(step)["ops_per_step"].detail["by"] == {"add": 1.0}
