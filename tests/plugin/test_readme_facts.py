"""The set-up facts the README and docs/cli.md state, checked where a test can check them."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from perfsuite_pytester import run

from perfsuite.cli.main import main

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_results_for_compare_come_from_a_save_into_another_directory(project, capsys):
    """docs/cli.md: `--perfsuite-save --perfsuite-baselines=results` writes what `perfsuite compare` takes."""
    project.makepyfile("def test_x(perf_run):\n    perf_run('plugin_tiny', aug='none', num_workers=0)\n")
    run(project, "--perfsuite-save").assert_outcomes(passed=1)
    run(project, "--perfsuite-save", "--perfsuite-baselines=results").assert_outcomes(passed=1)
    [base_key] = [p for p in (project.path / "baselines").iterdir() if p.is_dir()]
    [head_key] = [p for p in (project.path / "results").iterdir() if p.is_dir()]
    assert base_key.name == head_key.name  # one fingerprint: the same machine
    capsys.readouterr()
    code = main(["compare", str(base_key), str(head_key), "--factor", "50"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("**perfsuite:**") and "test_x" in out


def test_the_perfsuite_command_is_an_installed_console_script():
    """README: `pip install -e .` puts `perfsuite` on PATH (the console script of pyproject's [project.scripts])."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'perfsuite = "perfsuite.cli.main:main"' in text
    beside = Path(sys.executable).with_name("perfsuite")  # the environment's bin/, which activating puts on PATH
    found = str(beside) if beside.is_file() else shutil.which("perfsuite")
    if found is None:
        pytest.skip("perfsuite is not on PATH in this environment (not installed with pip install -e .)")
    assert Path(found).is_file()


def test_the_noxfile_offers_a_dev_environment_and_the_cpu_torch_index():
    text = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    assert "https://download.pytorch.org/whl/cpu" in text and "def dev(" in text
