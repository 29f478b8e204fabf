"""Terminal, markdown, JSON and PNG renderings of verdicts."""

from __future__ import annotations

import json

from fixed_fingerprint import FP

from perfsuite.core.results import Result
from perfsuite.judge.verdict import Outcome, Verdict
from perfsuite.report.verdicts import (
    format_markdown,
    format_terminal,
    ordered,
    read_report,
    summary_line,
    to_json,
    write_png,
)

VERDICTS = [
    Verdict("tests/perf/test_a.py::test_x[cpu]", "step_ms", 10.0, 10.1, 1.01, Outcome.UNCHANGED, "same"),
    Verdict("tests/perf/test_a.py::test_y", "syncs_per_step", 0, 2, None, Outcome.REGRESSED, "syncs_per_step 0 -> 2"),
    Verdict("t::z", "step_ms", 10.0, 10.9, 1.09, Outcome.INCONCLUSIVE, "noisy | drifting"),
    Verdict(
        "t::w",
        "max_data_wait_frac",
        0.05,
        0.62,
        12.4,
        Outcome.FAIL,
        "data_wait_frac 0.62 > 0.05",
        cause="data-bound: augmentation on CPU workers",
    ),
    Verdict("t::v", "step_ms", 10.0, 8.0, 0.8, Outcome.IMPROVED, "faster"),
    Verdict("t::u", "step_ms", 10.0, 10.0, 1.0, Outcome.UNCHANGED, "same"),
]


def test_summary_line_counts_outcomes_most_urgent_first():
    assert summary_line(VERDICTS) == "1 fail, 1 regressed, 1 inconclusive, 1 improved, 2 unchanged"
    assert summary_line([]) == "no verdicts"


def test_markdown_puts_regressions_first_and_escapes_pipes():
    text = format_markdown(VERDICTS)
    lines = text.splitlines()
    assert lines[0] == "**perfsuite:** 1 fail, 1 regressed, 1 inconclusive, 1 improved, 2 unchanged"
    assert lines[2] == "| test | metric | base | head | ratio | verdict |"
    rows = lines[4:]
    assert len(rows) == len(VERDICTS)
    assert "test_y" in rows[0] and "**regressed**" in rows[0]
    assert "max_data_wait_frac" in rows[1] and "data-bound: augmentation on CPU workers" in rows[1]
    assert "t::z" in rows[2] and "noisy \\| drifting" in rows[2]
    assert all(row.count(" | ") == 5 for row in rows)


def test_ordered_is_stable_within_a_group():
    unchanged = [v.test_id for v in ordered(VERDICTS) if v.outcome is Outcome.UNCHANGED]
    assert unchanged == ["tests/perf/test_a.py::test_x[cpu]", "t::u"]


def test_terminal_table_is_fixed_width_and_cuts_long_ids_from_the_left():
    long_id = "tests/perf/" + "deep/" * 30 + "test_long.py::test_case[cpu-2]"
    verdicts = VERDICTS + [Verdict(long_id, "step_ms", 1.0, 1.0, 1.0, Outcome.UNCHANGED, "")]
    lines = format_terminal(verdicts, width=100).splitlines()
    assert lines[0].split() == ["test", "metric", "base", "head", "ratio", "verdict"]
    assert all(len(line) <= 100 for line in lines)
    assert lines[-1].startswith("...") and "test_case[cpu-2]" in lines[-1]
    ratio_col = lines[0].index("ratio") + len("ratio")
    assert all(
        line[:ratio_col].endswith(("x1.010", "-", "x1.090", "x12.400", "x0.800", "x1.000")) for line in lines[2:]
    )


def test_json_is_an_object_with_a_schema_version_a_status_and_the_results():
    """Before: a bare list, with no place to say a report covers only part of a session."""
    data = json.loads(to_json(VERDICTS))
    assert (data["schema_version"], data["status"], data["reason"]) == (1, "complete", None)
    assert [Verdict.from_dict(d) for d in data["results"]] == VERDICTS
    partial = json.loads(to_json(VERDICTS, partial="interrupted (Ctrl-C) after 3 result(s)", problems=["x"]))
    assert partial["status"] == "partial" and partial["reason"].startswith("interrupted")
    assert partial["errors"] == ["x"] and partial["summary"].startswith("1 error, ")
    assert read_report(json.dumps([v.to_dict() for v in VERDICTS]))["status"] == "complete"  # older reports


def test_markdown_of_a_cut_short_session_says_partial_first():
    text = format_markdown(VERDICTS, partial="interrupted (Ctrl-C)", problems=["baseline error: x"])
    assert text.startswith("> **PARTIAL REPORT**: the session was interrupted (Ctrl-C)")
    assert "**perfsuite:** 1 error, " in text and "- baseline error: x" in text


def test_png_has_bars_and_timeline_panel(tmp_path):
    result = Result(
        workload="w",
        scale="smoke",
        knobs={},
        metrics={},
        samples={},
        fingerprint=FP,
        batch_size=1,
        steps=0,
        warmup=0,
        timeline={"t_s": [0.0, 1.0, 2.0], "gpu_util": [10.0, 90.0, 80.0], "power_w": [50.0, 300.0, 280.0]},
    )
    plain = write_png(VERDICTS, tmp_path / "plain.png")
    with_timeline = write_png(VERDICTS, tmp_path / "timeline.png", {"t::z": result})
    for path in (plain, with_timeline):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image as mpimg

    assert mpimg.imread(with_timeline).shape[0] > mpimg.imread(plain).shape[0]  # the extra panel


def test_the_summary_lists_each_note_once_with_the_results_it_applies_to():
    from perfsuite.core.results import Fingerprint, Result
    from perfsuite.report.summary import format_notes

    fp = Fingerprint("cpu", None, 0, None, None, "2.13.0", None, "3.11", "cpu", 2, "linux")

    def result(*notes):
        return Result("w", "smoke", {}, {}, {}, fp, 4, 2, 1, notes=notes)

    pinned = "pin_memory=True on a CPU run: without CUDA torch does not pin"
    lines = format_notes({"t::a": result(pinned), "t::b": result(pinned, "other"), "t::c": result()})
    assert lines == [f"note (2 results): {pinned}", "note (t::b): other"]


def test_past_the_limit_the_most_shared_notes_stay_and_the_rest_are_counted():
    from perfsuite.core.results import Fingerprint, Result
    from perfsuite.report.summary import OVERSUBSCRIBED, format_notes

    fp = Fingerprint("cpu", None, 0, None, None, "2.13.0", None, "3.11", "cpu", 2, "linux")
    results = {
        f"t::{i}": Result("w", "smoke", {}, {}, {}, fp, 4, 2, 1, notes=(f"note {i}", "shared", f"{OVERSUBSCRIBED} {i}"))
        for i in range(6)
    }
    lines = format_notes(results, limit=2)
    assert lines[0] == "note (6 results): shared" and len(lines) == 3  # oversubscription has its own line
    assert lines[2] == "5 more notes on reading these figures: -v lists them (each Result's notes hold them too)"
    assert len(format_notes(results)) == 7
