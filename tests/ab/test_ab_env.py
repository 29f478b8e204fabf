"""Which requirements each side of ``perfsuite ab`` installs when the sides' dependencies differ (pure, no pip)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from perfsuite.ab.envs import ABEnvError, changed_groups, dependencies, install_arguments, prepare

PYPROJECT = """
[project]
name = "my-proj"
dependencies = ["numpy>=1.24", {extra}]
[project.optional-dependencies]
dev = ["pytest", "my_proj[gpu]"]
gpu = ["nvidia-ml-py"]
[build-system]
requires = ["setuptools{build}"]
"""


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).write_text(text)
    run = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*run, "add", "."], check=True, capture_output=True)
    subprocess.run([*run, "commit", "-q", "-m", message], check=True, capture_output=True)
    return subprocess.run([*run, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("needs git")
    subprocess.run(["git", "init", "-q", str(tmp_path / "r")], check=True)
    return tmp_path / "r"


def test_only_the_changed_groups_are_installed_and_never_the_project_itself(repo: Path):
    a = _commit(repo, {"pyproject.toml": PYPROJECT.format(extra='"scipy"', build="")}, "base")
    b = _commit(
        repo,
        {
            "pyproject.toml": PYPROJECT.format(extra='"scipy>=1.11"', build=">=68").replace(
                '"pytest", ', '"pytest", "my-proj[gpu]", '
            ),
            "requirements-dev.txt": "# tools\nrich\n",
        },
        "head",
    )
    base, head = dependencies(repo, a), dependencies(repo, b)
    groups = changed_groups(base, head)
    assert groups == [
        "build-system.requires",
        "project.dependencies",
        "project.optional-dependencies.dev",
        "requirements-dev.txt",
    ]
    worktree = Path("/wt")
    assert install_arguments(groups, head, worktree, "my-proj") == [
        "numpy>=1.24",
        "scipy>=1.11",
        "pytest",  # my-proj[gpu] / my_proj[gpu] are the project itself: PYTHONPATH gives its code
        "-r",
        "/wt/requirements-dev.txt",
    ]
    assert install_arguments(groups, base, worktree, "my-proj") == ["numpy>=1.24", "scipy", "pytest"]


def test_unchanged_dependencies_keep_the_current_interpreter_and_a_bad_mode_is_named(repo: Path, tmp_path: Path):
    a = _commit(repo, {"requirements.txt": "numpy\n"}, "one")
    b = _commit(repo, {"other.txt": "x\n"}, "two")
    envs, note = prepare("auto", repo, {"A": a, "B": b}, {"A": tmp_path, "B": tmp_path}, tmp_path, "/py")
    assert {s: e.python for s, e in envs.items()} == {"A": "/py", "B": "/py"}
    assert note == "current environment, dependencies unchanged"
    with pytest.raises(ABEnvError, match="--env 'conda': write one of auto, current, venv"):
        prepare("conda", repo, {"A": a, "B": b}, {"A": tmp_path, "B": tmp_path}, tmp_path)
