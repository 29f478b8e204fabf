"""The self-test: does perfsuite catch every seed bug, and stay quiet when nothing changed?

For each :class:`~perfsuite.faults.Fault` it runs the fault's unchanged
:class:`~perfsuite.faults.Reference` and the fault, in the same session, and
decides with the fault's catching signal:

* exact signals compare counters and flags: syncs_per_step rises (with the
  new call site), amp_lowp_frac falls from ~1 to ~0, the compiled graph count
  falls to 0, label_violations rises from 0;
* statistical signals compare with the unchanged run: data_wait_frac must rise
  by a clear margin (:data:`WAIT_MARGIN` and :data:`WAIT_RATIO`); the fetches
  that start an epoch (workers restarted) must take over :data:`STALL_FACTOR`
  times as long, by perfsuite's timing rule; and per-sample step time must
  regress by that rule
  (:func:`perfsuite.verdicts.compare_timing`: larger than x1.05, Mann-Whitney
  p < 0.01, bootstrap interval above 1).

A/A: the unchanged reference, run again and again, goes through the very same
:func:`decide` for every fault on that reference; any catch is a false alarm.
``scripts/catch_table.py`` runs this and writes the catch table into README.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from perfsuite.errors import PerfsuiteError
from perfsuite.faults import FAULTS, REFERENCES, Fault, Reference
from perfsuite.results import Result
from perfsuite.verdicts import Outcome, compare_timing, format_value

WAIT_MARGIN = 0.05  # data_wait_frac must rise by at least this much (absolute) ...
WAIT_RATIO = 2.0  # ... and to at least this multiple of the unchanged run's
STALL_FACTOR = 2.0  # epoch-start fetches must take over twice as long as the unchanged run's
LOWP_ENGAGED = 0.9  # amp_lowp_frac of a run that trains in mixed precision
LOWP_FP32 = 0.1  # amp_lowp_frac of a run that does not
NOT_HERE = "not verified here: needs a CUDA GPU"
SCHEMA = 1

# Family labels of failure messages, as perfsuite.causes names them.
LABELS = {
    "data_wait_frac": "data-bound", "samples_per_s": "slow steps", "syncs_per_step": "host sync",
    "amp_lowp_frac": "AMP not engaged", "graph_breaks": "not compiled", "label_violations": "misaligned targets",
}


@dataclass(frozen=True)
class Catch:
    """One fault judged against its unchanged run. ``caught`` None: not run on this machine."""

    fault: str
    signal: str
    device: str
    caught: bool | None
    message: str
    base: Any = None
    head: Any = None
    refused: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Catch:
        return cls(**{f.name: data.get(f.name) for f in dataclasses.fields(cls)})


# --------------------------------------------------------------------------- running


def spec_for(ref: Reference, *, device: str = "cpu", fault: Fault | None = None, cache_dir: Path | None = None,
             seed: int = 0) -> Any:
    """The RunSpec of a reference, with a fault injected if given."""
    from perfsuite.runner import RunSpec

    knobs = ref.knobs(device)
    if fault is not None:
        missing = fault.applies_to(knobs)
        if missing:
            raise PerfsuiteError(missing)
        knobs = fault.apply(knobs)
    return RunSpec(ref.workload, "smoke", knobs, steps=ref.steps, warmup=ref.warmup, observe_steps=ref.observe_steps,
                   seed=seed, cache_dir=cache_dir, mutate=fault.mutate if fault and fault.mutation else None)


def run_reference(ref: Reference | str, *, device: str = "cpu", fault: Fault | str | None = None,
                  cache_dir: Path | None = None, probes: Sequence[Any] | None = None) -> Result:
    """Run a reference (or a fault applied to it) with every probe attached."""
    from perfsuite.runner import run

    ref = REFERENCES[ref] if isinstance(ref, str) else ref
    fault = FAULTS[fault] if isinstance(fault, str) else fault
    return run(spec_for(ref, device=device, fault=fault, cache_dir=cache_dir), probes)


def refusal(fault: Fault, *, device: str = "cpu", cache_dir: Path | None = None) -> str | None:
    """The message perfsuite's validation gives for the fault's config form, or None if it is accepted."""
    if not fault.refused:
        return None
    from perfsuite.runner import run

    ref = REFERENCES[fault.reference]
    try:
        knobs = ref.knobs(device).replace(**fault.refused)
        spec = dataclasses.replace(spec_for(ref, device=device, cache_dir=cache_dir), knobs=knobs, steps=2,
                                   warmup=0, observe_steps=0)
        run(spec, probes=[])  # build_pipeline refuses before anything heavy happens
    except PerfsuiteError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


# --------------------------------------------------------------------------- deciding


def decide(fault: Fault, base: Result, head: Result) -> Catch:
    """Is ``head`` (the fault's run) caught against ``base`` (the unchanged run) by the fault's signal?"""
    judge = _JUDGES[fault.judge or fault.signal]
    caught, evidence, b, h = judge(base, head)
    label = LABELS.get(fault.signal, fault.signal)
    message = f"{label}: {evidence} ({fault.cause})" if caught else f"not caught: {evidence}"
    return Catch(fault.name, fault.signal, fault.device, caught, message, _plain(b), _plain(h))


def _plain(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4) if math.isfinite(value) else None
    return value


def _judge_syncs(base: Result, head: Result) -> tuple[bool, str, Any, Any]:
    b, h = base.metric("syncs_per_step"), head.metric("syncs_per_step")
    if not (b.available and h.available):
        return False, f"syncs_per_step unavailable ({b.reason or h.reason})", b.value, h.value
    before = {(s["op"], s["site"]): s["per_step"] for s in b.detail.get("sites", [])}
    new = [s for s in h.detail.get("sites", []) if s["per_step"] > before.get((s["op"], s["site"]), 0.0)]
    where = ", ".join(f"{s['op']} at {_short(s['site'])}, "
                      f"{format_value(s['per_step'] - before.get((s['op'], s['site']), 0.0))}/step" for s in new[:2])
    text = f"syncs_per_step {format_value(h.value)} vs {format_value(b.value)} unchanged"
    caught = float(h.value) > float(b.value)
    return caught, f"{text}: {where}" if where else text, b.value, h.value


def _short(site: str) -> str:
    for marker in ("site-packages/", "dist-packages/"):
        if marker in site:
            return site.split(marker, 1)[1]
    return site


def _judge_amp(base: Result, head: Result) -> tuple[bool, str, Any, Any]:
    b, h = base.metric("amp_lowp_frac"), head.metric("amp_lowp_frac")
    if not (b.available and h.available):
        return False, f"amp_lowp_frac unavailable ({b.reason or h.reason})", b.value, h.value
    amp = head.knobs.get("amp")
    text = (f"amp_lowp_frac {h.value:.2f} vs {b.value:.2f} unchanged, amp_engaged={head.value('amp_engaged')}, "
            f"amp={amp!r}")
    caught = float(b.value) >= LOWP_ENGAGED and float(h.value) <= LOWP_FP32
    return caught, text, b.value, h.value


def _graphs(result: Result) -> int:
    metric = result.metric("graph_breaks")
    return int(metric.detail.get("graphs", 0)) if metric.available else 0


def _judge_graphs(base: Result, head: Result) -> tuple[bool, str, Any, Any]:
    b, h = _graphs(base), _graphs(head)
    if b == 0:
        return False, f"the unchanged run compiled no graph ({base.metric('graph_breaks').reason})", b, h
    text = f"{h} compiled graph(s) vs {b} unchanged, compile={head.knobs.get('compile')!r}"
    return h == 0, text, b, h


def _judge_labels(base: Result, head: Result) -> tuple[bool, str, Any, Any]:
    b, h = base.metric("label_violations"), head.metric("label_violations")
    if not (b.available and h.available):
        return False, f"label_violations unavailable ({b.reason or h.reason})", b.value, h.value
    parts = ", ".join(f"{k} {h.detail[k]}" for k in ("out_of_set", "invented", "unpaired", "property")
                      if h.detail.get(k))
    text = f"label_violations {h.value} vs {b.value} unchanged" + (f" [{parts}]" if parts else "")
    examples = h.detail.get("examples") or []
    if examples:
        text += f"; {examples[0].split(': ', 1)[-1][:220]}"
    return int(h.value) > 0 and int(b.value) == 0, text, b.value, h.value


def _judge_wait(base: Result, head: Result) -> tuple[bool, str, Any, Any]:
    b, h = base.metric("data_wait_frac"), head.metric("data_wait_frac")
    if not (b.available and h.available):
        return False, f"data_wait_frac unavailable ({b.reason or h.reason})", b.value, h.value
    bv, hv = float(b.value), float(h.value)
    caught = hv - bv >= WAIT_MARGIN and hv >= WAIT_RATIO * bv
    epochs = h.detail.get("epochs_started")
    nan = float("nan")
    hmed, bmed = h.detail.get("fetch_ms_median", nan), b.detail.get("fetch_ms_median", nan)
    hmax, bmax = h.detail.get("fetch_ms_max", nan), b.detail.get("fetch_ms_max", nan)
    text = (f"data_wait_frac {hv:.2f} vs {bv:.2f} unchanged (fetch median {hmed:.1f} vs {bmed:.1f} ms, "
            f"max {hmax:.0f} vs {bmax:.0f} ms" + (f", {epochs} epochs" if epochs else "") + ")")
    return caught, text, bv, hv


def epoch_stalls(result: Result) -> list[float]:
    """The fetch times that started an epoch: the longest ``epochs_started`` fetches of the window."""
    epochs = int(result.metric("data_wait_frac").detail.get("epochs_started") or 0)
    fetch = sorted(result.samples.get("fetch_ms", []))
    return fetch[-epochs:] if epochs else []


def _judge_epoch_stall(base: Result, head: Result) -> tuple[bool, str, Any, Any]:
    """Workers restarted every epoch: the epoch-start fetches take over STALL_FACTOR times as long."""
    b, h = epoch_stalls(base), epoch_stalls(head)
    bw, hw = base.value("data_wait_frac"), head.value("data_wait_frac")
    text = f"data_wait_frac {format_value(hw)} vs {format_value(bw)} unchanged"
    t = compare_timing(b, h, factor=STALL_FACTOR)
    if t.log_ratio is None:
        return False, f"{text}; epoch-start fetches: {t.reason}", bw, hw
    text += (f"; the {len(h)} epoch-start fetches take {t.head_median:.0f} vs {t.base_median:.0f} ms "
             f"(x{t.ratio:.1f}, 99% CI x{t.interval.low:.1f}..x{t.interval.high:.1f}, p={t.p_slower:.2g}): {t.outcome}")
    return t.outcome is Outcome.REGRESSED, text, bw, hw


def per_sample_ms(result: Result) -> list[float]:
    """Step times divided by the batch size: comparable across batch sizes."""
    return [t / result.batch_size for t in result.samples.get("step_ms", [])]


def _judge_throughput(base: Result, head: Result) -> tuple[bool, str, Any, Any]:
    t = compare_timing(per_sample_ms(base), per_sample_ms(head))
    bs, hs = base.value("samples_per_s"), head.value("samples_per_s")
    text = f"samples_per_s {format_value(hs)} vs {format_value(bs)} unchanged"
    if t.log_ratio is not None:
        text += (f"; per-sample step time x{t.ratio:.2f} (99% CI x{t.interval.low:.2f}..x{t.interval.high:.2f}, "
                 f"p={t.p_slower:.2g}, batch {head.batch_size} vs {base.batch_size}): {t.outcome}")
    else:
        text += f": {t.reason}"
    return t.outcome is Outcome.REGRESSED, text, bs, hs


_JUDGES: dict[str, Callable[[Result, Result], tuple[bool, str, Any, Any]]] = {
    "syncs_per_step": _judge_syncs, "amp_lowp_frac": _judge_amp, "graph_breaks": _judge_graphs,
    "label_violations": _judge_labels, "data_wait_frac": _judge_wait, "samples_per_s": _judge_throughput,
    "epoch_stall": _judge_epoch_stall,
}


# --------------------------------------------------------------------------- the self-test


@dataclass
class CatchReport:
    """Every fault's catch and the A/A record of each reference, from one session on one machine."""

    catches: dict[str, Catch] = field(default_factory=dict)
    aa: dict[str, dict[str, Any]] = field(default_factory=dict)
    machine: str = ""
    device: str = "cpu"
    references: dict[str, dict[str, Any]] = field(default_factory=dict)
    schema: int = SCHEMA

    @property
    def aa_runs(self) -> int:
        return min((a["runs"] for a in self.aa.values()), default=0)

    @property
    def false_alarms(self) -> int:
        return sum(a["false_alarms"] for a in self.aa.values())

    def to_dict(self) -> dict[str, Any]:
        return {"schema": self.schema, "machine": self.machine, "device": self.device,
                "references": {n: self.references[n] for n in sorted(self.references)},
                "catches": {n: c.to_dict() for n, c in sorted(self.catches.items())},
                "aa": {n: self.aa[n] for n in sorted(self.aa)}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CatchReport:
        if data.get("schema") != SCHEMA:
            raise PerfsuiteError(f"catch results schema {data.get('schema')!r}; regenerate with "
                                 "`python scripts/catch_table.py --run`")
        return cls({n: Catch.from_dict(c) for n, c in data["catches"].items()}, dict(data["aa"]),
                   data.get("machine", ""), data.get("device", "cpu"), dict(data.get("references", {})))

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1, sort_keys=False) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> CatchReport:
        return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))


