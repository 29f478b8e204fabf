"""A user's own job (examples/own_pipeline), 2 non-persistent workers, 20 steps: `perfsuite compare` of base
against head exits 1 naming the loader stage, for a collate_fn costing 5 ms per sample and for a Dataset that
decodes images with 4x the pixels before its transform resizes them (issue 20's "done when").

Wall-clock rules did not catch either on this machine (data wait 0.44 -> 0.49, step time x1.16 inconclusive);
the loader ledger judges CPU time per sample, replayed on the same indices in both runs, and the exact loader
counters (perfsuite.probes.loadercount) count the work that changed: the collate's calls, the decoded pixels.
Two unchanged runs exit 0 (issue 33's "done when").
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from torch.utils.data import default_collate

from perfsuite import RunSpec, run
from perfsuite.cli.main import main
from perfsuite.judge.contention import CPU_BOUND

pytestmark = pytest.mark.slow
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_pipeline"


def slow_collate(samples):
    """The user's collate_fn after a change: 5 ms of CPU per sample, then the default."""
    end = time.thread_time() + 0.005 * len(samples)
    while time.thread_time() < end:
        pass
    return default_collate(samples)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    sys.path.insert(0, str(EXAMPLE))
    try:
        import make_data
        import perf_jobs

        root = tmp_path_factory.mktemp("faces")
        # 4x the pixels, resized to the same input; at sides where decoding, not per-sample overhead, is the cost
        small = make_data.write_dataset(root / "128", count=12, size=128)
        large = make_data.write_dataset(root / "256", count=12, size=256)

        def result(data, collate=None):
            job = perf_jobs.face_job(data, "cpu", "cpu", workers=2)  # the example's loader: not persistent
            if collate is not None:
                job.loader.collate_fn = collate
            path = root / f"{len(list(root.glob('*.json')))}.json"
            path.write_text(run(RunSpec(job, steps=20, warmup=3, observe_steps=1)).to_json(), encoding="utf-8")
            return path

        yield {
            "base": result(small),
            "same": result(small),
            "collate": result(small, slow_collate),
            "decode": result(large),
        }
    finally:
        sys.path.remove(str(EXAMPLE))
        sys.modules.pop("perf_jobs", None)


@pytest.mark.parametrize("head,stage", [("collate", "collate_fn"), ("decode", "__getitem__")])
def test_compare_exits_1_naming_the_loader_stage(runs, head, stage, capsys) -> None:
    code = main(["compare", str(runs["base"]), str(runs[head])])
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "| loader_cpu_ms_per_sample |" in line)
    if "not judged: " in row and f"bound {CPU_BOUND:.0%}" in row:  # judge/contention.py: CPU time abstains beyond it
        pytest.skip(f"this machine was too busy for a CPU-time verdict, as designed: {row.split('<br>', 1)[1][:200]}")
    assert code == 1, out
    assert "**regressed**" in row and "loader cost" in row, row
    moved = row.split("by stage: ", 1)[1]
    assert moved.startswith(stage) or f", {stage} " in moved, row


@pytest.mark.parametrize(
    "head,stage,counter",
    [
        ("collate", "collate_fn", "loader_calls_per_sample"),
        ("decode", "__getitem__", "loader_decoded_pixels_per_sample"),
    ],
)
def test_an_exact_loader_counter_is_among_the_reasons_naming_the_stage(runs, head, stage, counter, capsys) -> None:
    assert main(["compare", str(runs["base"]), str(runs[head])]) == 1
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if f"| {counter} |" in line)
    assert "**regressed**" in row and (f"{stage}:" in row or f"{stage} " in row), row


def test_two_unchanged_runs_exit_0(runs, capsys) -> None:
    code = main(["compare", str(runs["base"]), str(runs["same"])])
    assert code == 0, capsys.readouterr().out
