"""The guide's example (examples/own_pipeline, docs/own_job.md) passes as written, and its glue stays small."""

from __future__ import annotations

from pathlib import Path

import pytest
from perfsuite_pytester import FAST

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_pipeline"
USER_CODE = ("facedata.py", "transforms.py", "model.py", "train.py", "make_data.py")
GLUE = ("perf_jobs.py", "test_perf.py", "conftest.py")
EXEC_GLUE = ("test_exec.py",)  # the script itself under perfsuite: its command line, nothing more


def _code_lines(path: Path) -> int:
    """Lines that are neither blank, comments nor the module docstring."""
    lines = [line.strip() for line in path.read_text().splitlines()]
    return sum(
        1
        for i, line in enumerate(lines)
        if line and not line.startswith("#") and not (i == 0 and line.startswith('"""'))
    )


def test_the_users_code_does_not_import_perfsuite_and_the_glue_is_short():
    for name in USER_CODE:
        assert "perfsuite" not in (EXAMPLE / name).read_text(), name
    assert sum(_code_lines(EXAMPLE / name) for name in GLUE) < 45  # perf_jobs + tests + data fixture
    assert sum(_code_lines(EXAMPLE / name) for name in EXEC_GLUE) <= 8  # imports, the path, the marker, one call


@pytest.mark.slow
def test_the_example_passes_under_the_plugin(project, monkeypatch):
    from perfsuite.jobs import registry as job

    monkeypatch.setattr(job, "_JOBS", dict(job._JOBS))
    result = project.runpytest_inprocess(*FAST, str(EXAMPLE), "--rootdir", str(EXAMPLE), "-v")
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    assert "test_face_training[cpu]" in out and "test_face_training[gpu]" in out and "test_train_script" in out
