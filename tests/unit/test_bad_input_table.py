"""Each row of the bad-input table (docs/bad_input.md, tests/unit/bad_inputs.py) as a test: its exit status,
one line naming the value or path (then, for a user's exception, their traceback alone), nothing created."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from pathlib import Path

import pytest
from bad_inputs import CASES, CLASSES, Case, prepare, sigterm_when_ready

import perfsuite
from perfsuite.cli.main import main

PAGE = Path(__file__).resolve().parents[2] / "docs" / "bad_input.md"


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if "__pycache__" not in p.parts}


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.slow else []) for c in CASES])
def test_each_row(case: Case, tmp_path: Path, tmp_path_factory, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from perfsuite.core import cores, tmpfiles
    from perfsuite.core.outlock import out_lock

    monkeypatch.chdir(prepare(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(cores, "usable_cores", lambda *a: cores.Cores(usable=2, affinity=2, quota=None, source="x"))
    if case.argv[0] == "tune":  # the row is about its input: tune on a busy machine (xdist's other worker) is not
        monkeypatch.setenv("PERFSUITE_WALL_BOUND", "1")
    if case.disk_full:

        def full(fd: int) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(tmpfiles.os, "fsync", full)
    with contextlib.ExitStack() as held:
        if case.held is not None:  # another run writing the same --out holds its lock
            held.enter_context(out_lock(tmp_path / case.held))
        before = _tree(tmp_path)
        if case.sigterm_when is not None:
            code, err = _terminated(case, tmp_path, tmp_path_factory.mktemp("tmpdir"))
        else:
            try:
                code = main(case.args())
            except SystemExit as exc:  # argparse's refusals
                code = int(exc.code or 0)
            finally:
                sys.modules.pop("bad_jobs_ps", None)
            err = capsys.readouterr().err
        after = _tree(tmp_path)  # (the other run's lock file still there)
    lines = err.strip().splitlines()
    assert code == case.exit, err
    assert case.says in lines[0], lines[0]
    if case.kind == "user exception":
        assert lines[1] == "Traceback (most recent call last):" and os.path.dirname(perfsuite.__file__) not in err, err
    else:
        assert len(lines) == 1 and "Traceback" not in err, err
    assert after == before  # nothing created (nor a partial file, nor a temporary, nor a folder)


def _terminated(case: Case, cwd: Path, tmpdir: Path) -> tuple[int, str]:
    """A fresh process SIGTERMed in its window: what it says, and that it left nothing of its own in TMPDIR."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(cwd)]), "CI": "1"}
    code, err = sigterm_when_ready(case, cwd, env, tmpdir)
    litter = [*tmpdir.glob("perfsuite-*"), *tmpdir.glob("pymp-*")]  # its own, and its DataLoader workers' sockets
    assert not litter, sorted(p.name for p in tmpdir.iterdir())
    return code, err


def test_the_page_has_a_row_for_each_case_and_every_class() -> None:
    page = PAGE.read_text(encoding="utf-8")
    for case in CASES:
        assert f"`{case.id}`" in page, f"docs/bad_input.md lacks {case.id}: run python scripts/bad_input_table.py"
    assert {c.kind for c in CASES} == set(CLASSES)
