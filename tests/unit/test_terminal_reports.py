"""Snapshots of the reports people read: the terminal tables (rich, at a fixed width) and the PR markdown.

A change in either shows in review as a change of a file under tests/data/snapshots/. To accept one on
purpose: ``PERFSUITE_UPDATE_SNAPSHOTS=1 pytest tests/unit/test_terminal_reports.py``, then read the diff.
"""

from __future__ import annotations

import dataclasses
import io
import os
from pathlib import Path

import pytest
from rich.console import Console

from perfsuite.core.results import Metric, Result
from perfsuite.judge.verdict import Outcome, Verdict
from perfsuite.report import terminal
from perfsuite.report.compare import judge_paths
from perfsuite.report.verdicts import format_markdown

DATA = Path(__file__).resolve().parents[1] / "data"
SNAPSHOTS = DATA / "snapshots"
WIDTH = 100
GPU_METRICS = ("gpu_util", "gpu_power_w", "gpu_mem_mb", "sm_clock_mhz", "gpu_sm_util", "gpu_sm_occupancy")
GPU_METRICS += ("gpu_tensor_active", "gpu_dram_bw_util", "gpu_pcie_rx_mib_s", "gpu_pcie_tx_mib_s")


def snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("PERFSUITE_UPDATE_SNAPSHOTS"):
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no snapshot {path}: run with PERFSUITE_UPDATE_SNAPSHOTS=1 once and review it"
    assert text == path.read_text(encoding="utf-8"), f"{name} changed; review, then update the snapshot"


def drawn(renderable: object, width: int = WIDTH) -> str:
    console = Console(file=io.StringIO(), record=True, width=width, color_system=None)
    console.print(renderable)
    return console.export_text()


def compared() -> list[Verdict]:
    verdicts, _ = judge_paths(DATA / "results" / "base.json", DATA / "results" / "head_slow.json", 1.05, 0.01, False)
    return verdicts


INCONCLUSIVE = Verdict(
    "tests/perf/test_loader.py::test_loader_settings[gray_classifier-workers0]",
    "step_ms",
    31.9,
    33.1,
    1.038,
    Outcome.INCONCLUSIVE,
    "step_ms median 31.9 -> 33.1 ms (x1.038, 99% CI x0.97..x1.11, n=20/20): too noisy to tell: the interval "
    "spans the margin",
)


def test_compare_at_a_terminal_is_a_table_with_no_markdown() -> None:
    text = drawn(terminal.verdicts_report(compared() + [INCONCLUSIVE], width=WIDTH))
    assert "<br>" not in text and "<details>" not in text and "|---" not in text
    assert "12.9 ms" in text  # human units, not 12.92 or 1.29e+01
    assert "to decide: about 4x the steps on both sides (--steps 80" in text and "perfsuite ab" in text
    snapshot("compare_terminal.txt", text)


def test_compare_markdown_for_a_pr_comment_says_what_would_decide_too() -> None:
    text = format_markdown(compared() + [INCONCLUSIVE])
    assert "<br>to decide: about 4x the steps" in text
    snapshot("compare_markdown.md", text)


def test_a_first_run_counts_its_empty_new_rows_on_one_line() -> None:
    new = [Verdict(f"t{i}", "timing", None, None, None, Outcome.NEW, "no timing baseline") for i in range(24)]
    text = drawn(terminal.verdicts_report(new, width=WIDTH))
    assert "24 tests new: no timing baseline" in text
    assert not [line for line in text.splitlines() if line.lstrip().startswith("timing")]  # no rows of '-'


def cpu_run() -> Result:
    result = Result.from_json((DATA / "results" / "head_slow.json").read_text(encoding="utf-8"))
    gpu = {n: Metric.unavailable(n, "device=cpu: GPU telemetry needs a CUDA device", "fraction") for n in GPU_METRICS}
    return dataclasses.replace(result, metrics={**result.metrics, **gpu})


