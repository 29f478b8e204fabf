"""A command whose stdout is redirected onto a full disk says so in one line naming stdout and where it went:
the OSError alone has no path (issue 57, left from the last round)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "results"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux), a device whose writes fail")
@pytest.mark.parametrize(
    "argv", [["list"], ["compare", str(DATA / "base.json"), str(DATA / "head_same.json")]], ids=["list", "compare"]
)
def test_stdout_on_a_full_disk_is_named(argv: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "perfsuite.cli", *argv], stdout=full, stderr=subprocess.PIPE, text=True, env=env
        )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "perfsuite: error: stdout (/dev/full): No space left on device; check the path, its free space and permissions"
    ]
