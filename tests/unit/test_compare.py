"""compare_paths and the `perfsuite compare` command on golden result files."""

from __future__ import annotations

import argparse
import io
import json
import shutil
from pathlib import Path

import pytest

from perfsuite.cli import compare as compare_cmd
from perfsuite.cli.main import main
from perfsuite.core.results import Result
from perfsuite.errors import FingerprintMismatch, PerfsuiteError
from perfsuite.judge.baselines import BaselineStore
from perfsuite.judge.verdict import Outcome
from perfsuite.report.compare import compare_paths
from perfsuite.report.verdicts import to_json

DATA = Path(__file__).resolve().parents[1] / "data" / "results"


def run(argv):
    parser = argparse.ArgumentParser()
    compare_cmd.add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    code = compare_cmd.run(parser.parse_args([str(a) for a in argv]), out, err)
    return code, out.getvalue(), err.getvalue()


def test_slow_head_matches_golden_verdicts():
    verdicts = compare_paths(DATA / "base.json", DATA / "head_slow.json")
    expected = json.loads((DATA / "expected_verdicts_slow.json").read_text())
    assert json.loads(to_json(verdicts))["results"] == expected  # regenerate with to_json(...)["results"] on purpose


def test_exit_status_and_markdown():
    code, out, err = run([DATA / "base.json", DATA / "head_slow.json"])
    assert code == 1 and err == ""
    assert out.startswith("**perfsuite:** 4 regressed, 1 unchanged")
    assert "| data_wait_frac | 2% | 30% |" in out and "data-bound" in out  # human units, as at a terminal
    code, out, _ = run([DATA / "base.json", DATA / "head_same.json"])
    assert code == 0 and "regressed" not in out


def test_json_output(tmp_path):
    code, out, _ = run([DATA / "base.json", DATA / "head_same.json", "--json", "--png", tmp_path / "c.png"])
    report = json.loads(out)
    assert report["status"] == "complete" and report["schema_version"] == 1
    outcomes = {d["metric"]: d["outcome"] for d in report["results"]}
    assert code == 0 and outcomes.pop("step_ms") == "inconclusive"  # one base run of the 3 a wall-clock verdict needs
    assert set(outcomes.values()) == {"unchanged"}
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"


def test_other_machine_is_bad_input_unless_forced():
    code, out, err = run([DATA / "base.json", DATA / "head_other_machine.json"])
    assert code == 2 and out == "" and "--force" in err and err.startswith("perfsuite compare: error:")
    with pytest.raises(FingerprintMismatch):
        compare_paths(DATA / "base.json", DATA / "head_other_machine.json")
    code, _, _ = run([DATA / "base.json", DATA / "head_other_machine.json", "--force"])
    assert code == 0


@pytest.mark.parametrize(
    "argv,match",
    [
        (["missing.json", "head_same.json"], "does not exist"),
        (["base.json", "head_same.json", "--factor", "0.9"], "above 1"),
        (["base.json", "."], "a file with a file"),
    ],
    ids=["missing", "factor", "file-vs-dir"],
)
def test_bad_input_exits_2_with_message(argv, match):
    code, _, err = run([DATA / a for a in argv[:2]] + argv[2:])
    assert code == 2 and match in err


def test_corrupt_file_exits_2(tmp_path):
    (tmp_path / "bad.json").write_text("{")
    code, _, err = run([tmp_path / "bad.json", DATA / "head_same.json"])
    assert code == 2 and "bad.json is not valid JSON" in err


def test_directories_match_by_test_id(tmp_path):
    base_store, head_store = BaselineStore(tmp_path / "base"), BaselineStore(tmp_path / "head")
    base = Result.from_json((DATA / "base.json").read_text())
    slow = Result.from_json((DATA / "head_slow.json").read_text())
    same = Result.from_json((DATA / "head_same.json").read_text())
    base_store.save(base, "t::kept")
    base_store.save(base, "t::slowed")
    base_store.save(base, "t::removed")
    head_store.save(same, "t::kept")
    head_store.save(slow, "t::slowed")
    head_store.save(same, "t::added")
    verdicts = compare_paths(tmp_path / "base", tmp_path / "head")
    step = {v.test_id: v.outcome for v in verdicts if v.metric in ("step_ms", "*")}
    assert step == {
        "t::added": Outcome.NEW,
        "t::kept": Outcome.INCONCLUSIVE,  # one base run: step_ms not decided
        "t::removed": Outcome.UNAVAILABLE,
        "t::slowed": Outcome.REGRESSED,
    }
    assert main(["compare", str(tmp_path / "base"), str(tmp_path / "head"), "--json"]) == 1


def test_directory_with_one_test_under_two_fingerprints_is_refused(tmp_path):
    shutil.copy(DATA / "baseline_file.json", tmp_path / "a.json")
    (tmp_path / "sub").mkdir()
    shutil.copy(DATA / "baseline_file.json", tmp_path / "sub" / "b.json")
    with pytest.raises(PerfsuiteError, match="twice"):
        compare_paths(tmp_path, tmp_path)


def test_compare_does_not_import_torch_or_matplotlib():
    import subprocess
    import sys

    code = (
        "import sys, perfsuite.report.compare, perfsuite.report.verdicts, perfsuite.judge.engine; "
        "import perfsuite.judge.baselines; "
        "print(sorted(m for m in ('torch', 'matplotlib', 'scipy') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout
    assert out.strip() == "[]"
