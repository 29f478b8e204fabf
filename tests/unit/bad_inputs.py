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
    "script exit",
    "termination",
    "concurrent write",
    "bad sample",
    "deadline",
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
    sigterm_when: str | None = None  # a fresh process, sent SIGTERM once this glob matches in its TMPDIR
    sigterm_after: float = 0.5  # ... and this many seconds more (the phase it lands in)
    sigterm_group: bool = False  # ... to the process, then to its whole process group, as `timeout` and CI runners do
    held: str | None = None  # this --out file's lock is held (by another run) while the row runs

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
        if self.fault == "none" and i == 5:
            return None  # a careless Dataset: the collate of its batch fails
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
register_job("none_data", lambda device=None: make("none", workers=2))
register_job("none_data_inline", lambda device=None: make("none"))
"""


# A script that ends itself mid-training (os._exit(STATUS) at its 4th batch), and one whose DataLoader worker
# is SIGKILLed (the kernel's out-of-memory killer does that) while it loads sample 8.
EXIT_MID = """
import os, sys
import torch
from torch.utils.data import DataLoader
model = torch.nn.Linear(3, 2)
for step, x in enumerate(DataLoader(torch.zeros(64, 3), batch_size=4)):
    model(x).sum().backward()
    if step == 3:
        os._exit(int(sys.argv[1]))
"""
WORKER_KILL = """
import os, signal
import torch
from torch.utils.data import DataLoader, Dataset
class Rows(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        if i == 8:
            os.kill(os.getpid(), signal.SIGKILL)
        return torch.zeros(3)
model = torch.nn.Linear(3, 2)
for x in DataLoader(Rows(), batch_size=4, num_workers=1):
    model(x).sum().backward()
"""


# A script that trains until it is stopped, with 2 DataLoader workers; TMPDIR/spin-training says it is training.
SPIN = """
import os, tempfile
import torch
from torch.utils.data import DataLoader, Dataset
class Noise(Dataset):
    def __len__(self):
        return 256
    def __getitem__(self, i):
        return torch.rand(3, 32, 32), i % 4
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 4))
for epoch in range(10**6):
    for x, y in DataLoader(Noise(), batch_size=8, num_workers=2):
        torch.nn.functional.cross_entropy(model(x), y).backward()
        open(os.path.join(tempfile.gettempdir(), "spin-training"), "w").close()
