"""The metric registry: every metric perfsuite (or a user's probe) reports, declared once.

A :class:`MetricSpec` says what a metric is and how it may be judged:

* ``kind`` decides the rule (see :mod:`perfsuite.judge.engine`):

  - ``exact``: a count or amount the code path fixes (syncs per step, graph
    breaks, bytes copied, FLOPs). Compared exactly, in both directions.
  - ``flag``: yes/no (``amp_engaged``). Compared exactly.
  - ``fraction``: a deterministic fraction (``amp_lowp_frac``): exact.
  - ``label``: a text signature (``input_format``): any change is a change.
  - ``timing``: per-step samples (``step_ms``; ``data_wait_frac`` from its
    per-step fetch samples), judged statistically on the raw samples.
  - ``noisy``: a summary value of a noisy quantity (``gpu_util``, RSS):
    within ``tolerance`` it is unchanged, beyond it inconclusive, never a
    regression, because one value cannot tell noise from change.

* ``better``: ``lower``, ``higher`` or ``None`` (a label: no direction).
* ``family``: the label failure messages lead with (``host syncs``), shared
  by every metric of one cause; :mod:`perfsuite.judge.causes` explains families.
* ``probe``: the name of the probe that makes it (``runner`` for the
  runner's own), so an unavailable metric can say who did not measure it.

Thresholds (``max_<name>``/``min_<name>``/``<flag>=bool``), baselines, causes,
reports, the CLI and the catch table all read this table. A user's probe
declares its metrics with :func:`register` and can then be bounded in
markers and compared with baselines like the built-in ones.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from perfsuite.errors import PerfsuiteError

# One run a side cannot see how far runs of unchanged code drift apart, and step by step every step moves with
# its run: on a quiet 2-core VM, 6 of 172 A/A pairs of three jobs moved beyond x1.05, 1 beyond x1.15, none beyond x1.2
# (docs/contention.md, the rule's pilot). So a single base run's step_ms must move more than this; with 3 or
# more base runs, their measured spread replaces it (judge.timing.compare_between_runs).
SINGLE_PAIR_FACTOR = 1.2
KINDS = ("exact", "flag", "fraction", "label", "timing", "noisy")
# The loader cost's ratio rule, on per-batch CPU time against a calibration kernel timed beside it: a 10% margin,
# widened by CALIBRATION_TRUST (a power) of the calibration's own move between the runs: the smallest widening
# that kept A/A false alarms at or under 1% in every study of scripts/loader_power.py (docs/loader.md): 0 sufficed
# for gray_classifier's loader, face_parsing's needed the fourth root (10% of A/A pairs alarmed unwidened).
LOADER_FACTOR = 1.10
CALIBRATION_TRUST = 0.25
EXACT_KINDS = frozenset({"exact", "flag", "fraction", "label"})
DIRECTIONS = ("lower", "higher", None)


@dataclass(frozen=True)
class MetricSpec:
    """One metric's declaration; see the module docstring for the fields."""

    name: str
    unit: str
    kind: str
    better: str | None
    family: str
    probe: str
    description: str = ""
    tolerance: float = 0.0  # exact kinds: 0 (a float's rounding aside); noisy: relative, or absolute if abs_tol
    abs_tol: bool = False
    samples: str | None = None  # timing: the Result.samples key that holds the raw per-step values
    rule: str = "ratio"  # timing: "ratio" (median ratio), "shares" (fractions in [0, 1]) or "tail" (see verdicts)
    factor: float | None = None  # timing, ratio rule: the effect needed, when not the session's factor
    compared: bool = True  # False: shown, not judged against a baseline (it restates a judged metric)
    # timing: the Result.samples key of a machine-speed calibration measured beside each sample (same length).
    # Both sides are expressed at the base's median calibration before the rule: times divided by their
    # calibration, rates (better='higher') multiplied. CPU time of the same work moves with what shares the core;
    # the correction is trusted only so far: the rule's factor grows with how far the calibration moved.
    scale_by: str | None = None
    # timing, ratio rule: the samples are the measured window's steps in order, so two runs of one job pass the
    # same steps at the same positions (an epoch start, a periodic evaluation) and are judged step by step
    # (perfsuite.judge.timing.compare_paired) when both hold as many.
    step_order: bool = False

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise PerfsuiteError(f"metric name {self.name!r} must be an identifier, e.g. 'my_probe_count'")
        if self.kind not in KINDS:
            raise PerfsuiteError(f"metric {self.name}: kind={self.kind!r}; write one of {', '.join(KINDS)}")
        if self.better not in DIRECTIONS:
            raise PerfsuiteError(f"metric {self.name}: better={self.better!r}; write 'lower', 'higher' or None")
        if self.kind == "label" and self.better is not None:
            raise PerfsuiteError(f"metric {self.name}: a label has no better direction; write better=None")
        if self.kind not in ("label",) and self.better is None:
            raise PerfsuiteError(f"metric {self.name}: kind {self.kind!r} needs better='lower' or 'higher'")
        if not (math.isfinite(self.tolerance) and self.tolerance >= 0):
            raise PerfsuiteError(f"metric {self.name}: tolerance={self.tolerance!r} must be a finite number >= 0")
        if self.rule not in ("ratio", "shares", "tail"):
            raise PerfsuiteError(f"metric {self.name}: rule={self.rule!r}; write 'ratio', 'shares' or 'tail'")
        if self.kind == "timing" and not self.samples:
            raise PerfsuiteError(f"metric {self.name}: a timing metric names its samples key, e.g. samples='step_ms'")
        if self.scale_by is not None and (self.kind != "timing" or self.rule != "ratio"):
            raise PerfsuiteError(f"metric {self.name}: scale_by calibrates a timing metric's ratio rule only")
        if self.step_order and (self.kind != "timing" or self.rule != "ratio"):
            raise PerfsuiteError(f"metric {self.name}: step_order pairs the steps of a timing metric's ratio rule only")

    @property
    def exact(self) -> bool:
        """Deterministic on any machine: compared exactly and kept in the committed baselines."""
        return self.kind in EXACT_KINDS

    @property
    def boundable(self) -> str:
        """How a marker bounds it: ``flag`` (``name=True``), ``range`` (``min_``/``max_``), or ``""`` (a label)."""
        if self.kind == "flag":
            return "flag"
        return "" if self.kind == "label" else "range"


