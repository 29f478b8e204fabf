"""``tune()``: the reference run, the memory guard, the climbs, the thresholds; then :func:`lock_in` writes them.

A library function first (tests and scripts call it with a planted job), ``perfsuite tune`` second.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.core.results import Fingerprint
from perfsuite.core.units import metric_value
from perfsuite.judge.contention import Load
from perfsuite.tools.tune.busy import read_machine, too_busy
from perfsuite.tools.tune.guard import MB, Footprint, Free, Guard, free_now
from perfsuite.tools.tune.lockin import thresholds_from, tune_file_path, write_thresholds, write_tune_file
from perfsuite.tools.tune.progress import Quiet, trial_line
from perfsuite.tools.tune.records import RunRecord, Summary, Trial, label, summarize
from perfsuite.tools.tune.search import Interrupted, Search, SearchConfig, worker_ladder
from perfsuite.tools.tune.targets import Target, TuneError

SCHEMA = 1
# What --require may bound: the figures every trial run records.
REQUIRABLE = {"samples_per_s": "samples_per_s", "data_wait_frac": "data_wait_frac", "peak_rss_mb": "peak_rss_mb"}


@dataclass
class TuneReport:
    """What one tuning session found; :meth:`to_dict` is the tune file."""

    target: str
    kind: str
    device: str
    test_key: str
    fingerprint: Fingerprint
    config: SearchConfig
    start: dict[str, Any]
    chosen: dict[str, Any]
    search: Search
    chosen_summary: Summary
    thresholds: dict[str, float]
    threshold_notes: list[str]
    guard: str
    cores: str
    elapsed_s: float
    stopped: str
    load: dict[str, list[float]] = field(default_factory=dict)
    unmet: list[str] = field(default_factory=list)
    not_written: str | None = None  # why nothing may be written: no step decided (:func:`not_measured`)

    @property
    def machine(self) -> str:
        """The machine class the plugin's thresholds are keyed by."""
        return self.fingerprint.machine_class

    @property
    def interrupted(self) -> bool:
        return self.stopped.startswith("interrupted")

    def tuned_knobs(self) -> dict[str, Any]:
        """The knobs chosen, batch_size only when it was searched (otherwise it is the recipe's, not tune's)."""
        return {k: v for k, v in self.chosen.items() if k != "batch_size" or self.config.batch}

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        s = self.search
        return {
            "schema_version": SCHEMA,
            "tool": "perfsuite tune",
            "target": {"name": self.target, "kind": self.kind, "device": self.device, "test": self.test_key},
            "fingerprint": asdict(self.fingerprint),
            "fingerprint_key": self.fingerprint.key(),
            "machine_class": self.machine,
            "chosen": self.tuned_knobs(),
            "chosen_summary": self.chosen_summary.to_dict(),
            "started_from": self.start,
            "batch_searched": self.config.batch,
            "thresholds": self.thresholds,
            "threshold_notes": self.threshold_notes,
            "rule": {
                "statistic": "window seconds per sample (1 / samples_per_s) per run",
                "factor": self.config.rule.factor,
                "margin": self.config.rule.margin,
                "alpha": self.config.rule.alpha,
                "confidence": self.config.rule.confidence,
                "min_pairs": self.config.rule.min_pairs,
                "min_rounds": self.config.min_rounds,
                "max_rounds": self.config.max_rounds,
            },
            "trials": [t.to_dict() for t in s.trials],
            "not_tried": s.not_tried,
            "notes": s.notes,
            "confirmation_runs": [r.to_dict() for r in s.extra_runs],
            "guard": self.guard,
            "cores": self.cores,
            "load_average": self.load,
            "elapsed_s": round(self.elapsed_s, 1),
            "stopped": self.stopped,
            "unmet": self.unmet,
            "not_written": self.not_written,
        }


def _footprint(ref: RunRecord) -> Footprint:
    batch = int(ref.knobs.get("batch_size") or 0)
    per_sample = ref.batch_bytes / batch if ref.batch_bytes and batch else None
    if ref.worker_processes and ref.workers_mb:
        rss, source = ref.workers_mb / ref.worker_processes * MB, "measured per worker"
    elif ref.peak_rss_mb:
        rss, source = ref.peak_rss_mb * MB, "no worker measured: the whole process's RSS, an upper bound"
    else:
        rss, source = 0.0, "unmeasured (no /proc): the guard checks batches only"
    return Footprint(per_sample, rss, source)


def _reference(target: Target, ladder: Sequence[int]) -> RunRecord:
    """The job as it is (also the sizing run); if it fails, each worker count once. None running: TuneError."""
    errors = []
    for setting in [None, *({"num_workers": n} for n in ladder)]:
        record = target.run(setting, reference=True)
        if record.ok:
            return record
        errors.append(f"{'as it is' if setting is None else label(setting)}: {record.error}")
    raise TuneError(
        f"{target.name} failed at every setting tried, so there is nothing to tune:\n  " + "\n  ".join(errors)
    )


