"""Knob validation: every refusal says what was wrong and what to write instead."""

from __future__ import annotations

import pytest

from perfsuite.core.knobs import FLAT_KNOBS, Knobs, resolve_for_device
from perfsuite.errors import DeviceError, KnobError

BAD = [
    pytest.param({"amp": True}, "amp=True is not a precision: write amp='bf16'", id="amp-true-seed003"),
    pytest.param({"amp": False}, "amp=False is not a precision", id="amp-false"),
    pytest.param({"amp": "float16"}, "write amp='fp16'", id="amp-float16-alias"),
    pytest.param({"amp": "bfloat16"}, "write amp='bf16'", id="amp-bfloat16-alias"),
    pytest.param({"amp": "fp8"}, "is not one of None, 'bf16', 'fp16'", id="amp-unknown"),
    pytest.param({"compile": True}, "compile=True is not a mode: write compile='default'", id="compile-true"),
    pytest.param({"compile": "fast"}, "is not a torch.compile mode", id="compile-unknown-mode"),
    pytest.param({"aug": "gpu0"}, "aug='gpu0' is not a placement; write one of cpu, gpu, none", id="aug-unknown"),
    pytest.param({"num_workers": -1}, "num_workers=-1 is below 0", id="workers-negative"),
    pytest.param({"num_workers": 2.0}, "num_workers=2.0 must be an integer", id="workers-float"),
    pytest.param({"num_workers": True}, "num_workers=True must be an integer", id="workers-bool"),
    pytest.param({"pin_memory": "yes"}, "pin_memory='yes' must be True or False", id="pin-memory-str"),
    pytest.param(
        {"num_workers": 0, "prefetch_factor": 2},
        "prefetch_factor=2 needs worker processes",
        id="prefetch-without-workers",
    ),
    pytest.param(
        {"num_workers": 0, "persistent_workers": True},
        "persistent_workers=True needs worker processes",
        id="persistent-without-workers",
    ),
    pytest.param({"prefetch_factor": 0}, "prefetch_factor=0 is below 1", id="prefetch-zero"),
    pytest.param({"batch_size": 0}, "batch_size=0 is below 1", id="batch-zero"),
    pytest.param({"log_interval": -2}, "log_interval=-2 is below 0", id="log-interval-negative"),
    pytest.param({"eval_interval": 1.5}, "eval_interval=1.5 must be an integer", id="eval-interval-float"),
    pytest.param({"cutmix": 1.5}, "cutmix=1.5 must be a probability", id="cutmix-above-one"),
    pytest.param({"device": "tpu"}, "device='tpu' is not supported; write 'cpu', 'cuda' or 'cuda:N'", id="device-tpu"),
    pytest.param({"num_wrokers": 4}, "unknown knob 'num_wrokers'", id="typo-in-name"),
]


@pytest.mark.parametrize(("flat", "message"), BAD)
def test_bad_knob_is_refused_with_its_fix(flat: dict, message: str) -> None:
    with pytest.raises(KnobError) as info:
        Knobs.from_flat(**flat)
    assert message in str(info.value)


def test_flat_round_trip_keeps_every_knob() -> None:
    knobs = Knobs.from_flat(
        aug="cpu",
        num_workers=4,
        pin_memory=True,
        persistent_workers=True,
        prefetch_factor=4,
        amp="bf16",
        compile="default",
        log_interval=1,
        fused=True,
        device="cpu",
    )
    flat = knobs.flat()
    assert set(flat) == set(FLAT_KNOBS) | {"device"}
    assert Knobs.from_flat(**flat) == knobs
    assert flat["aug"] == "cpu" and flat["amp"] == "bf16" and flat["prefetch_factor"] == 4


def test_replace_changes_only_the_named_knob() -> None:
    base = Knobs.from_flat(num_workers=2, amp="bf16")
    changed = base.replace(num_workers=0)
    assert changed.loader.num_workers == 0
    assert changed.step.amp == "bf16"
    assert base.loader.num_workers == 2


def test_cuda_knobs_on_cpu_fall_back_with_a_note_each() -> None:
    """tf32 and cudnn_benchmark are turned off; pin_memory and non_blocking are kept, since the sync model reads
    them to predict a GPU run's copies (docs/syncs.md); each gets a note."""
    knobs = Knobs.from_flat(pin_memory=True, non_blocking=True, tf32=True, cudnn_benchmark=True)
    resolved, notes = resolve_for_device(knobs, cuda_available=False)
    assert not any(resolved.flat()[k] for k in ("tf32", "cudnn_benchmark"))
    assert all(resolved.flat()[k] for k in ("pin_memory", "non_blocking"))
    assert len(notes) == 3
    assert "tf32=True has no effect without CUDA; ran with tf32=False" in notes
    assert any(n.startswith("pin_memory=True and non_blocking=True: not applied without CUDA; the sync") for n in notes)


def test_fp16_without_cuda_is_an_error_that_suggests_bf16() -> None:
    with pytest.raises(DeviceError, match="amp='fp16' needs CUDA.*write amp='bf16'"):
        resolve_for_device(Knobs.from_flat(amp="fp16"), cuda_available=False)


def test_cuda_device_without_cuda_is_an_error() -> None:
    with pytest.raises(DeviceError, match="torch sees no CUDA device"):
        resolve_for_device(Knobs.from_flat(device="cuda"), cuda_available=False)


def test_cuda_knobs_are_kept_on_cuda() -> None:
    knobs = Knobs.from_flat(pin_memory=True, amp="fp16", device="cuda:0")
    assert resolve_for_device(knobs, cuda_available=True) == (knobs, [])
