"""What tune runs: a reference workload or a user's job in this process, or a perf test in a fresh pytest.

Every trial run is fresh: a new pipeline, a new DataLoader and new worker processes, so no setting
inherits another's warm workers. A workload or a job runs in this process through the runner (the
same window as ``perfsuite run``; no observed steps, since tune judges throughput, not the step's
exact counts). A perf test id runs as ``python -m pytest <id> --perfsuite-knob NAME=VALUE ...``, the
test's own code with the loader knobs set over its own, and its Result comes back through
``--perfsuite-save`` into a private directory.

A run that fails is a :class:`RunRecord` with the error, out-of-memory told apart (it ends a batch
search; anything else fails that setting). Bad input (an unknown job, a job whose DataLoader was
built by the user, so its knobs cannot be changed) raises :class:`TuneError` at once.
"""

from __future__ import annotations

import gc
import importlib.util
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from perfsuite.core.knobs import Knobs
from perfsuite.core.pytest_cmd import plugin_args
from perfsuite.core.results import Result
from perfsuite.errors import KnobError, PerfsuiteError, RunTimeout
from perfsuite.judge.contention import contended_run
from perfsuite.tools.tune.records import LEDGER, RunRecord, setting_of


class TuneError(PerfsuiteError):
    """Bad input to perfsuite tune, a job that fails at every setting, or a bound no setting meets: exit 2."""


class Target(Protocol):
    """One thing to tune: runs a setting afresh and says what came of it."""

    name: str
    kind: str  # "workload", "job" or "test"
    device: str
    test_key: str  # the [tool.perfsuite.thresholds.<machine>] table its thresholds go in

    def run(self, setting: Mapping[str, Any] | None, reference: bool = False) -> RunRecord:
        """One fresh run; ``setting`` None runs the target as it is. ``reference``: the sizing run, which also
        measures a batch's bytes and the step's speed of light (its demand), once for the whole search."""


def is_oom(exc: BaseException) -> bool:
    """Out of memory, as CUDA, the host allocator or a killed DataLoader worker reports it."""
    import torch

    oom_type = getattr(torch, "OutOfMemoryError", None)
    if isinstance(exc, MemoryError) or (oom_type is not None and isinstance(exc, oom_type)):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "killed by signal: killed" in text)


def free_memory() -> None:
    """What an out-of-memory run left behind: Python garbage, and CUDA's cached blocks."""
    gc.collect()
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def tensor_bytes(batch: Any) -> int:
    """Bytes of every tensor in a (nested) batch."""
    import torch

    if isinstance(batch, torch.Tensor):
        return batch.nelement() * batch.element_size()
    if isinstance(batch, Mapping):
        return sum(tensor_bytes(v) for v in batch.values())
    if isinstance(batch, (tuple, list)):
        return sum(tensor_bytes(v) for v in batch)
    return 0


def record_from(result: Result, setting: Mapping[str, Any] | None, seconds: float) -> RunRecord:
    """The figures tune judges by, read from a Result by their registered names."""
    knobs = {**setting_of(result.knobs), "batch_size": result.batch_size, **(setting or {})}
    rss = result.metric("peak_rss_mb")
    ledger = {
        name: float(value)
        for name in LEDGER
        if isinstance(value := result.value(name), (int, float)) and not isinstance(value, bool)
    }
    h2d = result.value("h2d_bytes_per_step")
    sol = result.metric("input_efficiency")
    return RunRecord(
        knobs=knobs,
        samples_per_s=result.value("samples_per_s"),
        data_wait_frac=result.value("data_wait_frac"),
        peak_rss_mb=float(rss.value) if isinstance(rss.value, (int, float)) else None,
        workers_mb=rss.detail.get("workers_mb") if rss.available else None,
        worker_processes=int(rss.detail.get("worker_processes") or 0) if rss.available else 0,
        batch_bytes=float(h2d) if isinstance(h2d, (int, float)) and h2d else None,
        ledger=ledger,
        demand_samples_per_s=sol.detail.get("sol_samples_per_s") if sol.available else None,
        seconds=seconds,
        contended=contended_run(result),
    )


def failed(setting: Mapping[str, Any] | None, exc: BaseException, seconds: float) -> RunRecord:
    oom = is_oom(exc)
    if oom:
        free_memory()
    return RunRecord(
        knobs=dict(setting or {}), error=f"{type(exc).__name__}: {str(exc)[:300]}", oom=oom, seconds=seconds
    )