def tune(
    target: Target,
    config: SearchConfig,
    *,
    free: Callable[[], Free] = free_now,
    machine: Callable[[], Load] = read_machine,
    progress: Any = None,
    required: Mapping[str, float] | None = None,
    cores: str = "",
) -> TuneReport:
    """Search ``target``'s loader knobs (and batch size when ``config.batch``); see perfsuite.tools.tune.search.

    ``machine`` reads how busy the machine is (:func:`perfsuite.tools.tune.busy.read_machine`), asked when the
    reference run was contended: a machine still busy stops tune before its budget is spent."""
    progress = progress or Quiet()
    started = time.perf_counter()
    load = {"start": list(os.getloadavg())} if hasattr(os, "getloadavg") else {}
    checks = _required(required or {})
    progress.update(f"{target.name}: the reference run (as it is)")
    ref = _reference(target, worker_ladder(config.max_workers))
    start = dict(ref.knobs)
    guard = Guard(_footprint(ref), free)
    search = Search(target.run, guard, config, dict(start), progress, demand=ref.demand_samples_per_s)
    search.started = started
    stopped = "done: no further step was a measured gain"
    busy_now = too_busy(ref.contended, machine(), config.budget_s) if ref.contended else None
    try:
        if busy_now is None:  # a busy machine: nothing is run (tools.tune.busy), the report says what it would take
            search.workers()
            search.loader()
            if config.batch:
                search.batch()
            search.confirm()
    except KeyboardInterrupt:
        stopped = "interrupted (Ctrl-C): kept the best setting found so far"
    except Interrupted as exc:
        stopped = f"stopped: {exc}; kept the best setting found so far"
    finally:
        progress.close()
    undecided = [t for t in search.trials if not t.gain and (t.effect_without_gain or t.arms_apart())]
    if stopped.startswith("done") and undecided:  # never "no gain" beside intervals that exclude 1 or do not overlap
        stopped = "done: no further step was decided a gain, but " + "; ".join(map(_apart, undecided))
    unmeasured = busy_now or not_measured(search.trials, config)
    if unmeasured:
        stopped = f"not tuned: {unmeasured}"
    runs = search.runs_of(search.current)
    bounds, notes = thresholds_from(runs)
    busy = [r.contended for r in runs if r.contended]
    if bounds and busy:  # a threshold from a busy machine is written only with that said
        notes.append(
            f"the thresholds come from {len(busy)} of {len(runs)} runs on a contended machine ({busy[0]}): they "
            "describe a busy machine, looser than a quiet one gives; run tune again on a quiet machine"
        )
    if load:
        load["end"] = list(os.getloadavg())
    report = TuneReport(
        target=target.name,
        kind=target.kind,
        device=target.device,
        test_key=target.test_key,
        fingerprint=Fingerprint.collect(target.device),
        config=config,
        start=start,
        chosen=dict(search.current),
        search=search,
        chosen_summary=summarize(runs),
        thresholds=bounds,
        threshold_notes=notes,
        guard=guard.describe(),
        cores=cores,
        elapsed_s=time.perf_counter() - started,
        stopped=stopped,
        load=load,
        not_written=unmeasured,
    )
    report.unmet = _unmet(checks, runs)
    return report


def _apart(trial: Trial) -> str:
    """``persistent_workers False -> True: 44.3 [41..47.7] vs 57.7 [50.6..63] samples/s (...)``: measured apart."""
    base, head = summarize(trial.base_runs), summarize(trial.head_runs)
    why = (
        f"{trial.contended} contended run(s) not counted in its pairs"
        if trial.contended
        else "its rounds did not decide it: more --max-rounds would"
    )
    return f"{trial_line(trial)}: {base.text()} vs {head.text()} measured apart ({why})"


def not_measured(trials: Sequence[Trial], config: SearchConfig) -> str | None:
    """Why tune may write nothing: it ran steps and not one was decided (None when one was, or none ran).

    A busy machine drops every pair (perfsuite.judge.contention), and the setting tune would write is then
    the cheapest it starts from, never measured against the job's own: writing it would change the job on
    no evidence.
    """
    if not trials or any(t.decided for t in trials):
        return None
    runs = sum(len(t.base_runs) + len(t.head_runs) for t in trials)
    contended = sum(t.contended for t in trials)
    if contended:
        return (
            f"the machine was busy: {contended} of the {runs} runs of {len(trials)} step(s) ran while other "
            "processes took the cores (perfsuite.judge.contention), so their pairs were not counted and no step "
            "was decided; nothing was written. Run tune again when the machine is quiet (`uptime`'s load "
            "average below the usable cores, no build or test beside it), or on the runner that gates"
        )
    return (
        f"no step was decided within --max-rounds {config.max_rounds} ({runs} runs of {len(trials)} step(s)); "
        "nothing was written. Give the steps more rounds (--max-rounds, --budget) or a larger --delta"
    )


def _required(required: Mapping[str, float]) -> list[Any]:
    from perfsuite.judge.thresholds import parse_threshold

    checks = [parse_threshold(name, bound) for name, bound in required.items()]
    for check in checks:
        if check.metric not in REQUIRABLE:
            raise TuneError(
                f"--require {check.name}: tune measures {', '.join(REQUIRABLE)} in every run; bound one of those"
            )
    return checks


