"""Run a workload with its knobs and probes: warm-up, measured window, then observed steps.

The phases are :mod:`perfsuite.harness.driver`'s, at the step boundaries of the Job's loop here, or of a
user's training script (:class:`perfsuite.Script`, :mod:`perfsuite.harness.script.drive`) whose training DataLoader
calls the same driver; both Results are made by :func:`assemble_result`.

The runner is the only place that synchronises the device, and it does so
only at the edges of the measured window; per-step times on a GPU come from
CUDA events recorded on the stream, so the harness never adds a sync the
workload did not have (and the sync probe never counts the harness's own).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.core import phases
from perfsuite.core.knobs import Knobs, resolve_for_device
from perfsuite.core.results import Fingerprint, Metric, PhaseTimes, Result, ScriptStop
from perfsuite.errors import PerfsuiteError, RunInterrupted
from perfsuite.harness import interrupts, workers
from perfsuite.harness.batches import batch_samples
from perfsuite.harness.driver import Driver, Stop, speed_of_light
from perfsuite.harness.idle import against_nvml, gpu_idle, underused_sms
from perfsuite.harness.observation import ObservationPlan
from perfsuite.harness.threads import fit_threads
from perfsuite.harness.watchdog import Watchdog, WatchdogConfig
from perfsuite.probes.base import Probe, RunContext, WindowTimings
from perfsuite.probes.loader import loader_headroom

__all__ = [
    "RunSpec",
    "assemble_result",
    "default_probes",
    "input_band",
    "input_efficiency",
    "run",
    "setup_only",
    "speed_of_light",
]


@dataclass(frozen=True)
class RunSpec:
    """What to run and how long: a reference workload with its scale and knobs, or a user's Job.

    ``workload`` is a registered name (workload or job, entry points
    included), a Workload, a :class:`perfsuite.Job`, or a job factory
    (``factory(device) -> Job``, called with ``knobs.device``). For a Job,
    ``job_knobs`` holds the flat knobs the caller asked of it (perfsuite.jobs.contract.bind:
    loader knobs are applied or checked against the user's DataLoader, step
    knobs refused); ``knobs`` then only gives the session's device.

    ``mutate`` changes what was built before it runs, in place: the reference
    workload's Pipeline (how perfsuite.harness.faults.catalog injects code-level bugs), or the
    user's Job. perf_run(..., mutate=fn) passes it through.

    ``period_steps``: steps watched for work done every N steps before the
    observed ones (:mod:`perfsuite.harness.observation`); None: 20 for a user's
    job or script, two periods of a reference workload's log/eval interval.
    ``workload`` may also be a :class:`perfsuite.Script` (a user's training
    script, run unchanged: :mod:`perfsuite.harness.script.drive`).
    """

    workload: Any
    scale: str = "smoke"
    knobs: Knobs = field(default_factory=Knobs)
    steps: int = 20
    warmup: int = 3
    observe_steps: int = 4
    seed: int = 0
    cache_dir: Path | None = None
    mutate: Callable[[Any], None] | None = None
    job_knobs: Mapping[str, Any] = field(default_factory=dict)
    watchdog: WatchdogConfig = field(default_factory=WatchdogConfig)  # loader timeout and phase deadlines
    sol_steps: int = 5  # speed-of-light steps after the window (one batch kept on the device); 0: not measured
    target_samples_per_s: float | None = None  # declared demand for loader_headroom (else the speed of light)
    period_steps: int | None = None  # the period scan's length (perfsuite.harness.observation); None: decided per job
    # The loader alone: each window step takes its batch and does nothing with it (no copy, no model), and no
    # speed-of-light, period-scan or observed steps run. What the loader supplies on this host, measured apart from
    # the model's step: on a CPU run a full-scale model would make the workers wait through every step, so their CPU
    # per sample would grow with the wait (perfsuite.judge.starvation predicts a GPU runner's supply from it).
    loader_only: bool = False
    # progress(phase, done, total): called at each phase's start and end and per step outside the measured
    # window (never inside it), for a progress display; None: nothing is shown
    progress: Callable[[str, int, int], None] | None = None

    def __post_init__(self) -> None:
        from perfsuite.errors import KnobError

        for name, minimum in (("steps", 2), ("warmup", 0), ("observe_steps", 0), ("sol_steps", 0), ("period_steps", 0)):
            value = getattr(self, name)
            if name == "period_steps" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise KnobError(f"{name}={value!r} must be an integer >= {minimum}")
        target = self.target_samples_per_s
        if target is not None and (
            isinstance(target, bool) or not isinstance(target, (int, float)) or not target > 0 or target == float("inf")
        ):
            raise KnobError(f"target_samples_per_s={target!r} must be a number of samples per second above 0")

    def resolve(self) -> Any:
        """The Workload or Job this spec names (a job factory is called here, with the device; the lines that
        build its DataLoaders are noted for the settings judge)."""
        from perfsuite.jobs.registry import resolve
        from perfsuite.probes.sites import noting_built_loaders

        with noting_built_loaders():
            return resolve(self.workload, self.knobs.device)


def default_probes() -> list[Probe]:
    """Every probe perfsuite has, plus those other packages declare (entry points ``perfsuite.probes``).

    Each reports `unavailable` where it cannot measure.
    """
    from perfsuite.probes import all_probes, entry_point_probes

    return all_probes() + entry_point_probes()


def run(spec: RunSpec, probes: Sequence[Probe] | None = None) -> Result:
    """:func:`run_phases`, with each phase's wall and CPU time kept in the Result (:mod:`perfsuite.core.phases`)."""
    with phases.recording() as clock:
        result = run_phases(spec, probes)
    return dataclasses.replace(result, phases=clock.times())


