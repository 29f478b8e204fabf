"""Two commands writing one file: the second refuses in one line naming the first, its pid and command
(perfsuite.core.outlock, taken by perfsuite.cli.main for every file a command writes)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from perfsuite.cli.main import main
from perfsuite.core.outlock import lock_path, out_lock

FIRST = "perfsuite run gray_classifier --out same.json"


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "gray_classifier", "--out", "same.json"],
        ["run", "gray_classifier", "--out", "same.json", "--repeat", "3"],
        ["exec", "--out", "same.json", "--", "python", "train.py"],
    ],
)
def test_the_second_writer_names_the_first(argv, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    with out_lock(Path("same.json"), holder=FIRST):
        assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        f"perfsuite: error: --out same.json is being written by another perfsuite run (pid {os.getpid()}: {FIRST}) "
        "that is still running; wait for it to finish, or name another file"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written, the first's lock gone with it


def test_the_command_holds_its_files_lock_while_it_runs(tmp_path: Path, monkeypatch) -> None:
    from perfsuite.cli import list as list_command
    from perfsuite.cli import validate

    monkeypatch.setattr(validate, "written_files", lambda args: [("--out", tmp_path / "r.json")])
    held: list[str] = []
    monkeypatch.setattr(list_command, "run", lambda args: held.append(lock_path(tmp_path / "r.json").read_text()) or 0)
    assert main(["list"]) == 0
    assert held == [f"{os.getpid()}\nperfsuite list\n"]
    assert not lock_path(tmp_path / "r.json").exists()
