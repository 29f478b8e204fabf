"""A command leaves nothing behind in the temporary folder, the elastic launcher's logs included (issue 37)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_two_rank_run_leaves_no_folder_in_a_fresh_tmpdir(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {
        **os.environ,
        "TMPDIR": str(tmp),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    env.setdefault("PERFSUITE_CACHE", str(tmp_path / "cache"))
    command = [sys.executable, "-m", "perfsuite.cli", "run", "face_parsing", "--nproc-per-node", "2"]
    command += ["--steps", "3", "--warmup", "1", "--observe-steps", "1", "--workers", "0"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    left = sorted(p.name for p in tmp.iterdir())
    assert not [name for name in left if name.startswith("torchelastic_")], left
    # torch's compile cache (one fixed folder per user, reused by every later command) is torch's, not litter.
    assert [name for name in left if not name.startswith("torchinductor_")] == [], f"left in TMPDIR: {left}"
