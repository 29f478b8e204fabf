"""Fuzzing every command's argument parser and checks, and the Result / exact-file loaders (issue 34).

Whatever the arguments, ``perfsuite`` either accepts them (the command itself is stubbed out: only the
parser and :mod:`perfsuite.cli.validate` run) or exits 2 with one line; never a traceback, never a file
created. Whatever the bytes, the exact-file loader raises BaselineError naming the file, nothing else.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfsuite.cli import main as cli_main
from perfsuite.cli.main import COMMANDS, build_parser, main
from perfsuite.errors import BaselineError

DATA = Path(__file__).resolve().parents[1] / "data" / "results"
# Values a user might type: numbers out of range, paths that are files, directories, devices or missing.
VALUES = st.sampled_from(
    [
        "0",
        "1",
        "2",
        "3",
        "9",
        "-1",
        "1e9",
        "nan",
        "inf",
        "0.5",
        "x",
        "",
        "gray_classifier",
        "no_such_job",
        "afile",
        "adir",
        "missing/out.md",
        "afile/out.md",
        "/dev/null",
        "out.md",
        "pyproject.toml",
        "cpu",
        "face_parsing",
        "num_workers,amp",
        "min_samples_per_s=5",
        "A:B",
        "4:5",
        "Loader#0",
    ]
)
SKIPPED_FLAGS = {"-h", "--help", "--version", "--import", "--repo", "--cache-dir"}  # --import would import anything


def _flags() -> dict[str, list[tuple[str, bool]]]:
    """Each command's option strings, and whether each takes a value."""
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    out: dict[str, list[tuple[str, bool]]] = {}
    for name, parser in action.choices.items():
        out[name] = [
            (a.option_strings[-1], a.nargs != 0)
            for a in parser._actions
            if a.option_strings and not set(a.option_strings) & SKIPPED_FLAGS
        ]
    return out


FLAGS = _flags()


@st.composite
def argvs(draw: st.DrawFn) -> list[str]:
    command = draw(st.sampled_from(COMMANDS))
    argv = [command]
    positional = {"run": 1, "doctor": 1, "tune": 1, "compare": 2, "ab": 2, "bisect": 2, "history": 1}.get(command, 0)
    for _ in range(positional):
        argv.append(draw(VALUES | st.sampled_from([str(DATA / "base.json"), str(DATA / "head_same.json")])))
    flags = st.lists(st.sampled_from(FLAGS[command]), max_size=4) if FLAGS[command] else st.just([])
    for flag, takes in draw(flags):
        argv += [flag, draw(VALUES)] if takes else [flag]
    if command == "exec" and draw(st.booleans()):
        argv += ["--", "python", "train.py"]
    return argv


def _outcome(argv: list[str], cwd: Path) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own refusals
            code = int(exc.code or 0)
    return code, err.getvalue()


@pytest.fixture(scope="module")
def sandbox() -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "afile").write_text("x")
        (root / "adir").mkdir()
        (root / "pyproject.toml").write_text("[project]\nname = 'fuzz'\n")
        yield root


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=argvs())
def test_any_arguments_are_accepted_or_refused_in_one_line(
    argv: list[str], sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    for name in COMMANDS:  # the parser and the checks run; the commands themselves do not
        monkeypatch.setattr(importlib.import_module(f"perfsuite.cli.{name}"), "run", lambda *a, **k: 0)
    monkeypatch.chdir(sandbox)
    before = sorted(os.listdir(sandbox))
    code, err = _outcome(argv, sandbox)
    assert "Traceback" not in err, (argv, err)
    if code == 0:
        assert err == "", (argv, err)
    else:
        assert code == 2 and len(err.strip().splitlines()) == 1, (argv, err)
        assert err.startswith("perfsuite"), (argv, err)
    assert sorted(os.listdir(sandbox)) == before, argv  # nothing created


exact_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**12) | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
VALID_EXACT = {
    "schema_version": 2,
    "device": "cpu",
    "torch": "2.13",
    "tests": {"t.py::test_a": {"syncs_per_step": 0, "amp_engaged": False, "amp_lowp_frac": 0.5}},
    "breakdown": {"t.py::test_a": {"ops_per_step": {"aten::add": 2}}},
}


@st.composite
def exact_payloads(draw: st.DrawFn) -> object:
    data = json.loads(json.dumps(VALID_EXACT))
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(["top", "tests", "entry", "breakdown"]))
        key = draw(st.sampled_from(["schema_version", "device", "torch", "tests", "breakdown", "syncs_per_step", "x"]))
        value = draw(exact_values)
        tests = data.get("tests")
        entry = tests.get("t.py::test_a") if isinstance(tests, dict) else None
        target = {"top": data, "tests": tests, "entry": entry, "breakdown": data.get("breakdown")}[where]
        if isinstance(target, dict):
            target[key] = value
    return draw(st.sampled_from([data, draw(exact_values)]))


@settings(max_examples=80, deadline=None)
@given(payload=exact_payloads())
def test_the_exact_loader_reads_or_names_the_file(payload: object) -> None:
    from perfsuite.judge.exact import ExactBaselines

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cpu__torch-2.13.json"
        path.write_text(json.dumps(payload))
        try:
            store = ExactBaselines.open(tmp, "cpu__torch-2.13")
        except BaselineError as exc:
            assert str(path) in str(exc) and "\n" not in str(exc)
        else:
            assert store.loaded


def test_the_one_line_parser_is_what_main_uses() -> None:
    assert isinstance(build_parser(), cli_main.OneLineParser)
