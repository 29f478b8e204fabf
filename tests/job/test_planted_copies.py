"""A user's script on CPU CI: the copies CUDA would wait on, counted at their lines by perfsuite exec and compare.

tests/data/scripts/copies/train.py copies its images with ``non_blocking=True``; without ``pin_memory=True`` the
copy is from pageable memory, which makes the host wait on every CUDA step (docs/syncs.md). A per-step
``torch.tensor(list, device=d)`` is a blocking copy. Both are seen on a CPU run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfsuite.cli.main import main

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[2] / "tests" / "data" / "scripts" / "copies" / "train.py"


def line_of(text: str) -> str:
    lines = SCRIPT.read_text().splitlines()
    return f"tests/data/scripts/copies/train.py:{next(i + 1 for i, s in enumerate(lines) if text in s)}"


def exec_to(out: Path, *flags: str) -> dict:
    assert main(["exec", "--steps", "3", "--out", str(out), "--", "python", str(SCRIPT), *flags]) == 0
    syncs = json.loads(out.read_text())["metrics"]["syncs_per_step"]["detail"]
    return {(s["kind"], s["site"]): s["per_step"] for s in syncs["sites"]}


def test_pageable_and_blocking_copies_of_a_script_are_named_at_their_lines(tmp_path, capsys):
    pinned = exec_to(tmp_path / "pinned.json", "--non-blocking", "--pin-memory")
    assert pinned == {}
    pageable = exec_to(tmp_path / "pageable.json", "--non-blocking")
    assert pageable == {
        ("pageable copy", line_of("# the planted copy")): 1.0,
        ("pageable copy", line_of("labels = labels.to(device, non_blocking=True)")): 1.0,
    }
    from_list = exec_to(tmp_path / "list.json", "--non-blocking", "--pin-memory", "--tensor-from-list")
    assert from_list == {("blocking copy", line_of("# planted: built from a list")): 1.0}
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "pinned.json"), str(tmp_path / "pageable.json")]) == 1
    out = capsys.readouterr().out
    assert "syncs_per_step" in out and "pageable copy" in out and line_of("# the planted copy") in out
    assert "pin_memory=True" in out  # the fix, in the kind's one wording
