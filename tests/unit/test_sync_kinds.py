"""Every kind of host-device wait in docs/syncs.md, predicted on a CPU run: its count and its line.

One test per row of the table (:data:`perfsuite.probes.synckinds.KINDS`), plus the copies that make the host
wait for nothing. On a CPU run no copy is real: perfsuite follows where each tensor would live, and whether it
would be pinned, in a GPU run of the same code (``scripts/sync_truth.py`` compares with CUDA).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from perfsuite.core.knobs import Knobs
from perfsuite.harness.runner import RunSpec, run
from perfsuite.probes.base import WindowTimings
from perfsuite.probes.synckinds import KINDS, SyncKind
from perfsuite.probes.syncs import SyncProbe

TIMINGS = WindowTimings(start_s=0.0, end_s=1.0, steps=2, batch_size=1)
HERE = "tests/unit/test_sync_kinds.py"
host = torch.arange(6.0).reshape(2, 3)


def line(text: str) -> str:
    """``tests/unit/test_sync_kinds.py:N``, N the line of this file that holds ``text``."""
    lines = Path(__file__).read_text().splitlines()
    n = next(i + 1 for i, source in enumerate(lines) if text in source and "line(" not in source)
    return f"{HERE}:{n}"


def observe(step, steps: int = 2):  # type: ignore[no-untyped-def]
    """The sync probe's per-step (kind, op, site) over ``steps`` observed steps of ``step``."""
    probe = SyncProbe()
    probe.setup(SimpleNamespace(device="cpu", observe_steps=steps, knobs=Knobs.from_flat()))
    for _ in range(steps):
        with probe.observe():
            step()
    probe.stop()
    metric = probe.metrics(TIMINGS)[0]
    return metric, sorted((s["kind"], s["op"], s["site"], s["per_step"]) for s in metric.detail["sites"])


def on_device() -> torch.Tensor:
    """A tensor a GPU run holds on the device, put there without a copy (a factory with device=)."""
    return torch.ones(2, 3, device="cpu")


def test_the_table_has_one_row_per_predicted_kind() -> None:
    assert [row.kind for row in KINDS] == [k for k in SyncKind if k is not SyncKind.RUNTIME]


def test_read() -> None:
    metric, sites = observe(lambda: on_device().sum().item())  # planted: read
    assert sites == [("read", "Tensor.item", line("# planted: read"), 1.0)]
    assert metric.detail["kinds"] == {"read": 1.0}


def test_device_to_host_copy_into_pageable_memory() -> None:
    out = torch.empty(2, 3)

    def step() -> None:
        on_device().cpu()  # planted: cpu
        out.copy_(on_device())  # planted: copy back

    _, sites = observe(step)
    assert sites == sorted(
        [
            ("device-to-host copy", "Tensor.copy_", line("# planted: copy back"), 1.0),
            ("device-to-host copy", "Tensor.cpu", line("# planted: cpu"), 1.0),
        ]
    )


def test_device_to_host_copy_into_pinned_memory_with_non_blocking_is_no_wait() -> None:
    def step() -> None:
        pinned = torch.empty(2, 3).pin_memory()
        pinned.copy_(on_device(), non_blocking=True)

    assert observe(step)[1] == []


def test_blocking_host_to_device_copies() -> None:
    array = np.ones((2, 2), np.float32)

    def step() -> None:
        host.to("cpu")  # planted: to
        torch.tensor([3, 4], device="cpu")  # planted: from a list
        torch.as_tensor(array, device="cpu")  # planted: from numpy
        on_device().copy_(host)  # planted: copy_ in
        on_device().new_tensor([1.0, 2.0])  # planted: new_tensor

    metric, sites = observe(step)
    assert sites == sorted(
        [
            ("blocking copy", "Tensor.to", line("# planted: to"), 1.0),
            ("blocking copy", "torch.tensor", line("# planted: from a list"), 1.0),
            ("blocking copy", "torch.as_tensor", line("# planted: from numpy"), 1.0),
            ("blocking copy", "Tensor.copy_", line("# planted: copy_ in"), 1.0),
            ("blocking copy", "Tensor.new_tensor", line("# planted: new_tensor"), 1.0),
        ]
    )
    assert metric.value == 5.0


def test_pageable_copies() -> None:
    def step() -> None:
        host.to("cpu", non_blocking=True)  # planted: not pinned
        host.pin_memory().t().to("cpu", non_blocking=True)  # planted: pinned, not contiguous

    _, sites = observe(step)
    assert sites == sorted(
        [
            ("pageable copy", "Tensor.to", line("# planted: not pinned"), 1.0),
            ("pageable copy", "Tensor.to", line("# planted: pinned, not contiguous"), 1.0),
        ]
    )


