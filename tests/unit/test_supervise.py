"""The supervisor of a launch on several ranks: its failure reports, and nothing left running after Ctrl-C.

No torchrun here: the files ranks leave are written by hand, and the process tree is a plain one.
"""

from __future__ import annotations

import json
import subprocess
import sys

import psutil
import pytest
from alarm import raising_after

from perfsuite.errors import RankError, RunTimeout
from perfsuite.harness.ranks.supervise import Supervisor, behind
from perfsuite.harness.watchdog import WatchdogConfig


def test_supervisor_reports_a_ranks_timeout_with_the_other_ranks_stacks(tmp_path) -> None:
    """The failure report of a launch, read from the files its ranks left (no processes here)."""
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"])
    proc.wait()
    for k in (0, 1):
        (tmp_path / f"rank{k}.json").write_text(
            json.dumps({"rank": k, "pid": 10 + k, "phase": "window", "limit_s": 3.0, "since": 0.0})
        )
    (tmp_path / "rank0.stacks").write_text('File "ddp.py", line 1 in all_reduce')
    error = {"type": "RunTimeout", "message": "the window phase passed the deadline", "phase": "window"}
    (tmp_path / "rank1.error").write_text(json.dumps({**error, "deadline_s": 3.0, "rank": 1}))
    supervisor = Supervisor(proc, tmp_path, 2, WatchdogConfig())
    with pytest.raises(RunTimeout) as info:
        supervisor.wait()
    assert info.value.phase == "window" and str(info.value).startswith("rank 1: the window phase")
    assert "rank 0 (pid 10, last phase entered: window)" in str(info.value) and "all_reduce" in str(info.value)
    (tmp_path / "rank1.error").write_text(json.dumps({**error, "type": "ValueError", "traceback": "tb"}))
    with pytest.raises(RankError, match="rank 1 failed in window: ValueError"):
        Supervisor(proc, tmp_path, 2, WatchdogConfig()).wait()


def test_behind_names_the_rank_that_did_not_reach_the_collective() -> None:
    assert behind({0: (4, 3), 1: (4, 2)}).startswith("rank 1 did not reach the collective")
    assert "DDP forwards reached: rank 0 5, rank 1 4, rank 2 5" in behind({0: (5, 4), 1: (4, 4), 2: (5, 4)})
    assert behind({0: (4, 4), 1: (4, 4)}) == ""


def test_ctrl_c_stops_the_launch_and_kills_everything_under_it(tmp_path) -> None:
    """A launch whose process started a child: Ctrl-C in the supervisor leaves neither running."""
    script = "import subprocess, time; subprocess.Popen(['sleep', '120']); time.sleep(120)"
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    supervisor = Supervisor(proc, tmp_path, 1, WatchdogConfig())

    with pytest.raises(KeyboardInterrupt), raising_after(1.5, KeyboardInterrupt):
        supervisor.wait()
    assert proc.poll() is not None
    seen = list(supervisor._tree)
    assert len(seen) == 2, "the supervisor saw the launch and its child"
    assert supervisor.leftovers() == []
    assert not [pid for pid in seen if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
