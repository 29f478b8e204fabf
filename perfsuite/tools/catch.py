"""The self-test: does perfsuite catch every seed bug, and stay quiet when nothing changed?

For each :class:`~perfsuite.harness.faults.catalog.Fault` it runs the fault's unchanged
:class:`~perfsuite.harness.faults.catalog.Reference` and the fault, in the same session, and
passes both Results through the one verdict engine
(:func:`perfsuite.judge.engine.compare_results`, the code users run through the
plugin and ``perfsuite compare``). A fault is caught when the engine fails
its signal metric: exact metrics exactly (syncs_per_step rises with its new
call site, amp_lowp_frac falls, graph_breaks becomes unavailable because
nothing compiles, bytes copied grow), statistical ones by the metric's own
sample rule (epoch-start fetches, per-sample step time).

A/A: the unchanged reference, run again, goes through the very same
:func:`decide` for every fault on that reference; any catch is a false alarm.
The Results themselves are recorded (tests/faults/data/), so the table is
regenerated from them through the engine and a test fails if the two ever
disagree. ``scripts/catch_table.py`` runs this and writes the table into docs/catch.md.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.core import metrics
from perfsuite.core.results import Result
from perfsuite.core.tmpfiles import write_text_atomic
from perfsuite.errors import PerfsuiteError
from perfsuite.harness.faults.catalog import FAULTS, REFERENCES, Fault, Reference
from perfsuite.judge.engine import compare_results

NOT_HERE = "not verified here: needs a CUDA GPU"
SCHEMA = 2


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
        return cls(**{f.name: data.get(f.name) for f in dataclasses.fields(cls)})  # type: ignore[arg-type]


# --------------------------------------------------------------------------- running


def spec_for(
    ref: Reference, *, device: str = "cpu", fault: Fault | None = None, cache_dir: Path | None = None, seed: int = 0
) -> Any:
    """The RunSpec of a reference, with a fault injected if given."""
    from perfsuite.harness.runner import RunSpec

    knobs = ref.knobs(device)
    if fault is not None:
        missing = fault.applies_to(knobs)
        if missing:
            raise PerfsuiteError(missing)
        knobs = fault.apply(knobs)
    return RunSpec(
        ref.workload,
        "smoke",
        knobs,
        steps=ref.steps,
        warmup=ref.warmup,
        observe_steps=ref.observe_steps,
        seed=seed,
        cache_dir=cache_dir,
        mutate=fault.mutate if fault and fault.mutation else None,
    )


def run_reference(
    ref: Reference | str,
    *,
    device: str = "cpu",
    fault: Fault | str | None = None,
    cache_dir: Path | None = None,
    probes: Sequence[Any] | None = None,
) -> Result:
    """Run a reference (or a fault applied to it) with every probe attached; on its ranks if it has several."""
    from perfsuite.harness.runner import run

    ref = REFERENCES[ref] if isinstance(ref, str) else ref
    fault = FAULTS[fault] if isinstance(fault, str) else fault
    if ref.nproc > 1:
        (result,) = run_references([("run", ref, fault)], device=device, cache_dir=cache_dir).values()
        return result
    return run(spec_for(ref, device=device, fault=fault, cache_dir=cache_dir), probes)


def run_references(
    items: Sequence[tuple[str, Reference, Fault | None]],
    *,
    device: str = "cpu",
    cache_dir: Path | None = None,
    log: Callable[[str], None] = lambda s: None,
) -> dict[str, Result]:
    """Run each (key, reference, fault), one by one; those on several ranks together, in one launch per rank count.

    A launch costs seconds of process start-up per rank, so the runs of the ddp references (their faults and
    A/A runs included) share one; each still builds its job afresh and is merged on its own.
    """
    import dataclasses as dc

    from perfsuite.harness.ranks.launch import launch, rank_run

    out: dict[str, Result] = {}
    by_nproc: dict[int, list[tuple[str, Any]]] = {}
    for key, ref, fault in items:
        if ref.nproc <= 1:
            log(key)
            out[key] = run_reference(ref, device=device, fault=fault, cache_dir=cache_dir)
            continue
        spec = dc.replace(spec_for(ref, device=device, fault=fault, cache_dir=cache_dir), mutate=None)
        faults = (fault.name,) if fault is not None and fault.mutation is not None else ()
        by_nproc.setdefault(ref.nproc, []).append((key, rank_run(spec, faults)))
    for nproc, runs in by_nproc.items():
        log(f"{len(runs)} run(s) on {nproc} ranks: {', '.join(k for k, _ in runs)}")
        results = launch([r for _, r in runs], nproc, device=device)
        out.update({key: result for (key, _), result in zip(runs, results)})
    return {key: out[key] for key, _, _ in items}


def refusal(fault: Fault, *, device: str = "cpu", cache_dir: Path | None = None) -> str | None:
    """The message perfsuite's validation gives for the fault's config form, or None if it is accepted."""
    if not fault.refused:
        return None
    from perfsuite.harness.runner import run

    ref = REFERENCES[fault.reference]
    try:
        knobs = ref.knobs(device).replace(**fault.refused)
        spec = dataclasses.replace(
            spec_for(ref, device=device, cache_dir=cache_dir), knobs=knobs, steps=2, warmup=0, observe_steps=0
        )
        run(spec, probes=[])  # build_pipeline refuses before anything heavy happens
    except PerfsuiteError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


# --------------------------------------------------------------------------- deciding


def decide(fault: Fault, base: Result, head: Result) -> Catch:
    """Is ``head`` (the fault's run) caught against ``base`` (the unchanged run)?

    Caught means the shipped engine, :func:`perfsuite.judge.engine.compare_results`
    (what the plugin and ``perfsuite compare`` run), fails the fault's signal
    metric. There is no second rule book here.
    """
    verdicts = compare_results(base, head, fault.name, force=True)
    verdict = next((v for v in verdicts if v.metric == fault.signal), None)
    if verdict is None:
        b, h = base.metric(fault.signal), head.metric(fault.signal)
        return Catch(
            fault.name,
            fault.signal,
            fault.device,
            False,
            f"not caught: {fault.signal} unavailable on both sides ({h.reason or b.reason})",
        )
    label = metrics.family(fault.signal)
    if verdict.failed:
        message = f"{label}: {verdict.message} ({fault.cause})"
    else:
        message = f"not caught ({verdict.outcome}): {verdict.message}"
    return Catch(
        fault.name, fault.signal, fault.device, verdict.failed, message, _plain(verdict.base), _plain(verdict.head)
    )


def _plain(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4) if math.isfinite(value) else None
    return value


# --------------------------------------------------------------------------- the self-test


@dataclass
class CatchReport:
    """Every fault's catch and the A/A record of each reference, from one session on one machine."""

    catches: dict[str, Catch] = field(default_factory=dict)
    aa: dict[str, dict[str, Any]] = field(default_factory=dict)
    machine: str = ""
    device: str = "cpu"
    references: dict[str, dict[str, Any]] = field(default_factory=dict)
    results: dict[str, Result] = field(default_factory=dict)  # "ref:<name>", "fault:<name>", "aa:<ref>:<i>"
    schema: int = SCHEMA

    @property
    def aa_runs(self) -> int:
        return min((a["runs"] for a in self.aa.values()), default=0)

    @property
    def false_alarms(self) -> int:
        return sum(a["false_alarms"] for a in self.aa.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "machine": self.machine,
            "device": self.device,
            "references": {n: self.references[n] for n in sorted(self.references)},
            "catches": {n: c.to_dict() for n, c in sorted(self.catches.items())},
            "aa": {n: self.aa[n] for n in sorted(self.aa)},
            "results": {k: self.results[k].to_dict() for k in sorted(self.results)},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CatchReport:
        if data.get("schema") != SCHEMA:
            raise PerfsuiteError(
                f"catch results schema {data.get('schema')!r}; regenerate with `python scripts/catch_table.py --run`"
            )
        return cls(
            {n: Catch.from_dict(c) for n, c in data["catches"].items()},
            dict(data["aa"]),
            data.get("machine", ""),
            data.get("device", "cpu"),
            dict(data.get("references", {})),
            {k: Result.from_dict(r) for k, r in data.get("results", {}).items()},
        )

    def save(self, path: Path) -> None:
        write_text_atomic(path, json.dumps(self.to_dict(), sort_keys=False) + "\n")

    @classmethod
    def load(cls, path: Path) -> CatchReport:
        return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))