def setup_only(spec: RunSpec) -> PhaseTimes:
    """The run's set-up alone, timed as :func:`run` times it (the dataset, the model build, the loader), and no
    step: ``perfsuite run --setup-only``, to see the dataset cache hit without paying for the steps."""
    import torch

    from perfsuite.harness.pipeline import build_pipeline
    from perfsuite.jobs.contract import Job, bind
    from perfsuite.jobs.script import Script

    with phases.recording() as clock:
        target = spec.resolve()
        if isinstance(target, Script):
            raise PerfsuiteError(
                "--setup-only stops a run after perfsuite's own set-up, and a script's set-up is the script's own "
                "code up to its first batch; drop --setup-only, or run a workload or Job"
            )
        if isinstance(target, Job):
            bind(target, spec.job_knobs, default_device=spec.knobs.device)
        else:
            knobs, _ = resolve_for_device(spec.knobs, torch.cuda.is_available())
            build_pipeline(
                target,
                target.scale(spec.scale),
                knobs,
                seed=spec.seed,
                cache_dir=spec.cache_dir,
                loader_timeout_s=spec.watchdog.loader_timeout(),
            )
    return clock.times()


def run_phases(spec: RunSpec, probes: Sequence[Probe] | None = None) -> Result:
    """Build the pipeline and run it: warm-up, the measured window, then the observed steps.

    The order is the integrity guarantee. The window runs before any probe
    has instrumented anything: a dispatch mode (the sync, AMP and cost
    probes' tools) makes torch.compile run eagerly for the rest of the
    process, so observing first would time eager code. In the window only
    the runner's clock and passive samplers (NVML, RSS) run, and the runner
    checks that no probe left a torch function or dispatch mode active.

    Each phase runs under the watchdog (:mod:`perfsuite.harness.watchdog`): a hung
    worker, ``__getitem__`` or step raises RunTimeout naming the phase and
    the stuck worker, with the Python stacks, instead of hanging the session.
    """
    import torch

    from perfsuite.harness.pipeline import BatchStream, build_pipeline
    from perfsuite.jobs.contract import Job, bind
    from perfsuite.jobs.script import Script
    from perfsuite.jobs.workload import Scale

    target = spec.resolve()
    probes = list(default_probes() if probes is None else probes)
    if isinstance(target, Script):  # a user's script, run unchanged: its own loop drives the same phases
        from perfsuite.harness.script.drive import drive_script

        if spec.loader_only:
            from perfsuite.errors import KnobError

            raise KnobError(
                "loader_only runs a workload's or a Job's loader alone; a script's loop is its own and perfsuite "
                "does not change it: register the script's loader and model as a perfsuite.Job, or drop loader_only"
            )

        ran = drive_script(target, spec, probes)
        phases.enter(phases.ASSEMBLY)
        return assemble_result(
            ran.job, spec.scale, spec, ran.timings, ran.sol_ms, ran.last_batch, probes, ran.notes, ran.plan, ran.stop
        )
    if isinstance(target, Job):  # a user's own training job
        notes: list[str] = []
        if spec.mutate is not None:
            spec.mutate(target)
        job = bind(target, spec.job_knobs, default_device=spec.knobs.device)
        knobs = Knobs(device=str(job.device))  # for probes only; the Result records job.knobs and their sources
        scale = Scale(spec.scale, (0, 0), num_samples=0, batch_size=job.batch_size)
        workload: Any = job.info
        view: Any = job
    else:  # a reference workload: perfsuite builds its pipeline from the knobs, then runs it as a Job
        if spec.job_knobs:
            raise PerfsuiteError(f"job_knobs are for a user's Job; {target.name} takes its knobs as RunSpec.knobs")
        workload = target
        scale = workload.scale(spec.scale)
        knobs, notes = resolve_for_device(spec.knobs, torch.cuda.is_available())
        view = build_pipeline(
            workload,
            scale,
            knobs,
            seed=spec.seed,
            cache_dir=spec.cache_dir,
            loader_timeout_s=spec.watchdog.loader_timeout(),
        )
        if spec.mutate is not None:
            spec.mutate(view)
        job = bind(view.as_job())
    if spec.loader_only:
        from dataclasses import replace

        spec = replace(spec, sol_steps=0, observe_steps=0, period_steps=0)
        notes.append(LOADER_ONLY_NOTE)
    batches = BatchStream(job.loader, on_epoch=job.job.epoch_start)
    ctx = RunContext(workload, scale, knobs, str(job.device), view, job.batch_size, spec.observe_steps, job, batches)
    first_index = spec.warmup + spec.steps
    # A reference pipeline's speed-of-light steps reuse the step indices of the observed steps that follow (its
    # job's own counter is not advanced), so periodic work (log/eval intervals) happens at the window's rate and
    # every exact count stays as it was. A user's job is stepped through job.step.
    sol_step = (lambda b, i: view.step(b, first_index + i)) if job.reference else (lambda b, i: job.step(b))
    step = _take_batch if spec.loader_only else job.step
    source = JobSource(job, ctx, batches, None if spec.loader_only else sol_step)
    threads = fit_threads(job, reference=job.reference)
    notes.extend(threads.notes)
    with contextlib.ExitStack() as run_scope:
        guard = run_scope.enter_context(interrupts.guarded())
        lease = run_scope.enter_context(workers.lease(job.loader, spec.watchdog.loader_timeout(), job.reference))
        notes += lease.notes
        driver = Driver(spec, probes, source, dog=Watchdog(spec.watchdog, loader=batches), check=guard.check)
        try:
            with contextlib.suppress(Stop):
                while True:  # the Job's loop: each next_batch() is a step boundary (perfsuite.harness.driver)
                    step(driver.next_batch())
        except KeyboardInterrupt as exc:
            guard.delivered()
            if isinstance(exc, RunInterrupted):
                raise
            raise RunInterrupted(driver.phase, driver.k + 1 if driver.n else None, driver.n) from None
        finally:
            with interrupts.shielded():  # the workers stop even if Ctrl-C is pressed again meanwhile
                driver.close()
                for probe in probes:
                    probe.finish()
                batches.close()
                threads.restore()
    phases.enter(phases.ASSEMBLY)
    rec = driver.recorded()
    return assemble_result(job, scale.name, spec, rec.timings, rec.sol_ms, rec.last_batch, probes, notes, rec.plan)


