"""The loader ledger under `perfsuite exec`: the guide's train.py, unchanged, against planted copies (issue 31).

Each copy of examples/own_pipeline changes one thing in the user's own code or command line; `perfsuite compare`
of the unchanged run against it exits 1 naming a loader stage or metric, and two unchanged runs exit 0:

* ``decode``: the Dataset upsamples each image (and mask) to 4x the pixels before its transforms;
* ``collate``: the DataLoader gets a collate_fn costing 5 ms of CPU per sample;
* ``serial``: the same script run with ``--workers 0`` (its own flag): the training process loads every batch.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

import perfsuite
from perfsuite.cli.main import main
from perfsuite.judge.contention import CPU_BOUND

pytestmark = pytest.mark.slow
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_pipeline"
FILES = ("train.py", "facedata.py", "model.py", "transforms.py")

UPSAMPLE = """        sample = {
            "image": Image.open(path).convert("RGB"),
            "mask": Image.open(self.root / "masks" / f"{path.stem}.png"),
        }
        w, h = sample["image"].size  # planted: 4x the pixels before the transforms
        sample = {"image": sample["image"].resize((2 * w, 2 * h)), "mask": sample["mask"].resize((2 * w, 2 * h), 0)}
"""
SLOW_COLLATE = '''

def slow_collate(samples):
    """Planted: 5 ms of CPU per sample, then the default collate."""
    import time

    from torch.utils.data import default_collate

    end = time.thread_time() + 0.005 * len(samples)
    while time.thread_time() < end:
        pass
    return default_collate(samples)
'''


def planted(root: Path, name: str) -> Path:
    """A copy of the example with one change; its train.py."""
    where = root / name
    where.mkdir()
    for file in FILES:
        shutil.copy(EXAMPLE / file, where / file)
    if name == "decode":
        data = (where / "facedata.py").read_text()
        original = UPSAMPLE.split("        w, h =")[0]
        assert original in data
        (where / "facedata.py").write_text(data.replace(original, UPSAMPLE))
    elif name == "collate":
        train = (where / "train.py").read_text()
        assert "        drop_last=True,\n" in train
        keep = "        drop_last=True,\n"
        train = train.replace(keep, keep + "        collate_fn=slow_collate,\n")
        (where / "train.py").write_text(train.replace("\n\ndef main(", SLOW_COLLATE + "\n\ndef main(", 1))
    return where / "train.py"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    sys.path.insert(0, str(EXAMPLE))
    try:
        import make_data

        root = tmp_path_factory.mktemp("exec_ledger")
        # 12 batches an epoch: few epoch starts (each forks the 2 workers again) in the window
        data = str(make_data.write_dataset(root / "data", count=48, size=128))
    finally:
        sys.path.remove(str(EXAMPLE))
        sys.modules.pop("make_data", None)
    scripts = {name: planted(root, name) for name in ("base", "decode", "collate")}

    def exec_run(out: str, script: Path, workers: int = 2) -> Path:
        path = root / f"{out}.json"
        # Each copy's own modules: an earlier test in this process may have imported the example's facedata
        # (its folder on sys.path), and a script run in-process would reuse it in place of the planted copy.
        for name in (Path(file).stem for file in FILES):
            sys.modules.pop(name, None)
        argv = ["exec", "--steps", "20", "--warmup", "3", "--observe-steps", "1", "--period-steps", "0"]
        command = ["python", str(script), "--data", data, "--epochs", "10", "--workers", str(workers)]
        assert main([*argv, "--out", str(path), "--", *command]) == 0
        return path

    return {
        "base": exec_run("base", scripts["base"]),
        "again": exec_run("again", scripts["base"]),
        "decode": exec_run("decode", scripts["decode"]),
        "collate": exec_run("collate", scripts["collate"]),
        "serial": exec_run("serial", scripts["base"], workers=0),
    }


def test_the_ledger_is_measured_under_exec(runs):
    result = perfsuite.Result.from_json(runs["base"].read_text())
    for name in (
        "loader_cpu_ms_per_sample",
        "loader_process_cpu_ms_per_sample",
        "main_load_ms_per_step",
        "loader_capacity_samples_per_s",
    ):
        assert result.metric(name).available, (name, result.metric(name).reason)
    ledger = result.metric("loader_cpu_ms_per_sample").detail
    assert set(ledger["by"]) == {"__getitem__", "transform", "collate_fn"}
    assert ledger["code"]["__getitem__"] == "facedata.FaceParsingDataset.__getitem__"
    assert result.workload.startswith("python ") and result.workload.endswith("--workers 2")


def rows(out: str, name: str) -> list[str]:
    return [line for line in out.splitlines() if f"| {name} |" in line]


def test_the_4x_decode_is_an_exact_finding_at_its_stage(runs, capsys):
    """The upsampling's calls are counted, at their stage, whatever the load (issue 45: counters have sites)."""
    code = main(["compare", str(runs["base"]), str(runs["decode"])])
    out = capsys.readouterr().out
    assert code == 1, out
    (row,) = rows(out, "loader_calls_per_sample")
    assert "**regressed**" in row and "(exact)" in row, row
    assert "__getitem__: PIL.Image.Image.resize 0 -> 2 calls/sample" in row, row


@pytest.mark.parametrize("head,stage", [("decode", "__getitem__"), ("collate", "collate_fn")])
def test_compare_names_the_loader_stage_that_costs_more_cpu(runs, head, stage, capsys):
    main(["compare", str(runs["base"]), str(runs[head])])
    out = capsys.readouterr().out
    (row,) = rows(out, "loader_cpu_ms_per_sample")
    if "not judged: " in row and f"bound {CPU_BOUND:.0%}" in row:  # judge/contention.py: CPU time abstains beyond it
        pytest.skip(f"this machine was too busy for a CPU-time verdict, as designed: {row.split('<br>', 1)[1][:200]}")
    assert "**regressed**" in row, out
    assert stage in row.split("by stage: ", 1)[1], row
    assert "python " in row.split("|")[1] or "python " in out  # the test is named by the command that was run


def test_num_workers_0_is_caught_with_the_scripts_flag_named(runs, capsys):
    assert main(["compare", str(runs["base"]), str(runs["serial"])]) == 1
    out = capsys.readouterr().out
    (row,) = rows(out, "num_workers")  # the setting itself, exact: issue 45
    assert "**regressed**" in row and "train.py:" in row and "DataLoader(num_workers=2 -> 0)" in row, out
    # with what it cost, judged or not (named "not comparable" where the two runs' loads differ)
    assert "measured beside it (its own row judges it): main_load_ms_per_step" in row, row


def test_two_unchanged_runs_exit_0(runs, capsys):
    assert main(["compare", str(runs["base"]), str(runs["again"])]) == 0, capsys.readouterr().out
