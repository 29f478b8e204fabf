"""The bad-input table: every command x every class of bad input, one row each (docs/bad_input.md).

One source of truth for tests/unit/test_bad_input_table.py (each row a test, in this process) and
scripts/bad_input_table.py (each row timed as a user meets it: a fresh ``python -m perfsuite.cli``).
:func:`prepare` makes the files the rows name in a scratch directory, which is also the working
directory; ``{data}`` in an argument stands for tests/data/results.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "results"
CLASSES = (
    "range",
    "combination",
    "path",
    "unknown name",
    "corrupt file",
    "user exception",
    "worker signal",
    "disk full",
)


@dataclass(frozen=True)
class Case:
    id: str
    kind: str  # one of CLASSES
    argv: tuple[str, ...]
    says: str  # in the first line of stderr
    exit: int = 2
    slow: bool = False  # runs real work (a DataLoader worker, a script): @pytest.mark.slow in the test
    disk_full: bool = False  # every write fails with ENOSPC (mocked: os.fsync raises)

    def args(self) -> list[str]:
        return [a.replace("{data}", str(DATA)) for a in self.argv]


JOBS = """
import os
import signal

import torch
from torch.utils.data import DataLoader, Dataset

from perfsuite import Job
from perfsuite.jobs.registry import register_job


class Rows(Dataset):
    def __init__(self, fault):
        self.fault = fault
    def __len__(self):
        return 64
    def __getitem__(self, i):
        if self.fault == "raise" and i >= 8:
            raise ValueError(f"row {i} is corrupt")
        if self.fault == "segv" and i >= 8:
            os.kill(os.getpid(), signal.SIGSEGV)
        return torch.zeros(3), torch.tensor(0)


def make(fault=None, workers=0):
    model = torch.nn.Linear(3, 2)
    def step(batch):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(model(x), y)
        if fault == "step":
            raise RuntimeError("the user's step failed")
        return loss
    loader = DataLoader(Rows(fault), batch_size=4, num_workers=workers)
    return Job(step=step, model=model, loader=loader, target_kind="label", num_classes=2, name="j")