LOADER_ONLY_NOTE = (
    "the loader alone (--loader-only): the window's steps took their batches and ran nothing, so step_ms is the "
    "loader's time per batch on this host and no step metric was measured"
)


def _take_batch(batch: Any) -> None:
    """The loader-only run's step: the batch is taken and dropped (nothing copied, nothing computed)."""


@dataclass
class JobSource:
    """A Job's step boundaries for the driver: its BatchStream, which starts the next epoch itself."""

    job: Any
    ctx: RunContext
    batches: Any
    sol_step: Callable[[Any, int], Any] | None
    boundary_before_fetch: bool = True

    @property
    def epochs(self) -> int:
        return int(self.batches.epochs)

    def setup(self) -> tuple[Any, RunContext]:
        return self.job, self.ctx

    def fetch(self) -> Any:
        return next(self.batches)

    def epoch_start(self) -> tuple[float, float] | None:
        return None  # the stream makes each epoch's iterator inside fetch(), timed there

    def direct_step(self) -> Callable[[Any, int], Any] | None:
        return self.sol_step

    def state_objects(self) -> list[Any]:
        """The job's model and optimizer and what its step holds (a scheduler, a GradScaler, an EMA)."""
        from perfsuite.harness.state import held_by

        user = self.job.job
        return [user.model, user.optimizer, *held_by(user.step)]


