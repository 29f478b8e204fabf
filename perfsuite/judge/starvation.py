"""How starved a GPU runner's step will be: the loader's supply from any run, against the runner's recorded demand.

A GPU waits for its input when the loader supplies fewer samples per second than the step consumes. The two sides
are measured apart, where each can be:

* **Demand** (:class:`Demand`): the step's speed of light on that GPU, samples/s of the step fed one batch kept on
  the device, timed by CUDA events. It depends on the GPU model and on what the step runs (the workload, its scale,
  the batch size, AMP, compile, channels_last, GPU augmentation: :data:`DEMAND_KNOBS`), not on the loader. A GPU run
  records it (``perfsuite demand add``) in ``baselines/demand/<runner>.json`` beside the host it ran on: that host's
  calibration kernel time and usable cores.
* **Supply** (:class:`Supply`): what the loader's worker processes deliver, from any run, a CPU CI run included:
  the workers' whole-process CPU ms per sample (the loader probe's ``loader_process_cpu_ms_per_sample``: the stages
  plus the workers' own overhead, pickling and shared memory), or the ledger's stages when that was not measured,
  scaled to the runner's host by the two hosts' calibration kernel times, over ``min(num_workers, usable cores)``
  processes. Measured best with ``--loader-only``: on a CPU run with the model, workers waiting through a slow step
  burn CPU that a GPU runner would not see.

The prediction (:class:`Prediction`): input efficiency on the runner = min(1, supply / demand), with a range from
both sides' spreads, and the loader stage that limits supply. With ``num_workers=0`` the loader runs between the
steps: efficiency = 1 / (1 + demand / supply). Where a side is missing the prediction is unavailable, naming the
command that records it. docs/gpu.md has the rule and how close it came on an H200.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from perfsuite.core import tmpfiles
from perfsuite.core.knobs import AugKnobs, StepKnobs
from perfsuite.core.results import Metric, Result
from perfsuite.errors import PerfsuiteError

DEMAND_SCHEMA_VERSION = 1
MAKER = "starvation"  # the registry's maker of predicted_input_efficiency (not a probe: made from a run's figures)
DEMAND_DIR = Path("baselines") / "demand"
# What the step's speed of light depends on besides the GPU: the knobs that change what the step runs. The loader's
# knobs are not among them (the speed of light is fed a batch already on the device), nor the periodic intervals
# (the speed of light is a median step).
PERIODIC = ("log_interval", "eval_interval")
DEMAND_KNOBS = (
    "batch_size",
    "aug",
    *(f for f in AugKnobs.__dataclass_fields__ if f != "placement"),
    *(f for f in StepKnobs.__dataclass_fields__ if f not in PERIODIC),
)
# The input efficiency at or above which a runner counts as fed (below: starved), for the verdict word only;
# a marker's bound (min_predicted_input_efficiency) is what a test judges.
FED = 0.95
RECORD_HINT = (
    "record one on that GPU: `perfsuite run {workload} --scale {scale} {knobs} --json --out r.json`, then "
    "`perfsuite demand add r.json` (docs/gpu.md)"
)


class DemandError(PerfsuiteError):
    """A runner with no demand file, or a file that is not one: bad input, exit 2."""


@dataclass(frozen=True)
class Host:
    """The CPU a runner's loader workers run on: its calibration kernel time (ms) in each recorded run, and its
    usable cores. The host's speed is the least disturbed run's (the smallest time): a run beside other work reads
    a slower kernel, never a faster one."""

    calibrations_ms: tuple[float, ...]
    usable_cores: int
    cpu_model: str = ""

    @property
    def calibration_ms(self) -> float:
        return min(self.calibrations_ms)


@dataclass(frozen=True)
class Demand:
    """One step's speed of light on one GPU: samples/s per recorded run, and the runner's host."""

    runner: str
    workload: str
    scale: str
    step: Mapping[str, Any]
    sol_samples_per_s: tuple[float, ...]
    host: Host
    gpu_model: str = ""
    torch: str = ""
    provenance: str = ""

    @property
    def median(self) -> float:
        return float(statistics.median(self.sol_samples_per_s))

    def matches(self, workload: str, scale: str, step: Mapping[str, Any]) -> bool:
        return self.workload == workload and self.scale == scale and dict(self.step) == dict(step)


@dataclass(frozen=True)
class DemandFile:
    """A runner's demands (``baselines/demand/<runner>.json``)."""

    runner: str
    entries: tuple[Demand, ...]
    path: Path | None = None

    def find(self, workload: str, scale: str, step: Mapping[str, Any]) -> Demand | None:
        return next((d for d in self.entries if d.matches(workload, scale, step)), None)


