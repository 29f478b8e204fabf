"""``perfsuite doctor``'s report: for people in a terminal, as markdown, as JSON, and a timeline PNG.

Each renderer takes the typed :class:`perfsuite.tools.doctor.Diagnosis` (one per diagnosed run), so the
report knows nothing of how it was measured; JSON is its :meth:`~perfsuite.tools.doctor.Diagnosis.to_dict`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfsuite.core.units import sig

if TYPE_CHECKING:
    from perfsuite.tools.doctor.diagnosis import Diagnosis
    from perfsuite.tools.doctor.evidence import Evidence
    from perfsuite.tools.doctor.model import Contention, Counterfactuals, Finding, Ledger, Stages, WaitBand

BAR = 24


def _bar(share: float) -> str:
    return "#" * max(0, min(BAR, round(share * BAR)))


def _fmt(x: float | None) -> str:
    """Three significant digits, never an exponent (2690, not 2.69e+03): perfsuite.core.units.sig."""
    return "-" if x is None else sig(float(x))


def _wait_line(w: WaitBand) -> str:
    verdict = w.band or f"not decided: the interval spans the {w.edge or 0:.0%} edge"
    return (
        f"{w.source} {w.share:.1%} {w.interval[:-1]}, {w.steps} steps]: {verdict} "
        "(TensorFlow's bands: <5% not, 5-20% moderately, >20% highly)"
    )


def _ledger_lines(led: Ledger) -> list[str]:
    lines = [f"per-step time ledger (ms per step; the parts add up to the window's mean step of {sig(led.step_ms)} ms)"]
    for name, ms in led.parts.items():
        share = led.share(ms)
        extra = ""
        if name == led.sync_name and led.syncs_per_step:
            extra = f"  {led.syncs_per_step:g}/step: " + ", ".join(list(led.sync_sites)[:2])
            if led.periodic_syncs:
                extra += "; every N steps: " + ", ".join(
                    f"{s.op} at {s.site} ({s.seen})" for s in led.periodic_syncs[:2]
                )
        lines.append(f"  {name:<28}{sig(ms):>10} {share:>6.0%}  {_bar(share):<{BAR}}{extra}".rstrip())
    lines += [f"  note: {n}" for n in led.notes]
    return lines


def _efficiency_lines(e: Evidence) -> list[str]:
    from perfsuite.tools.doctor.model import CachedBatch, Unavailable

    eff, cached, lines = e.efficiency, e.cached, []
    if isinstance(eff, Unavailable):
        lines.append(f"input efficiency: unavailable ({eff.reason})")
    else:
        left = " (periodic work left out)" if eff.periodic_left_out else ""
        lines.append(
            f"input efficiency {eff.value:.2f} [{eff.confidence:.0%} CI {eff.low:.2f}..{eff.high:.2f}, over {eff.runs} "
            f"run(s) and their steps]: the cached-batch step over the steady step{left}"
            + (f"; {eff.caveat}" if eff.caveat else "")
        )
    if isinstance(cached, CachedBatch):
        lines.append(
            f"fed a cached batch the step takes {cached.cached_ms:.3g} ms [{cached.confidence:.0%} CI "
            f"{cached.cached_low:.3g}..{cached.cached_high:.3g}]: the input (waiting for batches, and the "
            f"loader's share of the cores) costs {cached.saves_ms:.3g} ms/step [{cached.saves_low:.3g}.."
            f"{cached.saves_high:.3g}]"
        )
    return lines


def _contention_line(c: Contention) -> list[str]:
    from perfsuite.tools.doctor.model import known

    figures = []
    pressure, queue, foreign, busy = (
        known(c.cpu_pressure),
        known(c.runqueue_per_core),
        known(c.foreign),
        known(c.loader_cores_busy),
    )
    if pressure is not None:
        figures.append(f"CPU pressure {pressure:.0%} (some task waited for a core)")
    if queue is not None:
        figures.append(f"{queue:.2g} runnable tasks per usable core")
    if foreign is not None:
        figures.append(f"other processes and steal {foreign:.0%} of the usable cores")
    if busy is not None:
        figures.append(f"the loader kept {busy:.2f} of {c.usable_cores} core(s) busy")
    if not figures:
        return ["machine over the runs: not recorded (no run recorded its contention)"]
    return [f"machine over the runs: {', '.join(figures)} ({c.source})"]


def _counterfactual_lines(cf: Counterfactuals) -> list[str]:
    from perfsuite.tools.doctor.model import Measured

    lines = []
    for t in cf.tried.values():
        m = t.measured
        if isinstance(m, Measured):
            interval = f" [{m.low:.2f}..{m.high:.2f}]" if m.low is not None and m.high is not None else ""
            marked = f" (contended: {m.contended})" if m.contended else ""
            lines.append(f"  {t.label}: samples/s x{m.ratio:.2f}{interval}, {m.pairs} interleaved pair(s){marked}")
        else:
            lines.append(f"  {t.label}: {m.reason}")
    lines += [f"  {fix.value}: not tried ({reason})" for fix, reason in cf.not_tried.items()]
    return ["counterfactuals (each fix run interleaved with the job as it is)", *lines] if lines else []


def _stage_lines(s: Stages) -> list[str]:
    if not s.available:
        return [f"loader stages: unavailable ({s.unavailable})"]
    head = (
        f"loader: CPU ms per sample by stage, num_workers={s.num_workers}, capacity {_fmt(s.capacity)} samples/s "
        "from the stages"
    )
    if s.capacity_after_overhead:
        head += f", {sig(s.capacity_after_overhead)} after the worker processes' overhead"
    if s.headroom is not None:
        head += f", headroom x{s.headroom:.2f} against {s.demand}"
    elif s.headroom_reason:
        head += f", headroom unavailable ({s.headroom_reason})"
    lines = [head]
    if s.overhead_note:
        lines.append(f"  note: {s.overhead_note}")
    if s.reconcile:
        lines.append(f"  {s.reconcile}")
    for name, ms in s.by.items():
        lines.append(f"  {name:<20}{sig(ms):>10} {s.shares.get(name, 0.0):>6.0%}  {s.code.get(name, '')}")
    if s.main_load_ms_per_step is not None:
        lines.append(f"  the training process spends {sig(s.main_load_ms_per_step)} ms of CPU per step in next(loader)")
    return lines


def _finding_lines(findings: Sequence[Finding]) -> list[str]:
    lines = ["findings (measured gains first, then the bottleneck, then by predicted gain)"]
    for i, f in enumerate(findings, 1):
        lines += [f" {i}. {f.title}", f"    evidence: {f.evidence}", f"    fix: {f.fix}", f"    gain: {f.effect}"]
    return lines


def format_terminal(d: Diagnosis) -> str:
    """The report for people: the headline first, then the ledger, the loader's stages, the findings."""
    e = d.evidence
    workers = e.last.knobs.get("num_workers")
    lines = [
        f"perfsuite doctor: {d.target} ({e.last.workload}) on {d.device}, {d.rounds} run(s)"
        + (f", num_workers={workers}" if workers is not None else ""),
        f"bottleneck: {d.bottleneck}",
        "",
        *_ledger_lines(e.ledger),
        _wait_line(e.wait),
        *_efficiency_lines(e),
        *_contention_line(e.contention),
        "",
        *_stage_lines(e.stages),
        "",
        *_counterfactual_lines(d.counterfactuals),
        "",
        *_finding_lines(d.findings),
    ]
    if d.counterfactuals.none:
        lines.append(f"counterfactuals: none run ({d.counterfactuals.none})")
    lines += [f"note: {n}" for n in d.notes]
    lines += [f"budget: {b}" for b in d.budget]
    from perfsuite.judge.contention import session_line

    runs = session_line({f"run {i + 1}": r for i, r in enumerate(d.results)})
    return "\n".join(lines + ([runs] if runs else []))


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def format_markdown(diags: Sequence[Diagnosis]) -> str:
    """One section per diagnosed run, for a PR comment or a ticket."""
    out = ["# perfsuite doctor", ""]
    for d in diags:
        e = d.evidence
        out += [f"## {_md(d.target)}", "", f"**Bottleneck:** {_md(d.bottleneck)}", ""]
        out += ["| part of the step | ms/step | share |", "|---|---:|---:|"]
        for name, ms in e.ledger.parts.items():
            out.append(f"| {name} | {sig(ms)} | {e.ledger.share(ms):.0%} |")
        out += [f"| **step** | {sig(e.ledger.step_ms)} | 100% |", ""]
        out += [_md(_wait_line(e.wait)), ""]
        out += [f"{_md(x)}  " for x in [*_efficiency_lines(e), *_contention_line(e.contention)]]
        out.append("")
        if e.stages.available:
            out += ["| loader stage | CPU ms/sample | share | code |", "|---|---:|---:|---|"]
            for name, ms in e.stages.by.items():
                code = _md(e.stages.code.get(name, ""))
                out.append(f"| {name} | {sig(ms)} | {e.stages.shares.get(name, 0):.0%} | {code} |")
            out.append("")
        out += ["| # | finding | fix | predicted | measured |", "|---|---|---|---|---|"]
        for i, f in enumerate(d.findings, 1):
            predicted, _, measured = f.effect.partition("; measured")
            out.append(
                f"| {i} | **{_md(f.title)}**: {_md(f.evidence)} | `{_md(f.fix)}` | {_md(predicted)} | "
                f"{_md('measured' + measured)} |"
            )
        out += [f"> {_md(n)}" for n in [*d.notes, *d.budget]]
        out.append("")
    return "\n".join(out)