def assemble_result(
    job: Any,
    scale: str,
    spec: RunSpec,
    timings: WindowTimings,
    sol_ms: list[float],
    last_batch: Any,
    probes: Sequence[Probe],
    notes: Sequence[str],
    plan: ObservationPlan,
    script: ScriptStop | None = None,
) -> Result:
    """The Result of a run from what its phases recorded: one assembly for a job's loop and a script's."""
    metrics: dict[str, Metric] = {}
    for metric in _core_metrics(timings):
        metrics[metric.name] = metric
    metrics["gpu_idle_frac"] = gpu_idle(timings)
    not_run = script.not_run.get("speed of light") if script is not None else None
    metrics["input_efficiency"] = input_efficiency(
        timings,
        sol_ms,
        batch_samples(last_batch) if last_batch is not None else 0,
        spec.sol_steps,
        plan.periods,
        not_run,
    )
    timeline: dict[str, list[float]] = {}
    probe_samples: dict[str, list[float]] = {}
    probe_notes: list[str] = []
    environment: dict[str, Any] = {}
    for probe in probes:
        for metric in probe.metrics(timings):
            metrics[metric.name] = metric
        timeline.update(probe.timeline())
        probe_samples.update(probe.samples())
        probe_notes += probe.notes()
        environment.update(probe.environment())
    metrics["gpu_idle_frac"], disagreement = against_nvml(
        metrics["gpu_idle_frac"], metrics.get("gpu_util"), _nvml_util_samples(timeline)
    )
    probe_notes += [disagreement] if disagreement else []
    underused = underused_sms(metrics.get("gpu_util"), metrics.get("gpu_sm_util"))
    probe_notes += [underused] if underused else []
    if "loader_capacity_samples_per_s" in metrics:
        metrics["loader_headroom"] = _headroom(metrics, spec.target_samples_per_s)
    if plan.skipped:
        probe_notes.append(
            f"{plan.skipped} step(s) after the period scan carried periodic work and were run unobserved, so the "
            "per-step counts describe the steady step; the periodic work is in syncs_per_step's sites"
        )
    fetch_s, host_s = timings.fetch_s, timings.host_step_s
    shares = [min(1.0, f / h) if h > 0 else 0.0 for f, h in zip(fetch_s, host_s)]
    return Result(
        workload=job.name,
        scale=scale,
        knobs=job.knobs,
        knob_sources=job.knob_sources,
        metrics=metrics,
        samples={
            "step_ms": timings.step_ms,
            "fetch_ms": [s * 1e3 for s in fetch_s],
            "data_wait": shares,
            "epoch_fetch_ms": timings.epoch_fetch_ms,
            "epoch_fetch_cpu_ms": timings.epoch_fetch_cpu_ms,
            "epoch_start_step": [float(i) for i in timings.epoch_steps],
            "sol_step_ms": sol_ms,
            "main_load_ms": [s * 1e3 for s in timings.fetch_cpu_s],
            "host_step_ms": [s * 1e3 for s in host_s],
            **_idle_samples(timings),
            **probe_samples,
        },
        fingerprint=Fingerprint.collect(str(job.device)),
        batch_size=job.batch_size,
        steps=spec.steps,
        warmup=spec.warmup,
        notes=tuple(dict.fromkeys([*notes, *job.notes, *probe_notes])),
        timeline=timeline,
        environment=environment,
        script=script,
    )


def _idle_samples(t: WindowTimings) -> dict[str, list[float]]:
    """The GPU's idle ms per step and its share of each step, where its own clock measured them (harness.idle)."""
    if t.device_clock != "cuda-events" or len(t.idle_ms) != len(t.step_ms):
        return {}
    return {
        "gpu_idle_ms": list(t.idle_ms),
        "gpu_idle": [min(1.0, max(0.0, i / s)) if s > 0 else 0.0 for i, s in zip(t.idle_ms, t.step_ms)],
    }


def _nvml_util_samples(timeline: Mapping[str, Sequence[float]]) -> list[float]:
    """NVML's utilisation readings over the window, one per driver sample (the timeline repeats a sample until the
    driver has a new one, so consecutive repeats are one reading)."""
    values = list(timeline.get("gpu_util", ()))
    return [v for i, v in enumerate(values) if i == 0 or v != values[i - 1]]