"""


# A script whose Dataset returns None for sample 5: torch's collate fails on its batch, in a worker.
NONE_SAMPLE = """
import torch
from torch.utils.data import DataLoader, Dataset
class Rows(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        return None if i == 5 else (torch.zeros(3), 0)
model = torch.nn.Linear(3, 2)
for x, y in DataLoader(Rows(), batch_size=4, num_workers=2):
    torch.nn.functional.cross_entropy(model(x), y).backward()
"""


# A script whose Dataset's reads block (a dead network mount): perfsuite check stops at its deadline.
BLOCKED = """
import time
import torch
from torch.utils.data import DataLoader, Dataset
class Rows(Dataset):
    def __len__(self):
        return 16
    def __getitem__(self, i):
        time.sleep(10**6)
model = torch.nn.Conv2d(3, 2, 1)
for x, y in DataLoader(Rows(), batch_size=4):
    torch.nn.functional.cross_entropy(model(x), y).backward()
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
    counted = json.loads((DATA / "base.json").read_text())
    counted["metrics"]["syncs_per_step"]["detail"] = {"by_site": [{"site": "train.py:9", "samples": -4}]}
    (root / "negative_count.json").write_text(json.dumps(counted))
    bench = {"machine_info": {"node": "ci"}, "commit_info": {}, "benchmarks": [{"name": "test_a", "stats": {}}]}
    (root / "benchmark.json").write_text(json.dumps(bench))
    (root / "notjson.json").write_text('{"schema_version": 1, "workload": ')
    other = json.loads((DATA / "base.json").read_text())
    other["workload"] = "captcha_slider"
    (root / "other_workload.json").write_text(json.dumps(other))
    script = json.loads((DATA / "base.json").read_text())
    script["workload"] = "python train.py"
    script["notes"] = ["perfsuite exec python train.py: training loader over Rows (batch 4, 0 workers)"]
    (root / "exec_result.json").write_text(json.dumps(script))
    (root / "jobs_syntax_ps.py").write_text("import torch\n\n\ndef make(:\n    pass\n")
    (root / "exit_mid.py").write_text(textwrap.dedent(EXIT_MID))
    (root / "worker_kill.py").write_text(textwrap.dedent(WORKER_KILL))
    (root / "spin.py").write_text(textwrap.dedent(SPIN))
    (root / "none_sample.py").write_text(textwrap.dedent(NONE_SAMPLE))
    (root / "blocked.py").write_text(textwrap.dedent(BLOCKED))
    (root / "base.json").write_text((DATA / "base.json").read_text())
    return root


JOB = ("--import", "bad_jobs_ps", "--steps", "2", "--warmup", "1", "--observe-steps", "0")
SCRIPT = ("--steps", "6", "--warmup", "1", "--observe-steps", "0", "--", "python")
TUNE = ("--knobs", "num_workers", "--max-workers", "1", "--min-rounds", "4", "--max-rounds", "4", "--steps", "2")
CASES = (
    # range
    Case("run-steps", "range", ("run", "gray_classifier", "--steps", "1"), "--steps: 1 is below 2"),
    # a step count no run could finish (a typo): refused before any work, not an OverflowError after the warm-up
    Case(
        "run-steps-huge",
        "range",
        ("run", "gray_classifier", "--steps", "999999999999"),
        "--steps: 999999999999 is above 10000000, the most a run takes",
    ),
    Case(
        "exec-warmup-huge",
        "range",
        ("exec", "--warmup", str(10**10), "--", "python", "train.py"),
        "--warmup: 10000000000 is above 10000000",
    ),
    Case("exec-loader", "range", ("exec", "--loader", "0", "--", "python", "train.py"), "loader='0'"),
    Case("compare-alpha", "range", ("compare", "{data}/base.json", "{data}/head_same.json", "--alpha", "2"), "--alpha"),
    Case("ab-budget", "range", ("ab", "--budget", "1", "HEAD~1", "HEAD"), "--budget 1: one round is 4"),
    Case("doctor-rounds", "range", ("doctor", "gray_classifier", "--rounds", "0"), "--rounds 0: write 1 or more"),
    Case(
        "doctor-max-rounds",
        "range",
        ("doctor", "gray_classifier", "--rounds", "3", "--max-rounds", "2"),
        "--rounds 3 is above --max-rounds 2",
    ),
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
        "compare-workloads",
        "combination",
        ("compare", "{data}/base.json", "other_workload.json"),
        "different workloads (gray_classifier vs captcha_slider); pass --force to compare them anyway",
    ),
    Case(
        "compare-exec-vs-run",
        "combination",
        ("compare", "exec_result.json", "{data}/base.json"),
        "different workloads (python train.py vs gray_classifier); pass --force to compare them anyway",
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
    Case(  # the FILE after an option is still the FILE (argparse alone said "unrecognized arguments")
        "history-add-file-after-option",
        "path",
        ("history", "add", "--history", "hist", "missing.json"),
        "history add: no such file or folder: missing.json",
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
    Case(  # a hand-edited count in a metric's detail
        "compare-negative-count",
        "corrupt file",
        ("compare", "{data}/base.json", "negative_count.json"),
        "field 'metrics.syncs_per_step.detail.by_site[0].samples' is -4; it must be >= 0 (a count cannot be negative)",
    ),
    Case(  # another tool's file: named as such, with no advice meant for perfsuite's own developers
        "compare-pytest-benchmark",
        "corrupt file",
        ("compare", "{data}/base.json", "benchmark.json"),
        "benchmark.json: a pytest-benchmark file (no schema_version): compare it with the tool that wrote it",
    ),
    Case("compare-empty", "corrupt file", ("compare", "{data}/base.json", "empty.json"), "empty.json is empty"),
    Case("compare-not-json", "corrupt file", ("compare", "{data}/base.json", "notjson.json"), "is not valid JSON"),
    Case(
        "run-import-syntax",
        "corrupt file",
        ("run", "x", "--import", "jobs_syntax_ps"),
        "jobs_syntax_ps.py:4: SyntaxError: invalid syntax",
    ),
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
    # bad sample: a Dataset returning None for sample 5; the collate of its batch fails (in a worker, or not)
    Case(
        "run-none-sample",
        "bad sample",
        ("run", "none_data", *JOB),
        "job 'none_data' (DataLoader worker 1) in the measured window: its Dataset's sample 5 is None where sample 0 "
        "is a tuple of 2 (a Tensor, a Tensor), so torch's collate could not batch it",
        slow=True,
    ),
    Case(
        "run-none-sample-inline",
        "bad sample",
        ("run", "none_data_inline", *JOB),
        "its Dataset's sample 5 is None where sample 0 is a tuple of 2 (a Tensor, a Tensor)",
    ),
    Case(
        "exec-none-sample",
        "bad sample",
        ("exec", *SCRIPT, "none_sample.py"),
        "job 'python none_sample.py' (DataLoader worker 1) in the measured window: its Dataset's sample 5 is None "
        "where sample 0 is a tuple of 2 (a Tensor, an int)",
        slow=True,
    ),
    # deadline: a Dataset whose dataset[i] blocks stops perfsuite check at its deadline (120 s unless told)
    Case(
        "check-blocked-dataset",
        "deadline",
        ("check", "--num-classes", "2", "--deadline", "1", "--", "python", "blocked.py"),
        "blocked.py:9 in __getitem__): the Dataset's read blocks",  # after: Rows[0] did not return within 1 s (at
    ),
    # worker signal
    # torch reports the death either with its signal or, when it notices while unpickling a batch, without it
    # torch tells the death by its signal, or (about 1 in 10) only by the batch's broken hand-over: both say the fix
    Case("run-worker-segv", "worker signal", ("run", "segv_data", *JOB), "its Dataset or collate crashed", slow=True),
    Case(
        "exec-worker-sigkill",
        "worker signal",
        ("exec", *SCRIPT, "worker_kill.py"),
        "python worker_kill.py: its training DataLoader worker (pid",  # then: killed by signal SIGKILL, the batch
        slow=True,
    ),
    # disk full
    Case(
        "compare-png-disk-full",
        "disk full",
        ("compare", "{data}/base.json", "{data}/head_same.json", "--png", "c.png"),
        "No space left on device",
        disk_full=True,
    ),
    Case(
        "tune-out-disk-full",
        "disk full",
        ("tune", "gray_classifier", "--out", "tuned", "--no-thresholds", *TUNE),
        "tuned/cpu",  # the tune file's path, then: No space left on device; and no tuned/ folder left
        disk_full=True,
        slow=True,
    ),
    # script exit: the script ends itself mid-training, perfsuite says where (never exit 0 without the Result)
    Case(
        "exec-os-exit-4",
        "script exit",
        ("exec", *SCRIPT, "exit_mid.py", "4"),
        "python exit_mid.py 4 called os._exit(4) after 4 training batch(es)",
        slow=True,
    ),
    Case(
        "exec-os-exit-0",
        "script exit",
        ("exec", *SCRIPT, "exit_mid.py", "0"),
        "python exit_mid.py 0 called os._exit(0) after 4 training batch(es)",
        slow=True,
    ),
    # termination: SIGTERM (a CI timeout) in the window; nothing left in TMPDIR (perfsuite-stacks-<pid>/)
    Case(
        "run-sigterm",
        "termination",
        ("run", "gray_classifier", "--workers", "1", "--steps", "2000", "--warmup", "1"),
        "perfsuite: terminated (SIGTERM) in perfsuite run; no result was written",
        exit=143,
        slow=True,
        sigterm_when="perfsuite-stacks-*",
    ),
    # termination of the process group (a CI job's time limit, `timeout`): its workers die of it too, which is
    # not their crash; nothing left in TMPDIR (pymp-* included); at the start, in the window, and under exec
    *(
        Case(
            f"run-group-sigterm-{when}",
            "termination",
            ("run", "gray_classifier", "--aug", "cpu", "--workers", "2", "--steps", "100000"),
            "perfsuite: terminated (SIGTERM) in perfsuite run; no result was written",
            exit=143,
            slow=True,
            sigterm_when="perfsuite-stacks-*",
            sigterm_after=after,
            sigterm_group=True,
        )
        for when, after in (("start", 0.0), ("window", 4.0))
    ),
    Case(
        "exec-group-sigterm",
        "termination",
        ("exec", "--steps", "100000", "--", "python", "spin.py"),
        "perfsuite: terminated (SIGTERM) in perfsuite exec; no result was written",
        exit=143,
        slow=True,
        sigterm_when="spin-training",
        sigterm_after=1.0,
        sigterm_group=True,
    ),
    # concurrent write: another exec is writing the same --out
    Case(
        "exec-out-held",
        "concurrent write",
        ("exec", "--out", "same.json", "--", "python", "train.py"),
        "--out same.json is being written by another perfsuite run (pid",
        held="same.json",
    ),
    # ... and every other command that writes a Result, baseline or history: the second refuses before any work
    Case(
        "run-out-held",
        "concurrent write",
        ("run", "gray_classifier", "--out", "same.json"),
        "--out same.json is being written by another perfsuite run (pid",
        held="same.json",
    ),
    Case(
        "accept-base-held",
        "concurrent write",
        ("accept", "{data}/head_same.json", "base.json"),
        "BASE base.json is being written by another perfsuite run (pid",
        held="base.json",
    ),
    Case(
        "history-add-held",
        "concurrent write",
        ("history", "add", "{data}/base.json", "--history", "hist"),
        "--history hist is being written by another perfsuite run (pid",
        held="hist",
    ),
)


def sigterm_when_ready(case: Case, cwd: Path, env: dict[str, str], tmpdir: Path) -> tuple[int, str]:
    """Run ``case`` in a fresh ``python -m perfsuite.cli`` whose TMPDIR is ``tmpdir``; SIGTERM it (and then its
    process group) once ``case.sigterm_when`` matches there (its run is under way); (exit status, stderr)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    assert case.sigterm_when is not None
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfsuite.cli", *case.args()],
        cwd=cwd,
        env={**env, "TMPDIR": str(tmpdir)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=case.sigterm_group,  # its own process group, as a CI job's
    )
    deadline = time.monotonic() + 240
    while proc.poll() is None and not list(tmpdir.glob(case.sigterm_when)) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(case.sigterm_after)  # into the run's phase
    proc.send_signal(signal.SIGTERM)
    if case.sigterm_group:  # then the whole group, the DataLoader workers included, as `timeout` does
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        return -9, "the process did not end within 120 s of SIGTERM\n" + err
    return proc.returncode, err
