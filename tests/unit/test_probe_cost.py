"""Exact cost counters on planted steps: ops, host->device bytes with dtypes, FLOPs, input format, GradScaler+bf16."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
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


@pytest.mark.parametrize(
    ("call", "bytes_by_dtype"),
    [
        (lambda: torch.tensor([[1, 2], [3, 4]], dtype=torch.int16, device="cpu"), {"int16": 8.0}),  # data from host
        (lambda: torch.as_tensor(np.zeros(3, np.float32), device="cpu"), {"float32": 12.0}),
        (lambda: torch.asarray([1.0, 2.0], device="cpu"), {"float32": 8.0}),
        (lambda: torch.zeros(100, device="cpu"), {}),  # allocated on the device: no host data crosses
        (lambda: torch.tensor([1, 2]), {}),  # no device: stays on the host
        (lambda: torch.ones(3).to(torch.float64), {}),  # a dtype change on the host
        (lambda: torch.ones(4).to("cpu").to("cpu"), {"float32": 16.0}),  # on the device already: copied once
        (lambda: torch.ones(4).to("cpu").cpu().to(torch.float64), {"float32": 16.0}),  # read back: not a copy there
        (lambda: torch.zeros(2, device="cpu").copy_(torch.ones(2, dtype=torch.float64)), {"float64": 16.0}),
    ],
    ids=["tensor", "as_tensor", "asarray", "zeros", "host-tensor", "host-dtype", "to-twice", "read-back", "copy_"],
)
def test_host_to_device_bytes_from_factories_given_a_device_and_not_from_host_copies(call, bytes_by_dtype) -> None:
    m = _measure(call)
    assert m["h2d_bytes_per_step"].detail["by"] == bytes_by_dtype
    assert m["h2d_bytes_per_step"].value == sum(bytes_by_dtype.values())


def test_flops_register_no_global_module_hook() -> None:
    """FlopCounterMode's global module hooks make torch.compile(module) warn at the user's call (issue 21, item 8)."""
    model = nn.Linear(4, 3, bias=False)
    seen = []
    m = _measure(lambda: seen.append(bool(torch.nn.modules.module._has_any_global_hook())) or model(torch.randn(2, 4)))
    assert seen == [False, False] and m["flops_per_step"].value == 2 * 2 * 4 * 3


def test_a_compiled_users_job_gets_no_global_hook_warning_at_its_call() -> None:
    import warnings

    import perfsuite

    model = nn.Linear(4, 1)
    compiled = torch.compile(model, backend="eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(batch):
        loss = compiled(batch).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    loader = torch.utils.data.DataLoader(torch.randn(16, 4), batch_size=4)
    job = perfsuite.Job(step=step, loader=loader, model=compiled, optimizer=opt)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = perfsuite.run(perfsuite.RunSpec(job, steps=2, warmup=1, observe_steps=2, period_steps=0))
    assert not [w for w in caught if "global hooks" in str(w.message)]
    assert result.value("flops_per_step") == 2 * (2 * 4 * 4 * 1)  # the forward matmul and the weight's gradient


def test_non_blocking_copies_on_a_cpu_run_get_a_note() -> None:
    probe = CostProbe()
    _measure(lambda: torch.ones(2).to("cpu", non_blocking=True), probe=probe)
    (note,) = probe.notes()
    assert note.startswith("non_blocking=True on 2 copies per 2 observed step(s) of a CPU run")
    assert CostProbe().notes() == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: host->device copies only cross on a device")
def test_cuda_counts_the_same_copies_as_the_cpu_run_predicts() -> None:
    """What the CPU run's residency rules predict (the table in docs/exec.md), on a real device."""
    probe = CostProbe()
    probe.setup(SimpleNamespace(device="cuda", observe_steps=1, knobs=Knobs(device="cuda"), pipeline=None))

    def step() -> None:
        torch.tensor([[1, 2], [3, 4]], dtype=torch.int16, device="cuda")  # 8 bytes of host data
        torch.zeros(100, device="cuda")  # allocated there: nothing crosses
        torch.ones(4).to("cuda").cpu().to(torch.float64)  # 16 bytes there, nothing back
        torch.zeros(2, device="cuda").copy_(torch.ones(2, dtype=torch.float64))  # 16 bytes

    with probe.observe():
        step()
    m = {metric.name: metric for metric in probe.metrics(TIMINGS)}
    assert m["h2d_bytes_per_step"].detail["by"] == {"int16": 8.0, "float32": 16.0, "float64": 16.0}