def rejudge(report: CatchReport) -> CatchReport:
    """The report with every catch and A/A record decided again from its recorded Results, by today's engine."""
    catches = dict(report.catches)
    for name, catch in report.catches.items():
        fault = FAULTS.get(name)
        base, head = (
            report.results.get(f"ref:{fault.reference}") if fault else None,
            report.results.get(f"fault:{name}"),
        )
        if fault is not None and base is not None and head is not None:
            catches[name] = dataclasses.replace(decide(fault, base, head), refused=catch.refused)
    aa = {
        ref: _aa_record(ref, report.results, [FAULTS[n] for n in rec["faults"] if n in FAULTS])
        for ref, rec in report.aa.items()
    }
    return dataclasses.replace(report, catches=catches, aa=aa)


def _aa_record(ref: str, results: Mapping[str, Result], faults: Sequence[Fault]) -> dict[str, Any]:
    """The A/A record of one reference: its recorded re-runs through the same decisions as its faults."""
    record: dict[str, Any] = {"runs": 0, "false_alarms": 0, "alarms": [], "faults": [f.name for f in faults]}
    base = results.get(f"ref:{ref}")
    i = 1
    while base is not None and f"aa:{ref}:{i}" in results:
        record["runs"] += 1
        for fault in faults:
            catch = decide(fault, base, results[f"aa:{ref}:{i}"])
            if catch.caught:
                record["false_alarms"] += 1
                record["alarms"].append({"run": i, "fault": fault.name, "message": catch.message})
        i += 1
    return record


