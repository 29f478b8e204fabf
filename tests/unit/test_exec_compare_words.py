"""Comparing two Results of ``perfsuite exec`` gives advice in exec's words (issue 56 item 5): its flags, not
pytest's options (``--perfsuite-steps``, ``--perfsuite-save``) nor ``perfsuite ab``, which runs pytest's tests."""

from __future__ import annotations

import dataclasses
import io
import re

import pytest
from fixed_fingerprint import FP

from perfsuite.cli.main import main
from perfsuite.core.results import Metric, Result
from perfsuite.jobs.script import EXEC_NOTE

PYTEST_WORDS = re.compile(r"--perfsuite-[a-z-]+|perfsuite ab\b|nox -s|perfsuite run --repeat")


def _result(step_ms: list[float], script: bool) -> Result:
    samples = {"step_ms": step_ms}
    median = sorted(step_ms)[len(step_ms) // 2]
    return Result(
        workload="python train.py",
        scale="smoke",
        knobs={"num_workers": 0},
        metrics={"step_ms": Metric("step_ms", median, "ms")},
        samples=samples,
        fingerprint=FP,
        batch_size=4,
        steps=len(step_ms),
        warmup=1,
        notes=[f"{EXEC_NOTE} python train.py: training loader over Data"] if script else [],
    )


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("form", ["terminal", "markdown"])  # JSON carries no hints
def test_two_exec_results_are_compared_in_execs_words(tmp_path, form, monkeypatch, capsys):
    base = _result([10.0, 12.0, 9.0, 14.0, 11.0, 10.5], script=True)
    head = dataclasses.replace(base, samples={"step_ms": [11.0, 13.5, 9.5, 15.0, 12.0, 10.0]})
    texts = {}
    for script in (False, True):
        for name, result in (("base", base), ("head", head)):
            result = dataclasses.replace(result, notes=result.notes if script else [])
            (tmp_path / f"{name}.json").write_text(result.to_json())
        if form == "terminal":
            monkeypatch.setattr("sys.stdout", Terminal())
        argv = ["compare", str(tmp_path / "base.json"), str(tmp_path / "head.json")]
        main([*argv, "--json"] if form == "json" else argv)
        import sys

        texts[script] = sys.stdout.getvalue() if form == "terminal" else capsys.readouterr().out
        monkeypatch.undo()
    assert PYTEST_WORDS.search(texts[False]), texts[False]  # a Job's Results: pytest's words, as before
    assert not PYTEST_WORDS.search(texts[True]), texts[True]
    assert "perfsuite exec" in texts[True], texts[True]