register_job("bad_step", lambda device=None: make("step"))
register_job("bad_data", lambda device=None: make("raise"))
register_job("segv_data", lambda device=None: make("segv", workers=1))
"""


def prepare(root: Path) -> Path:
    """The files the rows name, in ``root``; returns ``root``."""
    (root / "afile").write_text("x")
    (root / "adir").mkdir(exist_ok=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'mine'\n")
    (root / "empty.json").write_text("")
    (root / "bad_jobs_ps.py").write_text(textwrap.dedent(JOBS))
    (root / "train.py").write_text("raise SystemExit('never run')\n")
    base = json.loads((DATA / "base.json").read_text())
    base["metrics"]["step_ms"]["value"] = -3.0
    (root / "negative.json").write_text(json.dumps(base))
    (root / "notjson.json").write_text('{"schema_version": 1, "workload": ')
    return root


JOB = ("--import", "bad_jobs_ps", "--steps", "2", "--warmup", "1", "--observe-steps", "0")
CASES = (
    # range
    Case("run-steps", "range", ("run", "gray_classifier", "--steps", "1"), "--steps: 1 is below 2"),
    Case("exec-loader", "range", ("exec", "--loader", "0", "--", "python", "train.py"), "loader='0'"),
    Case("compare-alpha", "range", ("compare", "{data}/base.json", "{data}/head_same.json", "--alpha", "2"), "--alpha"),
    Case("ab-budget", "range", ("ab", "--budget", "1", "HEAD~1", "HEAD"), "--budget 1: one round is 4"),
    Case("doctor-rounds", "range", ("doctor", "gray_classifier", "--rounds", "0"), "--rounds 0: write 1 or more"),
    Case("tune-delta", "range", ("tune", "gray_classifier", "--delta", "2"), "--delta 2.0: write a number in (0, 1)"),
    Case("monitor-interval", "range", ("monitor", "--interval", "0"), "--interval 0.0: write a number above 0"),
    Case(
        "run-scaling-rounds",
        "range",
        ("run", "gray_classifier", "--nproc-per-node", "2", "--scaling-rounds", "1"),
        "--scaling-rounds 1",
    ),
    Case(
        "run-ranks-above-cores",
        "range",
        ("run", "gray_classifier", "--nproc-per-node", "4096"),
        "--nproc-per-node 4096: 4096 ranks need 4096 cores",
    ),
    # combination
    Case(
        "ab-rounds",
        "combination",
        ("ab", "--min-rounds", "9", "--max-rounds", "2", "HEAD~1", "HEAD"),
        "--min-rounds 9 is above --max-rounds 2",
    ),
    Case(
        "tune-rounds",
        "combination",
        ("tune", "gray_classifier", "--min-rounds", "9", "--max-rounds", "2"),
        "--min-rounds 9 is above --max-rounds 2",
    ),
    Case(
        "run-scaling-one-rank",
        "combination",
        ("run", "gray_classifier", "--scaling-rounds", "3"),
        "--scaling-rounds 3 with --nproc-per-node 1",
    ),
    Case(
        "run-prefetch-no-workers",
        "combination",
        ("run", "gray_classifier", "--workers", "0", "--prefetch", "2"),
        "prefetch_factor=2 needs worker processes",
    ),
    # path
    Case(
        "doctor-markdown-parent",
        "path",
        ("doctor", "gray_classifier", "--markdown", "missing/r.md"),
        "--markdown missing/r.md: its directory missing does not exist",
    ),
    Case(
        "exec-out-under-file", "path", ("exec", "--out", "afile/r.json", "--", "python", "train.py"), "afile is a file"
    ),
    Case("ab-report-exists", "path", ("ab", "--report-md", "afile", "HEAD~1", "HEAD"), "exists; pass --overwrite"),
    Case("tune-pyproject-dir", "path", ("tune", "gray_classifier", "--pyproject", "adir"), "is a directory"),
    Case("tune-new-pyproject", "path", ("tune", "gray_classifier", "--pyproject", "new.toml"), "no such file"),
    Case(
        "compare-png-dir",
        "path",
        ("compare", "{data}/base.json", "{data}/head_same.json", "--png", "adir"),
        "--png adir: is a directory",
    ),
    Case("monitor-json-parent", "path", ("monitor", "--json", "missing/m.json"), "its directory missing"),
    Case("compare-dev-null", "path", ("compare", "{data}/base.json", "/dev/null"), "/dev/null is a device or pipe"),
    # unknown name
    Case(
        "run-unknown-on-ranks",
        "unknown name",
        ("run", "no_such_job", "--nproc-per-node", "2"),
        "unknown workload 'no_such_job'",
    ),
    Case("doctor-unknown", "unknown name", ("doctor", "no_such_job"), "unknown workload or job 'no_such_job'"),
    Case("tune-unknown", "unknown name", ("tune", "no_such_job"), "unknown workload 'no_such_job'"),
    Case("tune-knob", "unknown name", ("tune", "gray_classifier", "--knobs", "amp"), "cannot search amp"),
    Case("run-import", "unknown name", ("run", "x", "--import", "no_such_module_ps"), "--import no_such_module_ps"),
    Case("list-flag", "unknown name", ("list", "--jsn"), "unrecognized arguments: --jsn"),
    # corrupt file
    Case(
        "compare-negative-step",
        "corrupt file",
        ("compare", "{data}/base.json", "negative.json"),
        "field 'metrics.step_ms.value' is -3.0",
    ),
    Case("compare-empty", "corrupt file", ("compare", "{data}/base.json", "empty.json"), "empty.json is empty"),
    Case("compare-not-json", "corrupt file", ("compare", "{data}/base.json", "notjson.json"), "is not valid JSON"),
    # user exception
    Case(
        "run-user-step",
        "user exception",
        ("run", "bad_step", *JOB),
        "job 'bad_step' raised RuntimeError in its step during the warm-up",
    ),
    Case(
        "doctor-user-step",
        "user exception",
        ("doctor", "bad_step", *JOB, "--rounds", "1", "--no-counterfactuals"),
        "job 'bad_step' raised RuntimeError in its step during the warm-up",
    ),
    Case(
        "run-user-dataset",
        "user exception",
        ("run", "bad_data", *JOB),
        "job 'bad_data' raised ValueError in its Dataset",
    ),
    # worker signal
    # torch reports the death either with its signal or, when it notices while unpickling a batch, without it
    Case("run-worker-segv", "worker signal", ("run", "segv_data", *JOB), "was killed by signal", slow=True),
    # disk full
    Case(
        "compare-png-disk-full",
        "disk full",
        ("compare", "{data}/base.json", "{data}/head_same.json", "--png", "c.png"),
        "No space left on device",
        disk_full=True,
    ),
)