def runnable(fault: Fault, device: str) -> bool:
    """A ``gpu`` fault is verified only on a CUDA device."""
    return fault.device == "cpu" or device.startswith("cuda")


def self_test(
    names: Iterable[str] | None = None,
    *,
    device: str = "cpu",
    aa_runs: int = 5,
    cache_dir: Path | None = None,
    log: Callable[[str], None] = lambda s: None,
) -> CatchReport:
    """Run each reference once, each fault once, then ``aa_runs`` more runs of each reference (A/A)."""
    from perfsuite.core.results import Fingerprint

    faults = [FAULTS[n] for n in (names or FAULTS)]
    report = CatchReport(machine=Fingerprint.collect(device).key(), device=device)
    todo = [f for f in faults if runnable(f, device)]
    refs = sorted({f.reference for f in todo})
    report.references = {r: describe_reference(REFERENCES[r]) for r in refs}
    items: list[tuple[str, Reference, Fault | None]] = [(f"ref:{r}", REFERENCES[r], None) for r in refs]
    items += [(f"fault:{f.name}", REFERENCES[f.reference], f) for f in todo]
    items += [(f"aa:{r}:{i + 1}", REFERENCES[r], None) for r in refs for i in range(aa_runs)]
    report.results.update(run_references(items, device=device, cache_dir=cache_dir, log=log))
    for fault in faults:
        refused = refusal(fault, device=device, cache_dir=cache_dir)
        if not runnable(fault, device):
            report.catches[fault.name] = Catch(
                fault.name, fault.signal, fault.device, None, f"{NOT_HERE} ({fault.why_device})", refused=refused
            )
            continue
        base, head = report.results[f"ref:{ref_of(fault)}"], report.results[f"fault:{fault.name}"]
        report.catches[fault.name] = dataclasses.replace(decide(fault, base, head), refused=refused)
    for ref in refs:
        report.aa[ref] = _aa_record(ref, report.results, [f for f in todo if f.reference == ref])
    return report


def ref_of(fault: Fault) -> str:
    return fault.reference


def describe_reference(ref: Reference) -> dict[str, Any]:
    """What a recorded self-test ran as a reference: a stale record shows up as a difference."""
    return {
        "workload": ref.workload,
        "knobs": dict(ref.flat),
        "steps": ref.steps,
        "warmup": ref.warmup,
        "observe_steps": ref.observe_steps,
        **({"nproc": ref.nproc} if ref.nproc > 1 else {}),
    }


# --------------------------------------------------------------------------- the table


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_table(report: CatchReport) -> str:
    """The catch table (markdown): one row per catalog fault, A/A figures above it."""
    aa = ", ".join(
        f"{name} {a['runs']} runs / {a['false_alarms']} false alarms" for name, a in sorted(report.aa.items())
    )
    lines = [
        f"Generated by `python scripts/catch_table.py --run` on `{report.machine}` (device {report.device}): "
        "each row is the verdict of `perfsuite.judge.engine.compare_results` (the engine the plugin and "
        "`perfsuite compare` run) on the recorded base and fault Results; `tests/faults/test_catalog.py` "
        "re-judges them and fails if the table and the engine disagree. Do not edit by hand.",
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
            # A row not run here says why from today's catalog, so a reason revised since the record shows.
            message = fault.why_device if fault.device == "gpu" else (catch.message if catch else "")
        else:
            caught = "yes" if catch.caught else "**no**"
            message = catch.message
        if catch is not None and catch.refused:
            message += f" Config form refused up front: {catch.refused.splitlines()[0][:160]}"
        lines.append(
            "| "
            + " | ".join(
                _cell(c)
                for c in (
                    f"`{name}`",
                    fault.seed,
                    f"`{fault.change}`",
                    f"`{fault.signal}` ({fault.rule})",
                    fault.device,
                    caught,
                    message,
                )
            )
            + " |"
        )
    return "\n".join(lines) + "\n"


START, END = "<!-- catch-table:start -->", "<!-- catch-table:end -->"


def splice(readme: str, table: str) -> str:
    """The page's text with the table between the markers (the section is appended if the markers are missing)."""
    block = f"{START}\n{table}{END}"
    if START in readme and END in readme:
        head, rest = readme.split(START, 1)
        return head + block + rest.split(END, 1)[1]
    sep = "" if not readme or readme.endswith("\n\n") else ("\n" if readme.endswith("\n") else "\n\n")
    intro = (
        "What perfsuite catches of the seeds' bugs (`perfsuite/harness/faults/catalog.py`, `perfsuite/tools/catch.py`)."
    )
    return f"{readme}{sep}## Catch table\n\n{intro}\n\n{block}\n"


def current_table(readme: str) -> str | None:
    if START not in readme or END not in readme:
        return None
    return readme.split(START, 1)[1].split(END, 1)[0].lstrip("\n")
