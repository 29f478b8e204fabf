"""One diagnosis: the evidence of the unchanged runs, the counterfactuals, the ranked findings and the headline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfsuite.core.results import Result
from perfsuite.judge.contention import contended_run
from perfsuite.tools.doctor import rules
from perfsuite.tools.doctor.evidence import GPU_IDLE, Evidence, gather
from perfsuite.tools.doctor.model import Counterfactuals, Finding, Measured, Predicted, Tried, Unavailable, plain
from perfsuite.tools.doctor.stats import ratio_interval


@dataclass
class Diagnosis:
    """What the doctor found for one target, rendered by :mod:`perfsuite.tools.doctor.report`."""

    target: str
    evidence: Evidence
    counterfactuals: Counterfactuals
    findings: list[Finding]
    notes: list[str] = field(default_factory=list)
    budget: list[str] = field(default_factory=list)  # what the time budget left out, and the time it took

    @property
    def results(self) -> tuple[Result, ...]:
        return self.evidence.results

    @property
    def rounds(self) -> int:
        return len(self.evidence.results)

    @property
    def device(self) -> str:
        return self.evidence.device

    @property
    def bottleneck(self) -> str:
        """The headline: the largest measured gain, else the bottleneck the evidence decides, else "not decided"
        with what would decide it."""
        first = self.findings[0] if self.findings else None
        if first is not None and isinstance(first.measured, Measured) and first.measured.gain:
            return f"{first.title}: measured x{first.measured.ratio:.2f} samples/s ({first.measured.label})"
        lead = next((f for f in self.findings if f.bottleneck), None)
        return lead.title if lead is not None else undecided(self.evidence)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the typed figures as objects, *unavailable* as ``{"reason": ...}``."""
        from perfsuite.judge.contention import session_line

        e, last = self.evidence, self.evidence.last
        return {
            "target": self.target,
            "rounds": self.rounds,
            "device": self.device,
            "workload": last.workload,
            "knobs": dict(last.knobs),
            "fingerprint": last.fingerprint.key(),
            "bottleneck": self.bottleneck,
            "findings": plain(self.findings),
            "ledger": plain(e.ledger),
            "wait": plain(e.wait),
            "stages": plain(e.stages),
            "cached_batch": plain(e.cached),
            "input_efficiency": plain(e.efficiency),
            "periodic": plain(e.periodic),
            "counterfactuals": plain(self.counterfactuals.tried),
            "not_tried": plain(self.counterfactuals.not_tried),
            "counterfactuals_reason": self.counterfactuals.none,
            "contention": plain(e.contention),
            "observed": plain(e.observed),
            "timeline": timeline(last, e),
            "notes": list(self.notes),
            "budget": list(self.budget),
            "contention_runs": session_line({f"run {i + 1}": r for i, r in enumerate(self.results)}),
        }


def undecided(e: Evidence) -> str:
    """The headline when the evidence decides no bottleneck: the wait's interval, and what would decide it."""
    w = e.wait
    would = ["a longer --budget (more rounds narrow the interval)"]
    if e.contention.busy:
        would.append("a quieter machine (its load widens the runs' spread)")
    if e.ledger.cpu:
        would.append("a GPU (on a CPU the step's arithmetic shares the cores with the loader)")
    what = "input-bound, moderately or highly not decided" if w.input_bound else "not decided"
    return (
        f"{what}: {w.source} {w.share:.1%} {w.interval} spans the {w.edge or 0:.0%} edge; "
        f"what would decide it: {', '.join(would)}"
    )


def timeline(result: Result, e: Evidence) -> dict[str, list[Any]]:
    """What the PNG draws: the window's steps (fetch, then the rest), the loader's busy cores, the observed steps."""
    return {
        "fetch_ms": list(result.samples.get("fetch_ms", [])),
        "host_step_ms": list(result.samples.get("host_step_ms", [])),
        "loader_cpu_t": list(result.timeline.get("loader_cpu_t", [])),
        "loader_cpu_cores": list(result.timeline.get("loader_cpu_cores", [])),
        "gpu_t": list(result.timeline.get("t_s", [])),
        "gpu_util": list(result.timeline.get("gpu_util", [])),
        "observed_steps": list(e.observed.steps),
    }


def measure(
    base: Sequence[Result], runs: Sequence[Result], label: str
) -> tuple[Measured | Unavailable, tuple[float, ...], tuple[float, ...]]:
    """A fix's runs against the unchanged runs of the same rounds: the ratio, marked where either side was
    contended beyond the wall-clock bound (as ab marks its rounds)."""
    b = tuple(float(r.value("samples_per_s") or 0.0) for r in base)[: len(runs)]
    h = tuple(float(r.value("samples_per_s") or 0.0) for r in runs)
    m = ratio_interval(b, h, label)
    contended = [why for r in [*base[: len(runs)], *runs] if (why := contended_run(r)) is not None]
    if isinstance(m, Measured) and contended:
        m = Measured(m.ratio, m.low, m.high, m.pairs, m.label, f"{len(contended)} run(s) beyond it: {contended[0]}")
    return m, b, h


def assess(
    target: str,
    results: Sequence[Result],
    summaries: Sequence[Mapping[str, Any]],
    cf: Counterfactuals,
    usable: int,
) -> Diagnosis:
    """The evidence of the unchanged runs, and the findings it and the counterfactuals give."""
    e = gather(results, summaries, usable)
    notes = sorted({n for r in results for n in r.notes if not n.startswith("oversubscribed:")})
    idle = e.last.metric("gpu_idle_frac")
    if e.device.startswith("cuda") and e.wait.source != GPU_IDLE:
        notes.append(
            "the band reads the host's wait for the batch, which overlaps the GPU's work on CUDA: gpu_idle_frac "
            f"unavailable ({idle.reason or 'not recorded'})"
        )
    if e.periodic.reason and "too few" in e.periodic.reason:
        notes.append(f"periodic work: {e.periodic.reason}; nothing was kept out of input efficiency (--steps)")
    return Diagnosis(target, e, cf, rank(rules.run(e, cf)), notes)


def rank(found: list[Finding]) -> list[Finding]:
    """Measured gains first, largest first; then the bottleneck (the first the rules name); then by predicted gain
    (the rules' order kept among equals)."""
    gains = sorted(
        (f for f in found if isinstance(f.measured, Measured) and f.measured.gain),
        key=lambda f: -f.measured.ratio,  # type: ignore[union-attr]
    )
    rest = [f for f in found if f not in gains]
    lead = [f for f in rest if f.bottleneck][:1]
    others = [f for f in rest if f not in lead]
    others.sort(key=lambda f: -(f.predicted.ratio if isinstance(f.predicted, Predicted) else 0.0))
    return gains + lead + others


def tried(
    fix: Any, label: str, change: str, why: str, base: Sequence[Result], runs: Sequence[Result], **kw: Any
) -> Tried:
    m, b, h = measure(base, runs, label)
    return Tried(fix, label, change, why, m, b, h, **kw)