STALL_FACTOR = 5.0  # a step slower than this multiple of the median is a stall


def _core_metrics(t: WindowTimings) -> list[Metric]:
    """Throughput and the step-time distribution, its tail included: the runner's own, so they exist with no probe.

    samples_per_s counts the samples the loader actually delivered (a short
    last batch counts what it holds), over the window's wall time.
    """
    import numpy as np

    steps = np.asarray(t.step_ms, dtype=float)
    p10, p50, p90, p99 = np.percentile(steps, [10, 50, 90, 99])
    q25, q75 = np.percentile(steps, [25, 75])
    stalls = [i for i, ms in enumerate(t.step_ms) if ms > STALL_FACTOR * p50]
    delivered = t.samples if t.samples else t.steps * t.batch_size
    return [
        Metric(
            "samples_per_s",
            delivered / t.wall_s,
            "samples/s",
            detail={"wall_s": t.wall_s, "steps": t.steps, "batch_size": t.batch_size, "samples": delivered},
        ),
        Metric(
            "step_ms",
            float(p50),
            "ms",
            detail={
                "median": float(p50),
                "p10": float(p10),
                "p90": float(p90),
                "p99": float(p99),
                "max": float(steps.max()),
                "iqr": float(q75 - q25),
                "mean": float(steps.mean()),
            },
        ),
        Metric("step_ms_p99", float(p99), "ms"),
        Metric("step_ms_max", float(steps.max()), "ms", detail={"step": int(steps.argmax())}),
        Metric(
            "stalls",
            len(stalls),
            "steps",
            detail={"factor": STALL_FACTOR, "steps": stalls, "ms": [float(t.step_ms[i]) for i in stalls]},
        ),
    ]


# TensorFlow's input-pipeline analyzer: the share of step time waiting for input.
INPUT_BANDS = ((0.05, "not input-bound"), (0.20, "moderately input-bound"), (float("inf"), "highly input-bound"))


def input_band(wait_frac: float) -> str:
    """``not input-bound`` below 5% data wait, ``moderately input-bound`` 5-20%, ``highly input-bound`` above."""
    for limit, name in INPUT_BANDS:
        if wait_frac < limit or limit == float("inf"):
            return name
    return INPUT_BANDS[-1][1]


# How far the speed of light's median step may run slower than the window's mean step work before the efficiency
# it gives contradicts the data wait (a median of 5 steps against a mean of the window's: 5% of slack).
SOL_SLACK = 0.05


def periodic_extra_s(t: WindowTimings, hints: Sequence[int] = ()) -> tuple[float, dict[str, Any] | None]:
    """The window's time spent on periodic work beyond the median step's, in s, and what it was: the steps
    :func:`perfsuite.probes.periods.window_periodic` finds (``hints``: the periods the sync probe's scan saw), the
    one detector input efficiency, the step ledger and doctor share."""
    from perfsuite.probes.periods import Epochs, window_periodic

    work = [max(0.0, (h - f) * 1e3) for h, f in zip(t.host_step_s, t.fetch_s)]
    found = window_periodic(work, Epochs(t.epochs_started, tuple(t.epoch_steps)), hints)
    if found.every is None:
        return 0.0, ({"every": None, "reason": found.reason} if found.reason and "too few" in found.reason else None)
    return found.extra_ms / 1e3, {
        "every": found.every,
        "steps": len(found.steps),
        "at": list(found.steps),
        "extra_ms": found.extra_ms,
    }


