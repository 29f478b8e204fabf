"""The history as people read it: a self-contained HTML dashboard, a PNG per metric, a PR summary.

The dashboard is one HTML file with everything inline (SVG plots, a little CSS and script for the
filters): it opens from disk or any static host, and makes no network request. Per test, metric and
machine it plots the value over commits in ancestry order (:mod:`.ancestry`), the series that moved first,
with each run's interval where the run has per-step samples (their 10th to 90th percentile), exact counters
drawn as steps, and the change points (:mod:`.changepoints`) marked and labelled with their commit, each
listed with the value before and after and, for a counter with call sites, which sites changed. Values are
in the metric's unit (:mod:`perfsuite.core.units`), the x axis names the commits.
"""

from __future__ import annotations

import html
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from perfsuite.core import metrics as registry
from perfsuite.core.results import Result
from perfsuite.core.units import human
from perfsuite.tools.history.changepoints import exact_steps, noisy_steps
from perfsuite.tools.history.store import Entry

WIDTH, HEIGHT = 640, 250
LEFT, RIGHT, TOP, BOTTOM = 92, 16, 22, 46  # room for the y ticks in units, the commits and the axis title


@dataclass
class Point:
    commit: str
    subject: str
    commit_time: float
    value: float
    low: float | None = None
    high: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class Series:
    test: str
    metric: str
    machine: str
    exact: bool
    unit: str
    points: list[Point]
    steps: list[int] = field(default_factory=list)  # indices into points where a change point begins

    @property
    def slug(self) -> str:
        return f"{abs(hash((self.test, self.metric, self.machine))) % 10**10:010d}"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def build_series(
    entries: Iterable[Entry], min_relative: float = 0.05, line: Sequence[str] | None = None
) -> list[Series]:
    """One series per (test, metric, machine), points in ancestry order, change points found.

    ``line`` is the newest commit's first-parent line, oldest first (:func:`.ancestry.first_parent_line`):
    the points follow it, and runs of commits off it are left out (:func:`.ancestry.off_line` names them).
    Without it (a history read with no clone at hand, as in tests) the entries are taken in the order given.
    """
    if line is not None:
        from perfsuite.tools.history.ancestry import rank_of

        rank = rank_of(line)
        entries = sorted((e for e in entries if e.commit in rank), key=lambda e: (rank[e.commit], e.recorded))
    grouped: dict[tuple[str, str, str], list[Point]] = defaultdict(list)
    runs: dict[tuple[str, str, str], list[Result]] = defaultdict(list)  # each point's Result, to judge a step by
    for e in entries:
        for name, metric in e.result.metrics.items():
            value = _number(metric.value) if metric.available else None
            if value is None:
                continue
            spec = registry.find(name)
            low = high = None
            samples = e.result.samples.get(spec.samples or name) if spec is not None else None
            if samples and len(samples) >= 5:
                low, high = (float(v) for v in np.percentile(samples, [10, 90]))
            grouped[(e.test, name, e.machine["key"])].append(
                Point(e.commit, e.subject, e.commit_time, value, low, high, dict(metric.detail or {}))
            )
            runs[(e.test, name, e.machine["key"])].append(e.result)
    series = []
    for (test, name, machine), points in sorted(grouped.items()):
        spec = registry.find(name)
        exact = spec is not None and spec.kind == "exact"
        s = Series(test, name, machine, exact, spec.unit if spec else "", points)
        values = [p.value for p in points]
        if exact:
            s.steps = exact_steps(values)
        else:  # a timing's step stands only where the verdict engine decides it between the runs either side
            found = runs[(test, name, machine)]
            s.steps = [i for i in noisy_steps(values, min_relative) if decided(spec, found[i - 1], found[i], test)]
        series.append(s)
    return series