def test_a_cpu_run_prints_one_line_about_gpu_telemetry() -> None:
    lines = terminal.run_lines(cpu_run())
    about_gpu = [line for line in lines if "gpu" in line.lower()]
    assert len(about_gpu) == 1, about_gpu
    assert about_gpu[0].strip().startswith("GPU telemetry: unavailable on a CPU run (10 metrics")
    snapshot("run_terminal.txt", "\n".join(lines) + "\n")


def test_a_reason_many_metrics_share_is_written_once_and_each_metric_keeps_its_row() -> None:
    why = "stages __getitem__ and collate_fn not replayed: Stream is an IterableDataset"
    names = ("loader_calls_per_sample", "loader_read_bytes_per_sample", "loader_output_format")
    shared = {name: Metric.unavailable(name, why) for name in names}
    result = cpu_run()
    lines = terminal.run_lines(dataclasses.replace(result, metrics={**result.metrics, **shared}))
    assert sum(why in line for line in lines) == 1
    rows = {line.split()[0]: line.split(None, 1)[1] for line in lines if line.split()[:1] and line.split()[0] in names}
    assert rows == {
        names[0]: f"unavailable: {why}",
        names[1]: f"unavailable: see {names[0]}",
        names[2]: f"unavailable: see {names[0]}",
    }


@pytest.mark.parametrize("width", [60, 80, 120])
def test_the_run_table_folds_to_the_width_losing_no_word(width: int) -> None:
    from perfsuite.cli.run import format_run

    fmt = "__getitem__ -> tuple(Tensor uint8 1x64x64, Tensor int64 -); collate_fn -> list(Tensor uint8 32x1x64x64)"
    long = {
        "loader_output_format": Metric("loader_output_format", fmt),
        "graph_breaks": Metric.unavailable("graph_breaks", "compile=None: nothing compiled, " * 4, "breaks"),
    }
    result = cpu_run()
    text = format_run(dataclasses.replace(result, metrics={**result.metrics, **long}))
    folded = terminal.folded_lines(text, width)
    assert folded.split() == text.split()  # the same words in the same order: nothing cut, nothing broken
    for line in folded.splitlines():
        assert len(line) <= width or " " not in line.strip(), line  # only a single word longer than the width
    rows = {line.split()[0]: line for line in text.splitlines() if line.startswith("  ") and "  " in line.strip()}
    wide = [name for name, line in rows.items() if len(line) > width and terminal.ROW.match(line)]
    assert set(long) <= set(wide)
    for name in wide:  # a table row goes on under its value column, where that leaves room
        first = folded.splitlines().index(next(f for f in folded.splitlines() if f.split()[:1] == [name]))
        column = terminal.ROW.match(rows[name]).end()  # type: ignore[union-attr]
        nxt = folded.splitlines()[first + 1]
        indent = len(nxt) - len(nxt.lstrip(" "))
        assert indent == (column if width - column >= terminal.MIN_VALUE_COLUMNS else 4), (name, nxt)


def test_the_session_summary_at_a_fixed_width() -> None:
    result = cpu_run()
    text = terminal.session_summary(compared(), {"head_slow": result}, {"head_slow": (3, 4)}, WIDTH, markup=False)
    assert "input eff:" in text  # the people table's labels are explained
    snapshot("session_summary.txt", text + "\n")


AB = {
    "base": {"rev": "main", "sha": "a" * 40},
    "head": {"rev": "feature", "sha": "b" * 40},
    "environment": "both sides in the current environment",
    "rule": {"factor": 1.05, "margin": 1.03, "alpha": 0.01, "confidence": 0.9, "min_pairs": 3, "statistic": "min"},
    "rounds": 3,
    "runs": 12,
    "elapsed_s": 171.4,
    "stopped": "time budget 180 s (a round takes about 57 s)",
    "problems": [],
    "regressed": True,
    "tests": [
        {
            "test_id": "tests/perf/test_step.py::test_step[face_parsing]",
            "verdict": "regressed",
            "step_ms_per_sample": {
                "outcome": "regressed",
                "ratio": 1.21,
                "low": 1.15,
                "high": 1.27,
                "pairs": 6,
                "reason": "slower than x1.05, signed-rank p=0.016",
                "needs": "",
            },
            "tails": {},
            "exact": [],
            "shown": {"samples_per_s": {"base": 480.0, "head": 397.0}},
            "missing": [],
        },
        {
            "test_id": "tests/perf/test_loader.py::test_loader[gray_classifier]",
            "verdict": "unknown",
            "step_ms_per_sample": {
                "outcome": "unknown",
                "ratio": 1.02,
                "low": 0.96,
                "high": 1.09,
                "pairs": 6,
                "reason": "the interval spans both margins",
                "needs": "about 6 more pairs would narrow it to the margin",
            },
            "tails": {},
            "exact": [],
            "shown": {},
            "missing": [],
        },
    ],
}