_REGISTRY: dict[str, MetricSpec] = {}


def register(spec: MetricSpec, *, replace: bool = False) -> MetricSpec:
    """Declare a metric. A second declaration of a name is refused unless it is identical or ``replace``."""
    known = _REGISTRY.get(spec.name)
    if known is not None and known != spec and not replace:
        raise PerfsuiteError(
            f"metric {spec.name!r} is already declared by probe {known.probe!r}; "
            "pick another name, or pass replace=True on purpose"
        )
    _REGISTRY[spec.name] = spec
    return spec


def get(name: str) -> MetricSpec:
    """The spec of ``name``; a PerfsuiteError listing the known names if there is none."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise PerfsuiteError(
            f"unknown metric {name!r}; known metrics: {', '.join(_REGISTRY)}. "
            "A probe of your own declares its metrics with perfsuite.register_metric"
        ) from None


def find(name: str) -> MetricSpec | None:
    return _REGISTRY.get(name)


def all_specs() -> Iterator[MetricSpec]:
    """Every declared metric, in declaration order (the order reports use)."""
    return iter(list(_REGISTRY.values()))


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def family(name: str) -> str:
    spec = _REGISTRY.get(name)
    return spec.family if spec else name


def _builtin(*specs: MetricSpec) -> None:
    for spec in specs:
        register(spec)


_builtin(
    # The runner's own: throughput and the step-time distribution of the measured window.
    MetricSpec(
        "samples_per_s",
        "samples/s",
        "noisy",
        "higher",
        "slow steps",
        "runner",
        "samples delivered per second of the measured window; judged through step_ms",
        tolerance=0.10,
        compared=False,
    ),
    MetricSpec(
        "step_ms",
        "ms",
        "timing",
        "lower",
        "slow steps",
        "runner",
        "per-step time; judged on the raw samples, step by step between runs of one shape, per sample when "
        "batch sizes differ",
        samples="step_ms",
        step_order=True,
        factor=SINGLE_PAIR_FACTOR,
    ),
    MetricSpec(
        "step_ms_p99",
        "ms",
        "timing",
        "lower",
        "step-time tail",
        "runner",
        "99th percentile of the window's step times; judged relative to each run's median",
        samples="step_ms",
        rule="tail",
        factor=1.5,
    ),
    MetricSpec(
        "step_ms_max",
        "ms",
        "timing",
        "lower",
        "step-time tail",
        "runner",
        "the slowest step of the window (a recompile or a restarted worker shows here); one step: "
        "never more than inconclusive alone",
        samples="step_ms",
        rule="tail",
        factor=2.0,
    ),
    MetricSpec(
        "stalls",
        "steps",
        "timing",
        "lower",
        "step-time tail",
        "runner",
        "steps of the window slower than 5x the median step",
        samples="step_ms",
        rule="tail",
        factor=2.0,
    ),
    # The step's CPU time (perfsuite.probes.contention): what a neighbour moves far less than wall time.
    MetricSpec(
        "step_cpu_ms",
        "ms",
        "timing",
        "lower",
        "slow steps",
        "contention",
        "the training thread's CPU time in each window step (job.step, fetch excluded): step_ms's load-robust "
        "companion, judged on the raw CPU time with the ledger's margin (the calibration kernel timed around "
        "the window moved on its own: scaled by it, 2 of 80 quiet A/A pairs alarmed, raw none); a run on more "
        "than one intra-op thread is guarded as wall-clock, since the thread's spin at each barrier while a "
        "helper waits for a core is CPU time",
        samples="step_cpu_ms",
        factor=LOADER_FACTOR,
    ),
    # The step's speed of light: the same step fed one batch kept on the device (after the window).
    MetricSpec(
        "input_efficiency",
        "fraction",
        "noisy",
        "higher",
        "data-bound",
        "runner",
        "samples/s over the speed of light's samples/s (the step fed one batch kept on the device, no "
        "loader); detail: the data-wait band (<5% not input-bound, 5-20% moderately, >20% highly)",
        tolerance=0.10,
        abs_tol=True,
    ),
    # Starvation on an asynchronous device (perfsuite.harness.idle) and predicted for a GPU runner
    # (perfsuite.judge.starvation).
    MetricSpec(
        "gpu_idle_frac",
        "fraction",
        "timing",
        "lower",
        "GPU starved",
        "runner",
        "share of the window's device time the GPU had no work because the next batch was not there, from its own "
        "clock (CUDA events at each step's request and once its batch was in hand); GPU only",
        samples="gpu_idle",
        rule="shares",
        tolerance=0.10,
    ),
    MetricSpec(
        "predicted_input_efficiency",
        "fraction",
        "noisy",
        "higher",
        "GPU starved (predicted)",
        "starvation",
        "input efficiency predicted for a named GPU runner (--predict-for, predict_for=): min(1, this run's loader "
        "supply scaled to the runner's host / the runner's recorded demand); detail: both sides and the limiting stage",
        tolerance=0.05,
        abs_tol=True,
    ),
    # Loader side.
    MetricSpec(
        "data_wait_frac",
        "fraction",
        "timing",
        "lower",
        "data-bound",
        "datawait",
        "share of the window blocked in next(loader); judged on per-step fetch shares",
        samples="data_wait",
        rule="shares",
        tolerance=0.10,
    ),
    MetricSpec(
        "epoch_fetch_ms",
        "ms",
        "timing",
        "lower",
        "data-bound",
        "datawait",
        "the fetches that started an epoch (workers forked again without persistent_workers)",
        samples="epoch_fetch_ms",
        factor=1.5,
    ),
    # The loader ledger (perfsuite.probes.loader): CPU time, which a shared CPU moves far less than wall time.
    MetricSpec(
        "loader_cpu_ms_per_sample",
        "ms/sample",
        "timing",
        "lower",
        "loader cost",
        "loader",
        "CPU time per sample of the loader's own code: Dataset.__getitem__ (its transform apart), collate_fn, "
        "pinning; replayed after the window on the same indices in every run (thread CPU time), judged per batch "
        "against a calibration kernel timed beside it; detail: each stage",
        samples="loader_cpu_ms",
        scale_by="loader_calib_ms",
        factor=LOADER_FACTOR,
    ),
    MetricSpec(
        "loader_process_cpu_ms_per_sample",
        "ms/sample",
        "noisy",
        "lower",
        "loader cost",
        "loader",
        "CPU time of the loader's processes over the window, read from the OS, per sample delivered: worker "
        "processes (reaped ones included), the pin thread and the training process's own loading; beyond the "
        "stages it holds forking workers and passing batches between processes",
        tolerance=0.25,
    ),
    MetricSpec(
        "main_load_ms_per_step",
        "ms/step",
        "timing",
        "lower",
        "loading in the training process",
        "loader",
        "CPU time the training process spends inside next(loader) per window step: all of the loading with "
        "num_workers=0; receiving batches (and forking workers at an epoch's start) with workers",
        samples="main_load_ms",
        factor=2.0,
    ),
    MetricSpec(
        "epoch_start_cpu_ms",
        "ms",
        "timing",
        "lower",
        "data-bound",
        "loader",
        "CPU time the training process spends in the fetches that start an epoch: forking the workers again "
        "without persistent_workers (tens of ms), where persistent workers only get their next indices (~2 ms, "
        "which doubles on a loaded machine)",
        samples="epoch_fetch_cpu_ms",
        factor=4.0,
    ),
    MetricSpec(
        "loader_capacity_samples_per_s",
        "samples/s",
        "timing",
        "higher",
        "loader capacity",
        "loader",
        "samples/s the loader's code allows: processes that may load at once (workers, capped by the usable cores; "
        "the training process with num_workers=0) / the stages' CPU per sample, judged per replayed batch; "
        "detail: after_overhead, with the window's worker overhead (forking, IPC) paid too",
        samples="loader_capacity",
        scale_by="loader_calib_ms",
        factor=1.5,
    ),
    MetricSpec(
        "loader_headroom",
        "x",
        "noisy",
        "higher",
        "loader capacity",
        "runner",
        "loader capacity after the worker overhead / the samples/s the step takes fed a cached batch (or a declared "
        "target_samples_per_s): below 1 the loader cannot feed the step; bound it with min_loader_headroom",
        tolerance=0.25,
    ),
    # GPU telemetry (NVML): noisy summaries.
    MetricSpec(
        "gpu_util",
        "fraction",
        "noisy",
        "higher",
        "GPU underfed",
        "nvml",
        "kernel-active time: the share of time some kernel ran (NVML utilization.gpu); one small kernel at a time "
        "reads 1.0, so gpu_sm_util says how many SMs worked",
        tolerance=0.05,
        abs_tol=True,
    ),
    MetricSpec("gpu_power_w", "W", "noisy", "higher", "GPU underfed", "nvml", tolerance=0.10),
    MetricSpec("gpu_mem_mb", "MB", "noisy", "lower", "memory", "nvml", tolerance=0.10),
    MetricSpec("sm_clock_mhz", "MHz", "noisy", "higher", "GPU underfed", "nvml", tolerance=0.10),
    # GPU Performance Monitoring (NVML GPM, Hopper and newer; perfsuite.probes.gpm): what the hardware did.
    MetricSpec(
        "gpu_sm_util",
        "fraction",
        "noisy",
        "higher",
        "GPU underfed",
        "nvml",
        "share of SMs busy (GPM); unavailable before Hopper",
        tolerance=0.05,
        abs_tol=True,
    ),
    MetricSpec(
        "gpu_sm_occupancy",
        "fraction",
        "noisy",
        "higher",
        "GPU underfed",
        "nvml",
        "resident warps over the SMs' maximum (GPM)",
        tolerance=0.05,
        abs_tol=True,
    ),
    MetricSpec(
        "gpu_tensor_active",
        "fraction",
        "noisy",
        "higher",
        "GPU underfed",
        "nvml",
        "share of time any tensor pipe ran (GPM): near 0 with AMP on says the matmuls miss the tensor cores",
        tolerance=0.05,
        abs_tol=True,
    ),
    MetricSpec(
        "gpu_dram_bw_util",
        "fraction",
        "noisy",
        "higher",
        "GPU underfed",
        "nvml",
        "DRAM bandwidth used over its peak (GPM)",
        tolerance=0.05,
        abs_tol=True,
    ),
    MetricSpec(
        "gpu_pcie_rx_mib_s",
        "MiB/s",
        "noisy",
        "lower",
        "more bytes copied",
        "nvml",
        "host-to-GPU PCIe traffic (GPM)",
        tolerance=0.10,
    ),
    MetricSpec(
        "gpu_pcie_tx_mib_s",
        "MiB/s",
        "noisy",
        "lower",
        "more bytes copied",
        "nvml",
        "GPU-to-host PCIe traffic (GPM)",
        tolerance=0.10,
    ),
    # The step: exact counts made in the observed steps.
    MetricSpec(
        "syncs_per_step",
        "syncs/step",
        "exact",
        "lower",
        "host syncs",
        "syncs",
        "every wait for the device the step forces, by kind (read, blocking or pageable copy, ...: docs/syncs.md), "
        "with call sites and periods (every N steps)",
    ),
    MetricSpec(
        "graph_breaks",
        "breaks",
        "exact",
        "lower",
        "graph breaks",
        "compile",
        "torch.compile graph breaks; unavailable when nothing was compiled",
    ),
    MetricSpec("recompiles", "recompiles", "exact", "lower", "recompiles", "compile"),
    MetricSpec("compile_s", "s", "noisy", "lower", "slow compile", "compile", tolerance=0.5),
    MetricSpec("amp_engaged", "", "flag", "higher", "AMP not engaged", "amp"),
    MetricSpec(
        "amp_lowp_frac",
        "fraction",
        "fraction",
        "higher",
        "AMP not engaged",
        "amp",
        "share of forward matmul/conv outputs in bf16/fp16",
        tolerance=1e-9,
    ),
    MetricSpec(
        "grad_scaler_bf16",
        "calls/step",
        "exact",
        "lower",
        "AMP misused",
        "amp",
        "GradScaler.scale calls in steps whose autocast ran bf16: loss scaling bf16 does not need",
    ),
    MetricSpec(
        "ops_per_step",
        "ops/step",
        "exact",
        "lower",
        "more work per step",
        "cost",
        "aten operations dispatched per step, with the top movers by name",
    ),
    MetricSpec(
        "h2d_bytes_per_step",
        "bytes/step",
        "exact",
        "lower",
        "more bytes copied",
        "cost",
        "bytes the step copies host->device, by dtype: .to(device), copy_ into a device tensor, "
        "torch.tensor(data, device=...) (on a CPU run: the copies a GPU run makes)",
    ),
    MetricSpec(
        "flops_per_step",
        "FLOP/step",
        "exact",
        "lower",
        "more work per step",
        "cost",
        "floating-point operations per step (torch's flop formulas, without global module hooks)",
    ),
    MetricSpec(
        "input_format",
        "",
        "label",
        None,
        "input format",
        "cost",
        "dtype and memory format of the model's input, and of its parameters",
    ),
    MetricSpec("peak_mem_mb", "MB", "noisy", "lower", "memory", "memory", tolerance=0.10),
    MetricSpec("peak_rss_mb", "MB", "noisy", "lower", "memory", "memory", tolerance=0.25),
    MetricSpec("label_violations", "violations", "exact", "lower", "misaligned targets", "labels"),
)


_builtin(
    # Runs on several ranks (perfsuite.harness.ranks.launch): the job as a whole, from every rank's figures.
    MetricSpec(
        "straggler_wait_frac",
        "fraction",
        "timing",
        "lower",
        "straggler rank",
        "ranks",
        "share of each step the first rank waits for the last at the step's collectives (forward buffer "
        "broadcast, first gradient bucket), from each rank's busy time since the previous one; detail: the "
        "straggler rank and the phase that makes it late",
        samples="straggler_wait",
        rule="shares",
        tolerance=0.10,
    ),
    MetricSpec(
        "input_skew_frac",
        "fraction",
        "timing",
        "lower",
        "input straggler",
        "ranks",
        "per step, the largest rank's share of step time in next(loader) minus the median rank's; detail: the "
        "rank whose loader lags",
        samples="input_skew",
        rule="shares",
        tolerance=0.10,
    ),
    MetricSpec(
        "scaling_efficiency",
        "fraction",
        "noisy",
        "higher",
        "scaling",
        "ranks",
        "samples/s on N ranks over N x samples/s on one rank, at the same per-rank batch, from interleaved "
        "runs; detail: its confidence interval",
        tolerance=0.10,
        abs_tol=True,
    ),
    MetricSpec(
        "dataset_passes_per_epoch",
        "passes",
        "fraction",
        "lower",
        "DDP sharding",
        "ranks",
        "samples all ranks draw in one epoch over the dataset's length: 1 with a DistributedSampler, N when "
        "every rank reads the whole dataset",
        tolerance=1e-9,
    ),
    MetricSpec(
        "repeated_epoch_orders",
        "epochs",
        "exact",
        "lower",
        "DDP shuffling",
        "ranks",
        "epochs whose sampled index order repeats an earlier epoch's on the same rank (set_epoch not called)",
    ),
    MetricSpec(
        "cpu_oversubscription",
        "threads/core",
        "fraction",
        "lower",
        "CPU oversubscribed",
        "ranks",
        "ranks x (intra-op threads + DataLoader workers) over the usable cores; above 1 they take turns",
        tolerance=1e-9,
    ),
    MetricSpec(
        "ddp_unused_search",
        "",
        "flag",
        "lower",
        "DDP unused-parameter search",
        "ranks",
        "find_unused_parameters=True while every parameter got its gradient in the observed steps: DDP walks "
        "the autograd graph after each forward for nothing",
    ),
)


_builtin(
    # The loader's work, counted in a replay after the window (perfsuite.probes.loadercount): exact for the same
    # code, data and library versions (detail "libraries"; a difference makes a comparison inconclusive).
    MetricSpec(
        "loader_calls_per_sample",
        "calls/sample",
        "exact",
        "lower",
        "loader work",
        "loadercount",
        "Python calls by callable and C calls by name per sample, replayed on fixed indices with seeded "
        "generators; detail by 'stage: callable' (__getitem__, transform, collate_fn), so a change names both",
    ),
    MetricSpec(
        "loader_decoded_pixels_per_sample",
        "pixels/sample",
        "exact",
        "lower",
        "loader work",
        "loadercount",
        "width x height of the PIL images decoded per sample (ImageFile.load), by stage",
    ),
    MetricSpec(
        "loader_read_bytes_per_sample",
        "bytes/sample",
        "exact",
        "lower",
        "loader work",
        "loadercount",
        "bytes the replay's thread read (files, pipes, sockets: rchar of /proc/thread-self/io) per sample, by stage",
    ),
    MetricSpec(
        "loader_blocking_calls_per_sample",
        "calls/sample",
        "exact",
        "lower",
        "loader work",
        "loadercount",
        "calls that wait (time.sleep, file and socket reads, lock acquires) per sample, by 'stage: callable'",
    ),
    MetricSpec(
        "loader_alloc_bytes_per_sample",
        "bytes/sample",
        "noisy",
        "lower",
        "loader work",
        "loadercount",
        "peak Python and NumPy allocations above each stage's start (tracemalloc; not torch's allocator), "
        "per sample, by stage; noisy: it moved by up to 3% between fresh processes (the interpreter's free lists)",
        tolerance=0.05,
    ),
    MetricSpec(
        "loader_output_bytes_per_sample",
        "bytes/sample",
        "exact",
        "lower",
        "loader work",
        "loadercount",
        "bytes of the arrays and tensors leaving each stage per sample (float64 where uint8 would do: x8)",
    ),
    MetricSpec(
        "loader_output_format",
        "",
        "label",
        None,
        "loader work",
        "loadercount",
        "types, dtypes and shapes leaving each stage: '__getitem__ -> tuple(Tensor uint8 1x64x64, ...)'",
    ),
    MetricSpec(
        "loader_offcpu_ms_per_sample",
        "ms/sample",
        "noisy",
        "lower",
        "loader work",
        "loadercount",
        "wall minus thread CPU time per sample in the counting replay (a sleep, a slow read), by stage; noisy: "
        "the exact loader_blocking_calls_per_sample says which call waits",
        tolerance=0.5,
        abs_tol=True,
    ),
)


KIND_RULES = {
    "exact": "exact, both ways",
    "flag": "exact",
    "fraction": "exact",
    "label": "any change fails",
    "timing": "raw per-step samples, statistically",
    "noisy": "within a tolerance, else inconclusive",
}


def render_table() -> str:
    """The metrics table of docs/metrics.md, generated from the registry (a test checks the page holds this text)."""
    lines = [
        "| metric | unit | kind: how it is compared | better | family (messages) | probe | what |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in all_specs():
        rule = KIND_RULES[s.kind] if s.compared else "shown, judged through step_ms"
        if s.kind == "noisy" and s.compared:
            rule += f" (±{s.tolerance:g}" + ("" if s.abs_tol else " relative") + ")"
        if s.kind == "timing" and s.rule == "shares":
            rule += f", a rise ≥ {s.tolerance:g} and p < α"
        elif s.kind == "timing" and s.rule == "tail":
            rule += f", relative to the run's median, x{s.factor:g} and an exact tail test"
        elif s.kind == "timing":
            rule += f", factor {s.factor:g}" if s.factor else ", the session's factor"
            if s.scale_by:
                rule += ", calibrated"
            if s.step_order:
                rule += ", step by step"
        lines.append(
            f"| `{s.name}` | {s.unit or '-'} | {s.kind}: {rule} | {s.better or '-'} | {s.family} | "
            f"`{s.probe}` | {s.description or '-'} |"
        )
    return "\n".join(lines) + "\n"
