"""Result, Metric and Fingerprint: plain data, JSON with a schema version.

A Result is what one run of a workload produced: the knobs it ran with, each
metric by its one name (declared in :mod:`perfsuite.metrics`), the raw per-step samples that the
statistical verdicts need, and the environment fingerprint that decides which
baselines it may be compared with. ``Result.from_json(r.to_json()) == r``.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

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

    @property
    def available(self) -> bool:
        return self.value is not None

    @classmethod
    def unavailable(cls, name: str, reason: str, unit: str = "") -> Metric:
        return cls(name=name, value=None, unit=unit, reason=reason)

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "unit": self.unit, "reason": self.reason, "detail": self.detail}

    @classmethod
    def from_dict(cls, name: str, data: dict[str, Any]) -> Metric:
        return cls(name=name, value=data.get("value"), unit=data.get("unit", ""),
                   reason=data.get("reason"), detail=data.get("detail") or {})


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
            device=device, gpu_model=gpu_model, gpu_count=gpu_count, driver=driver,
            cuda=torch.version.cuda, torch=_torch_version(torch), kornia=kornia_version,
            python=platform.python_version(),
            cpu_model=_cpu_model(), cpu_cores=os.cpu_count() or 1, platform=platform.platform(terse=True),
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
    # Where each knob's value came from, for a user's job (perfsuite.job): "set by the user's code", "not
    # applied", ... Empty for reference workloads, whose knobs perfsuite set itself.
    knob_sources: dict[str, str] = field(default_factory=dict)
    created: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    schema_version: int = SCHEMA_VERSION

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
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        if not isinstance(data, dict):
            raise ResultError(f"a result is a JSON object, not {type(data).__name__}")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ResultError(
                f"result schema_version={version!r} but this perfsuite reads {SCHEMA_VERSION}; "
                "re-save it with this version (nox -s baseline)"
            )
        try:
            return cls(
                workload=data["workload"], scale=data["scale"], knobs=dict(data["knobs"]),
                metrics={n: Metric.from_dict(n, m) for n, m in data["metrics"].items()},
                samples={k: [float(x) for x in v] for k, v in data["samples"].items()},
                fingerprint=Fingerprint(**data["fingerprint"]), batch_size=int(data["batch_size"]),
                steps=int(data["steps"]), warmup=int(data["warmup"]), notes=tuple(data.get("notes", ())),
                timeline={k: [float(x) for x in v] for k, v in data.get("timeline", {}).items()},
                knob_sources={str(k): str(v) for k, v in data.get("knob_sources", {}).items()},
                created=data["created"], schema_version=version,
            )
        except (KeyError, TypeError) as exc:
            raise ResultError(f"result is missing or has a malformed field: {exc}") from exc

    @classmethod
    def from_json(cls, text: str) -> Result:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ResultError(f"result is not valid JSON: {exc}") from exc
        return cls.from_dict(data)