def _unmet(checks: Sequence[Any], runs: Sequence[RunRecord]) -> list[str]:
    out = []
    for check in checks:
        values = sorted(v for r in runs if (v := getattr(r, REQUIRABLE[check.metric])) is not None)
        if not values:
            out.append(f"{check.name}: not measured in the chosen setting's runs")
            continue
        median = values[len(values) // 2]
        if check.fails(median):
            out.append(
                f"{check.name}={check.bound:g}: the best setting found reaches {metric_value(check.metric, median)} "
                "(median of its runs)"
            )
    return out


# --------------------------------------------------------------------------------------------- lock in


@dataclass
class LockIn:
    tune_file: Path | None = None
    thresholds: str | None = None
    skipped: list[str] = field(default_factory=list)


def lock_in(
    report: TuneReport,
    out_root: Path,
    pyproject: Path | None,
    force: bool = False,
    out_file: Path | None = None,
) -> LockIn:
    """Write the tune file and (unless ``pyproject`` is None) the thresholds; an unmet bound writes nothing."""
    done = LockIn()
    if report.unmet:
        done.skipped.append("nothing written: a required bound was not met")
        return done
    if report.not_written:  # nothing measured: neither the tune file nor the thresholds (the report says why)
        return done
    path = out_file or tune_file_path(out_root, report.fingerprint.key(), report.target)
    done.tune_file = write_tune_file(path, report.to_dict(), overwrite=force)
    if pyproject is None:
        done.skipped.append("thresholds not written (--no-thresholds)")
    elif not report.thresholds:
        done.skipped.append("thresholds not written: " + "; ".join(report.threshold_notes))
    else:
        done.thresholds = write_thresholds(
            pyproject,
            report.machine,
            report.test_key,
            report.thresholds,
            report.tuned_knobs(),
            f"{path.as_posix()} ({time.strftime('%Y-%m-%d')})",
            overwrite=force,
        )
    return done


# --------------------------------------------------------------------------------------------- for people


def format_report(report: TuneReport) -> str:
    """What the terminal shows at the end: the choice, each trial with its interval, what was not tried, the bounds."""
    s = report.search
    lines = [
        f"perfsuite tune {report.target} ({report.kind}) on {report.machine}, device {report.device}, "
        f"{report.elapsed_s:.0f} s: {report.stopped if not report.not_written else 'not tuned'}",
        f"  started from: {label(report.start)}",
    ]
    if report.not_written:  # nothing chosen, nothing bounded: the job keeps its own settings
        lines.append(f"  NOT TUNED: {report.not_written}")
    else:
        lines.append(f"  chosen:       {label(report.chosen)}  ->  {report.chosen_summary.text()}")
    if report.config.batch:
        lines.append("  batch_size was searched (--batch): it changes the training recipe (learning rate, schedule)")
    lines.append(
        f"  each step: rounds of 4 fresh runs (ABBA/BAAB), window time per sample; a gain is faster than "
        f"x{report.config.rule.factor:g} with signed-rank p < {report.config.rule.alpha:g}"
    )
    for trial in s.trials:
        base, head = summarize(trial.base_runs), summarize(trial.head_runs)
        lines.append(f"  - {trial_line(trial)}")
        lines.append(f"      {label(trial.base, [trial.knob])}: {base.text()}")
        lines.append(f"      {label(trial.head, [trial.knob])}: {head.text()}")
        if trial.note:
            lines.append(f"      {trial.note}")
    for item in s.not_tried:
        lines.append(f"  - {item['knob']}={item['value']} not tried: {item['why']}")
    lines += [f"  note: {n}" for n in s.notes]
    if report.thresholds and not report.not_written:
        bounds = ", ".join(f"{k} = {v:g}" for k, v in report.thresholds.items())
        lines.append(f"  thresholds for {report.test_key!r} on {report.machine!r}: {bounds}")
    if not report.not_written:
        lines += [f"  {n}" for n in report.threshold_notes]
    lines.append(f"  {report.guard}")
    if report.cores:
        lines.append(f"  cores: {report.cores}")
    if report.load:
        lines.append(
            "  load average (1/5/15 min): "
            + "; ".join(f"{k} {' '.join(f'{x:.2f}' for x in v)}" for k, v in report.load.items())
        )
    for unmet in report.unmet:
        lines.append(f"  NOT MET: {unmet}")
    return "\n".join(lines)


def suggested_test(report: TuneReport) -> str:
    """The perf test the thresholds are for, when the target was a workload or a job rather than a test."""
    import json

    knobs = ", ".join(f"{k}={json.dumps(v) if isinstance(v, str) else v!r}" for k, v in report.tuned_knobs().items())
    return (
        f"def {report.test_key}(perf_run):\n"
        f"    # bounds: [tool.perfsuite.thresholds] in pyproject.toml, written by perfsuite tune\n"
        f"    perf_run({json.dumps(report.target)}, {knobs})"
    )