@pytest.mark.parametrize(
    "copy",
    [
        lambda: host.pin_memory().to("cpu", non_blocking=True),
        lambda: torch.empty(2, 3, pin_memory=True).to("cpu", non_blocking=True),
        lambda: on_device().to("cpu"),  # already on the device: no copy
        lambda: torch.empty(0).to("cpu"),  # nothing to copy: CUDA returns without a copy
        lambda: torch.zeros(4, device="cpu"),  # built on the device: no host data
        lambda: host.to(torch.float64),  # a dtype change on the host
    ],
    ids=["pinned", "made pinned", "on device", "empty", "factory", "dtype only"],
)
def test_copies_that_make_the_host_wait_for_nothing(copy) -> None:  # type: ignore[no-untyped-def]
    assert observe(copy)[1] == []


def test_explicit_synchronize_is_counted_at_its_line_then_runs_as_written() -> None:
    """A CPU build of torch refuses ``torch.cuda.synchronize()``: the call is counted, then raises as it would
    (on a machine with a GPU it synchronises, as it would)."""
    raised: list[str] = []

    def step() -> None:
        try:
            torch.cuda.synchronize()  # planted: synchronize
        except (AssertionError, RuntimeError) as exc:
            raised.append(type(exc).__name__)
        with contextlib.suppress(RuntimeError):
            torch.accelerator.synchronize()  # planted: accelerator

    step()
    without = list(raised)  # what the calls do without perfsuite: raise on a CPU build, return on a GPU machine
    raised.clear()
    _, sites = observe(step)
    assert sites == sorted(
        [
            ("explicit sync", "torch.cuda.synchronize", line("# planted: synchronize"), 1.0),
            ("explicit sync", "torch.accelerator.synchronize", line("# planted: accelerator"), 1.0),
        ]
    )
    assert raised == without * 2  # as without perfsuite: the call itself ran, in each of the 2 steps
    assert torch.cuda.synchronize.__name__ == "synchronize" and not hasattr(torch.cuda.synchronize, "__wrapped__")


def test_data_dependent_size() -> None:
    _, sites = observe(lambda: on_device().nonzero())  # planted: nonzero
    assert sites == [("data-dependent size", "Tensor.nonzero", line("# planted: nonzero"), 1.0)]


def _reference(**knobs: object):  # type: ignore[no-untyped-def]
    spec = RunSpec(
        "gray_classifier",
        knobs=Knobs.from_flat(aug="none", num_workers=0, **knobs),  # type: ignore[arg-type]
        steps=2,
        warmup=1,
        observe_steps=2,
    )
    return run(spec, probes=[SyncProbe()]).metric("syncs_per_step")


def _to_device_lines() -> list[str]:
    import perfsuite.harness.pipeline as pipeline

    lines = Path(pipeline.__file__).read_text().splitlines()
    return [
        f"perfsuite/harness/pipeline.py:{i + 1}"
        for i, text in enumerate(lines)
        if ".to(self.device, non_blocking=nb)" in text
    ]


@pytest.mark.parametrize(
    ("knobs", "kind"),
    [
        ({"pin_memory": False, "non_blocking": False}, "blocking copy"),
        ({"pin_memory": False, "non_blocking": True}, "pageable copy"),
        ({"pin_memory": True, "non_blocking": False}, "blocking copy"),
        ({"pin_memory": True, "non_blocking": True}, None),
    ],
    ids=["seed", "non_blocking alone", "pin_memory alone", "tuned"],
)
def test_a_loaders_pin_memory_decides_the_copies_of_its_batches(knobs, kind) -> None:  # type: ignore[no-untyped-def]
    """The DataLoader's pin_memory=True, which torch cannot apply on a CPU, is what a GPU run's batches have."""
    metric = _reference(**knobs)
    found = sorted((s["kind"], s["site"]) for s in metric.detail["sites"])
    assert found == ([] if kind is None else sorted((kind, site) for site in _to_device_lines()))


def test_the_docs_table_of_kinds_is_generated_from_the_one_table() -> None:
    import importlib.util

    script = Path(__file__).resolve().parents[2] / "scripts" / "metrics_table.py"
    spec = importlib.util.spec_from_file_location("metrics_table", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    now, regenerated = module.fresh(module.DOCS / "syncs.md")
    assert now == regenerated, "docs/syncs.md is stale: run python scripts/metrics_table.py"
