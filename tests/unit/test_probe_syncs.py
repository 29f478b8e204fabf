"""syncs_per_step: exact counts and call sites of sync-forcing operations."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from perfsuite.core.knobs import Knobs
from perfsuite.harness.runner import RunSpec, run
from perfsuite.probes.base import WindowTimings
from perfsuite.probes.compile import CompileProbe
from perfsuite.probes.syncs import SyncProbe

TIMINGS = WindowTimings(start_s=0.0, end_s=1.0, steps=2, batch_size=1)


def _ctx(observe_steps: int, **knobs: object) -> SimpleNamespace:
    return SimpleNamespace(device="cpu", observe_steps=observe_steps, knobs=Knobs.from_flat(**knobs))


def _observe(probe: SyncProbe, step, steps: int = 3, **knobs: object):  # type: ignore[no-untyped-def]
    probe.setup(_ctx(steps, **knobs))
    for _ in range(steps):
        with probe.observe():
            step()
    probe.stop()
    return probe.metrics(TIMINGS)[0]


def to_dev(t: torch.Tensor) -> torch.Tensor:
    """``t`` on the device by the copy that makes the host wait for nothing: pinned, then ``non_blocking=True``
    (on a CPU run: where a GPU run would put it, and pinned as a GPU run pins it)."""
    return t.pin_memory().to("cpu", non_blocking=True)


def _line_of(text: str) -> int:
    """The line of this file on which ``text`` appears (call sites are asserted exactly)."""
    lines = Path(__file__).read_text().splitlines()
    return next(i + 1 for i, line in enumerate(lines) if text in line and "_line_of" not in line)


def _pipeline_site() -> str:
    import perfsuite.harness.pipeline as pipeline

    lines = Path(pipeline.__file__).read_text().splitlines()
    line = next(i + 1 for i, text in enumerate(lines) if "loss.item()" in text)
    return f"perfsuite/harness/pipeline.py:{line}"


def _run_syncs(log_interval: int):  # type: ignore[no-untyped-def]
    # pinned batches copied with non_blocking=True: the copies make the host wait for nothing
    knobs = Knobs.from_flat(aug="none", num_workers=0, log_interval=log_interval, pin_memory=True, non_blocking=True)
    result = run(RunSpec("gray_classifier", knobs=knobs, steps=2, warmup=1, observe_steps=2), probes=[SyncProbe()])
    return result.metric("syncs_per_step")


def test_reading_the_loss_every_step_is_one_sync_per_step_at_its_call_site() -> None:
    metric = _run_syncs(log_interval=1)
    assert metric.value == 1.0
    assert metric.detail["observed_steps"] == 2
    (site,) = metric.detail["sites"]
    assert site == {
        "kind": "read",
        "op": "Tensor.item",
        "site": _pipeline_site(),
        "per_step": 1.0,
        "function": "Pipeline.step",  # what survives lines moving above it (issue 31): function and code
        "code": "self.loss_log.append(loss.item())",
    }


def test_never_reading_the_loss_is_zero_syncs() -> None:
    metric = _run_syncs(log_interval=0)
    assert metric.value == 0.0
    assert metric.detail["sites"] == []


def test_two_reads_per_step_are_two_syncs_each_with_its_site() -> None:
    value = torch.tensor(3.0)

    def step() -> None:
        loss = to_dev(value)  # on the device, as a GPU run's .to(device) puts it
        loss.item()  # first read
        loss.item()  # second read

    metric = _observe(SyncProbe(), step)
    assert metric.value == 2.0
    assert sorted(s["site"] for s in metric.detail["sites"]) == sorted(
        f"tests/unit/test_probe_syncs.py:{_line_of(f'loss.item()  # {which} read')}" for which in ("first", "second")
    )
    assert {s["per_step"] for s in metric.detail["sites"]} == {1.0}


x = torch.tensor([1.0, -2.0, 3.0])


def dev() -> torch.Tensor:
    """``x`` on the device, as the step's own ``.to(device)`` puts it (on a CPU run: where a GPU run would)."""
    return to_dev(x)