def test_ab_at_a_terminal_is_a_table_and_an_undecided_test_says_what_would_decide() -> None:
    text = drawn(terminal.ab_report(AB))
    assert "<details>" not in text and "|---" not in text
    assert "about 6 more pairs" in text and "a larger --budget runs more rounds" in text
    snapshot("ab_terminal.txt", text)


def test_doctor_and_tune_lines_keep_their_words_and_only_gain_style() -> None:
    lines = ["perfsuite doctor: face_parsing", "bottleneck: the loader", "  - num_workers 0 -> 2: gain (x1.8)"]
    assert drawn(terminal.styled_lines(lines)).splitlines() == lines


@pytest.mark.parametrize("width", [80, 120])
def test_the_verdict_table_keeps_metric_and_verdict_whole_at_any_width(width: int) -> None:
    text = drawn(terminal.verdict_table([INCONCLUSIVE], width), width)
    row = next(line for line in text.splitlines() if "step_ms" in line)
    assert "inconclusive" in row and row.rstrip().endswith("inconclusive")


def test_a_live_line_is_quiet_off_a_terminal_and_estimates_the_time_left_from_the_first_round() -> None:
    from perfsuite.cli import progress

    assert progress.live_line("x", io.StringIO()) is None  # piped: nothing drawn
    line = progress.LiveLine("perfsuite doctor", io.StringIO())
    now = [100.0]
    line._time = lambda: now[0]  # type: ignore[method-assign]
    line.update("round 1/3: as it is")
    assert line.time_left(now[0]) is None  # nothing to go on before the first round ends
    now[0] = 130.0
    line.update("round 2/3: as it is")
    assert line.time_left(now[0]) == 60.0  # two rounds left (this one included) of 30 s
    assert line.time_left(now[0] + 10.0) == 50.0
    line.stop()


def test_gpu_only_unavailable_verdicts_collapse_to_one_line() -> None:
    why = "device=cpu: GPU telemetry needs a CUDA device"
    gpu = [
        Verdict(f"t{i}", m, None, None, None, Outcome.UNAVAILABLE, f"{m} unavailable: {why}")
        for i in range(3)
        for m in GPU_METRICS[:2]
    ]
    other = Verdict(
        "t0", "graph_breaks", None, None, None, Outcome.UNAVAILABLE, "graph_breaks unavailable: compile=None"
    )
    lines = terminal.unavailable_lines([*gpu, other])
    assert lines == [
        "unavailable: t0: graph_breaks unavailable: compile=None",
        "GPU telemetry: unavailable on a CPU run (2 metrics: gpu_power_w, gpu_util; 6 verdicts, each with its "
        "reason above)",
    ]


