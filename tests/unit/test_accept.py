"""``perfsuite accept HEAD BASE``: the one command that makes a change the baseline (issue 45 item 2)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from fixed_fingerprint import FP

from perfsuite.cli.main import main
from perfsuite.core.results import Result
from perfsuite.judge.baselines import BaselineStore


def result(num_workers: int) -> Result:
    return Result("train", "smoke", {"num_workers": num_workers}, {}, {}, FP, 4, 6, 1)


def test_a_script_s_result_file_is_replaced_and_compare_then_passes(tmp_path, capsys):
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    base.write_text(result(2).to_json())
    head.write_text(result(0).to_json())
    assert main(["compare", str(base), str(head)]) == 1  # regressed (setting)
    assert main(["accept", str(head), str(base)]) == 0
    assert f"now holds {head}'s run" in capsys.readouterr().out
    assert Result.from_json(base.read_text()).knobs["num_workers"] == 0
    assert main(["compare", str(base), str(head)]) == 0


def test_a_perf_test_s_baseline_directory_keeps_its_format_and_drops_its_earlier_runs(tmp_path, capsys):
    bases, heads = BaselineStore(tmp_path / "baselines"), BaselineStore(tmp_path / "results")
    for n in (2, 2, 2):
        bases.save(result(n), "tests/perf/test_x.py::test_a", overwrite=True, keep_runs=3)
    heads.save(result(0), "tests/perf/test_x.py::test_a")
    heads.save(result(0), "tests/perf/test_x.py::test_new")
    assert main(["accept", str(tmp_path / "results"), str(tmp_path / "baselines")]) == 0
    assert "test_new is not in" in capsys.readouterr().err
    data = json.loads(bases.path_for(FP, "tests/perf/test_x.py::test_a").read_text())
    assert data["test_id"] == "tests/perf/test_x.py::test_a" and "runs" not in data
    assert data["result"]["knobs"] == {"num_workers": 0}


def test_another_machine_s_run_is_refused_unless_forced(tmp_path, capsys):
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    base.write_text(result(2).to_json())
    head.write_text(replace(result(0), fingerprint=replace(FP, cpu_model="another CPU")).to_json())
    assert main(["accept", str(head), str(base)]) == 2
    assert "pass --force" in capsys.readouterr().err
    assert main(["accept", str(head), str(base), "--force"]) == 0


@pytest.mark.parametrize("head_name", ["missing.json", "dir"])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, head_name):
    base = tmp_path / "base.json"
    base.write_text(result(2).to_json())
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "x.json").write_text(result(0).to_json())
    assert main(["accept", str(tmp_path / head_name), str(base)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
