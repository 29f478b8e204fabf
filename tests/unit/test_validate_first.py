"""Fail fast, in one line, touching nothing that was not asked (issue 34).

Every bad argument, combination, name and output path is refused before any work, exit 2, one line
naming the value or the path, and nothing is created; a user's step or Dataset that raises shows their
traceback alone under one line naming the job and the phase; OS errors name the user's path once.
"""

from __future__ import annotations

import errno
import os
import sys
import textwrap
from pathlib import Path

import pytest

from perfsuite.cli.main import build_parser, main
from perfsuite.core import tmpfiles
from perfsuite.core.cores import Cores
from perfsuite.core.outputs import output_problem

DATA = Path(__file__).resolve().parents[1] / "data" / "results"


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'mine'\n")
    return tmp_path


# argv, then what the one line must say. None of them may start any work (no run, no launch, no worktree).
REFUSED = {
    "tune-pyproject-dir": (["tune", "gray_classifier", "--pyproject", "adir"], "--pyproject adir: is a directory"),
    "tune-pyproject-missing": (
        ["tune", "gray_classifier", "--pyproject", "none/pyproject.toml"],
        "--pyproject none/pyproject.toml: no such file",
    ),
    "tune-new-pyproject": (["tune", "gray_classifier", "--pyproject", "new.toml"], "create it first (touch new.toml)"),
    "tune-min-above-max": (
        ["tune", "gray_classifier", "--min-rounds", "9", "--max-rounds", "2"],
        "--min-rounds 9 is above --max-rounds 2",
    ),
    "tune-budget": (["tune", "gray_classifier", "--budget", "1"], "--budget 1: one round is 4 runs"),
    "ab-min-above-max": (["ab", "--min-rounds", "9", "--max-rounds", "2", "A", "B"], "--min-rounds 9 is above"),
    "ab-after-head": (["ab", "A", "B", "--min-rounds", "9", "--max-rounds", "2"], "--min-rounds 9 is above"),
    "ab-budget": (["ab", "--budget", "1", "A", "B"], "--budget 1: one round is 4 fresh pytest runs"),
    "ab-report-parent": (["ab", "--report-md", "no/such/r.md", "A", "B"], "its directory no/such does not exist"),
    "ab-report-exists": (["ab", "--report-md", "afile", "A", "B"], "--report-md afile: exists; pass --overwrite"),
    "run-scaling-rounds": (
        ["run", "gray_classifier", "--nproc-per-node", "2", "--scaling-rounds", "1"],
        "--scaling-rounds 1: an interval needs 3 or more",
    ),
    "run-unknown-job-on-ranks": (["run", "no_such_job", "--nproc-per-node", "2"], "unknown workload 'no_such_job'"),
    "run-ranks-above-cores": (["run", "gray_classifier", "--nproc-per-node", "64"], "64/2 = 32.0 ranks per core"),
    "doctor-markdown-parent": (
        ["doctor", "gray_classifier", "--markdown", "missing/r.md"],
        "--markdown missing/r.md: its directory missing does not exist; create it, or pass --parents",
    ),
    "doctor-markdown-under-file": (
        ["doctor", "gray_classifier", "--markdown", "afile/r.md"],
        "afile is a file, so no directory can be made there",
    ),
    "doctor-markdown-dir": (["doctor", "gray_classifier", "--markdown", "adir"], "--markdown adir: is a directory"),
    "doctor-unknown": (["doctor", "no_such_job"], "unknown workload or job 'no_such_job'"),
    "exec-out-parent": (["exec", "--out", "missing/r.json", "--", "python", "t.py"], "its directory missing does"),
    "exec-out-dev-null": (["exec", "--out", "/dev/null", "--", "python", "t.py"], "is not a regular file"),
    "exec-loader-0": (["exec", "--loader", "0", "--", "python", "t.py"], "loader='0': name the training DataLoader"),
    "compare-png-parent": (
        ["compare", str(DATA / "base.json"), str(DATA / "head_same.json"), "--png", "missing/c.png"],
        "--png missing/c.png: its directory missing does not exist",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_bad_input_is_refused_before_any_work_in_one_line_creating_nothing(
    case: str, workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: tune --pyproject DIR failed after 15 s, ab --min-rounds 9 --max-rounds 2 ran 113 s, an unknown job
    under --nproc-per-node 2 launched both ranks, --nproc-per-node 64 ran 132 s, missing parents were created."""
    from perfsuite.cli import ab, doctor, exec, run, tune
    from perfsuite.core import cores

    monkeypatch.setattr(cores, "usable_cores", lambda *a: Cores(usable=2, affinity=2, quota=None, source="affinity"))

    def no_work(args: object, *rest: object) -> int:
        raise AssertionError(f"{case}: the command started although its input was wrong")

    for module in (ab, doctor, exec, run, tune):
        monkeypatch.setattr(module, "run", no_work)
    argv, message = REFUSED[case]
    before = _tree(workdir)
    assert main(argv) == 2
    line = _one_line(capsys.readouterr().err)
    assert message in line and line.startswith("perfsuite: error: ") and "error::" not in line
    assert _tree(workdir) == before


def test_oversubscribe_lets_more_ranks_than_cores_through(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from perfsuite.cli import run
    from perfsuite.core import cores

    monkeypatch.setattr(cores, "usable_cores", lambda *a: Cores(usable=2, affinity=2, quota=None, source="affinity"))
    monkeypatch.setattr(run, "run", lambda args: 0)
    assert main(["run", "gray_classifier", "--nproc-per-node", "4", "--oversubscribe"]) == 0


def test_parents_creates_only_what_was_asked(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "r.md"
    assert "does not exist" in (output_problem(target, overwrite=False) or "")
    assert output_problem(target, overwrite=False, parents=True) is None
    assert not (tmp_path / "a").exists()  # checking creates nothing


def test_a_clashing_tune_file_is_refused_before_the_search(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: the clash with an earlier tune file showed after 55-60 s of search."""
    from perfsuite.core.results import Fingerprint

    earlier = workdir / "perfsuite-tuned" / Fingerprint.collect("cpu").key() / "gray_classifier.json"
    earlier.parent.mkdir(parents=True)
    earlier.write_text("{}")
    assert main(["tune", "gray_classifier", "--device", "cpu"]) == 2
    assert "gray_classifier.json exists" in _one_line(capsys.readouterr().err) and earlier.read_text() == "{}"


def test_earlier_bounds_in_pyproject_are_refused_before_the_search(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from perfsuite.core.results import Fingerprint

    machine = Fingerprint.collect("cpu").machine_class
    text = f'[tool.perfsuite.thresholds."{machine}".test_gray_classifier_tuned]\nmin_samples_per_s = 5\n'
    (workdir / "pyproject.toml").write_text(text)
    assert main(["tune", "gray_classifier", "--device", "cpu"]) == 2
    assert "already bounds 'test_gray_classifier_tuned'" in _one_line(capsys.readouterr().err)


# ---------------------------------------------------------------------------------------------- the user's errors

JOBS = """
import torch
from torch.utils.data import DataLoader, Dataset
from perfsuite import Job
from perfsuite.jobs.registry import register_job


class Rows(Dataset):
    def __init__(self, bad):
        self.bad = bad
    def __len__(self):
        return 64
    def __getitem__(self, i):
        if self.bad and i >= 8:
            raise ValueError(f"row {i} is corrupt")
        return torch.zeros(3), torch.tensor(0)


def users_helper():
    raise RuntimeError("the user's step failed")


def make(bad_data=False, bad_step=False):
    model = torch.nn.Linear(3, 2)
    def step(batch):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(model(x), y)
        if bad_step:
            users_helper()
        return loss
    return Job(step=step, model=model, loader=DataLoader(Rows(bad_data), batch_size=4), target_kind="label",
               num_classes=2, name="j")


register_job("ps34_bad_step", lambda device=None: make(bad_step=True))
register_job("ps34_bad_data", lambda device=None: make(bad_data=True))
"""


@pytest.fixture
def user_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ps34_jobs.py").write_text(textwrap.dedent(JOBS))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("ps34_jobs", None)


@pytest.mark.parametrize(
    ("command", "job", "says"),
    [
        ("run", "ps34_bad_step", "job 'ps34_bad_step' raised RuntimeError in its step during the warm-up"),
        ("doctor", "ps34_bad_step", "job 'ps34_bad_step' raised RuntimeError in its step during the warm-up"),
        ("run", "ps34_bad_data", "job 'ps34_bad_data' raised ValueError in its Dataset"),
    ],
)
def test_a_users_error_is_one_line_then_their_traceback_alone(
    command: str, job: str, says: str, user_jobs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: a raw traceback through perfsuite's runner and exit 1."""
    extra = ["--rounds", "1", "--no-counterfactuals"] if command == "doctor" else []
    argv = [command, job, "--import", "ps34_jobs", "--steps", "2", "--warmup", "1", "--observe-steps", "0", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    first, *rest = err.splitlines()
    assert first.startswith(f"perfsuite: error: {says}"), first
    assert rest[0] == "Traceback (most recent call last):"
    frames = [line for line in rest if line.startswith('  File "')]
    assert frames and all("ps34_jobs.py" in f for f in frames), frames  # the user's frames, and only theirs
    assert "perfsuite" not in "".join(frames)


def test_a_worker_killed_by_a_signal_is_one_line_naming_it() -> None:
    from perfsuite.cli.user_errors import describe

    try:
        raise RuntimeError("DataLoader worker (pid 4242) is killed by signal: Segmentation fault. ")
    except RuntimeError as exc:
        told = describe(exc, "faces")
    assert told is not None and told.traceback == ""
    assert "DataLoader worker (pid 4242) was killed by signal SIGSEGV (Segmentation fault)" in told.line


def test_perfsuites_own_bug_keeps_its_traceback() -> None:
    from perfsuite.cli.user_errors import describe

    try:
        {}["missing"]  # raised here, in a test file: a user's frame; raised in perfsuite alone: not the user's
    except KeyError as exc:
        exc.__traceback__ = None
        assert describe(exc, "x") is None


def test_hints_name_the_flag_of_the_command_run() -> None:
    """Before: `perfsuite run`'s hang hint named --perfsuite-deadline-floor, which run does not take."""
    import argparse

    from perfsuite.cli.hints import for_command

    run_args = argparse.Namespace(deadline_floor=None, deadline_factor=None)
    text = "raise --perfsuite-deadline-floor or --perfsuite-deadline-factor; --perfsuite-baselines DIR"
    assert for_command(text, run_args) == "raise --deadline-floor or --deadline-factor; --perfsuite-baselines DIR"


# ---------------------------------------------------------------------------------------------- outputs, OS errors


def test_a_full_disk_names_the_users_path_and_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the error named the hidden temporary file, and the CLI printed `error::`."""

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(tmpfiles.os, "fsync", full)
    target = tmp_path / "report.md"
    with pytest.raises(OSError) as info:
        tmpfiles.write_text_atomic(target, "x" * 1000)
    assert info.value.filename == str(target) and info.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []  # no partial file, no temporary


def test_an_os_error_is_one_line_with_one_colon(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from perfsuite.cli import list as list_command

    def full(args: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(list_command, "run", full)
    assert main(["list"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("perfsuite: error: No space left on device;") and "::" not in line


# ---------------------------------------------------------------------------------------------- schemas


def _result_with(tmp_path: Path, name: str, change) -> Path:
    import json

    data = json.loads((DATA / "base.json").read_text())
    change(data)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("name", "change", "field"),
    [
        ("neg_step", lambda d: d["metrics"]["step_ms"].update(value=-3.0), "'metrics.step_ms.value' is -3.0"),
        ("neg_rate", lambda d: d["metrics"]["samples_per_s"].update(value=-1), "'metrics.samples_per_s.value' is -1"),
        ("frac", lambda d: d["metrics"]["data_wait_frac"].update(value=1.5), "'metrics.data_wait_frac.value' is 1.5"),
        ("unknown", lambda d: d["metrics"].update(made_up={"value": 1}), "'metrics.made_up' is not a metric"),
        ("neg_sample", lambda d: d["samples"]["step_ms"].__setitem__(0, -1.0), "'samples.step_ms[0]' is -1.0"),
    ],
)
def test_compare_refuses_values_that_cannot_be_true(tmp_path: Path, name, change, field, capsys) -> None:
    head = _result_with(tmp_path, name, change)
    assert main(["compare", str(DATA / "base.json"), str(head)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert field in line and str(head) in line


@pytest.mark.parametrize(
    ("head", "says"),
    [
        ("/dev/null", "/dev/null is a device or pipe, not a file"),
        ("empty.json", "empty.json is empty (0 bytes)"),
        ("missing.json", "missing.json does not exist"),
    ],
)
def test_dev_null_an_empty_file_and_a_missing_one_each_have_their_message(
    tmp_path: Path, monkeypatch, head: str, says: str, capsys
) -> None:
    """Before: `perfsuite compare base.json /dev/null` said "does not exist"."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.json").write_text("")
    assert main(["compare", str(DATA / "base.json"), head]) == 2
    assert says in _one_line(capsys.readouterr().err)


def test_a_directory_where_an_exact_file_belongs_has_its_own_message(tmp_path: Path) -> None:
    from perfsuite.errors import BaselineError
    from perfsuite.judge.exact import ExactBaselines

    (tmp_path / "cpu__torch-2.13.json").mkdir()
    with pytest.raises(BaselineError, match="is a directory or device, not a file"):
        ExactBaselines.open(tmp_path, "cpu__torch-2.13")


@pytest.mark.parametrize(("field", "value"), [("device", "cuda"), ("torch", "2.11")])
def test_an_exact_files_header_must_match_its_name(tmp_path: Path, field: str, value: str) -> None:
    """Before: a cuda file copied to cpu__torch-2.13.json gated the CPU runs with cuda's values."""
    import json

    from perfsuite.errors import BaselineError
    from perfsuite.judge.exact import ExactBaselines

    data = {"schema_version": 2, "device": "cpu", "torch": "2.13", "tests": {}, "breakdown": {}}
    (tmp_path / "cpu__torch-2.13.json").write_text(json.dumps({**data, field: value}))
    with pytest.raises(BaselineError, match=f"field '{field}' is '{value}' but the file's name says"):
        ExactBaselines.open(tmp_path, "cpu__torch-2.13")


SCRIPT = """
import sys
import torch
from torch.utils.data import DataLoader, TensorDataset

train = DataLoader(TensorDataset(torch.zeros(16, 3), torch.zeros(16, dtype=torch.long)), batch_size=4)
val = DataLoader(TensorDataset(torch.zeros(8, 3), torch.zeros(8, dtype=torch.long)), batch_size=4)
model = torch.nn.Linear(3, 2)
for epoch in range(1000):
    with open(sys.argv[1], "a") as log:
        log.write(f"{epoch}\\n")
    for x, y in train:
        torch.nn.functional.cross_entropy(model(x), y).backward()
    for x, y in val:
        model(x)
"""


def test_exec_loader_9_stops_at_the_second_epoch_not_after_the_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `perfsuite exec --loader 9` was reported after the whole script had run (201 s)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(SCRIPT)
    assert main(["exec", "--loader", "9", "--steps", "2", "--", "python", "train.py", "epochs.log"]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "loader='9' matched none of the DataLoaders python train.py epochs.log iterated" in line
    assert "before it iterated DataLoader number 1 again" in line
    assert (tmp_path / "epochs.log").read_text().split() == ["0", "1"]  # stopped as epoch 1 began, not epoch 999


def test_a_ranks_traceback_keeps_only_the_users_frames() -> None:
    """A rank's failure is named once by the launcher, with the user's frames only (perfsuite's are noise there)."""
    from perfsuite.core.user_frames import PERFSUITE_DIR, users_traceback_text

    text = (
        "Traceback (most recent call last):\n"
        f'  File "{PERFSUITE_DIR}/harness/rank_main.py", line 83, in main\n    run_plan(plan, run_dir, rank)\n'
        f'  File "{PERFSUITE_DIR}/harness/runner.py", line 204, in run\n    job.step(batch)\n'
        '  File "/home/me/jobs.py", line 27, in step\n    helper()\n'
        f'  File "{PERFSUITE_DIR}/probes/x.py", line 1, in wrapper\n    return f()\n'
        '  File "/home/me/jobs.py", line 33, in helper\n    raise RuntimeError("boom")\n'
        "RuntimeError: boom\n"
    )
    kept = users_traceback_text(text)
    assert kept.splitlines() == [
        '  File "/home/me/jobs.py", line 27, in step',
        "    helper()",
        '  File "/home/me/jobs.py", line 33, in helper',
        '    raise RuntimeError("boom")',
        "RuntimeError: boom",
    ]
    perfsuites_own = text.replace("/home/me/jobs.py", f"{PERFSUITE_DIR}/jobs/contract.py")
    assert users_traceback_text(perfsuites_own) == ""  # perfsuite's own error: its message says it all


def test_run_and_doctor_take_the_watchdog_flags_their_hints_name() -> None:
    from perfsuite.cli.hints import watchdog_from_args
    from perfsuite.harness.watchdog import WatchdogConfig

    for command in ("run", "doctor"):
        args = build_parser().parse_args([command, "gray_classifier", "--deadline-floor", "7", "--loader-timeout", "0"])
        config = watchdog_from_args(args, WatchdogConfig(factor=3.0))
        assert (config.floor_s, config.loader_timeout_s, config.factor) == (7.0, 0.0, 3.0)
