"""The command line under faults: every flag has help, --version works, counts print as integers, OS errors
and Ctrl-C are one line (exit 2 and 130), progress only on a terminal, `perfsuite ab` takes its own options
after BASE HEAD, and `perfsuite compare` skips JSON that is no Result."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from perfsuite.cli import ab
from perfsuite.cli.main import build_parser, main
from perfsuite.core.units import metric_value

DATA = Path(__file__).resolve().parents[1] / "data" / "results"


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_subcommand_and_every_flag_has_help_text() -> None:
    """Before: `list` had no description and the loader flags had no help."""
    for name, parser in _subcommands().items():
        assert parser.description and len(parser.description) > 30, name
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help and action.help != argparse.SUPPRESS, f"perfsuite {name} {action.option_strings}"


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `perfsuite --version` exited 2."""
    from importlib.metadata import version

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == f"perfsuite {version('perfsuite')}"


def test_counts_print_as_integers() -> None:
    """Before: FLOP counts printed as 1438009776.000 (now in human units: tests/unit/test_units.py)."""
    assert metric_value("flops_per_step", 1438009776.0) == "1.44 GFLOP/step"
    assert metric_value("ops_per_step", 597.0) == "597 ops/step"
    assert metric_value("syncs_per_step", 0.5) == "0.5 syncs/step"  # a per-step average of a periodic read
    assert metric_value("data_wait_frac", 0.25) == "25%"


@pytest.mark.parametrize("kind", ["a file", "a file's child", "unreachable"])
def test_a_cache_dir_that_cannot_be_written_is_one_line_and_exit_2(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: exit 1 with a raw NotADirectoryError/OSError traceback from the cache's mkdir."""
    afile = tmp_path / "afile"
    afile.write_text("")
    cache = {"a file": afile, "a file's child": afile / "sub", "unreachable": Path("/proc/perfsuite-cache")}[kind]
    code = main(["run", "gray_classifier", "--cache-dir", str(cache), "--steps", "2", "--warmup", "0"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("perfsuite: error: cannot write the dataset cache at ") and "--cache-dir" in err


def test_compare_skips_json_that_is_no_result_with_a_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: a stray non-Result JSON file (the committed exact file, say) aborted with schema_version=None."""
    for side in ("base", "head"):
        d = tmp_path / side
        (d / "exact").mkdir(parents=True)
        (d / "exact" / "cpu__torch-2.13.json").write_text(json.dumps({"schema_version": 2, "tests": {}}))
        (d / "package.json").write_text('{"name": "x"}')
        (d / "run.json").write_text((DATA / ("base.json" if side == "base" else "head_same.json")).read_text())
    code = main(["compare", str(tmp_path / "base"), str(tmp_path / "head")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.err.count("note: skipped") == 4 and "not a Result or baseline file" in captured.err
    assert "unchanged" in captured.out


def test_ab_takes_its_own_options_after_base_and_head() -> None:
    """Before: `perfsuite ab BASE HEAD --max-rounds 3` passed --max-rounds to pytest ("unrecognized arguments")."""
    parser = argparse.ArgumentParser()
    ab.add_arguments(parser)
    args = parser.parse_args(["main", "HEAD", "tests/perf", "-k", "face", "--max-rounds", "3", "--budget=60"])
    assert ab.split_own_options(args) == ["tests/perf", "-k", "face"]
    assert (args.max_rounds, args.budget) == (3, 60.0)
    args = parser.parse_args(["main", "HEAD", "tests/perf", "--", "--seed", "7"])
    assert ab.split_own_options(args) == ["tests/perf", "--seed", "7"] and args.seed == 0  # after --: pytest's


def test_progress_is_drawn_only_on_a_terminal_and_never_inside_the_window() -> None:
    import io

    from perfsuite.cli.progress import phase_progress
    from perfsuite.core.knobs import Knobs
    from perfsuite.harness.runner import RunSpec, run

    with phase_progress("x", stream=io.StringIO()) as show:
        assert show is None  # not a terminal: nothing drawn
    calls: list[tuple[str, int, int]] = []
    spec = RunSpec(
        "gray_classifier",
        knobs=Knobs.from_flat(aug="none", num_workers=0, device="cpu"),
        steps=3,
        warmup=2,
        observe_steps=1,
        sol_steps=1,
        progress=lambda phase, done, total: calls.append((phase, done, total)),
    )
    run(spec, probes=[])
    window = [c for c in calls if c[0] == "window"]
    assert window == [("window", 0, 3), ("window", 3, 3)]  # before and after the window, nothing between
    assert [c[0] for c in calls][:2] == ["first batch", "warm-up"] and ("observe", 1, 1) in calls


def _descendants(pid: int) -> list[int]:
    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


@pytest.mark.slow
def test_ctrl_c_during_perfsuite_run_is_one_line_exit_130_and_leaves_no_worker(tmp_path: Path) -> None:
    """Before: a 37-line KeyboardInterrupt traceback."""
    cmd = [sys.executable, "-m", "perfsuite.cli", "run", "gray_classifier", "--workers", "2", "--steps", "400"]
    env = {**os.environ, "PERFSUITE_CACHE": str(tmp_path / "cache")}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(_descendants(proc.pid)) < 2:  # its workers are up: mid-run
            time.sleep(0.2)
        workers = _descendants(proc.pid)
        assert len(workers) >= 2, "the run never started its workers"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == [err.strip().splitlines()[-1]] and "Traceback" not in err
    assert err.startswith("perfsuite: interrupted (Ctrl-C) in the ") and out == ""
    time.sleep(0.5)
    assert not [p for p in workers if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
