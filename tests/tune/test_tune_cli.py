"""perfsuite tune's command line: bad input exits 2 with what to write instead, never a traceback."""

from __future__ import annotations

import pytest

from perfsuite.cli.main import main


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no_such_workload"], "unknown workload 'no_such_workload'"),
        (["face_parsing", "--delta", "2"], "--delta 2.0: write a number in (0, 1)"),
        (["face_parsing", "--batch-margin", "1.5"], "--batch-margin 1.5"),
        (["face_parsing", "--max-workers", "0"], "--max-workers 0"),
        (["face_parsing", "--knobs", "num_workers,amp"], "cannot search amp"),
        (["face_parsing", "--require", "min_samples_per_s"], "write BOUND=VALUE"),
        (["face_parsing", "--require", "max_syncs_per_step=0"], "bound one of those"),
        (["face_parsing", "--max-rounds", "3"], "--max-rounds 3 cannot decide a gain"),
    ],
    ids=["unknown", "delta", "margin", "workers", "knob", "require-form", "require-metric", "rounds"],
)
def test_bad_input_exits_2_saying_what_to_write(args, message, capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")  # tune edits an existing pyproject.toml, never creates one
    assert main(["tune", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "perfsuite-tuned").exists()


def test_a_test_id_that_runs_no_perf_test_exits_2(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    pass\n")
    (tmp_path / "pyproject.toml").write_text("")  # tune edits an existing pyproject.toml, never creates one
    assert main(["tune", "test_plain.py::test_plain"]) == 2
    assert "ran, but saved no perf result" in capsys.readouterr().err