def runnable(fault: Fault, device: str) -> bool:
    """A ``gpu`` fault is verified only on a CUDA device."""
    return fault.device == "cpu" or device.startswith("cuda")


def self_test(names: Iterable[str] | None = None, *, device: str = "cpu", aa_runs: int = 20,
              cache_dir: Path | None = None, log: Callable[[str], None] = lambda s: None) -> CatchReport:
    """Run each reference once, each fault once, then ``aa_runs`` more runs of each reference (A/A)."""
    from perfsuite.results import Fingerprint

    faults = [FAULTS[n] for n in (names or FAULTS)]
    report = CatchReport(machine=Fingerprint.collect(device).key(), device=device)
    todo = [f for f in faults if runnable(f, device)]
    refs = sorted({f.reference for f in todo})
    report.references = {r: describe_reference(REFERENCES[r]) for r in refs}
    base = {}
    for ref in refs:
        log(f"reference {ref}")
        base[ref] = run_reference(ref, device=device, cache_dir=cache_dir)
    for fault in faults:
        refused = refusal(fault, device=device, cache_dir=cache_dir)
        if not runnable(fault, device):
            report.catches[fault.name] = Catch(fault.name, fault.signal, fault.device, None,
                                               f"{NOT_HERE} ({fault.why_device})", refused=refused)
            continue
        log(f"fault {fault.name}")
        head = run_reference(fault.reference, device=device, fault=fault, cache_dir=cache_dir)
        report.catches[fault.name] = dataclasses.replace(decide(fault, base[ref_of(fault)], head), refused=refused)
    for ref in refs:
        on_ref = [f for f in todo if f.reference == ref]
        record: dict[str, Any] = {"runs": 0, "false_alarms": 0, "alarms": [], "faults": [f.name for f in on_ref]}
        for i in range(aa_runs):
            log(f"A/A {ref} {i + 1}/{aa_runs}")
            again = run_reference(ref, device=device, cache_dir=cache_dir)
            record["runs"] += 1
            for fault in on_ref:
                catch = decide(fault, base[ref], again)
                if catch.caught:
                    record["false_alarms"] += 1
                    record["alarms"].append({"run": i + 1, "fault": fault.name, "message": catch.message})
        report.aa[ref] = record
    return report


