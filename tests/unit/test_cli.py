"""The perfsuite command: list, run (table and JSON), and errors that say what to write."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from perfsuite.cli.main import main
from perfsuite.core.results import Result


def test_list_names_every_workload_with_both_scales(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--json"]) == 0
    rows = [r for r in json.loads(capsys.readouterr().out) if not r.get("job")]
    # Other tests in this process may have registered workloads of their own; the reference four are always there.
    assert {"captcha_slider", "face_parsing", "gray_classifier", "super_resolution"} <= {r["name"] for r in rows}
    assert all(set(r["scales"]) == {"smoke", "full"} for r in rows if r["name"] != "plugin_tiny")


@pytest.mark.slow
def test_run_json_is_a_result_with_metrics_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "run",
            "gray_classifier",
            "--aug",
            "cpu",
            "--workers",
            "0",
            "--steps",
            "3",
            "--warmup",
            "1",
            "--observe-steps",
            "1",
            "--log-interval",
            "1",
            "--amp",
            "bf16",
            "--device",
            "cpu",
            "--json",
        ]
    )
    assert code == 0
    result = Result.from_json(capsys.readouterr().out)
    assert result.knobs["aug"] == "cpu" and result.knobs["amp"] == "bf16" and result.knobs["log_interval"] == 1
    assert result.steps == 3 and len(result.samples["step_ms"]) == 3
    assert {"samples_per_s", "step_ms"} <= set(result.metrics)


def test_run_table_shows_throughput_and_step_percentiles(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "run",
                "super_resolution",
                "--aug",
                "none",
                "--workers",
                "0",
                "--steps",
                "3",
                "--warmup",
                "0",
                "--observe-steps",
                "0",
                "--device",
                "cpu",
                "--pin-memory",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    for text in ("samples_per_s", "step_ms", "median; p90", "pin_memory=True: not applied without CUDA"):
        assert text in out
    gpu = [line for line in out.splitlines() if "gpu" in line.lower() and "unavailable" in line]
    assert len(gpu) == 1 and gpu[0].strip().startswith("GPU telemetry: unavailable on a CPU run ("), gpu


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--amp", "true"], "amp=True is not a precision: write amp='bf16'", id="amp-true"),
        pytest.param(["--aug", "gpus"], "aug='gpus' is not a placement", id="aug-typo"),
        pytest.param(
            ["--workers", "0", "--prefetch", "2"],
            "prefetch_factor=2 needs worker processes",
            id="prefetch-without-workers",
        ),
        pytest.param(["--compile", "turbo"], "is not a torch.compile mode", id="compile-mode"),
    ],
)
def test_bad_flags_exit_2_with_the_fix(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "gray_classifier", "--device", "cpu", *argv]) == 2
    assert message in capsys.readouterr().err


def test_unknown_workload_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "imagenet", "--device", "cpu"]) == 2
    assert "unknown workload 'imagenet'" in capsys.readouterr().err


def test_help_does_not_import_torch() -> None:
    code = "import sys; from perfsuite.cli.main import build_parser; build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_worker_that_exited_unexpectedly_is_one_line_of_the_users_terms():
    from perfsuite.cli.user_errors import describe

    told = describe(RuntimeError("DataLoader worker (pid(s) 7622) exited unexpectedly"), "segv_data")
    assert told is not None and told.traceback == ""
    assert told.line.startswith("job 'segv_data': DataLoader worker (pid 7622) was killed by signal or crashed")
