"""amp_engaged / amp_lowp_frac: autocast that engages versus seed 003's silent FP32."""

from __future__ import annotations

from types import SimpleNamespace

import torch
import torch.nn.functional as F

from perfsuite.core.knobs import Knobs
from perfsuite.harness.runner import RunSpec, run
from perfsuite.probes.amp import AmpProbe
from perfsuite.probes.base import WindowTimings

TIMINGS = WindowTimings(start_s=0.0, end_s=1.0, steps=2, batch_size=1)


def _run(amp: str | None):  # type: ignore[no-untyped-def]
    knobs = Knobs.from_flat(aug="none", num_workers=0, amp=amp)
    return run(RunSpec("gray_classifier", knobs=knobs, steps=2, warmup=1, observe_steps=2), probes=[AmpProbe()])


def test_bf16_autocast_on_cpu_engages_with_nearly_all_outputs_low_precision() -> None:
    result = _run("bf16")
    assert result.value("amp_lowp_frac") > 0.9
    assert result.value("amp_engaged") is True


def test_amp_none_is_fp32_everywhere() -> None:
    result = _run(None)
    assert result.value("amp_lowp_frac") == 0.0
    assert result.value("amp_engaged") is False
    assert set(result.metric("amp_lowp_frac").detail["dtypes"]) == {"float32"}


def _observe(step) -> dict:  # type: ignore[no-untyped-def]
    probe = AmpProbe()
    probe.setup(SimpleNamespace(device="cpu", observe_steps=1, knobs=Knobs()))
    with probe.observe():
        step()
    return {m.name: m for m in probe.metrics(TIMINGS)}


def test_functional_calls_count_and_no_grad_work_does_not() -> None:
    w = torch.randn(4, 4, requires_grad=True)
    x = torch.randn(2, 4)

    def step() -> None:
        with torch.no_grad():
            x @ x.T  # augmentation-style FP32 maths: not the model
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = F.linear(x, w)  # low precision
        (y.float() + (x @ w)).sum().backward()  # x @ w outside autocast: FP32

    m = _observe(step)
    assert m["amp_lowp_frac"].value == 0.5
    assert m["amp_lowp_frac"].detail["outputs"] == 2
    assert m["amp_engaged"].value is True


def test_a_model_cast_by_hand_is_low_precision_but_not_autocast() -> None:
    model = torch.nn.Linear(4, 4).to(torch.bfloat16)
    m = _observe(lambda: model(torch.randn(2, 4, dtype=torch.bfloat16)).float().sum().backward())
    assert m["amp_lowp_frac"].value == 1.0
    assert m["amp_engaged"].value is False


def test_without_observed_steps_amp_is_unavailable_with_the_reason() -> None:
    probe = AmpProbe()
    probe.setup(SimpleNamespace(device="cpu", observe_steps=0, knobs=Knobs()))
    assert all(m.value is None and "observe_steps=0" in m.reason for m in probe.metrics(TIMINGS))


def test_observing_a_compiled_model_counts_its_dtypes_without_recompiling() -> None:
    from perfsuite.probes.compile import CompileProbe

    model = torch.compile(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), backend="eager")
    x = torch.randn(2, 4)

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model(x).float().sum().backward()

    compile_probe = CompileProbe()
    compile_probe.setup(SimpleNamespace(knobs=Knobs.from_flat(compile="default"), device="cpu", observe_steps=1))
    step()  # warm-up compiles
    m = _observe(step)
    step()
    compile_probe.stop()
    assert m["amp_lowp_frac"].value == 1.0 and m["amp_engaged"].value is True
    assert compile_probe.metrics(TIMINGS)[1].value == 0  # recompiles