def decided(spec: registry.MetricSpec | None, before: Result, after: Result, test: str) -> bool:
    """Whether the verdict engine, contention guard included, decides ``spec`` between two runs (regressed or
    improved): a change point from a figure that was not judged (a busy machine's timing, one value per run)
    would be noise drawn as a step (issue 56: 2 of 4 change points on a short history under load)."""
    from perfsuite.judge.engine import compare_results
    from perfsuite.judge.verdict import Outcome

    if spec is None or not spec.compared:
        return False
    name = spec.name
    verdicts = compare_results(before, after, test, force=True, only=lambda other: other.name == name)
    return any(v.metric == name and v.outcome in (Outcome.REGRESSED, Outcome.IMPROVED) for v in verdicts)


def value_text(s: Series, value: float | None, counts: bool = True) -> str:
    """A value of ``s`` as people read it (:mod:`perfsuite.core.units`): ``1.58 GFLOP/step``, ``41.7 ms``."""
    return human(value, s.unit, counts)


def change_text(s: Series, i: int) -> str:
    """What changed at change point ``i``: the value before and after, and the call sites that moved."""
    before, after = s.points[i - 1], s.points[i]
    text = f"{s.metric} {value_text(s, before.value, counts=False)} -> {value_text(s, after.value)}"
    if before.detail.get("sites") is not None or before.detail.get("by") is not None:
        from perfsuite.judge.sites import describe, site_changes

        changes = site_changes(before.detail, after.detail)
        if changes:
            text += f": {describe(changes)}"
    return text


def commit_label(p: Point, width: int = 28) -> str:
    """``a1b2c3d subject`` cut to ``width`` characters: a change point's label on the plot."""
    text = f"{p.commit[:7]} {p.subject}"
    return text if len(text) <= width else text[: width - 1] + "…"


X_LABELS = 8  # at most this many commits named under the x axis (the first, the last, evenly between)


def _x_ticks(n: int) -> list[int]:
    if n <= X_LABELS:
        return list(range(n))
    return sorted({round(k * (n - 1) / (X_LABELS - 1)) for k in range(X_LABELS)})