@dataclass(frozen=True)
class Supply:
    """What this run's loader supplies, per process, and what limits it."""

    ms_per_sample: float  # CPU ms per sample in one worker process, on this host
    source: str  # which figure: the workers' whole-process time, or the stages alone
    calibration_ms: float
    num_workers: int
    stages: Mapping[str, float] = field(default_factory=dict)  # CPU ms per sample by stage (the ledger's replay)
    spread: tuple[float, float] | None = None  # the per-batch range of ms_per_sample, relative (lo, hi)

    def limiting_stage(self) -> str:
        """The stage that costs the most per sample; the workers' own overhead when it costs more."""
        named = dict(self.stages)
        overhead = self.ms_per_sample - sum(named.values())
        if named and overhead > max(named.values()):
            return f"the workers' own overhead (pickling, shared memory): {overhead:.3g} ms/sample"
        if not named:
            return "unknown (no loader ledger in this run)"
        stage = max(named, key=lambda k: named[k])
        return f"{stage}: {named[stage]:.3g} of {self.ms_per_sample:.3g} ms/sample"


@dataclass(frozen=True)
class Prediction:
    """Input efficiency on a runner, predicted: min(1, supply / demand) and its range."""

    runner: str
    efficiency: float
    low: float
    high: float
    supply_per_s: float
    demand_per_s: float
    processes: int
    scale_to_runner: float  # the runner host's calibration over this host's: CPU ms there per CPU ms here
    limiting: str
    demand_provenance: str
    serial: bool = False

    @property
    def verdict(self) -> str:
        """``starved`` or ``fed`` by the predicted figure; a marker's bound is what a test judges."""
        return "fed" if self.efficiency >= FED else "starved"

    @property
    def decided(self) -> bool:
        """Whether the whole range lies on the verdict's side of :data:`FED`."""
        return self.low >= FED if self.verdict == "fed" else self.high < FED

    def describe(self) -> str:
        verdict = self.verdict if self.decided else f"{self.verdict}, though its range reaches {FED:g}"
        return (
            f"predicted for {self.runner}: input efficiency {self.efficiency:.2f} [{self.low:.2f}..{self.high:.2f}] "
            f"({verdict}): the loader feeds {self.supply_per_s:.4g} samples/s on its host "
            f"({self.processes} process{'es' if self.processes != 1 else ''}), the step consumes "
            f"{self.demand_per_s:.4g}; limited by {self.limiting}"
        )


# -- demand files ---------------------------------------------------------------------------------------------------


def demand_path(runner: str, root: Path | None = None) -> Path:
    return (root if root is not None else project_demand_dir()) / f"{runner}.json"


def project_demand_dir() -> Path:
    """``baselines/demand`` under the project's root (the git top level, else the working directory)."""
    import subprocess

    try:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        top = ""
    return (Path(top) if top else Path.cwd()) / DEMAND_DIR


