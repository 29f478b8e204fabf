"""Result, Metric and Fingerprint: plain data, JSON with a schema version.

A Result is what one run of a workload produced: the knobs it ran with, each
metric by its one name (declared in :mod:`perfsuite.core.metrics`), the raw per-step samples that the
statistical verdicts need, and the environment fingerprint that decides which
baselines it may be compared with. ``Result.from_json(r.to_json()) == r``.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from perfsuite.core import metrics as metric_specs
from perfsuite.errors import ResultError

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Metric:
    """One measured value, or the reason it could not be measured here.

    value None means unavailable, and ``reason`` says why ("no NVML: ...").
    ``detail`` holds structured extras: percentiles for step_ms, call sites
    for syncs_per_step, break reasons for graph_breaks.
    """

    name: str
    value: float | int | bool | str | None
    unit: str = ""
    reason: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.value is None and not self.reason:
            raise ResultError(f"metric {self.name!r} is unavailable but gives no reason; pass reason='...'")
        if isinstance(self.value, float) and math.isnan(self.value):
            raise ResultError(f"metric {self.name!r} is NaN; report it unavailable with a reason instead")
        if isinstance(self.value, float) and math.isinf(self.value):
            raise ResultError(
                f"metric {self.name!r} is {self.value}; a measurement is finite: report it "
                "unavailable with a reason instead"
            )

    @property
    def available(self) -> bool:
        return self.value is not None

    @classmethod
    def unavailable(cls, name: str, reason: str, unit: str = "") -> Metric:
        return cls(name=name, value=None, unit=unit, reason=reason)

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "unit": self.unit, "reason": self.reason, "detail": self.detail}

    @classmethod
    def from_dict(cls, name: str, data: Any, field_path: str | None = None) -> Metric:
        """A Metric from its JSON object; ResultError naming the field (``metrics.<name>.value``) if malformed."""
        where = field_path or f"metrics.{name}"
        _need(isinstance(data, dict), where, data, "an object with 'value', 'unit', 'reason' and 'detail'")
        _no_unknown(data, ("value", "unit", "reason", "detail"), where)
        value = data.get("value")
        spec = metric_specs.find(name)
        kind = spec.kind if spec else None
        if kind == "flag":
            _need(value is None or isinstance(value, bool), f"{where}.value", value, "true, false or null")
        elif kind == "label" or (kind is None and isinstance(value, (str, bool))):
            _need(value is None or isinstance(value, (str, bool)), f"{where}.value", value, "a string or null")
        elif value is not None:
            value = _number(value, f"{where}.value")
            if kind == "exact":
                _need(value >= 0, f"{where}.value", value, "a count >= 0")
        unit = data.get("unit", "")
        _need(isinstance(unit, str), f"{where}.unit", unit, "a string")
        reason = data.get("reason")
        _need(reason is None or isinstance(reason, str), f"{where}.reason", reason, "a string or null")
        _need(
            value is not None or bool(reason),
            f"{where}.reason",
            reason,
            "a non-empty string saying why the metric is unavailable (its value is null)",
        )
        detail = data.get("detail") or {}
        _need(isinstance(detail, dict), f"{where}.detail", detail, "an object")
        return cls(name=name, value=value, unit=unit, reason=reason, detail=detail)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-").lower() or "unknown"


@dataclass(frozen=True)
class Fingerprint:
    """The environment a result came from. Baselines compare only within one key."""

    device: str
    gpu_model: str | None
    gpu_count: int
    driver: str | None
    cuda: str | None
    torch: str
    kornia: str | None
    python: str
    cpu_model: str
    cpu_cores: int
    platform: str

    def key(self) -> str:
        """Directory name under baselines/: the GPU model (or CPU), torch and CUDA versions."""
        hardware = self.gpu_model if self.gpu_model else f"cpu-{self.cpu_model}-{self.cpu_cores}c"
        return "__".join([_slug(hardware), f"torch-{_slug(self.torch)}", f"cuda-{_slug(self.cuda or 'none')}"])

    @property
    def machine_class(self) -> str:
        """What per-machine thresholds are keyed by (``[tool.perfsuite.thresholds]``): "cpu", or the GPU model."""
        return self.gpu_model or "cpu"

    @classmethod
    def collect(cls, device: str = "cpu") -> Fingerprint:
        """Read the fingerprint of this machine, for a run on ``device``."""
        import torch

        gpu_model = driver = None
        gpu_count = 0
        if device.startswith("cuda") and torch.cuda.is_available():
            index = torch.device(device).index or 0
            gpu_model = torch.cuda.get_device_name(index)
            gpu_count = torch.cuda.device_count()
            driver = _nvidia_driver()
        try:
            import kornia

            kornia_version: str | None = kornia.__version__
        except ImportError:
            kornia_version = None
        return cls(
            device=device,
            gpu_model=gpu_model,
            gpu_count=gpu_count,
            driver=driver,
            cuda=torch.version.cuda,
            torch=_torch_version(torch),
            kornia=kornia_version,
            python=platform.python_version(),
            cpu_model=_cpu_model(),
            cpu_cores=os.cpu_count() or 1,
            platform=platform.platform(terse=True),
        )


def _torch_version(torch: Any) -> str:
    """torch's version; a CPU build's local tag ('+cpu') is dropped, since cuda=None says it already."""
    return torch.__version__ if torch.version.cuda else torch.__version__.split("+")[0]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _nvidia_driver() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
            return version.decode() if isinstance(version, bytes) else version
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - the driver version is informative only
        return None


@dataclass(frozen=True)
class RankResult:
    """One rank's own figures in a run on several ranks (perfsuite.harness.ranks.launch).

    ``metrics`` are what that rank measured (its step_ms with p50 and p95, its
    data_wait_frac, syncs_per_step and every exact counter); ``samples`` its raw
    per-step series (step_ms, fetch_ms, data_wait, and the phases of each step
    the straggler analysis reads). ``pid`` and ``threads``/``workers`` say which
    process it was and what it ran with.
    """

    rank: int
    metrics: dict[str, Metric]
    samples: dict[str, list[float]] = field(default_factory=dict)
    pid: int = 0
    threads: int = 0
    workers: int = 0

    def metric(self, name: str) -> Metric:
        if name in self.metrics:
            return self.metrics[name]
        return Metric.unavailable(name, f"rank {self.rank} did not measure {name}")

    def value(self, name: str) -> Any:
        return self.metric(name).value

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "pid": self.pid,
            "threads": self.threads,
            "workers": self.workers,
            "metrics": {name: m.to_dict() for name, m in self.metrics.items()},
            "samples": {k: list(v) for k, v in self.samples.items()},
        }

    @classmethod
    def from_dict(cls, data: Any, where: str) -> RankResult:
        _need(isinstance(data, dict), where, data, "an object with rank, metrics and samples")
        _no_unknown(data, ("rank", "pid", "threads", "workers", "metrics", "samples"), where)
        metrics = data.get("metrics", {})
        _need(isinstance(metrics, dict), f"{where}.metrics", metrics, "an object of metric name -> {value, ...}")
        return cls(
            rank=_count(data.get("rank", _MISSING), f"{where}.rank", 0),
            metrics={n: Metric.from_dict(n, m, f"{where}.metrics.{n}") for n, m in metrics.items()},
            samples=_series(data.get("samples", {}), f"{where}.samples"),
            pid=_count(data.get("pid", 0), f"{where}.pid", 0),
            threads=_count(data.get("threads", 0), f"{where}.threads", 0),
            workers=_count(data.get("workers", 0), f"{where}.workers", 0),
        )


@dataclass(frozen=True)
class ScriptStop:
    """Where perfsuite stopped a user's script (``perfsuite exec``), and what it left out of the script's run.

    The script ran ``batches`` training steps (over ``epochs`` epochs begun) and was stopped when it asked its
    training loader for the next batch, so nothing it would have done after (a later checkpoint, the rest of that
    epoch) ran. ``not_run``: perfsuite's phases a script does not get, each with why (the speed of light:
    :data:`perfsuite.harness.state.SCRIPT_NO_SOL`).
    """

    batches: int
    epochs: int
    not_run: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        """One line for the report."""
        left = "; ".join(f"{phase} {why}" for phase, why in self.not_run.items())
        return (
            f"the script was stopped when it asked for training batch {self.batches + 1} (epoch {self.epochs}), "
            f"after {self.batches} steps: nothing it would do after that ran (a later checkpoint)"
            + (f"; {left}" if left else "")
        )

    def to_dict(self) -> dict[str, Any]:
        return {"batches": self.batches, "epochs": self.epochs, "not_run": dict(self.not_run)}

    @classmethod
    def from_dict(cls, data: Any, where: str = "script") -> ScriptStop:
        _need(isinstance(data, dict), where, data, "an object with batches, epochs and not_run")
        _no_unknown(data, ("batches", "epochs", "not_run"), where)
        not_run = data.get("not_run", {})
        _need(
            isinstance(not_run, dict) and all(isinstance(v, str) for v in not_run.values()),
            f"{where}.not_run",
            not_run,
            "an object of phase -> why it was not run",
        )
        return cls(
            batches=_count(data.get("batches", _MISSING), f"{where}.batches", 0),
            epochs=_count(data.get("epochs", _MISSING), f"{where}.epochs", 0),
            not_run=dict(not_run),
        )


@dataclass(frozen=True)
class Phase:
    """One phase of a run (set-up, warm-up, the window, ...): its wall time and the main process's CPU time, in s.

    CPU time is the perfsuite process's own (every thread of it), not its DataLoader workers': it says how much of
    the phase's wall time the host itself was busy, which is what a GPU waits on when the phase is not measurement.
    """

    name: str
    wall_s: float
    cpu_s: float

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "wall_s": self.wall_s, "cpu_s": self.cpu_s}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Phase:
        _need(isinstance(data, dict), where, data, "an object with name, wall_s and cpu_s")
        _no_unknown(data, ("name", "wall_s", "cpu_s"), where)
        times = {}
        for key in ("wall_s", "cpu_s"):
            value = _number(data.get(key, _MISSING), f"{where}.{key}")
            _need(value >= 0, f"{where}.{key}", value, "seconds >= 0")
            times[key] = float(value)
        return cls(_text(data.get("name", _MISSING), f"{where}.name"), times["wall_s"], times["cpu_s"])


@dataclass(frozen=True)
class PhaseTimes:
    """Where a run's time went, phase by phase in the order each first began (:mod:`perfsuite.harness.phases`).

    The phases tile the run: their wall times sum to the run's wall time (``wall_s``), from the call of
    :func:`perfsuite.harness.runner.run` to its Result.
    """

    phases: tuple[Phase, ...]

    @property
    def wall_s(self) -> float:
        return sum(p.wall_s for p in self.phases)

    @property
    def cpu_s(self) -> float:
        return sum(p.cpu_s for p in self.phases)

    def get(self, name: str) -> Phase | None:
        return next((p for p in self.phases if p.name == name), None)

    def line(self, least_s: float = 0.005, most: int | None = None) -> str:
        """One line: ``12.3 s: set-up 1.10, warm-up 2.00, window 5.00, ...`` (wall seconds); the phases shorter
        than ``least_s`` are counted at the end, not listed (the JSON keeps them all). ``most``: only that many
        of the longest phases, in their order, the others counted."""
        shown = [p for p in self.phases if p.wall_s >= least_s]
        short = len(self.phases) - len(shown)
        if most is not None and len(shown) > most:
            longest = {id(p) for p in sorted(shown, key=lambda p: p.wall_s, reverse=True)[:most]}
            rest = [p for p in shown if id(p) not in longest]
            shown = [p for p in shown if id(p) in longest]
            parts = [f"{p.name} {p.wall_s:.2f}" for p in shown]
            parts.append(f"{len(rest) + short} more ({sum(p.wall_s for p in rest):.2f} s; -v lists them)")
            return f"{self.wall_s:.1f} s: {', '.join(parts)}"
        parts = [f"{p.name} {p.wall_s:.2f}" for p in shown]
        parts += [f"{short} more under {least_s * 1e3:g} ms"] if short else []
        return f"{self.wall_s:.1f} s: {', '.join(parts)}"

    def to_list(self) -> list[dict[str, Any]]:
        return [p.to_dict() for p in self.phases]

    @classmethod
    def summed(cls, runs: Iterable[PhaseTimes | None]) -> PhaseTimes | None:
        """Each phase's total over several runs (a session's), in the order each first appears; None: no run
        recorded its phases."""
        totals: dict[str, list[float]] = {}
        for times in runs:
            for p in times.phases if times is not None else ():
                total = totals.setdefault(p.name, [0.0, 0.0])
                total[0] += p.wall_s
                total[1] += p.cpu_s
        return cls(tuple(Phase(name, wall, cpu) for name, (wall, cpu) in totals.items())) if totals else None

    @classmethod
    def from_list(cls, data: Any, where: str = "phases") -> PhaseTimes:
        _need(isinstance(data, list), where, data, "a list of {name, wall_s, cpu_s}")
        return cls(tuple(Phase.from_dict(item, f"{where}[{i}]") for i, item in enumerate(data)))


@dataclass(frozen=True)
class Result:
    """Everything one run produced. Plain data; see the module docstring."""

    workload: str
    scale: str
    knobs: dict[str, Any]
    metrics: dict[str, Metric]
    samples: dict[str, list[float]]
    fingerprint: Fingerprint
    batch_size: int
    steps: int
    warmup: int
    notes: tuple[str, ...] = ()
    timeline: dict[str, list[float]] = field(default_factory=dict)
    # Where each knob's value came from, for a user's job (perfsuite.jobs.contract): "set by the user's code", "not
    # applied", ... Empty for reference workloads, whose knobs perfsuite set itself.
    knob_sources: dict[str, str] = field(default_factory=dict)
    created: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    schema_version: int = SCHEMA_VERSION
    # A run on several ranks (perfsuite.harness.ranks.launch): each rank's own figures, rank 0 first. The metrics
    # above are then the job's as a whole (see perfsuite.harness.ranks.merge). Empty for a one-process run.
    ranks: tuple[RankResult, ...] = ()
    # What the machine was doing during the run, by concern: "contention" (perfsuite.probes.contention: CPU
    # pressure, steal, neighbours' CPU, run queue, the calibration kernel's speed). JSON values; not judged itself.
    environment: dict[str, Any] = field(default_factory=dict)
    # A user's script (perfsuite exec): where perfsuite stopped it and the phases it does not get. None for a Job.
    script: ScriptStop | None = None
    # How long each phase of the run took (set-up, warm-up, window, ...). None: a Result written before it was kept.
    phases: PhaseTimes | None = None

    def metric(self, name: str) -> Metric:
        """The metric by name; a metric no probe reported is unavailable, with that reason."""
        if name in self.metrics:
            return self.metrics[name]
        return Metric.unavailable(name, f"no probe measured {name} in this run")

    def value(self, name: str) -> Any:
        return self.metric(name).value

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "workload": self.workload,
            "scale": self.scale,
            "created": self.created,
            "batch_size": self.batch_size,
            "steps": self.steps,
            "warmup": self.warmup,
            "knobs": dict(self.knobs),
            **({"knob_sources": dict(self.knob_sources)} if self.knob_sources else {}),
            "metrics": {name: m.to_dict() for name, m in self.metrics.items()},
            "samples": {k: list(v) for k, v in self.samples.items()},
            "timeline": {k: list(v) for k, v in self.timeline.items()},
            "notes": list(self.notes),
            "fingerprint": asdict(self.fingerprint),
            **({"ranks": [r.to_dict() for r in self.ranks]} if self.ranks else {}),
            **({"environment": self.environment} if self.environment else {}),
            **({"script": self.script.to_dict()} if self.script is not None else {}),
            **({"phases": self.phases.to_list()} if self.phases is not None else {}),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    @classmethod
    def from_dict(cls, data: Any) -> Result:
        """A Result from its JSON object. Every field is checked: a malformed one is a ResultError naming it
        (``metrics.step_ms.value``, ``samples.step_ms[3]``) and saying what it must be."""
        _need(isinstance(data, dict), "(top level)", data, "a JSON object (a Result as Result.to_json writes it)")
        version = data.get("schema_version")
        if "schema_version" not in data:
            kind = "a pytest-benchmark file" if {"benchmarks", "machine_info"} <= set(data) else "not a Result"
            raise ResultError(
                f"{kind} (no schema_version): compare it with the tool that wrote it; perfsuite compares the Results "
                "of perfsuite run --out or pytest --perfsuite-save"
            )
        if isinstance(version, bool) or version != SCHEMA_VERSION:
            raise ResultError(
                f"result schema_version={_show(version)} but this perfsuite reads {SCHEMA_VERSION}; "
                "record it again with this perfsuite (perfsuite run --out, or pytest --perfsuite-save)"
            )
        _no_unknown(data, _RESULT_FIELDS, "(top level)")
        for name in (
            "workload",
            "scale",
            "created",
            "knobs",
            "metrics",
            "samples",
            "fingerprint",
            "batch_size",
            "steps",
            "warmup",
        ):
            _need(name in data, name, _MISSING, "present")
        knobs = data["knobs"]
        _need(isinstance(knobs, dict), "knobs", knobs, "an object of knob name -> value")
        for key, value in knobs.items():
            _need(
                value is None or isinstance(value, (str, bool, int, float)),
                f"knobs.{key}",
                value,
                "a string, number, true/false or null",
            )
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                _number(value, f"knobs.{key}")
        metrics = data["metrics"]
        _need(isinstance(metrics, dict), "metrics", metrics, "an object of metric name -> {value, unit, ...}")
        notes = data.get("notes", [])
        _need(isinstance(notes, list) and all(isinstance(n, str) for n in notes), "notes", notes, "a list of strings")
        result = cls(
            workload=_text(data["workload"], "workload"),
            scale=_text(data["scale"], "scale"),
            knobs=dict(knobs),
            metrics={n: Metric.from_dict(n, m) for n, m in metrics.items()},
            samples=_series(data["samples"], "samples"),
            fingerprint=_fingerprint(data["fingerprint"]),
            batch_size=_count(data["batch_size"], "batch_size", 1),
            steps=_count(data["steps"], "steps", 1),
            warmup=_count(data["warmup"], "warmup", 0),
            notes=tuple(notes),
            timeline=_series(data.get("timeline", {}), "timeline"),
            knob_sources=_knob_sources(data.get("knob_sources", {})),
            created=_text(data["created"], "created"),
            schema_version=version,
            ranks=_ranks(data.get("ranks", [])),
            environment=_environment(data.get("environment", {})),
            script=ScriptStop.from_dict(data["script"]) if data.get("script") is not None else None,
            phases=PhaseTimes.from_list(data["phases"]) if data.get("phases") is not None else None,
        )
        from perfsuite.core.schema import check_result

        check_result(data)  # the declared schema: ranges (no negative step_ms) and known metric names
        return result

    @classmethod
    def from_json(cls, text: str | bytes) -> Result:
        return cls.from_dict(parse_json(text, "result"))


# ------------------------------------------------------------------------------------- reading JSON strictly

# What a metric's value may be follows its declared kind (perfsuite.core.metrics): flags are true/false, labels
# strings, exact counts finite numbers >= 0, the rest finite numbers; an undeclared metric may be any of them.
_RESULT_FIELDS = (
    "schema_version",
    "workload",
    "scale",
    "created",
    "batch_size",
    "steps",
    "warmup",
    "knobs",
    "metrics",
    "samples",
    "timeline",
    "notes",
    "fingerprint",
    "knob_sources",
    "ranks",
    "environment",
    "script",
    "phases",
)
_INT_LIMIT = 2**63  # JSON numbers beyond int64 are not measurements; float() of a 400-digit integer overflows
_MISSING = object()


def parse_json(text: str | bytes, what: str) -> Any:
    """Decode JSON strictly: UTF-8 only, no NaN/Infinity tokens; a ResultError saying what ``what`` is otherwise."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ResultError(
                f"{what} is not UTF-8 text (byte {exc.start} is {text[exc.start]:#04x}): is it a "
                "JSON file at all? pass a Result or baseline JSON file"
            ) from None

    def refuse(token: str) -> Any:
        raise ValueError(f"{token} is not a JSON number; write null, or leave the sample out")

    try:
        return json.loads(text, parse_constant=refuse)
    except RecursionError:
        raise ResultError(f"{what} is nested too deeply to be a Result or baseline") from None
    except ValueError as exc:  # JSONDecodeError, NaN/Infinity, integers of more than 4300 digits
        raise ResultError(f"{what} is not valid JSON ({exc})") from None


