"""Verdicts rendered for people: terminal table, markdown for PR comments, JSON, PNG chart.

Formatting only; the judgements are made in :mod:`perfsuite.judge`. matplotlib is
imported inside :func:`write_png`, so the other formats stay cheap.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from perfsuite.core.results import Result
from perfsuite.core.units import metric_value
from perfsuite.judge.verdict import Outcome, Verdict
from perfsuite.report.hints import reworded, what_would_decide

COLUMNS = ("test", "metric", "base", "head", "ratio", "verdict")
# Markdown order: what needs a look first.
_RANK = {
    Outcome.FAIL: 0,
    Outcome.REGRESSED: 0,
    Outcome.CHANGED: 0,
    Outcome.INCONCLUSIVE: 1,
    Outcome.UNAVAILABLE: 2,
    Outcome.NEW: 3,
    Outcome.IMPROVED: 4,
    Outcome.UNCHANGED: 5,
    Outcome.PASS: 6,
}
# Summary line order.
_SUMMARY_ORDER = (
    Outcome.FAIL,
    Outcome.REGRESSED,
    Outcome.CHANGED,
    Outcome.INCONCLUSIVE,
    Outcome.UNAVAILABLE,
    Outcome.NEW,
    Outcome.IMPROVED,
    Outcome.UNCHANGED,
    Outcome.PASS,
)
COLOURS = {
    Outcome.FAIL: "#d62728",
    Outcome.REGRESSED: "#d62728",
    Outcome.CHANGED: "#9467bd",
    Outcome.IMPROVED: "#2ca02c",
    Outcome.UNCHANGED: "#7f7f7f",
    Outcome.PASS: "#7f7f7f",
    Outcome.INCONCLUSIVE: "#ff7f0e",
    Outcome.UNAVAILABLE: "#bcbd22",
    Outcome.NEW: "#1f77b4",
}


def summary_line(verdicts: Sequence[Verdict], errors: int = 0) -> str:
    """``1 error, 2 regressed, 1 improved, 14 unchanged`` (outcomes that occur, most urgent first).

    ``errors`` counts problems that failed a test without a verdict (a baseline that cannot be read),
    so the line never reads as a pass when a test failed.
    """
    counts = Counter(v.outcome for v in verdicts)
    parts = [f"{errors} error{'s' if errors != 1 else ''}"] if errors else []
    parts += [f"{counts[o]} {o.value}" for o in _SUMMARY_ORDER if counts[o]]
    return ", ".join(parts) if parts else "no verdicts"


def ordered(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """Regressions and failures first, then inconclusive, then the rest; stable within a group."""
    return sorted(verdicts, key=lambda v: _RANK[v.outcome])


def _ratio_text(ratio: float | None) -> str:
    return "-" if ratio is None else f"x{ratio:.3f}"


def _row(v: Verdict) -> tuple[str, ...]:
    base, head = (metric_value(v.metric, x, counts=False) for x in (v.base, v.head))
    return (v.test_id, v.metric, base, head, _ratio_text(v.ratio), v.outcome.value)


def cut(text: str, width: int) -> str:
    return text if len(text) <= width else "..." + text[-(width - 3) :]


def format_terminal(verdicts: Sequence[Verdict], width: int = 120) -> str:
    """A fixed-width table for the pytest session summary; long test ids keep their tail."""
    rows = [_row(v) for v in verdicts]
    widths = [max([len(COLUMNS[i])] + [len(r[i]) for r in rows]) for i in range(len(COLUMNS))]
    widths[0] = min(widths[0], max(20, width - sum(widths[1:]) - 2 * (len(COLUMNS) - 1)))
    numeric = (False, False, True, True, True, False)

    def line(cells: Sequence[str]) -> str:
        cells = [cut(cells[0], widths[0]), *cells[1:]]
        return "  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)).rstrip()

    return "\n".join([line(COLUMNS), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def format_markdown(verdicts: Sequence[Verdict], partial: str | None = None, problems: Sequence[str] = ()) -> str:
    """Summary line, then a table for a PR comment; failing rows carry their message and cause.

    ``partial`` (why the session was cut short) heads the report, so a report of part of a run never
    reads as a complete one; ``problems`` (errors outside any verdict) are listed under the table.
    """
    lines = [f"**perfsuite:** {summary_line(verdicts, errors=len(problems))}", ""]
    if partial:
        lines[:0] = [f"> **PARTIAL REPORT**: the session was {partial}; tests that did not run are missing.", ""]
    lines.append("| " + " | ".join(COLUMNS) + " |")
    lines.append("|" + "|".join(["---", "---", "---:", "---:", "---:", "---"]) + "|")
    for v in ordered(verdicts):
        cells = list(_row(v))
        cells[0] = f"`{cells[0]}`"
        if v.failed or v.outcome in (Outcome.INCONCLUSIVE, Outcome.UNAVAILABLE):
            note = v.message + (f" — {v.cause}" if v.cause else "")
            hint = reworded(
                what_would_decide(v, shared=False)
            )  # no shared-reason lines in a PR comment: each row says it
            note += f" <br>{hint}" if hint else ""
            cells[5] = f"**{cells[5]}** <br>{note}" if v.failed else f"{cells[5]} <br>{note}"
        lines.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
    if problems:
        lines += ["", "**Errors:**", ""] + [f"- {_md_cell(p)}" for p in problems]
    return "\n".join(lines) + "\n"


REPORT_SCHEMA_VERSION = 1


def to_json(
    verdicts: Sequence[Verdict], indent: int | None = 2, partial: str | None = None, problems: Sequence[str] = ()
) -> str:
    """The JSON report: ``{"schema_version", "status", "reason", "summary", "errors", "results"}``.

    ``status`` is ``complete``, or ``partial`` when the session was cut short (``reason`` says how);
    ``results`` holds one object per verdict (see Verdict.to_dict). Strict JSON: no NaN.
    """
    payload = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "status": "partial" if partial else "complete",
        "reason": partial,
        "summary": summary_line(verdicts, errors=len(problems)),
        "errors": list(problems),
        "results": [{k: _finite(x) for k, x in v.to_dict().items()} for v in verdicts],
    }
    return json.dumps(payload, indent=indent, allow_nan=False)


def _finite(value: object) -> object:
    """A NaN or infinite figure is no figure: null in the report."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def read_report(text: str) -> dict:
    """A JSON report back: the object form, or the bare verdict list older versions wrote (as complete)."""
    data = json.loads(text)
    if isinstance(data, list):
        return {"schema_version": 0, "status": "complete", "reason": None, "summary": "", "errors": [], "results": data}
    return data


