"""A script run in-process keeps to itself: its ``os.chdir`` does not move ``--out`` (nor leave its lock behind),
and a module of the same name another test imported from elsewhere is not the one it gets (issue 57)."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from perfsuite.cli.main import main

TRAIN = """
import os
import torch
from torch.utils.data import DataLoader
{before}
model = torch.nn.Linear(3, 2)
for x in DataLoader(torch.zeros(64, 3), batch_size=4):
    model(x).sum().backward()
"""
RUN = ["--steps", "3", "--warmup", "1", "--observe-steps", "0", "--period-steps", "0", "--", "python"]


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def test_a_script_that_changes_directory_writes_out_where_perfsuite_started(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "chdir.py").write_text(textwrap.dedent(TRAIN.format(before="os.chdir('elsewhere')")))
    monkeypatch.chdir(tmp_path)
    assert main(["exec", "--out", "rel.json", *RUN, "chdir.py"]) == 0
    assert _files(tmp_path) == ["chdir.py", "rel.json"]  # not elsewhere/rel.json, and no .rel.json.lock anywhere
    assert Path.cwd() == tmp_path


def test_a_module_imported_from_another_folder_is_set_aside_while_the_script_runs(tmp_path: Path, monkeypatch) -> None:
    for folder in ("other", "mine"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "facedata_ps57.py").write_text(f"WHERE = {folder!r}\n")
    monkeypatch.syspath_prepend(str(tmp_path / "other"))
    import facedata_ps57  # another test's, imported first

    check = "import facedata_ps57\nassert facedata_ps57.WHERE == 'mine', facedata_ps57.WHERE"
    (tmp_path / "mine" / "train.py").write_text(textwrap.dedent(TRAIN.format(before=check)))
    monkeypatch.chdir(tmp_path)
    try:
        assert main(["exec", *RUN, str(tmp_path / "mine" / "train.py")]) == 0
        assert sys.modules["facedata_ps57"] is facedata_ps57  # put back afterwards
    finally:
        sys.modules.pop("facedata_ps57", None)


@pytest.mark.parametrize("name", ["os", "torch"])
def test_the_standard_library_and_installed_packages_are_never_set_aside(tmp_path: Path, name: str) -> None:
    from perfsuite.harness.script.modules import shadowed

    (tmp_path / f"{name}.py").write_text("")
    assert name in sys.modules and shadowed(tmp_path) == {}
    assert os.path.exists(tmp_path / f"{name}.py")
