"""What the set-up commands leave in the checkout is ignored by git: `nox -s dev`'s .venv/, the example's data/."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", [".venv/bin/python", "examples/own_pipeline/data/images/0000.jpg"])
def test_the_set_up_commands_litter_is_ignored(path: str) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout")
    done = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", "--no-index", path], capture_output=True)
    assert done.returncode == 0, f"{path} is not ignored by .gitignore"


def test_committed_data_stays_tracked() -> None:
    """The ignore rule for the example's data/ is anchored: docs/data/ (committed figures) is not ignored."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout")
    done = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", "--no-index", "docs/data/x.json"])
    assert done.returncode == 1