def _svg(s: Series) -> str:
    """The plot: y ticks in the metric's unit, the x axis named by commits (oldest left), change points labelled."""
    pts = s.points
    values = [p.value for p in pts] + [v for p in pts for v in (p.low, p.high) if v is not None]
    lo, hi = min(values), max(values)
    if hi == lo:
        lo, hi = lo - max(1.0, abs(lo) * 0.1), hi + max(1.0, abs(hi) * 0.1)
    n = len(pts)
    top, bottom = TOP, HEIGHT - BOTTOM

    def x(i: int) -> float:
        return LEFT + (WIDTH - LEFT - RIGHT) * (i / (n - 1) if n > 1 else 0.5)

    def y(v: float) -> float:
        return bottom - (v - lo) / (hi - lo) * (bottom - top)

    parts = [f'<svg class="plot" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img">']
    parts.append(f'<line class="frame" x1="{LEFT}" x2="{LEFT}" y1="{top}" y2="{bottom}"/>')
    parts.append(f'<line class="frame" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{bottom}" y2="{bottom}"/>')
    for v in (lo, (lo + hi) / 2, hi):
        parts.append(
            f'<text class="axis ytick" x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">'
            f"{html.escape(value_text(s, v, counts=False))}</text>"
        )
    unit = s.unit or "count"
    parts.append(
        f'<text class="axis ylabel" x="12" y="{(top + bottom) / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 12 {(top + bottom) / 2:.1f})">{html.escape(unit)}</text>'
    )
    for i in _x_ticks(n):
        parts.append(
            f'<text class="axis xtick" x="{x(i):.1f}" y="{bottom + 16}" text-anchor="middle">'
            f"{html.escape(pts[i].commit[:7])}</text>"
        )
    parts.append(
        f'<text class="axis xlabel" x="{(LEFT + WIDTH - RIGHT) / 2:.1f}" y="{HEIGHT - 6}" text-anchor="middle">'
        f"commit ({n}, oldest to newest along the first-parent line)</text>"
    )
    if s.exact:  # a counter holds its value until the next commit: a step line
        d = f"M {x(0):.1f} {y(pts[0].value):.1f}" + "".join(
            f" H {x(i):.1f} V {y(p.value):.1f}" for i, p in enumerate(pts) if i
        )
    else:
        d = "M " + " L ".join(f"{x(i):.1f} {y(p.value):.1f}" for i, p in enumerate(pts))
    parts.append(f'<path class="line" d="{d}"/>')
    for i, p in enumerate(pts):
        if p.low is not None and p.high is not None:
            parts.append(
                f'<line class="interval" x1="{x(i):.1f}" x2="{x(i):.1f}" y1="{y(p.low):.1f}" y2="{y(p.high):.1f}"/>'
            )
    for k, i in enumerate(s.steps):
        cx = (x(i - 1) + x(i)) / 2
        anchor = "end" if cx > (LEFT + WIDTH - RIGHT) / 2 else "start"
        dx = -4 if anchor == "end" else 4
        parts.append(
            f'<a href="#cp-{s.slug}-{i}"><line class="changepoint" x1="{cx:.1f}" x2="{cx:.1f}" y1="{top - 4}" '
            f'y2="{bottom}"><title>{html.escape(change_text(s, i))}</title></line>'
            f'<text class="cplabel" data-commit="{html.escape(pts[i].commit)}" x="{cx + dx:.1f}" '
            f'y="{top + 8 + 12 * (k % 3)}" text-anchor="{anchor}">{html.escape(commit_label(pts[i]))}</text></a>'
        )
    for i, p in enumerate(pts):
        title = html.escape(f"{p.commit[:10]} {p.subject}: {value_text(s, p.value)}")
        parts.append(
            f'<circle class="point" cx="{x(i):.1f}" cy="{y(p.value):.1f}" r="3.5"><title>{title}</title></circle>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _commit_link(sha: str, commit_url: str | None) -> str:
    if commit_url:
        return f'<a href="{html.escape(commit_url.format(sha=sha))}"><code>{sha[:10]}</code></a>'
    return f"<code>{sha[:10]}</code>"


STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
figure{display:inline-block;margin:0 1em 1.5em 0;vertical-align:top}
figcaption{font-size:.9em;margin-bottom:.3em}
.plot{border:1px solid #ddd;background:#fff}
.line{fill:none;stroke:#3465a4;stroke-width:1.5}
.point{fill:#3465a4}
.interval{stroke:#9bb7dd;stroke-width:3}
.changepoint{stroke:#cc0000;stroke-width:2;stroke-dasharray:4 3}
.axis{font-size:11px;fill:#666}
.xtick{font-family:monospace}
.frame{stroke:#bbb;stroke-width:1}
.cplabel{font-size:11px;fill:#cc0000}
table{border-collapse:collapse;font-size:.85em}td,th{border:1px solid #ddd;padding:2px 6px}
.hidden{display:none}
"""

SCRIPT = """
function applyFilters(){
  const f={test:document.getElementById('f-test').value,metric:document.getElementById('f-metric').value,
           machine:document.getElementById('f-machine').value};
  for(const el of document.querySelectorAll('[data-test]')){
    const ok=['test','metric','machine'].every(k=>!f[k]||el.dataset[k]===f[k]);
    el.classList.toggle('hidden',!ok);
  }
}
function showView(v){
  document.getElementById('plots').classList.toggle('hidden',v!=='plots');
  document.getElementById('table').classList.toggle('hidden',v!=='table');
}
"""


def _select(name: str, values: Sequence[str]) -> str:
    options = "".join(f'<option value="{html.escape(v)}">{html.escape(v)}</option>' for v in values)
    select = f'<select id="f-{name}" onchange="applyFilters()"><option value="">all</option>{options}</select>'
    return f"<label>{name} {select}</label> "


def _data_attrs(s: Series) -> str:
    """The attributes the filters match on."""
    return " ".join(
        f'data-{k}="{html.escape(v)}"' for k, v in (("test", s.test), ("metric", s.metric), ("machine", s.machine))
    )


def changed_first(series: Sequence[Series]) -> list[Series]:
    """The series with a change point first (a moved figure is what a reader came for), then the rest."""
    return sorted(series, key=lambda s: not s.steps)


def render_html(series: Sequence[Series], problems: Sequence[str] = (), commit_url: str | None = None) -> str:
    """The dashboard page (see the module docstring)."""
    tests = sorted({s.test for s in series})
    metrics = sorted({s.metric for s in series})
    machines = sorted({s.machine for s in series})
    out = [
        "<!doctype html><html><head><meta charset='utf-8'><title>perfsuite history</title>",
        f"<style>{STYLE}</style><script>{SCRIPT}</script></head><body>",
        f"<h1>perfsuite history</h1><p>{len(series)} series over "
        f"{len({p.commit for s in series for p in s.points})} commits, in ancestry order (the newest commit's "
        f"first-parent line, oldest left), {sum(bool(s.steps) for s in series)} of them with a change point, "
        "shown first. Exact counters are drawn as steps; "
        "red dashed lines are change points (every change of an exact counter; on timings PELT, penalty "
        "4 log(n) sigma^2, a 5% minimum shift, kept only where perfsuite compare would decide the step between the "
        "runs either side: a figure that was not judged, such as a busy machine's timing, draws none); bars are "
        "each run's 10th-90th percentile of its steps.</p>",
        "<p>",
        _select("test", tests),
        _select("metric", metrics),
        _select("machine", machines),
        "<button onclick=\"showView('plots')\">plots</button> <button onclick=\"showView('table')\">table</button></p>",
    ]
    if problems:
        out.append(
            "<p><b>Entries skipped:</b></p><ul>" + "".join(f"<li>{html.escape(p)}</li>" for p in problems) + "</ul>"
        )
    out.append('<div id="plots">')
    for s in changed_first(series):
        attrs = _data_attrs(s)
        caption = " &middot; ".join(
            [f"<b>{html.escape(s.metric)}</b> ({html.escape(s.unit)})", html.escape(s.test), html.escape(s.machine)]
        )
        steps = "".join(
            f'<li id="cp-{s.slug}-{i}">{_commit_link(s.points[i].commit, commit_url)} '
            f"{html.escape(s.points[i].subject)}: {html.escape(change_text(s, i))} "
            f"(since {_commit_link(s.points[i - 1].commit, commit_url)})</li>"
            for i in s.steps
        )
        out.append(
            f'<figure class="series" {attrs}><figcaption>{caption}</figcaption>{_svg(s)}'
            + (f'<ul class="changes">{steps}</ul>' if steps else "")
            + "</figure>"
        )
    out.append(
        '</div><div id="table" class="hidden"><table><tr><th>test</th><th>metric</th><th>machine</th>'
        "<th>commit</th><th>value</th><th>interval</th></tr>"
    )
    for s in series:
        for p in s.points:
            interval = (
                f"{value_text(s, p.low, counts=False)}..{value_text(s, p.high)}"
                if p.low is not None and p.high is not None
                else ""
            )
            out.append(
                f"<tr {_data_attrs(s)}><td>{html.escape(s.test)}</td><td>{html.escape(s.metric)}</td>"
                f"<td>{html.escape(s.machine)}</td><td>{_commit_link(p.commit, commit_url)}</td>"
                f"<td>{html.escape(value_text(s, p.value))}</td><td>{html.escape(interval)}</td></tr>"
            )
    out.append("</table></div></body></html>\n")
    return "".join(out)


def _tick(s: Series, value: float, _pos: int) -> str:
    return value_text(s, value, counts=False)


def write_pngs(series: Sequence[Series], folder: Path) -> list[Path]:
    """One PNG per metric: every test and machine's series of it, change points marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    from perfsuite.core import tmpfiles

    written = []
    by_metric: dict[str, list[Series]] = defaultdict(list)
    for s in series:
        by_metric[s.metric].append(s)
    for metric, group in sorted(by_metric.items()):
        fig, ax = plt.subplots(figsize=(8, 3.2))
        for s in group:
            xs = list(range(len(s.points)))
            ys = [p.value for p in s.points]
            ax.plot(
                xs,
                ys,
                drawstyle="steps-post" if s.exact else "default",
                marker="o",
                ms=3,
                label=f"{s.test} ({s.machine})"[:60],
            )
            for i in s.steps:
                ax.axvline(i - 0.5, color="#cc0000", ls="--", lw=1)
                ax.annotate(
                    commit_label(s.points[i]),
                    (i - 0.5, 1.0),
                    xycoords=("data", "axes fraction"),
                    rotation=90,
                    va="top",
                    ha="right",
                    fontsize=7,
                    color="#cc0000",
                )
        ax.set_title(metric)
        ax.set_xlabel("commit (oldest to newest along the first-parent line)")
        longest = max(group, key=lambda s: len(s.points))
        ticks = _x_ticks(len(longest.points))
        ax.set_xticks(ticks, [longest.points[i].commit[:7] for i in ticks], fontsize=7, family="monospace")
        ax.set_ylabel(group[0].unit or "count")
        ax.yaxis.set_major_formatter(FuncFormatter(partial(_tick, group[0])))
        ax.legend(fontsize=6, loc="best")
        fig.tight_layout()
        import io

        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100)
        plt.close(fig)
        path = folder / f"{metric}.png"
        tmpfiles.write_bytes_atomic(path, buf.getvalue())
        written.append(path)
    return written


def summary_markdown(series: Sequence[Series], last: int = 20, newest: tuple[str, str] | None = None) -> str:
    """For a PR comment: the commits where a figure moved among the newest ``last`` + 1 (ancestry order), then
    each series' newest value against its previous ``last`` commits. ``newest``: (sha, subject) of the newest
    commit recorded on the line, named in the heading."""
    changes = []
    for s in changed_first(series):
        for i in s.steps:
            if i >= len(s.points) - last - 1:
                p = s.points[i]
                changes.append(f"- `{p.commit[:10]}` {p.subject}: {change_text(s, i)} ({s.test}, {s.machine})")
    rows = [
        "| test | metric | machine | head | last commits (min..max) | change at head |",
        "|---|---|---|---|---|---|",
    ]
    for s in series:
        if len(s.points) < 2:
            continue
        head, before = s.points[-1], s.points[-1 - last : -1]
        lo, hi = min(p.value for p in before), max(p.value for p in before)
        at_head = len(s.points) - 1 in s.steps
        span = f"{value_text(s, lo, counts=False)}..{value_text(s, hi)}"
        rows.append(
            f"| {s.test} | {s.metric} | {s.machine} | {value_text(s, head.value)} | {span} ({len(before)}) | "
            f"{change_text(s, len(s.points) - 1) if at_head else 'no'} |"
        )
    named = f" (`{newest[0][:10]}` {newest[1]})" if newest is not None else ""
    moved = "\n".join(changes) if changes else f"No figure moved in the last {last + 1} commits."
    return (
        f"**perfsuite history**: the newest commit{named} against the {last} before it, in ancestry order\n\n"
        f"{moved}\n\n" + "\n".join(rows) + "\n"
    )


def write_dashboard(
    path: Path, series: Sequence[Series], problems: Sequence[str] = (), commit_url: str | None = None
) -> Path:
    from perfsuite.core import tmpfiles

    return tmpfiles.write_text_atomic(path, render_html(series, problems, commit_url))


def series_json(series: Sequence[Series]) -> str:
    return json.dumps(
        [
            {
                "test": s.test,
                "metric": s.metric,
                "machine": s.machine,
                "exact": s.exact,
                "steps": s.steps,
                "points": [{"commit": p.commit, "value": p.value} for p in s.points],
            }
            for s in series
        ],
        indent=2,
    )
