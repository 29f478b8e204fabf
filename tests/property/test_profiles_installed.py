"""The ci/dev/nightly profiles ship with perfsuite: a project outside this repo can pick them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
USER_TEST = """
from hypothesis import given, settings, strategies as st

def test_profile_applies():
    assert settings.default.max_examples == {expected}
    assert settings.default.database is None

@given(st.integers())
def test_runs(x):
    assert isinstance(x, int)
"""


@pytest.mark.parametrize("how", ["option", "env", "ci-var"])
def test_ci_profile_from_installed_package_writes_no_database(tmp_path, how):
    (tmp_path / "test_user.py").write_text(USER_TEST.format(expected=30))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PERFSUITE_HYPOTHESIS_PROFILE", "HYPOTHESIS_STORAGE_DIRECTORY", "CI")
    }
    env["PYTHONPATH"] = str(ROOT)  # perfsuite as installed: its pytest11 entry point loads perfsuite.plugin.hooks
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"]
    if how == "option":
        args.append("--hypothesis-profile=ci")
    elif how == "env":
        env["PERFSUITE_HYPOTHESIS_PROFILE"] = "ci"
    else:
        env["CI"] = "true"
    run = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert not (tmp_path / ".hypothesis").exists(), "the ci profile wrote .hypothesis into the working directory"


def test_unknown_profile_is_a_usage_error(tmp_path):
    (tmp_path / "test_user.py").write_text("def test_x():\n    pass\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), PERFSUITE_HYPOTHESIS_PROFILE="fast")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0 and "write one of ci, dev, nightly" in run.stdout + run.stderr