@pytest.mark.parametrize(
    ("op", "call"),
    [
        ("Tensor.item", lambda: dev().sum().item()),
        ("Tensor.tolist", lambda: dev().tolist()),
        ("Tensor.cpu", lambda: dev().cpu()),
        ("Tensor.numpy", lambda: dev().numpy()),
        ("Tensor.__bool__", lambda: bool(dev().sum() > 0)),
        ("Tensor.__float__", lambda: float(dev().sum())),
        ("Tensor.nonzero", lambda: dev().nonzero()),
        ("torch.nonzero", lambda: torch.nonzero(dev())),
        ("Tensor.unique", lambda: dev().unique()),
        ("torch.unique", lambda: torch.unique(dev())),
        ("torch.masked_select", lambda: torch.masked_select(dev(), dev() > 0)),
        ("Tensor.__getitem__[bool mask]", lambda: dev()[dev() > 0]),
        ("torch.where(cond)", lambda: torch.where(dev() > 0)),
        ("Tensor.item", lambda: torch.zeros(2, device="cpu").sum().item()),  # built on the device
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_each_sync_forcing_op_counts_once(op: str, call) -> None:  # type: ignore[no-untyped-def]
    metric = _observe(SyncProbe(), call, steps=2)
    assert metric.value == 1.0
    assert [s["op"] for s in metric.detail["sites"]] == [op]


@pytest.mark.parametrize(
    "call",
    [
        lambda: x.sum().item(),  # a host tensor: a GPU run reads it without a sync
        lambda: x.numpy(),  # the loader's batch before .to(device)
        lambda: torch.zeros(2).tolist(),  # built without a device: on the host
        lambda: dev().cpu().numpy(),  # counted once, at .cpu(): the copy it returns is a host tensor
    ],
    ids=["host item", "host numpy", "host factory", "cpu then numpy"],
)
def test_reads_of_host_tensors_are_not_syncs(call) -> None:  # type: ignore[no-untyped-def]
    metric = _observe(SyncProbe(), call, steps=2)
    assert metric.value == (1.0 if "cpu()" in _source(call) else 0.0)


def _source(fn) -> str:  # type: ignore[no-untyped-def]
    import inspect

    return inspect.getsource(fn)


def test_a_read_inside_torch_counts_at_the_steps_call_site() -> None:
    """clip_grad_norm_(error_if_nonfinite=True) checks the norm on the host: a sync at the line that calls it."""
    model = torch.nn.Linear(3, 1)
    inputs = torch.randn(4, 3)

    def step() -> None:
        model(to_dev(inputs)).sum().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)  # planted: clip

    metric = _observe(SyncProbe(), step, steps=2)
    assert metric.value == 1.0
    assert [(s["op"], s["site"]) for s in metric.detail["sites"]] == [
        ("Tensor.__bool__", f"tests/unit/test_probe_syncs.py:{_line_of('# planted: clip')}")
    ]


def test_ops_that_do_not_sync_count_zero() -> None:
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters())  # its step reads a CPU step counter with .item()

    def step() -> None:
        y = to_dev(x)  # the host-to-device copy of a GPU run, from pinned memory: no wait
        z = torch.where(x > 0, x, y) + x[torch.tensor([0, 2, 1])]  # integer indexing: no sync
        model(z.unsqueeze(0)).sum().backward()
        opt.step()

    assert _observe(SyncProbe(), step).value == 0.0


def test_without_observed_steps_syncs_are_unavailable_with_the_reason() -> None:
    probe = SyncProbe()
    probe.setup(_ctx(0))
    metric = probe.metrics(TIMINGS)[0]
    assert metric.value is None and "observe_steps=0" in metric.reason


def test_observing_a_compiled_model_does_not_recompile_it() -> None:
    """The probe's function mode must not cost the model a recompile (the compile probe would report it)."""
    model = torch.compile(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), backend="eager")
    inputs = torch.randn(2, 4)
    compile_probe = CompileProbe()
    compile_probe.setup(_ctx(2, compile="default"))
    model(inputs).sum().backward()  # warm-up: compiles
    metric = _observe(SyncProbe(), lambda: model(to_dev(inputs)).sum().item(), steps=2, compile="default")
    model(inputs).sum().backward()  # a measured step after observing
    compile_probe.stop()
    assert metric.value == 1.0
    assert compile_probe.metrics(TIMINGS)[1].value == 0  # recompiles


@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs CUDA: the profiler/sync-debug-mode path "
    "counts real host-device syncs, including explicit torch.cuda.synchronize()",
)
def test_cuda_counts_real_syncs_including_explicit_synchronize() -> None:
    loss = torch.ones((), device="cuda")

    def step() -> None:
        loss.item()
        torch.cuda.synchronize()

    probe = SyncProbe()
    probe.setup(SimpleNamespace(device="cuda", observe_steps=2, knobs=Knobs.from_flat(device="cuda")))
    for _ in range(2):
        with probe.observe():
            step()
    probe.stop()
    metric = probe.metrics(TIMINGS)[0]
    assert metric.value == 2.0
    assert any(s["op"] == "Tensor.item" and s["per_step"] == 1.0 for s in metric.detail["sites"])


def test_printing_or_formatting_a_tensor_is_a_read_at_its_call_site() -> None:
    """print(loss) formats the tensor, which reads it back: seen although torch reads it with modes off."""
    import io

    loss = torch.tensor(1.5)

    def step() -> None:
        on_device = to_dev(loss)
        print(on_device, file=io.StringIO())  # planted: print
        f"{on_device:.3f}"  # planted: format

    metric = _observe(SyncProbe(), step, steps=2)
    assert metric.value == 2.0
    sites = {(s["op"], s["site"].rsplit(":", 1)[1]) for s in metric.detail["sites"]}
    assert sites == {
        ("Tensor.__repr__", str(_line_of("# planted: print"))),
        ("Tensor.__format__", str(_line_of("# planted: format"))),
    }


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: only a device tensor's read is a real sync")
def test_cuda_reads_match_what_the_cpu_run_counts() -> None:
    """docs/exec.md's table on a real device: host reads free, one sync for .cpu().numpy(), clip_grad_norm_ syncs."""
    model = torch.nn.Linear(3, 1).cuda()
    host = torch.ones(3)

    def step() -> None:
        host.numpy()
        host.sum().item()
        model(torch.randn(4, 3, device="cuda")).sum().backward()
        model.weight.detach().cpu().numpy()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)

    probe = SyncProbe()
    probe.setup(SimpleNamespace(device="cuda", observe_steps=1, knobs=Knobs.from_flat(device="cuda")))
    with probe.observe():
        step()
    probe.finish()
    ops = sorted(s["op"] for s in probe.metrics(TIMINGS)[0].detail["sites"] if s["site"] != "<unknown>")
    assert ops == ["Tensor.__bool__", "Tensor.cpu"]
