"""A command leaves nothing behind in the temporary folder: the elastic launcher's logs (issue 37), and the
DataLoader workers' socket folders (``pymp-*``) of a script stopped inside its epoch (issue 47)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "own_pipeline"


def left_in(tmp: Path) -> list[str]:
    """What a command left in TMPDIR, less torch's compile cache (one fixed folder per user, made by importing
    torch with perfsuite or without it, and reused by every later command): torch's, not litter."""
    return sorted(p.name for p in tmp.iterdir() if not p.name.startswith("torchinductor_"))


def fresh_env(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {
        **os.environ,
        "TMPDIR": str(tmp),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    env.setdefault("PERFSUITE_CACHE", str(tmp_path / "cache"))
    return tmp, env


@pytest.mark.slow
def test_a_two_rank_run_leaves_no_folder_in_a_fresh_tmpdir(tmp_path: Path) -> None:
    tmp, env = fresh_env(tmp_path)
    command = [sys.executable, "-m", "perfsuite.cli", "run", "face_parsing", "--nproc-per-node", "2"]
    command += ["--steps", "3", "--warmup", "1", "--observe-steps", "1", "--workers", "0"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert left_in(tmp) == [], f"left in TMPDIR: {left_in(tmp)}"


# Under pytest-xdist this test's exec hung (5 of 5): its tmp_path, the command's TMPDIR, is 10 bytes longer there
# (popen-gw0/), which put a DataLoader worker's socket path (TMPDIR/pymp-*/listener-*) past the 108 bytes a Unix
# socket path may have; the worker's queue thread failed to send the batch and the main thread waited for it. The
# workers' socket folder is now made in a short directory under such a TMPDIR (perfsuite.harness.socket_folder).
@pytest.mark.slow
def test_exec_stopping_a_script_inside_its_epoch_leaves_no_worker_folder(tmp_path: Path) -> None:
    """The guide's train.py with 2 workers, stopped by perfsuite mid-epoch: its workers are shut down by torch's
    own path (they remove their ``pymp-*`` folders), not terminated at exit."""
    sys.path.insert(0, str(EXAMPLE))
    try:
        import make_data

        data = make_data.write_dataset(tmp_path / "data", count=24, size=64)
    finally:
        sys.path.remove(str(EXAMPLE))
        sys.modules.pop("make_data", None)
    tmp, env = fresh_env(tmp_path)
    command = [sys.executable, "-m", "perfsuite.cli", "exec", "--steps", "4", "--warmup", "1", "--period-steps", "0"]
    command += ["--", "python"]
    command += [str(EXAMPLE / "train.py"), "--data", str(data), "--epochs", "4", "--workers", "2"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "stopped: the script was stopped" in done.stdout  # inside its epoch, its workers still running
    assert left_in(tmp) == [], f"left in TMPDIR: {left_in(tmp)}"