def write_png(verdicts: Sequence[Verdict], path: Path | str, results: Mapping[str, Result] | None = None) -> Path:
    """Bar chart of head/base ratios coloured by verdict; an NVML timeline panel when a result has one.

    ``results`` maps test id to the head Result; those with ``timeline`` data
    (``t_s`` plus series such as ``gpu_util``, ``power_w``) get plotted.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    bars = [v for v in verdicts if v.ratio is not None]
    timelines = {tid: r.timeline for tid, r in (results or {}).items() if r.timeline.get("t_s")}
    panels = 1 + bool(timelines)
    fig = Figure(figsize=(9, 1.5 + 0.35 * max(len(bars), 2) + 3 * (panels - 1)))
    FigureCanvasAgg(fig)
    axes = fig.subplots(panels, 1, squeeze=False)[:, 0]
    ax = axes[0]
    labels = [f"{v.test_id} · {v.metric}" for v in bars]
    ax.barh(range(len(bars)), [v.ratio for v in bars], color=[COLOURS[v.outcome] for v in bars])
    ax.set_yticks(range(len(bars)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("head / base")
    ax.set_title(f"perfsuite: {summary_line(verdicts)}", fontsize=9)
    seen = list(dict.fromkeys(v.outcome for v in bars))
    if seen:
        ax.legend(handles=[Patch(color=COLOURS[o], label=o.value) for o in seen], fontsize=7, loc="lower right")
    if timelines:
        tax = axes[1]
        for tid, series in timelines.items():
            for name, values in series.items():
                if name != "t_s" and len(values) == len(series["t_s"]):
                    tax.plot(series["t_s"], values, label=f"{tid} · {name}", linewidth=1)
        tax.set_xlabel("t (s)")
        tax.set_title("NVML timeline", fontsize=9)
        tax.legend(fontsize=7)
    fig.tight_layout()
    import io

    from perfsuite.core.tmpfiles import write_bytes_atomic

    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    return write_bytes_atomic(Path(path), png.getvalue())  # a full disk leaves no half a PNG


# --------------------------------------------------------------------------- the summary for people
