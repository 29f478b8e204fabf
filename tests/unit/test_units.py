"""Human units (perfsuite.core.units): every report writes 2.69 s, 41.7 ms, 1.2 GB, never 2.69e+03 ms."""

from __future__ import annotations

import pytest

from perfsuite.core.units import human, metric_value, sig


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (2690.0, "ms", "2.69 s"),
        (41.7, "ms", "41.7 ms"),
        (0.02, "ms", "20 µs"),
        (192_000.0, "ms", "3 min 12 s"),
        (0.736, "ms/sample", "0.736 ms/sample"),
        (2.5, "s", "2.5 s"),
        (1200.0, "MB", "1.2 GB"),
        (873.977, "MB", "874 MB"),
        (131328, "bytes/step", "131 kB/step"),
        (464080896, "FLOP/step", "464 MFLOP/step"),
        (0.243, "fraction", "24.3%"),
        (1.703, "x", "x1.70"),
        (15273.2, "samples/s", "15,273 samples/s"),
        (55.91, "samples/s", "55.9 samples/s"),
        (461, "ops/step", "461 ops/step"),
        (True, "", "yes"),
        (None, "ms", "-"),
        (float("nan"), "ms", "-"),
        ("input float32", "", "input float32"),
    ],
)
def test_figures_read_in_human_units(value: object, unit: str, text: str) -> None:
    assert human(value, unit) == text
    assert "e+" not in text and "e-" not in text


def test_sig_keeps_three_digits_without_an_exponent() -> None:
    assert [sig(x) for x in (2690.0, 0.00131, 15273.2, 1.0, 0.0)] == ["2690", "0.00131", "15273", "1", "0"]


def test_a_metric_takes_its_registry_unit_and_a_column_may_leave_a_count_bare() -> None:
    assert metric_value("step_ms", 2690.0) == "2.69 s"
    assert metric_value("peak_rss_mb", 1234.0) == "1.2 GB"
    assert metric_value("syncs_per_step", 2, counts=False) == "2"
    assert metric_value("no_such_metric", 3.14159) == "3.14"


@pytest.mark.parametrize(
    ("name", "value", "text"),
    [
        ("flops_per_step", 1.58e9, "1.58 GFLOP"),
        ("h2d_bytes_per_step", 131180.0, "131 kB"),
        ("main_load_ms_per_step", 0.975, "0.975 ms"),
        ("step_ms", 1438.0, "1.44 s"),
    ],
)
def test_a_column_named_by_the_metric_leaves_out_the_per_step_its_name_says(name: str, value: float, text: str) -> None:
    assert metric_value(name, value, counts=False) == text
    assert metric_value(name, value).startswith(text)


def test_no_figure_is_ever_written_with_an_exponent() -> None:
    from hypothesis import given
    from hypothesis import strategies as st

    from perfsuite.judge.verdict import format_value

    units = ["ms", "ms/step", "s", "MB", "bytes/step", "FLOP/step", "fraction", "syncs/step", "samples/s", ""]

    @given(st.floats(min_value=-1e15, max_value=1e15, allow_nan=False), st.sampled_from(units))
    def check(value: float, unit: str) -> None:
        for text in (human(value, unit), human(value, unit, counts=False), format_value(value)):
            assert "e+" not in text and "e-" not in text, text

    check()