def load_demand(runner: str, root: Path | None = None) -> DemandFile:
    """A runner's demand file; DemandError naming the runners that have one when it has none."""
    if not runner or "/" in runner or runner.startswith("."):
        raise DemandError(f"--predict-for {runner!r} is not a runner's name; write one like nvidia-h200")
    path = demand_path(runner, root)
    if not path.exists():
        known = sorted(p.stem for p in path.parent.glob("*.json")) if path.parent.is_dir() else []
        raise DemandError(
            f"no demand recorded for runner {runner!r} ({path} does not exist); "
            + (f"runners with one: {', '.join(known)}" if known else "none is recorded yet")
            + "; record one on that GPU with `perfsuite run ... --json --out r.json` and `perfsuite demand add r.json`"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        entries = tuple(_demand_from(e, runner) for e in data["entries"])
        if data.get("schema_version") != DEMAND_SCHEMA_VERSION:
            raise ValueError(f"schema_version {data.get('schema_version')!r}, not {DEMAND_SCHEMA_VERSION}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DemandError(f"{path} is not a demand file ({exc}); re-record it with `perfsuite demand add`") from None
    return DemandFile(runner, entries, path)


def _demand_from(e: Mapping[str, Any], runner: str) -> Demand:
    rates = tuple(float(x) for x in e["sol_samples_per_s"])
    if not rates or not all(math.isfinite(r) and r > 0 for r in rates):
        raise ValueError("sol_samples_per_s must be positive numbers")
    h = e["host"]
    host = Host(tuple(float(x) for x in h["calibrations_ms"]), int(h["usable_cores"]), str(h.get("cpu_model", "")))
    if not host.calibrations_ms or not all(x > 0 for x in host.calibrations_ms) or host.usable_cores < 1:
        raise ValueError("host.calibrations_ms must be times above 0 and host.usable_cores at least 1")
    return Demand(
        runner=runner,
        workload=str(e["workload"]),
        scale=str(e["scale"]),
        step=dict(e["step"]),
        sol_samples_per_s=rates,
        host=host,
        gpu_model=str(e.get("gpu_model", "")),
        torch=str(e.get("torch", "")),
        provenance=str(e.get("provenance", "")),
    )


def step_key(result: Result) -> dict[str, Any]:
    """The knobs a Result's speed of light depends on (:data:`DEMAND_KNOBS`), the batch size resolved."""
    knobs = dict(result.knobs)
    key = {name: knobs.get(name) for name in DEMAND_KNOBS}
    key["batch_size"] = result.batch_size
    return key


def demand_of(result: Result, provenance: str = "") -> Demand:
    """The demand a GPU run measured: its speed of light, its GPU and its host. DemandError when it has none."""
    fp = result.fingerprint
    if fp.device != "cuda":
        raise DemandError(
            f"{result.workload}: a demand is a GPU's speed of light, and this Result ran on {fp.device!r}; "
            "record it on the GPU runner"
        )
    eff = result.metric("input_efficiency")
    sol = eff.detail.get("sol_samples_per_s")
    if not isinstance(sol, (int, float)) or not sol > 0:
        raise DemandError(f"{result.workload}: the Result has no speed of light ({eff.reason or 'not measured'})")
    ledger = result.metric("loader_cpu_ms_per_sample")
    capacity = result.metric("loader_capacity_samples_per_s")
    calibration = ledger.detail.get("calibration_ms")
    cores = capacity.detail.get("usable_cores")
    if not isinstance(calibration, (int, float)) or not isinstance(cores, int):
        raise DemandError(
            f"{result.workload}: the Result has no host calibration or usable cores (the loader ledger did not run); "
            "record it without --observe-steps 0"
        )
    return Demand(
        runner=runner_name(result),
        workload=result.workload,
        scale=result.scale,
        step=step_key(result),
        sol_samples_per_s=(float(sol),),
        host=Host((float(calibration),), cores, fp.cpu_model or ""),
        gpu_model=fp.gpu_model or "",
        torch=fp.torch,
        provenance=provenance or f"perfsuite run on {fp.gpu_model}, {result.created}",
    )


def runner_name(result: Result) -> str:
    """The runner's name: the hardware part of the Result's fingerprint key (``nvidia-h200``)."""
    return result.fingerprint.key().split("__", 1)[0]


def add_demands(results: Sequence[Result], root: Path | None = None, provenance: str = "") -> list[Path]:
    """Record each GPU Result's demand in its runner's file: runs of the same step are kept together (their spread
    is the demand's), and a provisional entry of that step is replaced by the measured one. Atomic writes."""
    written: list[Path] = []
    for result in results:
        new = demand_of(result, provenance)
        path = demand_path(new.runner, root)
        old = load_demand(new.runner, root).entries if path.exists() else ()
        kept: list[Demand] = []
        merged = new
        for d in old:
            if d.matches(new.workload, new.scale, new.step):
                if _provisional(d) == _provisional(new):  # runs of one kind kept together: their spread is the demand's
                    merged = replace(
                        merged,
                        sol_samples_per_s=d.sol_samples_per_s + merged.sol_samples_per_s,
                        host=replace(merged.host, calibrations_ms=d.host.calibrations_ms + merged.host.calibrations_ms),
                    )
                elif _provisional(new):
                    merged = d  # a measured demand is not replaced by a provisional one
                continue
            kept.append(d)
        write_demand(path, new.runner, [*kept, merged])
        written.append(path)
    return written


def _provisional(d: Demand) -> bool:
    return d.provenance.startswith("provisional")


def write_demand(path: Path, runner: str, entries: Sequence[Demand]) -> Path:
    payload = {
        "schema_version": DEMAND_SCHEMA_VERSION,
        "runner": runner,
        "entries": [_entry_dict(d) for d in entries],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    return tmpfiles.write_json_atomic(path, payload)


def _entry_dict(d: Demand) -> dict[str, Any]:
    out = asdict(d)
    out.pop("runner")
    out["sol_samples_per_s"] = list(d.sol_samples_per_s)
    out["host"]["calibrations_ms"] = list(d.host.calibrations_ms)
    return out


# -- supply and the prediction --------------------------------------------------------------------------------------


def supply_of(result: Result) -> Supply | str:
    """This run's loader supply per process; a reason (str) when the run did not measure it."""
    ledger = result.metric("loader_cpu_ms_per_sample")
    if not ledger.available:
        return f"the loader ledger did not run ({ledger.reason})"
    calibration = ledger.detail.get("calibration_ms")
    if not isinstance(calibration, (int, float)) or not calibration > 0:
        return "the loader ledger recorded no calibration kernel time"
    stages = {str(k): float(v) for k, v in (ledger.detail.get("by") or {}).items()}
    workers = int(result.knobs.get("num_workers") or 0)
    process = result.metric("loader_process_cpu_ms_per_sample")
    whole = process.value if process.available else None
    stages_ms = float(ledger.value) if isinstance(ledger.value, (int, float)) else 0.0
    spread = _relative_spread(result.samples.get("loader_cpu_ms", []))
    if workers > 0 and isinstance(whole, (int, float)) and whole >= stages_ms:
        return Supply(
            float(whole), "the workers' whole-process CPU per sample", float(calibration), workers, stages, spread
        )
    return Supply(stages_ms, "the loader's stages (the ledger's replay)", float(calibration), workers, stages, spread)


def _relative_spread(values: Sequence[float]) -> tuple[float, float] | None:
    """The 95% interval of the mean per-batch CPU time over the replayed batches, relative to that mean (Student's
    t): how far the loader's cost per sample is known, not how far single batches range."""
    xs = [float(v) for v in values if isinstance(v, (int, float)) and v > 0]
    if len(xs) < 2:
        return None
    from scipy.stats import t as student

    mean = statistics.fmean(xs)
    half = float(student.ppf(0.975, len(xs) - 1)) * statistics.stdev(xs) / math.sqrt(len(xs))
    return max(1e-3, (mean - half) / mean), (mean + half) / mean


def predict(result: Result, demands: DemandFile) -> Prediction | Metric:
    """Input efficiency on the runner: min(1, supply / demand). An unavailable Metric says what is missing."""
    name = "predicted_input_efficiency"
    step = step_key(result)
    demand = demands.find(result.workload, result.scale, step)
    if demand is None:
        knobs = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in step.items() if v not in (None, False, 0, 0.0))
        return Metric.unavailable(
            name,
            f"no demand for {result.workload} at scale {result.scale} with these step settings on {demands.runner}; "
            + RECORD_HINT.format(workload=result.workload, scale=result.scale, knobs=knobs),
            "fraction",
        )
    supply = supply_of(result)
    if isinstance(supply, str):
        return Metric.unavailable(name, f"no loader supply in this run: {supply}", "fraction")
    scale = demand.host.calibration_ms / supply.calibration_ms
    ms = supply.ms_per_sample * scale
    serial = supply.num_workers == 0
    processes = 1 if serial else min(supply.num_workers, demand.host.usable_cores)
    lo_s, hi_s = supply.spread or (1.0, 1.0)

    def rate(rel: float) -> float:
        return processes * 1e3 / (ms * rel)

    def efficiency(supply_per_s: float, demand_per_s: float) -> float:
        if serial:
            return 1.0 / (1.0 + demand_per_s / supply_per_s)
        return min(1.0, supply_per_s / demand_per_s)

    rates = demand.sol_samples_per_s
    return Prediction(
        runner=demands.runner,
        efficiency=efficiency(rate(1.0), demand.median),
        low=efficiency(rate(hi_s), max(rates)),
        high=efficiency(rate(lo_s), min(rates)),
        supply_per_s=rate(1.0),
        demand_per_s=demand.median,
        processes=processes,
        scale_to_runner=scale,
        limiting=supply.limiting_stage(),
        demand_provenance=demand.provenance,
        serial=serial,
    )


def prediction_metric(prediction: Prediction | Metric) -> Metric:
    """The prediction as the Result's ``predicted_input_efficiency`` metric (its detail holds every figure)."""
    if isinstance(prediction, Metric):
        return prediction
    detail = asdict(prediction)
    detail["verdict"] = prediction.verdict
    detail["decided"] = prediction.decided
    detail["interval"] = [prediction.low, prediction.high]
    return Metric("predicted_input_efficiency", prediction.efficiency, "fraction", detail=detail)


def with_prediction(result: Result, prediction: Prediction | Metric) -> Result:
    """The Result with the prediction among its metrics (``--json`` keeps it)."""
    metrics = dict(result.metrics)
    metrics["predicted_input_efficiency"] = prediction_metric(prediction)
    return replace(result, metrics=metrics)


def predicted_change(base: Metric, head: Metric) -> str:
    """A pull request's predicted change on the runner, as compare prints it: both sides' supply and efficiency."""
    b, h = base.detail, head.detail
    if "supply_per_s" not in b or "supply_per_s" not in h:
        return f"predicted input efficiency {base.value} -> {head.value}"
    return (
        f"the loader feeds {b['supply_per_s']:.4g} -> {h['supply_per_s']:.4g} samples/s on the {h['runner']} runner, "
        f"which consumes {h['demand_per_s']:.4g}: input efficiency {float(b['efficiency']):.2f} -> "
        f"{float(h['efficiency']):.2f}, predicted; limited by {h['limiting']}"
    )