def test_compare_writes_the_markdown_file_it_is_asked_for_announces_it_and_never_overwrites(tmp_path: Path) -> None:
    from perfsuite.cli.main import main

    out = tmp_path / "pr.md"
    argv = ["compare", str(DATA / "results" / "base.json"), str(DATA / "results" / "head_slow.json")]
    err = io.StringIO()
    import contextlib

    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()) as stdout:
        assert main([*argv, "--markdown", str(out)]) == 1  # head_slow regressed
    assert out.read_text(encoding="utf-8") == format_markdown(compared())
    assert f"wrote {out} (markdown for a PR comment)" in err.getvalue()
    assert "| test | metric |" in stdout.getvalue()  # stdout is no terminal here: markdown too
    with contextlib.redirect_stderr(err):
        assert main([*argv, "--markdown", str(out)]) == 2
    assert "exists; remove it or give another file" in err.getvalue()


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def face_parsing_compare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, width: int, *extra: str) -> str:
    """``COLUMNS=width perfsuite compare`` at a terminal on two smoke runs of face_parsing (2026-11-27, the busy
    2-core VM) whose head's output format is planted to differ (float32 where uint8 was): a long label row."""
    import argparse
    import json
    import re

    from perfsuite.cli import compare as compare_cmd

    head = json.loads((DATA / "results" / "face_parsing_head.json").read_text(encoding="utf-8"))
    fmt = head["metrics"]["loader_output_format"]
    fmt["value"] = fmt["value"].replace("Tensor uint8 3x64x64", "Tensor float32 3x64x64")
    (tmp_path / "face_parsing.json").write_text(json.dumps(head), encoding="utf-8")
    monkeypatch.setenv("COLUMNS", str(width))
    parser = argparse.ArgumentParser()
    compare_cmd.add_arguments(parser)
    out, err = Tty(), io.StringIO()
    argv = [str(DATA / "results" / "face_parsing_base.json"), str(tmp_path / "face_parsing.json"), *extra]
    code = compare_cmd.run(parser.parse_args(argv), out, err)
    assert code == 1  # the format changed
    return re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())


@pytest.mark.parametrize("width", [80, 120])
def test_compare_of_face_parsing_fits_the_terminal_and_cuts_no_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    """Issue 47: at 120 columns the format cell took the width and cut metric names to ``step_…``."""
    text = face_parsing_compare(tmp_path, monkeypatch, width, "--verbose")
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    verdicts, _ = judge_paths(
        DATA / "results" / "face_parsing_base.json", DATA / "results" / "face_parsing_head.json", 1.05, 0.01, False
    )
    assert len(verdicts) > 20
    for v in verdicts:  # every row whole: metric, ratio and verdict on the metric's own line
        row = [line for line in lines if line.startswith(f"  {v.metric} ")]
        assert len(row) == 1, (v.metric, row)
        ratio = "-" if v.ratio is None else f"x{v.ratio:.3f}"
        assert f" {ratio} " in row[0] and row[0].split()[-1] in ("unchanged", "inconclusive", "changed", "new")
    fmt = next(i for i, line in enumerate(lines) if line.startswith("  loader_output_format "))
    assert lines[fmt].split()[-1] == "changed" and "(below)" in lines[fmt]
    assert lines[fmt + 1].lstrip().startswith("base: __getitem__ -> tuple(Tensor uint8 3x64x64")  # folded under it
    snapshot(f"compare_face_parsing_{width}.txt", face_parsing_compare(tmp_path, monkeypatch, width))


def busy_counts(text: str, tests: str) -> list[int]:
    """The counts of the shared 'the machine was busy' lines of a report, in their order."""
    import re

    pattern = rf"(\d+) figures not judged in {tests}: the machine was busy"
    return [int(n) for n in re.findall(pattern, " ".join(text.split()))]


