"""The dashboard page: plotted points, a marked change point that names the call site, filters, a table
view, and nothing fetched from the network. (The page in a real browser: test_browser.py.)"""

from __future__ import annotations

import re
from pathlib import Path

from test_store import SHA, result

from perfsuite.core.results import Metric
from perfsuite.tools.history import dashboard
from perfsuite.tools.history.store import HistoryStore

LINE = [f"{i:x}" * 40 if i else SHA for i in range(6)]  # the commits' first-parent line, oldest first


def _history(tmp_path: Path) -> HistoryStore:
    store = HistoryStore(tmp_path / "h")
    for i in range(6):
        r = result(1.0 if i < 4 else 2.0, step_ms=(10.0 + i % 2, 11.0, 9.5, 10.2, 10.4))
        site = {"op": "Tensor.item", "site": "train.py:57", "function": "main", "code": "loss.item()", "per_step": 1.0}
        sites = [site] + ([{**site, "site": "train.py:60", "code": "x.item()"}] if i >= 4 else [])
        r.metrics["syncs_per_step"] = Metric("syncs_per_step", len(sites), detail={"sites": sites})
        r.metrics["step_ms"] = Metric("step_ms", 10.0 + 0.1 * (i % 2), "ms")
        store.record(r, f"{i:x}" * 40 if i else SHA, 1000.0 + i, f"commit {i}")
    return store


def test_the_page_plots_points_marks_the_step_and_names_the_new_site(tmp_path: Path) -> None:
    store = _history(tmp_path)
    series = dashboard.build_series(store.entries(), line=LINE)
    syncs = next(s for s in series if s.metric == "syncs_per_step")
    assert syncs.exact and syncs.steps == [4]
    page = dashboard.render_html(series)
    assert page.count('class="point"') >= 6
    assert page.count('class="changepoint"') == 1
    assert "syncs_per_step 1 -&gt; 2 syncs/step" in page and "train.py:60" in page and "commit 4" in page
    assert 'id="f-test"' in page and 'id="f-metric"' in page and 'id="f-machine"' in page
    assert 'id="table"' in page and page.count("<tr ") >= 6


def test_the_page_fetches_nothing(tmp_path: Path) -> None:
    page = dashboard.render_html(dashboard.build_series(_history(tmp_path).entries(), line=LINE))
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<link" not in page and "@import" not in page and "fetch(" not in page


def test_commit_links_follow_the_template(tmp_path: Path) -> None:
    page = dashboard.render_html(
        dashboard.build_series(_history(tmp_path).entries(), line=LINE), commit_url="https://example.org/c/{sha}"
    )
    assert f"https://example.org/c/{'4' * 40}" in page


def test_summary_and_pngs(tmp_path: Path) -> None:
    series = dashboard.build_series(_history(tmp_path).entries(), line=LINE)
    text = dashboard.summary_markdown(series, last=3)
    assert "| train.py | syncs_per_step |" in text and "(3)" in text
    written = dashboard.write_pngs(series, tmp_path / "png")
    assert {p.name for p in written} >= {"syncs_per_step.png"}
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in written)


def _timing_history(tmp_path: Path, foreign: float) -> HistoryStore:
    """Eight commits whose step_cpu_ms doubles at the fifth (and input_efficiency, one value per run, halves),
    every run at ``foreign`` load: the contention guard's reading of other processes' share of the CPU."""
    store = HistoryStore(tmp_path / f"h{foreign}")
    for i in range(8):
        level = 10.0 if i < 4 else 20.0
        r = result(1.0)
        r.samples["step_cpu_ms"] = [level * (1 + 0.01 * ((k * 7 + i) % 5)) for k in range(20)]
        r.metrics["step_cpu_ms"] = Metric("step_cpu_ms", level * (1 + 0.01 * (i % 3)), "ms")
        r.metrics["input_efficiency"] = Metric(
            "input_efficiency", (0.9 if i < 4 else 0.45) + 0.01 * (i % 3), "fraction"
        )
        r.environment["contention"] = {"window": {"neighbours": foreign, "steal": 0.0}}
        store.record(r, LONG_LINE[i], 1000.0 + i, f"commit {i}")
    return store


LONG_LINE = [f"{i + 1:x}" * 40 for i in range(8)]


def test_a_timing_change_point_stands_only_where_the_verdict_engine_decides_it(tmp_path: Path) -> None:
    """Issue 56: on a short history under load, 2 of 4 change points were noise in figures nobody had judged."""
    quiet = {s.metric: s for s in dashboard.build_series(_timing_history(tmp_path, 0.02).entries(), line=LONG_LINE)}
    assert quiet["step_cpu_ms"].steps == [4]  # judged between the runs either side: regressed
    assert quiet["input_efficiency"].steps == []  # one value per run: never judged, so never a change point
    busy = {s.metric: s for s in dashboard.build_series(_timing_history(tmp_path, 0.7).entries(), line=LONG_LINE)}
    assert busy["step_cpu_ms"].steps == []  # the same step at 70% foreign load: the guard abstains, no change point
    assert busy["syncs_per_step"].steps == quiet["syncs_per_step"].steps == []  # an exact counter: as before