@dataclass
class InProcessTarget:
    """A reference workload (``knobs`` are its flat knobs) or a user's job (loader knobs asked of it).

    ``workload`` is what RunSpec takes: a registered name, or a job factory ``factory(device) -> Job``.
    """

    workload: Any
    kind: str
    scale: str
    knobs: Knobs
    steps: int
    warmup: int
    sol_steps: int = 5  # the reference run's speed-of-light steps (the step's demand); trials run none
    seed: int = 0
    cache_dir: Path | None = None
    test_key: str = ""
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.workload if isinstance(self.workload, str) else getattr(self.workload, "__name__", "job")
        if not self.test_key:
            self.test_key = "test_" + "".join(c if c.isalnum() else "_" for c in self.name) + "_tuned"

    @property
    def device(self) -> str:
        return self.knobs.device

    def _spec(self, setting: Mapping[str, Any] | None, mutate: Any, sol_steps: int) -> Any:
        from perfsuite.harness.runner import RunSpec

        common = dict(
            scale=self.scale,
            steps=self.steps,
            warmup=self.warmup,
            observe_steps=0,
            sol_steps=sol_steps,
            seed=self.seed,
            cache_dir=self.cache_dir,
            mutate=mutate,
        )
        if self.kind == "job":
            return RunSpec(self.workload, knobs=Knobs(device=self.device), job_knobs=dict(setting or {}), **common)
        knobs = self.knobs.replace(**setting) if setting else self.knobs
        return RunSpec(self.workload, knobs=knobs, **common)

    def run(self, setting: Mapping[str, Any] | None, reference: bool = False) -> RunRecord:
        from perfsuite.errors import JobError, WorkloadError
        from perfsuite.harness.runner import run

        seen: list[int] = []
        start = time.perf_counter()
        try:
            meter = _batch_meter(seen) if reference else None
            result = run(self._spec(setting, meter, self.sol_steps if reference else 0))
        except (JobError, WorkloadError) as exc:
            raise TuneError(f"{self.workload}: {exc}") from exc
        except (KnobError, RunTimeout) as exc:  # this setting cannot run (a batch larger than the data, a hang)
            return failed(setting, exc, time.perf_counter() - start)
        except PerfsuiteError:
            raise
        except Exception as exc:  # noqa: BLE001 - the job's own failure at this setting (OOM included)
            return failed(setting, exc, time.perf_counter() - start)
        record = record_from(result, setting, time.perf_counter() - start)
        if seen:
            record.batch_bytes = float(seen[0])
        return record


def _batch_meter(seen: list[int]) -> Any:
    """A RunSpec.mutate that notes the bytes of the first batch the step receives (the sizing run only)."""

    def mutate(built: Any) -> None:
        inner = built.step

        def step(batch: Any, *args: Any) -> Any:
            if not seen:
                seen.append(tensor_bytes(batch))
            return inner(batch, *args)

        built.step = step

    return mutate


@dataclass
class PytestTarget:
    """A perf test, run as its own pytest process per trial run, with the loader knobs set over its own."""

    nodeid: str
    scale: str
    device: str
    python: str = sys.executable
    cwd: Path = field(default_factory=Path.cwd)
    timeout_s: float = 1800.0
    kind: str = "test"
    name: str = field(init=False)
    test_key: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.test_key = self.nodeid

    def command(self, setting: Mapping[str, Any] | None, out_dir: Path, reference: bool = False) -> list[str]:
        knob_args: list[str] = []
        for name, value in (setting or {}).items():
            text = "none" if value is None else str(value).lower()
            knob_args += ["--perfsuite-knob", f"{name}={text}"]
        return [
            self.python,
            "-m",
            "pytest",
            self.nodeid,
            *plugin_args(),
            *(["-n", "0"] if importlib.util.find_spec("xdist") else []),
            "-p",
            "no:cacheprovider",
            "-q",
            "--perfsuite-save",
            "--perfsuite-baselines",
            str(out_dir),
            "--perfsuite-scale",
            self.scale,
            "--perfsuite-device",
            self.device,
            # the observed steps come after the window: a trial skips them; the reference run keeps them, so the
            # cost probe measures a batch's bytes for the memory guard
            *([] if reference else ["--perfsuite-observe-steps", "0"]),
            *knob_args,
        ]

    def run(self, setting: Mapping[str, Any] | None, reference: bool = False) -> RunRecord:
        from perfsuite.report.compare import load_side

        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="perfsuite-tune-") as tmp:
            out = Path(tmp) / "results"
            try:
                proc = subprocess.run(
                    self.command(setting, out, reference),
                    cwd=self.cwd,
                    capture_output=True,
                    text=True,
                    timeout=self.timeout_s,
                )
            except subprocess.TimeoutExpired:
                return failed(setting, TimeoutError(f"pytest ran past {self.timeout_s:.0f} s"), self.timeout_s)
            log = (proc.stdout + proc.stderr)[-3000:]
            results = load_side(out) if out.is_dir() and any(out.rglob("*.json")) else {}
            seconds = time.perf_counter() - start
        refused = next((line for line in log.splitlines() if "does not rebuild a DataLoader" in line), None)
        if refused:  # the test's job hands perfsuite a built DataLoader: no setting can change its knobs
            raise TuneError(f"{self.nodeid}: {refused.strip()}")
        if not results:
            if setting is None:
                why = (
                    "selects no test: give a test id, e.g. tests/perf/test_loader.py::test_loader_settings"
                    if proc.returncode in (4, 5)
                    else "ran, but saved no perf result: it failed before perf_run returned, or never calls perf_run"
                )
                raise TuneError(f"{self.nodeid} {why} (pytest exit {proc.returncode}). Its output ends:\n{log}")
            return failed(setting, RuntimeError(f"pytest exit {proc.returncode}: {log[-600:]}"), seconds)
        if len(results) > 1:
            raise TuneError(
                f"{self.nodeid} made {len(results)} perf results ({', '.join(sorted(results))}); tune one at a "
                "time: give a test id that calls perf_run once"
            )
        return record_from(next(iter(results.values())), setting, seconds)