def test_a_busy_machine_is_one_line_with_its_count_not_a_paragraph_per_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runs were contended: their wall-clock figures abstain together, on one line; --verbose lists each."""
    quiet = face_parsing_compare(tmp_path, monkeypatch, 100)
    verdicts, _ = judge_paths(
        DATA / "results" / "face_parsing_base.json", DATA / "results" / "face_parsing_head.json", 1.05, 0.01, False
    )
    busy = [v for v in verdicts if v.unjudged and v.unjudged.startswith("the machine was busy")]
    assert busy and all(v.outcome is Outcome.INCONCLUSIVE for v in busy)
    # one line for both bounds passed (wall-clock 10%, CPU time 45%): 10 wall-clock figures and 6 CPU-time ones
    assert busy_counts(quiet, "1 test") == [len(busy)] == [16]
    assert "neither wall-clock (bound 10%) nor CPU-time figures are compared" in " ".join(quiet.split())
    assert quiet.count("the machine was busy") == 1 and "  step_ms " not in quiet
    loud = face_parsing_compare(tmp_path, monkeypatch, 100, "--verbose")
    assert "  step_ms " in loud and " ".join(loud.split()).count("not judged: head run:") == len(busy)


def test_the_json_report_keeps_each_figure_not_judged_and_its_shared_reason() -> None:
    from perfsuite.report.verdicts import read_report, to_json

    verdicts, _ = judge_paths(
        DATA / "results" / "face_parsing_base.json", DATA / "results" / "face_parsing_head.json", 1.05, 0.01, False
    )
    rows = read_report(to_json(verdicts))["results"]
    busy = [r for r in rows if str(r.get("unjudged", "")).startswith("the machine was busy")]
    assert len(busy) == sum(1 for v in verdicts if v.unjudged) and all("not judged" in r["message"] for r in busy)


def test_a_green_session_on_a_busy_machine_ends_in_a_screenful() -> None:
    """Issue 47: 365 contended figures were 365 paragraphs (4,631 lines); now one line with the count and why."""
    from perfsuite.core import metrics as registry
    from perfsuite.judge.contention import Guard, Load

    guard = Guard(Load(0.5, 0.6, 2.2), Load(0.4, 0.2, 1.9))
    wall = [s.name for s in registry.all_specs() if s.kind == "timing" and s.name != "step_cpu_ms"][:12]
    tests = [f"tests/perf/test_loader.py::test_loader_settings[job{i}-workers2]" for i in range(30)]
    verdicts = [
        guard.apply(registry.get(m), Verdict(t, m, 10.0, 10.5, 1.05, Outcome.UNCHANGED, f"{m} 10 -> 10.5"))
        for t in tests
        for m in wall
    ]
    results = {t: cpu_run() for t in tests}
    shown = [v for v in verdicts if v.outcome not in (Outcome.PASS, Outcome.UNCHANGED)]  # as the plugin passes them
    assert len(shown) > 200
    text = terminal.session_summary(shown, results, {t: (3, 3) for t in tests}, 80, markup=False)
    lines = text.splitlines()
    assert len(lines) <= 40, text
    assert sum(busy_counts(text, "30 tests")) == len(shown)
    assert "per-test figures (samples/s, input efficiency, data wait, ...) of 30 results: -v" in text
    assert max(map(len, lines)) <= 80


def test_new_figures_and_new_tests_are_counted_apart_so_the_counts_agree() -> None:
    """Issue 47: '14 new' beside '0 timing results new': figures without a baseline value are not tests without a
    baseline, and each line says which it counts."""
    from perfsuite.judge.verdict import NO_BASE_VALUE, NO_BASELINE
    from perfsuite.report.summary import gate_line

    figures = [
        Verdict("t::a", m, None, 1.0, None, Outcome.NEW, f"{m} 1: no baseline value", unjudged=NO_BASE_VALUE)
        for m in ("loader_calls_per_sample", "loader_read_bytes_per_sample", "loader_output_bytes_per_sample")
    ]
    first = [Verdict("t::b", "timing", None, None, None, Outcome.NEW, "no timing baseline", unjudged=NO_BASELINE)]
    text = " ".join(drawn(terminal.verdicts_report(figures + first, width=WIDTH)).split())
    assert "perfsuite: 4 new" in text
    assert "3 figures new in 1 test: the baseline run holds no value for them" in text
    assert "1 test new: first run on this machine: no timing baseline yet" in text
    assert gate_line({}, 0, 1, {}).endswith("; 1 test with no timing baseline on this machine yet")


def test_the_contention_note_before_the_compare_table_is_folded_to_80_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 56: the note was one line of 216-268 characters before a table folded to 80."""
    from perfsuite.cli.main import main

    monkeypatch.delenv("COLUMNS", raising=False)
    base, head = DATA / "results" / "face_parsing_base.json", DATA / "results" / "face_parsing_head.json"
    main(["compare", str(base), str(head)])
    err = capsys.readouterr().err
    note = [line for line in err.splitlines() if line.strip()]
    assert note[0].startswith("perfsuite compare: note: ") and "contention: head run:" in " ".join(err.split())
    assert len(note) > 1 and max(map(len, note)) <= 80, err