def read_json_file(path: Any, what: str = "result file") -> Any:
    """Read and strictly decode one JSON file; ResultError naming the file if it cannot be."""
    from pathlib import Path

    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ResultError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    if not raw:
        raise ResultError(f"{what} {path} is empty (0 bytes): a run stopped while writing it? pass a Result file")
    try:
        return parse_json(raw, f"{what} {path}")
    except ResultError as exc:
        raise ResultError(f"{exc}; pass a Result or baseline JSON file") from None


def _show(value: Any) -> str:
    if value is _MISSING:
        return "missing"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= _INT_LIMIT:
        return f"an integer of {len(str(abs(value))) if abs(value) < 10**4000 else 'thousands of'} digits"
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    kind = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), type(value).__name__
    )
    return f"{text} ({kind})"


def _need(ok: bool, where: str, value: Any, what: str) -> None:
    if not ok:
        raise ResultError(f"field {where!r} is {_show(value)}; it must be {what}")


def _no_unknown(data: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    unknown = sorted(str(k) for k in data if k not in known)
    if unknown:
        raise ResultError(
            f"{where} has unknown field(s) {', '.join(map(repr, unknown))}; known fields: {', '.join(known)}"
        )


def _number(value: Any, where: str) -> float | int:
    _need(isinstance(value, (int, float)) and not isinstance(value, bool), where, value, "a number")
    if isinstance(value, int):
        _need(abs(value) < _INT_LIMIT, where, value, f"a number below {_INT_LIMIT:.3g}")
        return value
    _need(math.isfinite(value), where, value, "a finite number")
    return value


def _text(value: Any, where: str) -> str:
    _need(isinstance(value, str) and bool(value), where, value, "a non-empty string")
    return str(value)


def _count(value: Any, where: str, minimum: int) -> int:
    _need(
        isinstance(value, int) and not isinstance(value, bool) and minimum <= value < _INT_LIMIT,
        where,
        value,
        f"an integer >= {minimum}",
    )
    return int(value)


def _series(value: Any, where: str) -> dict[str, list[float]]:
    _need(isinstance(value, dict), where, value, "an object of name -> list of numbers")
    out: dict[str, list[float]] = {}
    for name, xs in value.items():
        _need(isinstance(xs, list), f"{where}.{name}", xs, "a list of numbers")
        out[name] = [float(_number(x, f"{where}.{name}[{i}]")) for i, x in enumerate(xs)]
    return out


def _fingerprint(value: Any) -> Fingerprint:
    from dataclasses import fields

    _need(isinstance(value, dict), "fingerprint", value, "an object (Fingerprint.collect's fields)")
    specs = {f.name: f.type for f in fields(Fingerprint)}
    _no_unknown(value, tuple(specs), "fingerprint")
    for name, kind in specs.items():
        got = value.get(name, _MISSING)
        if "int" in str(kind):
            _count(got, f"fingerprint.{name}", 0)
        elif "None" in str(kind):
            _need(got is None or isinstance(got, str), f"fingerprint.{name}", got, "a string or null")
        else:
            _need(isinstance(got, str), f"fingerprint.{name}", got, "a string")
    return Fingerprint(**value)


def _ranks(value: Any) -> tuple[RankResult, ...]:
    """Each rank's figures, rank 0 first, every rank once."""
    _need(isinstance(value, list), "ranks", value, "a list of per-rank objects")
    ranks = tuple(RankResult.from_dict(r, f"ranks[{i}]") for i, r in enumerate(value))
    _need(
        [r.rank for r in ranks] == list(range(len(ranks))),
        "ranks",
        [r.rank for r in ranks],
        "ranks 0, 1, ... in order, each once",
    )
    return ranks


def _knob_sources(value: Any) -> dict[str, str]:
    """Where each knob of a user's job came from ("set by the user's code", "not applied"): strings only."""
    _need(isinstance(value, dict), "knob_sources", value, "an object of knob name -> where it came from")
    for key, source in value.items():
        _need(isinstance(source, str), f"knob_sources.{key}", source, "a string")
    return dict(value)


def _environment(value: Any, where: str = "environment") -> dict[str, Any]:
    """What the machine was doing: an object of JSON values (finite numbers, strings, booleans, null, nesting)."""
    _need(isinstance(value, dict), where, value, "an object (Result.environment: concern -> figures)")
    for key, item in value.items():
        _environment_value(item, f"{where}.{key}")
    return dict(value)


def _environment_value(item: Any, where: str) -> None:
    if isinstance(item, dict):
        _environment(item, where)
    elif isinstance(item, list):
        for i, x in enumerate(item):
            _environment_value(x, f"{where}[{i}]")
    elif isinstance(item, (int, float)) and not isinstance(item, bool):
        _number(item, where)
    else:
        _need(item is None or isinstance(item, (str, bool)), where, item, "a number, string, boolean or null")
