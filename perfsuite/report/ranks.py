"""The ranks of a run on several ranks, for people: one row per rank, then the straggler and scaling lines."""

from __future__ import annotations

from collections.abc import Sequence

from perfsuite.core.results import Result

RANK_COLUMNS = ("rank", "pid", "threads", "workers", "step p50 ms", "step p95 ms", "data-wait", "syncs/step")


def _cell(value: object, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def rank_rows(result: Result) -> list[tuple[str, ...]]:
    """One row per rank: its step-time p50/p95, data wait and syncs ('-' where it measured nothing)."""
    rows: list[tuple[str, ...]] = []
    for r in result.ranks:
        step = r.metric("step_ms")
        rows.append(
            (
                str(r.rank),
                str(r.pid or "-"),
                str(r.threads),
                str(r.workers),
                _cell(step.detail.get("p50", step.value) if step.available else None, ".1f"),
                _cell(step.detail.get("p95") if step.available else None, ".1f"),
                _cell(r.value("data_wait_frac"), ".3f"),
                _cell(r.value("syncs_per_step"), "g"),
            )
        )
    return rows


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str) -> list[str]:
    widths = [max([len(header[i])] + [len(row[i]) for row in rows]) for i in range(len(header))]
    return [indent + "  ".join(c.rjust(w) for c, w in zip(line, widths)).rstrip() for line in (header, *rows)]


def format_ranks(result: Result, indent: str = "  ") -> str:
    """Per-rank table plus the job-wide distributed figures; '' for a one-process run."""
    if not result.ranks:
        return ""
    knobs = result.knobs
    lines = [
        f"{indent}{len(result.ranks)} ranks (OMP_NUM_THREADS={knobs.get('omp_num_threads', '?')}); the job's step "
        "is its slowest rank's:"
    ]
    lines += _table(RANK_COLUMNS, rank_rows(result), indent + "  ")
    for name in ("straggler_wait_frac", "input_skew_frac"):
        m = result.metric(name)
        text = f"{m.value:.3f}: {m.detail.get('summary', '')}" if m.available else f"unavailable ({m.reason})"
        lines.append(f"{indent}{name} {text}")
    for name, fmt in (("dataset_passes_per_epoch", ".3g"), ("cpu_oversubscription", ".2f")):
        m = result.metric(name)
        extra = m.detail.get("rule", "") if name == "cpu_oversubscription" else ""
        shown = format(m.value, fmt) if m.available else f"unavailable ({m.reason})"
        lines.append(f"{indent}{name} {shown}" + (f" ({extra})" if extra else ""))
    m = result.metric("scaling_efficiency")
    if m.available:
        d = m.detail
        lines.append(
            f"{indent}scaling_efficiency {m.value:.3f} ({d.get('confidence', 0.95):.0%} CI {d.get('low', 0):.3f}.."
            f"{d.get('high', 0):.3f}, {d.get('rounds')} interleaved rounds)"
        )
    else:
        lines.append(f"{indent}scaling_efficiency unavailable ({m.reason})")
    return "\n".join(lines)