def ref_of(fault: Fault) -> str:
    return fault.reference


def describe_reference(ref: Reference) -> dict[str, Any]:
    """What a recorded self-test ran as a reference: a stale record shows up as a difference."""
    return {"workload": ref.workload, "knobs": dict(ref.flat), "steps": ref.steps, "warmup": ref.warmup,
            "observe_steps": ref.observe_steps}


# --------------------------------------------------------------------------- the table


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_table(report: CatchReport) -> str:
    """The catch table (markdown): one row per catalog fault, A/A figures above it."""
    aa = ", ".join(f"{name} {a['runs']} runs / {a['false_alarms']} false alarms"
                   for name, a in sorted(report.aa.items()))
    lines = [
        f"Generated by `python scripts/catch_table.py --run` on `{report.machine}` (device {report.device}); "
        "checked by `tests/faults/test_catalog.py`. Do not edit by hand.",
        "",
        f"A/A (unchanged references through the same decision): {aa or 'none run'}; "
        f"{report.false_alarms} false alarm(s) in total.",
        "",
        "| Fault | Seed | Change | Signal | Device | Caught here | Message |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, fault in FAULTS.items():
        catch = report.catches.get(name)
        if catch is None or catch.caught is None:
            caught = NOT_HERE if fault.device == "gpu" else "not run"
            message = catch.message.replace(f"{NOT_HERE} ", "") if catch else ""
            if message.startswith("(") and message.endswith(")"):
                message = message[1:-1]
        else:
            caught = "yes" if catch.caught else "**no**"
            message = catch.message
        if catch is not None and catch.refused:
            message += f" Config form refused up front: {catch.refused.splitlines()[0][:160]}"
        lines.append("| " + " | ".join(_cell(c) for c in (
            f"`{name}`", fault.seed, f"`{fault.change}`", f"`{fault.signal}` ({fault.rule})", fault.device, caught,
            message)) + " |")
    return "\n".join(lines) + "\n"


START, END = "<!-- catch-table:start -->", "<!-- catch-table:end -->"


def splice(readme: str, table: str) -> str:
    """README text with the table between the markers (the section is appended if the markers are missing)."""
    block = f"{START}\n{table}{END}"
    if START in readme and END in readme:
        head, rest = readme.split(START, 1)
        return head + block + rest.split(END, 1)[1]
    sep = "" if not readme or readme.endswith("\n\n") else ("\n" if readme.endswith("\n") else "\n\n")
    intro = "What perfsuite catches of the seeds' bugs (`perfsuite/faults.py`, `perfsuite/catch.py`)."
    return f"{readme}{sep}## Catch table\n\n{intro}\n\n{block}\n"


def current_table(readme: str) -> str | None:
    if START not in readme or END not in readme:
        return None
    return readme.split(START, 1)[1].split(END, 1)[0].lstrip("\n")
