"""Every exact counter names the line that changed it (issue 45 item 1).

The planted faults of the segmentation job, each in a step or a Dataset of this file: compare names the
fault's own line, and a line inserted above it changes nothing.
"""

from __future__ import annotations

import inspect
import time
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from fixed_fingerprint import FP
from torch import nn
from torch.utils.data import DataLoader, default_collate

from perfsuite.core.knobs import Knobs
from perfsuite.core.results import Metric, Result
from perfsuite.judge.engine import compare_results
from perfsuite.judge.exact import BY_SITE, ExactBaselines, check_exact, exact_breakdown, exact_values
from perfsuite.judge.verdict import Outcome
from perfsuite.probes.base import WindowTimings
from perfsuite.probes.cost import CostProbe
from perfsuite.probes.loadercount import count, library_versions, to_metrics

TIMINGS = WindowTimings(start_s=0.0, end_s=1.0, steps=2, batch_size=1)
MODEL = nn.Linear(4, 2)
OPT = torch.optim.SGD(MODEL.parameters(), lr=0.1)
X = torch.randn(3, 4)
MASKS = torch.zeros(2, 8, 8, dtype=torch.uint8)
LOADER = DataLoader(list(range(8)), batch_size=2)


def line_of(fn: Any, text: str) -> int:
    source, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(source) if text in line)


def step(fault: str = "") -> None:
    """One training step of the same code in base and head; ``fault`` plants one of the seeds' regressions."""
    (MASKS.long() if fault == "int64" else MASKS).to("cpu")  # int64 masks: 8x the bytes
    OPT.zero_grad(set_to_none=True)
    MODEL(X).sum().backward()
    if fault == "zero_grad":
        OPT.zero_grad(set_to_none=False)
    if fault == "iter":
        next(iter(LOADER))  # a new iterator every step
    OPT.step()


def measured(fault: str = "", name: str = "w") -> Result:
    probe = CostProbe()
    probe.setup(SimpleNamespace(device="cpu", observe_steps=2, knobs=Knobs(), pipeline=SimpleNamespace(model=MODEL)))
    for _ in range(2):
        step(fault)  # gradients exist before the observed steps, as in a training loop
    for _ in range(2):
        with probe.observe():
            step(fault)
    metrics = {m.name: m for m in probe.metrics(TIMINGS)}
    return result(metrics, name)


def result(metrics: dict[str, Metric], name: str = "w") -> Result:
    return Result(name, "smoke", {}, metrics, {}, FP, 2, 2, 0)


def verdicts(base: Result, head: Result) -> dict[str, Any]:
    return {v.metric: v for v in compare_results(base, head, "t") if v.outcome is not Outcome.UNCHANGED}


def test_each_step_fault_is_named_at_its_own_line() -> None:
    base, here = measured(), f"tests/unit/{__file__.rsplit('/', 1)[1]}"
    got = verdicts(base, measured("zero_grad"))
    assert got["ops_per_step"].outcome is Outcome.REGRESSED
    assert got["ops_per_step"].message.startswith(
        f"ops_per_step 19 -> 23 (exact): aten::zero_ at {here}:{line_of(step, 'set_to_none=False')} +2/step (new)"
    )
    got = verdicts(base, measured("iter"))
    assert f" at {here}:{line_of(step, 'next(iter(LOADER))')} +" in got["ops_per_step"].message
    got = verdicts(base, measured("int64"))
    masks = line_of(step, "MASKS.long()")
    assert got["h2d_bytes_per_step"].message == (
        f"h2d_bytes_per_step 128 -> 1024 (exact): int64 at {here}:{masks} +1024/step (new), "
        f"uint8 at {here}:{masks} -128/step (gone)"
    )


def test_a_line_inserted_above_a_counted_site_changes_nothing() -> None:
    base, head = measured(), measured()
    for name in ("ops_per_step", "h2d_bytes_per_step", "flops_per_step"):
        sites = [
            {**e, "site": e["site"].rsplit(":", 1)[0] + f":{int(e['site'].rsplit(':', 1)[1]) + 1}"}
            for e in head.metrics[name].detail["sites"]
        ]
        head.metrics[name] = Metric(
            name,
            head.metrics[name].value,
            head.metrics[name].unit,
            detail={**head.metrics[name].detail, "sites": sites},
        )
    assert verdicts(base, head) == {}


def test_the_exact_file_keeps_line_free_sites_and_names_the_line_that_moved(tmp_path) -> None:
    base = measured()
    store = ExactBaselines(tmp_path, "cpu__torch-2.13")
    store.record("t", exact_values(base), exact_breakdown(base))
    store.save()
    parts = ExactBaselines.open(tmp_path, "cpu__torch-2.13").expected_breakdown("t")
    assert parts == exact_breakdown(base)  # the line-free sites survive the file's round trip
    assert "ops_per_step" + BY_SITE in parts
    assert not any(":" in label.split(" in ", 1)[1].split(" ", 1)[0] for label in parts["ops_per_step" + BY_SITE])
    got = check_exact(exact_values(base), measured("zero_grad"), "t", "the file", breakdown=parts)
    ops = next(v for v in got if v.metric == "ops_per_step")
    assert f"aten::zero_ at tests/unit/{__file__.rsplit('/', 1)[1]}:{line_of(step, 'set_to_none=False')}" in (
        ops.message
    )


class Images:
    """Each item: a 16x16 PIL image as an array; ``resize``: decoded then resized twice (the 4x decode)."""

    def __init__(self, resize: bool = False) -> None:
        self.resize = resize

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> Any:
        from PIL import Image

        img = Image.fromarray(np.full((16, 16), index, dtype=np.uint8))
        if self.resize:
            img = img.resize((32, 32)).resize((16, 16))
        return np.array(img)


def sleepy_collate(samples: list[Any]) -> Any:
    time.sleep(0.001)
    return default_collate(samples)


def loader_result(loader: DataLoader) -> Result:
    counts = count(loader, 2)
    assert not isinstance(counts, str), counts
    return result({m.name: m for m in to_metrics(counts, library_versions())})


def test_a_resize_in_getitem_and_a_sleeping_collate_are_named_at_their_lines() -> None:
    base = loader_result(DataLoader(Images(), batch_size=2))
    here = __file__.rsplit("/", 1)[1]
    resized = verdicts(base, loader_result(DataLoader(Images(resize=True), batch_size=2)))
    line = line_of(Images.__getitem__, "img.resize")
    assert f"PIL.Image.Image.resize at tests/unit/{here}:{line} " in resized["loader_calls_per_sample"].message
    head = loader_result(DataLoader(Images(), batch_size=2, collate_fn=sleepy_collate))
    line = line_of(sleepy_collate, "time.sleep")
    message = verdicts(base, head)["loader_blocking_calls_per_sample"].message
    assert f"time.sleep at tests/unit/{here}:{line} +0.5/sample (new)" in message
    [site] = [e for e in head.metrics["loader_blocking_calls_per_sample"].detail["sites"] if e["op"] == "time.sleep"]
    assert (site["per_sample"], site["function"], site["code"]) == (0.5, "sleepy_collate", "time.sleep(0.001)")
