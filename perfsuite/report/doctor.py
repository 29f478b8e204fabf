"""``perfsuite doctor``'s report: for people in a terminal, as markdown, as JSON, and a timeline PNG.

Each renderer takes the plain dict of :meth:`perfsuite.tools.doctor.Diagnosis.to_dict`
(one per diagnosed run), so the report knows nothing of how it was measured.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfsuite.core.units import sig

BAR = 24


def _bar(share: float) -> str:
    n = max(0, min(BAR, round(share * BAR)))
    return "#" * n


def _fmt(x: Any, spec: str = "") -> str:
    """Three significant digits, never an exponent (2690, not 2.69e+03): perfsuite.core.units.sig."""
    return "-" if x is None else sig(float(x))


def _wait_line(wait: Mapping[str, Any]) -> str:
    if not wait:
        return "data wait: not measured"
    ci = f"[{wait['confidence']:.0%} CI {wait['low']:.1%}..{wait['high']:.1%}, {wait['steps']} steps]"
    verdict = wait["band"] or f"no band called: the interval spans the {wait['edge']:.0%} edge"
    return f"data wait {wait['share']:.1%} {ci}: {verdict} (TensorFlow's bands: <5% not, 5-20% moderately, >20% highly)"


def _ledger_lines(ledger: Mapping[str, Any]) -> list[str]:
    if not ledger:
        return []
    step = ledger["step_ms"]
    lines = [f"per-step time ledger (ms per step; the parts add up to the window's mean step of {sig(step)} ms)"]
    sites = ledger.get("sync_sites") or {}
    for name, ms in ledger["parts"].items():
        share = ledger["shares"].get(name, 0.0)
        extra = ""
        if name in ("host syncs", "reads to Python") and ledger.get("syncs_per_step"):
            extra = f"  {ledger['syncs_per_step']:g}/step: " + ", ".join(list(sites)[:2])
            periodic = ledger.get("periodic_syncs") or []
            if periodic:
                extra += "; every N steps: " + ", ".join(
                    f"{s['op']} at {s['site']} ({s['seen']})" for s in periodic[:2]
                )
        lines.append(f"  {name:<28}{sig(ms):>10} {share:>6.0%}  {_bar(share):<{BAR}}{extra}".rstrip())
    lines += [f"  note: {n}" for n in ledger.get("notes", [])]
    return lines


def _efficiency_lines(diag: Mapping[str, Any]) -> list[str]:
    eff = diag.get("input_efficiency") or {}
    cached = diag.get("cached_batch") or {}
    lines = []
    if eff.get("available"):
        left = " (periodic work left out)" if eff.get("periodic_left_out") else ""
        lines.append(
            f"input efficiency {eff['value']:.2f} [{eff['confidence']:.0%} CI {eff['low']:.2f}..{eff['high']:.2f}, "
            f"over {eff['runs']} run(s) and their steps]: the cached-batch step over the steady step{left}"
            + (f"; {eff['caveat']}" if eff.get("caveat") else "")
        )
    elif eff:
        lines.append(f"input efficiency: unavailable ({eff.get('reason')})")
    if cached.get("available"):
        lines.append(
            f"fed a cached batch the step takes {cached['cached_ms']:.3g} ms [{cached['confidence']:.0%} CI "
            f"{cached['cached_low']:.3g}..{cached['cached_high']:.3g}]: the input (waiting for batches, and the "
            f"loader's share of the cores) costs {cached['saves_ms']:.3g} ms/step [{cached['saves_low']:.3g}.."
            f"{cached['saves_high']:.3g}]"
        )
    return lines


def _contention_line(c: Mapping[str, Any]) -> list[str]:
    if not c:
        return []
    figures = []
    if c.get("cpu_pressure") is not None:
        figures.append(f"CPU pressure {c['cpu_pressure']:.0%} (some task waited for a core)")
    if c.get("run_queue_per_core") is not None:
        figures.append(f"{c['run_queue_per_core']:.2g} runnable tasks per usable core")
    if c.get("steal") is not None:
        figures.append(f"steal {c['steal']:.1%}")
    if c.get("loader_cores_busy") is not None:
        figures.append(f"the loader kept {c['loader_cores_busy']:.2f} of {c['usable_cores']} core(s) busy")
    if not figures:
        return []
    return [f"machine over the runs: {', '.join(figures)} ({c.get('source')})"]


def _counterfactual_lines(cfs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    lines = []
    for key, cf in cfs.items():
        if cf.get("pairs"):
            ci = f" [{cf['low']:.2f}..{cf['high']:.2f}]" if cf.get("low") is not None else ""
            lines.append(f"  {cf['label']}: samples/s x{cf['ratio']:.2f}{ci}, {cf['pairs']} interleaved pair(s)")
        elif cf.get("reason"):
            lines.append(f"  {key}: not tried ({cf['reason']})")
    return ["counterfactuals (each fix run interleaved with the job as it is)", *lines] if lines else []


def _stage_lines(stages: Mapping[str, Any]) -> list[str]:
    if not stages:
        return []
    if not stages.get("available"):
        return [f"loader stages: unavailable ({stages.get('reason')})"]
    head = (
        f"loader: CPU ms per sample by stage, num_workers={stages.get('num_workers')}, capacity "
        f"{_fmt(stages.get('capacity_samples_per_s'))} samples/s from the stages"
    )
    if stages.get("capacity_after_overhead"):
        head += f", {sig(stages['capacity_after_overhead'])} after the worker processes' overhead"
    if stages.get("headroom") is not None:
        head += f", headroom x{stages['headroom']:.2f} against {stages.get('demand')}"
    elif stages.get("headroom_reason"):
        head += f", headroom unavailable ({stages['headroom_reason']})"
    lines = [head]
    if stages.get("overhead_note"):
        lines.append(f"  note: {stages['overhead_note']}")
    if stages.get("reconcile"):
        lines.append(f"  {stages['reconcile']}")
    for name, ms in sorted(stages["by"].items(), key=lambda kv: -kv[1]):
        share = stages["shares"].get(name, 0.0)
        lines.append(f"  {name:<20}{sig(ms):>10} {share:>6.0%}  {stages['code'].get(name, '')}")
    if stages.get("main_load_ms_per_step") is not None:
        lines.append(
            f"  the training process spends {sig(stages['main_load_ms_per_step'])} ms of CPU per step in next(loader)"
        )
    return lines


def _finding_lines(findings: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["findings"]
    for i, f in enumerate(findings, 1):
        lines.append(f" {i}. {f['title']}")
        lines.append(f"    evidence: {f['evidence']}")
        lines.append(f"    fix: {f['fix']}")
        if f.get("effect"):
            lines.append(f"    gain: {f['effect']}")
    return lines


def format_terminal(diag: Mapping[str, Any]) -> str:
    """The report for people: the bottleneck first, then the ledger, the loader's stages, the findings."""
    knobs = diag.get("knobs", {})
    workers = knobs.get("num_workers")
    lines = [
        f"perfsuite doctor: {diag['target']} ({diag.get('workload')}) on {diag['device']}, {diag['rounds']} run(s)"
        + (f", num_workers={workers}" if workers is not None else ""),
        f"bottleneck: {diag['bottleneck']}",
        "",
        *_ledger_lines(diag.get("ledger", {})),
        _wait_line(diag.get("wait", {})),
        *_efficiency_lines(diag),
        *_contention_line(diag.get("contention", {})),
        "",
        *_stage_lines(diag.get("stages", {})),
        "",
        *_counterfactual_lines(diag.get("counterfactuals", {})),
        "",
        *_finding_lines(diag.get("findings", [])),
    ]
    if diag.get("counterfactuals_reason"):
        lines.append(f"counterfactuals: none run ({diag['counterfactuals_reason']})")
    lines += [f"note: {n}" for n in diag.get("notes", [])]
    lines += [diag["contention_runs"]] if diag.get("contention_runs") else []  # judge.contention.session_line
    return "\n".join(lines)


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def format_markdown(diags: Sequence[Mapping[str, Any]]) -> str:
    """One section per diagnosed run, for a PR comment or a ticket."""
    out = ["# perfsuite doctor", ""]
    for d in diags:
        out += [f"## {_md(d['target'])}", "", f"**Bottleneck:** {_md(d['bottleneck'])}", ""]
        ledger = d.get("ledger") or {}
        if ledger:
            out += ["| part of the step | ms/step | share |", "|---|---:|---:|"]
            for name, ms in ledger["parts"].items():
                out.append(f"| {name} | {sig(ms)} | {ledger['shares'].get(name, 0.0):.0%} |")
            out.append(f"| **step** | {sig(ledger['step_ms'])} | 100% |")
            out.append("")
        out += [_md(_wait_line(d.get("wait", {}))), ""]
        out += [f"{_md(x)}  " for x in [*_efficiency_lines(d), *_contention_line(d.get("contention", {}))]]
        out.append("")
        stages = d.get("stages") or {}
        if stages.get("available"):
            out += ["| loader stage | CPU ms/sample | share | code |", "|---|---:|---:|---|"]
            for name, ms in sorted(stages["by"].items(), key=lambda kv: -kv[1]):
                code = _md(stages["code"].get(name, ""))
                out.append(f"| {name} | {sig(ms)} | {stages['shares'].get(name, 0):.0%} | {code} |")
            out.append("")
        for i, f in enumerate(d.get("findings", []), 1):
            out.append(f"{i}. **{_md(f['title'])}**: {_md(f['evidence'])}. Fix: `{_md(f['fix'])}`.")
            if f.get("effect"):
                out.append(f"   Gain: {_md(f['effect'])}.")
        out += [f"> {_md(n)}" for n in d.get("notes", [])]
        out.append("")
    return "\n".join(out)


def to_json(diags: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps({"schema": 1, "diagnoses": list(diags)}, indent=2, default=str) + "\n"


def write_png(diags: Sequence[Mapping[str, Any]], path: Path | str) -> Path:
    """A timeline per diagnosed run: the window's steps with the data wait shaded, the loader's busy cores
    (NVML utilisation on top on a GPU), and the observed steps with their syncs and copies shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from perfsuite.core.tmpfiles import write_bytes_atomic

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
