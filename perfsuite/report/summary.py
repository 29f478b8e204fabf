"""The session summary for people: the few figures that matter per test, and the exact gate's line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from perfsuite.core.results import Result
from perfsuite.core.units import metric_value
from perfsuite.report.verdicts import cut

PEOPLE_COLUMNS = (
    "test",
    "samples/s",
    "input eff",
    "data-wait",
    "loader CPU/sample",
    "syncs/step",
    "AMP low-p",
    "graphs",
    "H2D/step",
    "exact held",
)


def _figure(result: Result, name: str) -> str:
    """A figure in its registry unit (perfsuite.core.units), the column naming what it is per; '-' if unmeasured."""
    metric = result.metric(name)
    return "-" if not metric.available else metric_value(name, metric.value, counts=False)


def _input_eff(result: Result) -> str:
    """``0.82 moderate``: input efficiency with the first word of its data-wait band."""
    metric = result.metric("input_efficiency")
    if not metric.available:
        return "-"
    band = str(metric.detail.get("band", "")).split(" ")[0].replace("not", "ok")
    return f"{metric.value:.2f} {band}".rstrip()


def people_rows(results: Mapping[str, Result], exact_counts: Mapping[str, tuple[int, int]]) -> list[tuple[str, ...]]:
    """One row per Result: the few figures that matter, '-' where a figure was not measured."""
    rows: list[tuple[str, ...]] = []
    for rid, r in results.items():
        graphs = r.metric("graph_breaks")
        held = exact_counts.get(rid)
        rows.append(
            (
                rid,
                _figure(r, "samples_per_s"),
                _input_eff(r),
                _figure(r, "data_wait_frac"),
                _figure(r, "loader_cpu_ms_per_sample"),
                _figure(r, "syncs_per_step"),
                _figure(r, "amp_lowp_frac"),
                str(graphs.detail.get("graphs", "-")) if graphs.available else "-",
                _figure(r, "h2d_bytes_per_step"),
                f"{held[0]}/{held[1]}" if held else "-",
            )
        )
    return rows


def format_people(results: Mapping[str, Result], exact_counts: Mapping[str, tuple[int, int]], width: int = 120) -> str:
    """The per-test figures: a table where it fits ``width``, else a block per test (its id, then its measured
    figures, wrapped), so no figure is ever cut."""
    rows = people_rows(results, exact_counts)
    widths = [max([len(PEOPLE_COLUMNS[i])] + [len(r[i]) for r in rows]) for i in range(len(PEOPLE_COLUMNS))]
    if sum(widths) + 2 * (len(PEOPLE_COLUMNS) - 1) > width:
        return "\n".join(_people_block(row, width) for row in rows)

    def line(cells: Sequence[str]) -> str:
        return "  ".join([cells[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(cells[1:], widths[1:]))]).rstrip()

    return "\n".join([line(PEOPLE_COLUMNS), *(line(r) for r in rows)])


def _people_block(row: Sequence[str], width: int) -> str:
    """``test`` then its measured figures, ``name value`` pairs packed on indented lines of at most ``width``."""
    pairs = [f"{name} {value}" for name, value in zip(PEOPLE_COLUMNS[1:], row[1:]) if value != "-"]
    lines = [cut(row[0], width)]
    current = ""
    for pair in pairs or ["no figure measured"]:
        if current and len(current) + 3 + len(pair) > width:
            lines.append(current)
            current = ""
        current = f"{current} · {pair}" if current else f"  {pair}"
    return "\n".join([*lines, current])


OVERSUBSCRIBED = "oversubscribed:"  # perfsuite.harness.threads notes start so (not imported: report < harness)


def oversubscription_note(results: Mapping[str, Result], named: bool = True) -> str | None:
    """One line when any run's threads and workers exceeded the cores it may use; None when none did. ``named``:
    the first runs' ids in it (a green session's summary counts them, and ``-v`` names them)."""
    over = [rid for rid, r in results.items() if any(n.startswith(OVERSUBSCRIBED) for n in r.notes)]
    if not over:
        return None
    shown = ", ".join(over[:3]) + (f" and {len(over) - 3} more" if len(over) > 3 else "") if named else "-v names them"
    return (
        f"note: {len(over)} of {len(results)} run(s) oversubscribed the cores (intra-op threads + loader workers "
        f"above the usable cores): {shown}; their wall-clock figures mix work with waiting for a core (each "
        "Result's notes say by how much)"
    )


def gate_line(
    exact_counts: Mapping[str, tuple[int, int]],
    exact_failed: int,
    timing_new: int,
    sources: Sequence[str] | Mapping[str, str],
    missing: int = 0,
    missing_allowed: bool = False,
    absent_files: Sequence[str] = (),
) -> str:
    """``N exact checks held against committed baselines (file); M tests with no timing baseline on this machine``.

    ``sources`` maps each result id to what its exact metrics were held against (the committed file's
    name, or ``this machine's baselines``); a plain sequence names committed files only. ``missing``
    counts tests with no committed values; ``absent_files`` names committed files that should exist.
    """
    held = sum(h for h, _ in exact_counts.values())
    if isinstance(sources, Mapping):
        per_source: dict[str, int] = {}
        for rid, (h, _) in exact_counts.items():
            per_source[sources.get(rid, "?")] = per_source.get(sources.get(rid, "?"), 0) + h
    else:
        per_source = {name: 0 for name in sources}
    files = sorted(k for k in per_source if k != "this machine's baselines")
    text = f"{held} exact checks held against committed baselines"
    if files:
        text += f" ({', '.join(files)})"
    machine = per_source.get("this machine's baselines")
    if machine is not None:
        text = (
            f"{held} exact checks held ({held - machine} against committed baselines"
            + (f" ({', '.join(files)})" if files else "")
            + f", {machine} against this machine's baselines)"
        )
    if exact_failed:
        text += f", {exact_failed} did not"
    if absent_files:
        text += f"; no committed exact file applies to this run ({', '.join(absent_files)} does not exist)"
    if missing:
        verdict = "reported as new" if missing_allowed else "failed"
        text += f"; {missing} test result(s) with no committed exact values ({verdict})"
    tests = "test" if timing_new == 1 else "tests"
    return f"{text}; {timing_new} {tests} with no timing baseline on this machine yet"


def format_notes(results: Mapping[str, Result], limit: int | None = None) -> list[str]:
    """The Results' notes (where a figure can mislead: pinning on a CPU run, a knob the device turned off,
    what perfsuite exec hooked), each once, with the results it applies to; whole, the terminal wraps them.

    Oversubscription notes are left to :func:`oversubscription_note` (one line for all); past ``limit`` notes,
    the most widely shared are kept and one line counts the rest.
    """
    where: dict[str, list[str]] = {}
    for rid, result in results.items():
        for note in result.notes:
            if not note.startswith(OVERSUBSCRIBED):
                where.setdefault(note, []).append(rid)
    notes = list(where.items())
    if limit is not None and len(notes) > limit:
        notes = sorted(notes, key=lambda item: -len(item[1]))[:limit]
    lines = []
    for note, rids in notes:
        whom = rids[0] if len(rids) == 1 else f"{len(rids)} results"
        lines.append(f"note ({whom}): {note}")
    if len(notes) < len(where):
        n = len(where) - len(notes)
        lines.append(
            f"{n} {'more ' if notes else ''}note{'s' if n != 1 else ''} on reading these figures: -v lists them "
            "(each Result's notes hold them too)"
        )
    return lines
