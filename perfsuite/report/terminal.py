"""Reports for people at a terminal, drawn with rich: coloured verdicts, wrapped reasons, human units.

The pull-request markdown (:mod:`perfsuite.report.verdicts`) stays for files and for
stdout that is not a terminal; these renderers are for a person reading a terminal.
Each returns rich renderables or prints them on a :class:`rich.console.Console`, so
tests capture the output at a fixed width (``Console(record=True, width=...)``).
"""

from __future__ import annotations

import io
import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from perfsuite.core.results import Result
from perfsuite.core.units import human, metric_value
from perfsuite.judge.verdict import Outcome, Verdict
from perfsuite.report.hints import labels_of, legend, reworded, what_would_decide
from perfsuite.report.verdicts import cut, ordered, summary_line

STYLES = {
    "fail": "bold red",
    "regressed": "bold red",
    "changed": "bold magenta",
    "improved": "green",
    "unchanged": "dim",
    "pass": "dim",
    "same": "green",
    "inconclusive": "yellow",
    "unknown": "yellow",
    "unavailable": "yellow",
    "new": "cyan",
}
GPU_ONLY = "device=cpu"  # how the GPU probes' reasons start on a CPU run (perfsuite.probes.nvml, .memory)


def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is a terminal a person reads (markdown and plain text go elsewhere)."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def console_for(stream: TextIO, width: int | None = None) -> Console:
    """A console on ``stream``; colours when it is a terminal, plain text otherwise."""
    return Console(file=stream, width=width, highlight=False, soft_wrap=False)


def folded_note(text: str, stream: TextIO, indent: str = "") -> str:
    """A note for ``stream`` folded to its width (80 columns where it is no terminal) after ``indent``, later lines
    indented two more, like the table it comes before."""
    width = console_for(stream).width
    return textwrap.fill(
        text,
        width,
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_on_hyphens=False,
        break_long_words=False,
    )


ROW = re.compile(r"^( +)\S+ {2,}(?=\S)")  # "  name    value ...": a table row, its value column after the gap
MIN_VALUE_COLUMNS = 30  # a value column narrower than this folds under the name instead


def folded_lines(text: str, width: int) -> str:
    """``text`` with each line wider than ``width`` folded at spaces: a table row's continuation under its value
    column, any other line's two columns in from its own indent. Words (paths, flags) are never broken."""
    out = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        row = ROW.match(line)
        own = len(line) - len(line.lstrip(" "))
        indent = row.end() if row and width - row.end() >= MIN_VALUE_COLUMNS else own + 2
        out.append(
            textwrap.fill(
                line,
                width,
                subsequent_indent=" " * indent,
                break_on_hyphens=False,
                break_long_words=False,
                replace_whitespace=False,
            )
        )
    return "\n".join(out)


def to_text(renderable: RenderableType, width: int, markup: bool = False) -> str:
    """``renderable`` drawn at ``width`` columns, with colour codes when ``markup`` (for pytest's writer)."""
    buf = io.StringIO()
    Console(
        file=buf, width=width, force_terminal=markup, color_system="standard" if markup else None, highlight=False
    ).print(renderable)
    return buf.getvalue().rstrip("\n")


def outcome_text(outcome: str) -> Text:
    return Text(outcome, style=STYLES.get(outcome, ""))


# --------------------------------------------------------------------------- verdicts (compare, session summary)


def _why(v: Verdict) -> str:
    if v.outcome in (Outcome.PASS, Outcome.UNCHANGED):
        return ""
    parts = [v.message + (f" — {v.cause}" if v.cause else "")]
    hint = reworded(what_would_decide(v))
    if hint:
        parts.append(hint)
    return "\n".join(parts)


def _ratio(v: Verdict) -> str:
    return "-" if v.ratio is None else f"x{v.ratio:.3f}"


def _empty_new(v: Verdict) -> bool:
    """A ``new`` row with no figure at all (the first run's ``timing - - - new``): counted, not listed."""
    return v.outcome is Outcome.NEW and v.base is None and v.head is None


def shared_reason(v: Verdict) -> str | None:
    """Why ``v`` was not judged, when many verdicts share the reason (counted on one line); None otherwise."""
    return v.unjudged or (v.message if _empty_new(v) else None)


FOLD = 20  # a longer value (a format, a list of sites) goes on its own line under its row, at any width
BELOW = "(below)"
INDENT = "  "  # a test's rows sit under its id
GAP = "  "
HEADERS = ("metric", "base", "head", "ratio", "verdict")