def input_efficiency(
    t: WindowTimings,
    sol_ms: Sequence[float],
    sol_samples: int,
    sol_steps: int,
    hints: Sequence[int] = (),
    not_run: str | None = None,
) -> Metric:
    """samples/s of the window over the speed of light's samples/s, with the data-wait band.

    Never above 1, and never above the share of the window not spent waiting (beyond SOL_SLACK): a speed of
    light slower than the window's own step work bounds nothing, so the figure is unavailable with both times.
    """
    import numpy as np

    if not sol_ms or sol_samples <= 0:
        why = (
            f"the speed of light was {not_run}"
            if not_run is not None
            else "sol_steps=0: the speed-of-light phase was not run"
            if sol_steps <= 0
            else "no batch reached the window, so there was nothing to feed the speed-of-light steps"
        )
        return Metric.unavailable("input_efficiency", why, "fraction")
    sol_step = float(np.median(sol_ms))
    if sol_step <= 0:
        return Metric.unavailable("input_efficiency", "the speed-of-light steps took no measurable time", "fraction")
    delivered = t.samples if t.samples else t.steps * t.batch_size
    extra_s, periodic = periodic_extra_s(t, hints)
    unknown = periodic.pop("reason") if periodic is not None and periodic["every"] is None else None
    periodic = periodic if unknown is None else None
    wall = t.wall_s - extra_s  # periodic work (an evaluation every N steps) is not the input's: left out
    samples_per_s = delivered / wall
    sol_per_s = sol_samples / (sol_step / 1e3)
    wait = sum(t.fetch_s) / wall if wall > 0 else 0.0
    # The share of the window the device was idle for want of a batch: on a GPU its own clock's (the host's wait
    # overlaps the GPU's work on the previous step, harness.idle), on a CPU the host's wait, which is the device's.
    idle = device_idle_share(t)
    waited = idle if idle is not None else wait
    detail = {
        "periodic_left_out": periodic,
        **({"periodic_unknown": unknown} if unknown else {}),
        "samples_per_s": samples_per_s,
        "sol_samples_per_s": sol_per_s,
        "sol_step_ms": sol_step,
        "sol_steps": len(sol_ms),
        "data_wait": wait,
        "device_idle": idle,
        "band": input_band(waited),
        "band_from": "the GPU's idle time (its own clock)" if idle is not None else "the host's wait for batches",
    }
    ratio = samples_per_s / sol_per_s
    if ratio > 1.0:  # a ceiling the window beat is no ceiling: never print an efficiency above 1
        window_step = wall * 1e3 / max(1, t.steps)
        return Metric(
            "input_efficiency",
            None,
            "fraction",
            reason=(
                f"the window ran {ratio:.2f}x its speed of light ({window_step:.3g} ms per step, fetch included, vs "
                f"{sol_step:.3g} ms fed a cached batch): the speed-of-light steps were slowed by something else "
                "(another process, threads beyond the cores), so they bound nothing; data wait "
                f"{wait:.1%} ({input_band(wait)})"
            ),
            detail=detail,
        )
    bound = 1.0 - waited
    if ratio > bound * (1.0 + SOL_SLACK):  # the speed of light says the step's own work took longer than it did
        compute = (
            (wall - sum(t.fetch_s)) * 1e3 / max(1, t.steps) if idle is None else bound * wall * 1e3 / max(1, t.steps)
        )
        what = (
            "the GPU's own steps, less its idle time between them"
            if idle is not None
            else "steps did without their fetch"
        )
        share = "the GPU was busy" if idle is not None else "not spent waiting"
        return Metric(
            "input_efficiency",
            None,
            "fraction",
            reason=(
                f"the speed-of-light step ({sol_step:.3g} ms fed a cached batch) took longer than the window's own "
                f"{what} ({compute:.3g} ms): it was slowed by something else (another process, threads beyond the "
                f"cores), so its efficiency ({ratio:.2f}) would exceed the {bound:.0%} of the window {share}; "
                + (f"GPU idle {idle:.1%}" if idle is not None else f"data wait {wait:.1%} ({input_band(wait)})")
            ),
            detail=detail,
        )
    return Metric("input_efficiency", ratio, "fraction", detail=detail)


def device_idle_share(t: WindowTimings) -> float | None:
    """The GPU's idle share of the window from its own clock (harness.idle); None on a CPU run."""
    idle = gpu_idle(t).value
    return float(idle) if isinstance(idle, (int, float)) else None


def _headroom(metrics: dict[str, Metric], target: float | None) -> Metric:
    """loader_headroom against the declared target, else against the speed of light's samples/s."""
    capacity = metrics.get("loader_capacity_samples_per_s")
    if target is not None:
        return loader_headroom(capacity, float(target), f"declared target_samples_per_s={target:g}")
    eff = metrics.get("input_efficiency")
    sol = eff.detail.get("sol_samples_per_s") if eff is not None else None
    if eff is None or not eff.available or not sol:
        why = eff.reason if eff is not None and eff.reason else "no speed of light was measured"
        return loader_headroom(capacity, None, f"{why}; declare target_samples_per_s")
    return loader_headroom(
        capacity, float(sol), f"the speed of light: the step fed a cached batch takes {float(sol):.4g} samples/s"
    )