def to_json(diags: Sequence[Diagnosis]) -> str:
    return json.dumps({"schema": 2, "diagnoses": [d.to_dict() for d in diags]}, indent=2, default=str) + "\n"


def write_png(diagnoses: Sequence[Diagnosis], path: Path | str) -> Path:
    """A timeline per diagnosed run: the window's steps with the data wait shaded, the loader's busy cores
    (NVML utilisation on top on a GPU), and the observed steps with their syncs and copies shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from perfsuite.core.tmpfiles import write_bytes_atomic

    diags = [d.to_dict() for d in diagnoses]
    rows = len(diags)
    fig, axes = plt.subplots(rows, 2, figsize=(13, 3.2 * rows), squeeze=False, gridspec_kw={"width_ratios": [3, 1]})
    for (ax, obs), d in zip(axes, diags):
        tl = d.get("timeline", {})
        t = 0.0
        for i, (fetch, step) in enumerate(zip(tl.get("fetch_ms", []), tl.get("host_step_ms", []))):
            ax.barh(0, fetch, left=t, height=0.6, color="#ff7f0e", label="data wait" if i == 0 else None)
            ax.barh(
                0, max(0.0, step - fetch), left=t + fetch, height=0.6, color="#1f77b4", label="step" if i == 0 else None
            )
            ax.axvline(t, color="white", lw=0.6)
            t += step
        ax.set_yticks([])
        ax.set_xlabel("ms since the measured window began")
        ax.set_title(f"{d['target']}: {d['bottleneck']}", fontsize=9, loc="left")
        if tl.get("loader_cpu_t"):
            twin = ax.twinx()
            twin.plot(
                [x * 1e3 for x in tl["loader_cpu_t"]],
                tl["loader_cpu_cores"],
                color="#2ca02c",
                lw=1,
                label="loader CPU (cores)",
            )
            twin.set_ylabel("loader cores busy", fontsize=8)
            twin.set_ylim(bottom=0)
        if tl.get("gpu_util"):
            twin2 = ax.twinx()
            twin2.plot([x * 1e3 for x in tl["gpu_t"]], tl["gpu_util"], color="#d62728", lw=1, label="GPU util")
            twin2.set_ylim(0, 1.05)
            twin2.set_yticks([])
        ax.legend(loc="upper left", fontsize=7)
        for i, step in enumerate(tl.get("observed_steps", [])):
            obs.barh(i, step["wall_ms"], color="#c7c7c7", height=0.6, label="observed step" if i == 0 else None)
            for k, (start, ms, _label) in enumerate(step["syncs"]):
                obs.barh(
                    i,
                    max(ms, step["wall_ms"] / 200),
                    left=start,
                    color="#d62728",
                    height=0.6,
                    label="host sync" if i == 0 and k == 0 else None,
                )
            for k, (start, ms, _label) in enumerate(step["copies"]):
                obs.barh(
                    i, ms, left=start, color="#2ca02c", height=0.6, label="H2D copy" if i == 0 and k == 0 else None
                )
        obs.set_xlabel("ms within the observed step")
        obs.set_yticks([])
        if tl.get("observed_steps"):
            obs.legend(loc="upper right", fontsize=7)
    fig.tight_layout()
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return write_bytes_atomic(Path(path), buf.getvalue())