def verdict_table(verdicts: Sequence[Verdict], width: int | None = None) -> RenderableType:
    """One row per verdict under its test id, the most urgent first; figures in human units, the verdict coloured.

    Metric, base, head, ratio and verdict are never cut: the test id has a line of its own (cut from the
    left when wider than the terminal, so it keeps the test's name), and a value wider than its column
    (``FOLD`` characters, or half of what the width leaves) folds onto its own line under the row.
    """
    rows = [
        (
            v,
            v.metric,
            metric_value(v.metric, v.base, counts=False),
            metric_value(v.metric, v.head, counts=False),
            _ratio(v),
            v.outcome.value,
        )
        for v in ordered(verdicts)
    ]
    if not rows:
        return Text("")
    metric_w = max(len(HEADERS[0]), *(len(r[1]) for r in rows))
    ratio_w = max(len(HEADERS[3]), *(len(r[4]) for r in rows))
    verdict_w = max(len(HEADERS[4]), *(len(r[5]) for r in rows))
    limit = FOLD
    if width is not None:
        left = width - len(INDENT) - metric_w - ratio_w - verdict_w - 4 * len(GAP)
        limit = max(len(BELOW), min(FOLD, left // 2))
    value_w = max(len(BELOW), len(HEADERS[1]), *(len(c) for r in rows for c in r[2:4] if len(c) <= limit))

    def line(metric: str, base: str, head: str, ratio: str, verdict: Text) -> Text:
        out = Text(INDENT + metric.ljust(metric_w) + GAP)
        out.append(GAP.join((base.rjust(value_w), head.rjust(value_w), ratio.rjust(ratio_w))) + GAP)
        out.append_text(verdict)
        return out

    header = line(*HEADERS[:4], Text(HEADERS[4]))
    header.stylize("bold")
    parts: list[RenderableType] = [header, Text("─" * min(len(header), width or len(header)))]
    by_test: dict[str, list[tuple]] = {}
    for row in rows:
        by_test.setdefault(row[0].test_id, []).append(row)
    for test_id, group in by_test.items():
        parts.append(Text(cut(test_id, width) if width else test_id, style="bold"))
        for _, metric, base, head, ratio, outcome in group:
            long = [(side, value) for side, value in (("base", base), ("head", head)) if len(value) > limit]
            shown = [BELOW if len(value) > limit else value for value in (base, head)]
            parts.append(line(metric, shown[0], shown[1], ratio, outcome_text(outcome)))
            for side, value in long:
                parts.append(Text(_folded(f"{side}: {value}", width)))
    return Group(*parts)


def _folded(text: str, width: int | None) -> str:
    """``text`` on lines indented under its row, wrapped at ``width`` (one line when None)."""
    indent = 2 * INDENT
    if width is None:
        return indent + text
    return textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False)


def reasons(verdicts: Sequence[Verdict]) -> list[RenderableType]:
    """Under the table, wrapped to the terminal: why each row that needs a look came out so, what would decide it."""
    out: list[RenderableType] = []
    for v in ordered(verdicts):
        why = _why(v)
        if not why:
            continue
        head = Text()
        head.append(v.outcome.value, style=STYLES.get(v.outcome.value, ""))
        head.append(f" {v.test_id} · {v.metric}: ", style="bold")
        head.append(why.replace("\n", "\n  "))
        out.append(head)
    return out


def shared_lines(verdicts: Sequence[Verdict]) -> list[Text]:
    """One line per shared reason: ``365 figures not judged: the machine was busy: ...``, most frequent first."""
    groups: dict[str, list[Verdict]] = {}
    for v in verdicts:
        reason = shared_reason(v)
        if reason:
            groups.setdefault(reason, []).append(v)
    out = []
    for reason, group in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        tests = all(v.metric in ("timing", "exact", "*") for v in group)  # one verdict stands for a whole test
        noun = ("test" if tests else "figure") + ("s" if len(group) != 1 else "")
        state = "new" if all(v.outcome is Outcome.NEW for v in group) else "not judged"
        n = len({v.test_id for v in group})
        where = f" in {n} test{'s' if n != 1 else ''}" if not tests else ""
        line = Text()
        line.append(f"{len(group)} {noun} {state}{where}", style=STYLES.get(group[0].outcome.value, ""))
        line.append(f": {reason}")
        out.append(line)
    return out


def verdicts_report(
    verdicts: Sequence[Verdict],
    problems: Sequence[str] = (),
    partial: str | None = None,
    width: int | None = None,
    verbose: bool = False,
) -> RenderableType:
    """The summary line, the table and the reasons of the verdicts that need a look, one line per reason many
    verdicts share (a busy machine, a first run: each listed with ``verbose``), a legend of the verdicts shown."""
    shared = [v for v in verdicts if shared_reason(v)]
    listed = [v for v in verdicts if not _empty_new(v) and (verbose or not shared_reason(v))]
    parts: list[RenderableType] = []
    if partial:
        parts.append(
            Text(f"PARTIAL REPORT: the session was {partial}; tests that did not run are missing.", "bold red")
        )
    summary = Text()
    summary.append("perfsuite: ", style="bold")
    summary.append(summary_line(verdicts, errors=len(problems)))
    parts.append(summary)
    if listed:
        parts.append(verdict_table(listed, width))
        parts += reasons(listed)
    parts += shared_lines(shared)
    if any(not _empty_new(v) for v in shared) and not verbose:
        parts.append(Text("(each figure: --verbose lists it, -v under pytest; so does the JSON report)", "dim"))
    parts += [Text(p, style="red") for p in problems]
    labels = legend(labels_of(listed))
    if labels:
        parts.append(Text("\n".join(labels), style="dim"))
    return Group(*parts)


def print_verdicts(
    verdicts: Sequence[Verdict],
    console: Console,
    problems: Sequence[str] = (),
    partial: str | None = None,
    verbose: bool = False,
) -> None:
    console.print(verdicts_report(verdicts, problems, partial, console.width, verbose))


PEOPLE_LEGEND = (
    "input eff: the window's samples/s over the speed of light's (the step fed one batch kept on the device); "
    "its word is the data-wait band: not input-bound < 5%, moderately 5-20%, highly > 20% of the window",
    "data-wait: share of the window blocked in next(loader); exact held: exact checks unchanged / checked; "
    "'-': not measured in that run",
)


PEOPLE_ROWS = 8  # more results than this: their figures table is listed with -v only, so a green run fits a screen


def session_summary(
    verdicts: Sequence[Verdict],
    results: Mapping[str, Result],
    exact_counts: Mapping[str, tuple[int, int]],
    width: int,
    markup: bool,
    verbose: bool = False,
) -> str:
    """The pytest session's verdicts (rich: see :func:`verdicts_report`) and its per-test figures
    (report.summary, fitted to ``width``) with a legend of their labels, for pytest's terminal writer.

    With more than ``PEOPLE_ROWS`` results the figures are one line saying ``-v`` lists them.
    """
    from perfsuite.report.summary import format_people

    parts = [to_text(verdicts_report(verdicts, width=width, verbose=verbose), width, markup)] if verdicts else []
    if results and (verbose or len(results) <= PEOPLE_ROWS):
        parts.append(format_people(results, exact_counts, width=width))
        parts.append(to_text(Text("\n".join(PEOPLE_LEGEND), style="dim"), width, markup))
    elif results:
        parts.append(f"per-test figures (samples/s, input efficiency, data wait, ...) of {len(results)} results: -v")
    return "\n".join(parts)


# --------------------------------------------------------------------------- one run (perfsuite run, exec)


def gpu_only(result: Result) -> list[str]:
    """The metrics a CPU run could not measure only because it had no GPU (GPU telemetry, device memory)."""
    return [
        name
        for name, m in result.metrics.items()
        if not m.available and str(m.reason or "").startswith(GPU_ONLY) and result.knobs.get("device", "cpu") == "cpu"
    ]


def unavailable_lines(verdicts: Sequence[Verdict]) -> list[str]:
    """``unavailable: test: why`` per unavailable verdict, those that need a GPU on a CPU run collapsed to one line."""
    unavailable = [v for v in verdicts if v.outcome is Outcome.UNAVAILABLE]
    gpu = [v for v in unavailable if GPU_ONLY in v.message]
    gpu = gpu if len(gpu) > 1 else []  # a single one is listed as it is
    collapsed = {id(v) for v in gpu}
    lines = [f"unavailable: {v.test_id}: {v.message}" for v in unavailable if id(v) not in collapsed]
    if gpu:
        metrics = sorted({v.metric for v in gpu})
        lines.append(
            f"GPU telemetry: unavailable on a CPU run ({len(metrics)} metric{'s' if len(metrics) > 1 else ''}: "
            f"{', '.join(metrics)}; {len(gpu)} verdicts, each with its reason above)"
        )
    return lines


def gpu_line(names: Sequence[str]) -> str:
    return f"GPU telemetry: unavailable on a CPU run ({len(names)} metrics: {', '.join(names)})"


SKIPPED_WITH_RANKS = (
    "straggler_wait_frac",
    "input_skew_frac",
    "scaling_efficiency",
    "dataset_passes_per_epoch",
    "cpu_oversubscription",
)


def run_rows(result: Result) -> list[tuple[str, str, str]]:
    """(metric, value, note) for every metric of a run, GPU-only ones on a CPU run left to :func:`gpu_line`."""
    step = result.metric("step_ms")
    rows = [
        ("samples_per_s", metric_value("samples_per_s", result.value("samples_per_s")), ""),
        (
            "step_ms",
            metric_value("step_ms", step.value),
            f"median; p90 {human(step.detail.get('p90'), 'ms')}" if step.available else f"unavailable ({step.reason})",
        ),
    ]
    hidden = set(gpu_only(result))
    for name, metric in result.metrics.items():
        if name in ("samples_per_s", "step_ms") or name in hidden:
            continue
        if result.ranks and name in SKIPPED_WITH_RANKS:
            continue
        if metric.available:
            rows.append((name, metric_value(name, metric.value), _run_note(name, metric.detail)))
        else:
            rows.append((name, "unavailable", str(metric.reason)))
    return rows


def _run_note(name: str, detail: Mapping[str, Any]) -> str:
    """What a figure of `perfsuite run` needs beside it: input efficiency's band, a prediction's runner and sides."""
    if name == "input_efficiency":
        return str(detail.get("band", ""))
    if name == "predicted_input_efficiency" and "runner" in detail:
        low, high = detail["interval"]
        return (
            f"[{low:.2f}..{high:.2f}] on {detail['runner']} ({detail['verdict']}): the loader feeds "
            f"{detail['supply_per_s']:.4g} samples/s there, the step consumes {detail['demand_per_s']:.4g}; "
            f"limited by {detail['limiting']}"
        )
    return ""


# What a scale's name means to someone who has not read docs/workloads.md (a script runs as it is: no scale).
SCALE_WORDS = {"smoke": "CPU-sized, seconds a run", "full": "GPU-sized"}


def scale_words(result: Result) -> str:
    """`` at smoke scale (CPU-sized, seconds a run)``; "" for a script, which has no scale."""
    from perfsuite.jobs.script import ran_a_script

    if ran_a_script(result) or not result.scale:
        return ""
    words = SCALE_WORDS.get(result.scale)
    return f" at {result.scale} scale" + (f" ({words})" if words else "")


def run_lines(result: Result) -> list[str]:
    """`perfsuite run`'s plain table: identifiers as in thresholds, values in human units, one GPU line on a CPU."""
    rows = run_rows(result)
    width = max(len(name) for name, _, _ in rows) + 2
    numeric = [len(v) for n, v, _ in rows if v != "unavailable" and not isinstance(result.value(n), str)]
    value_width = max(numeric, default=0)
    lines = [
        f"{result.workload}{scale_words(result)} on {result.fingerprint.gpu_model or 'cpu'}: "
        f"batch {result.batch_size}, {result.steps} measured steps"
    ]
    first_with: dict[str, str] = {}  # a reason many metrics share (a Dataset no copy can be made of) is written once
    for name, value, note in rows:
        if value == "unavailable" and note in first_with:
            lines.append(f"  {name:<{width}}unavailable: see {first_with[note]}")
        elif value == "unavailable":
            first_with[note] = name
            lines.append(f"  {name:<{width}}unavailable: {note}")
        elif isinstance(result.value(name), str):  # a label: as it reads
            lines.append(f"  {name:<{width}}{value}")
        else:
            lines.append(f"  {name:<{width}}{value:>{value_width}}  {note}".rstrip())
    hidden = gpu_only(result)
    if hidden:
        lines.append(f"  {gpu_line(hidden)}")
    lines.append("  (docs/metrics.md says what each metric measures and how it is judged)")
    return lines


# --------------------------------------------------------------------------- perfsuite ab


def ab_report(data: Mapping[str, Any]) -> RenderableType:
    """perfsuite ab's session (``perfsuite.ab.engine.to_dict``) for a person: a verdict per test, then findings."""
    tests = data.get("tests", [])
    counts: dict[str, int] = {}
    for t in tests:
        counts[t["verdict"]] = counts.get(t["verdict"], 0) + 1
    head = Text()
    head.append("perfsuite ab: ", style="bold")
    head.append(", ".join(f"{n} {v}" for v, n in counts.items()) or "no tests")
    base, head_rev = data["base"], data["head"]
    head.append(f": {head_rev['rev']} ({head_rev['sha'][:10]}) against {base['rev']} ({base['sha'][:10]})")
    rule = data["rule"]
    about = Text(
        f"{data['rounds']} rounds of interleaved fresh runs, {data['runs']} runs, {human(data['elapsed_s'], 's')}; "
        f"stopped: {data['stopped'] or '-'}; {data['environment']}. Regressed: slower than x{rule['factor']:g} with "
        f"p < {rule['alpha']:g}; same: the {rule['confidence']:.0%} interval within ±{rule['margin'] - 1:.0%}.",
        style="dim",
    )
    table = Table(show_edge=False, pad_edge=False, header_style="bold", box=box.SIMPLE_HEAD)
    table.add_column("test", overflow="fold")
    table.add_column("verdict", no_wrap=True)
    table.add_column(f"ratio ({rule['statistic']} step per sample, CI)", justify="right", no_wrap=True)
    table.add_column("pairs", justify="right", no_wrap=True)
    whys: list[RenderableType] = []
    for t in tests:
        d = t["step_ms_per_sample"]
        ratio = "-" if d.get("ratio") is None else f"x{d['ratio']:.3f} (x{d['low']:.3f}..x{d['high']:.3f})"
        why = d.get("reason", "")
        if d.get("outcome") == "unknown" and d.get("needs"):
            why = f"{why}; to decide: {d['needs']}"
        if "budget" in str(data.get("stopped", "")) and d.get("outcome") == "unknown":
            why += "; a larger --budget runs more rounds"
        exact = t.get("exact", [])
        if exact:
            held = sum(v["outcome"] == "unchanged" for v in exact)
            why = f"exact: {held}/{len(exact)} unchanged; timing: {why}"
        table.add_row(Text(t["test_id"]), outcome_text(t["verdict"]), Text(ratio), Text(str(d.get("pairs", "-"))))
        line = Text()
        line.append(t["verdict"], style=STYLES.get(t["verdict"], ""))
        line.append(f" {t['test_id']}: ", style="bold")
        line.append(why)
        whys.append(line)
    parts: list[RenderableType] = [head, about, table, *whys]
    findings = []
    for t in tests:
        for v in t.get("exact", []):
            if v["outcome"] in ("regressed", "changed", "fail"):
                cause = f" — {v['cause']}" if v.get("cause") else ""
                findings.append(f"{t['test_id']}: {v['outcome']}: {v['message']}{cause}")
        for metric, d in t.get("tails", {}).items():
            if d.get("outcome") == "regressed":
                findings.append(f"{t['test_id']}: {metric} regressed (per run, paired): {d.get('reason', '')}")
        if t.get("missing"):
            findings.append(f"{t['test_id']}: no results on {', '.join(t['missing'])}")
    if findings:
        parts.append(Text("exact and tail findings", style="bold"))
        parts += [Text(f"- {f}") for f in findings]
    shown = Table(
        show_edge=False,
        pad_edge=False,
        header_style="bold",
        box=box.SIMPLE_HEAD,
        title="medians over runs",
        title_justify="left",
    )
    shown.add_column("test", overflow="fold")
    shown.add_column("metric")
    shown.add_column("base", justify="right")
    shown.add_column("head", justify="right")
    for t in tests:
        for metric, side in t.get("shown", {}).items():
            values = (metric_value(metric, side["base"]), metric_value(metric, side["head"]))
            shown.add_row(*map(Text, (t["test_id"], metric, *values)))
    if shown.row_count:
        parts.append(shown)
    parts += [Text(p, style="red") for p in data.get("problems", [])]
    labels = legend({t["verdict"] for t in tests})
    if labels:
        parts.append(Text("\n".join(labels), style="dim"))
    return Group(*parts)


# --------------------------------------------------------------------------- doctor, tune: text made readable


def styled_lines(lines: Iterable[str]) -> RenderableType:
    """Plain report lines with their headings in bold and verdict words coloured (doctor's and tune's reports)."""
    out = Text()
    for line in lines:
        text = Text(line)
        stripped = line.strip()
        if stripped.startswith(("bottleneck:", "chosen:", "perfsuite doctor:", "perfsuite tune")):
            text.stylize("bold")
        if stripped.startswith(("NOT MET", "NOT TUNED", "error")):
            text.stylize("bold red")
        for word, style in STYLES.items():
            text.highlight_words([f" {word} ", f" {word}:", f"({word})"], style=style)
        out.append_text(text)
        out.append("\n")
    out.rstrip()
    return out


def wrote(console: Console, path: Any, what: str = "") -> None:
    """Announce a file written: ``wrote FILE (what)``."""
    console.print(Text(f"wrote {path}" + (f" ({what})" if what else ""), style="bold"))
