"""Likely causes of a failed threshold or a regression, in the seeds' terms.

A bare "gpu_util 0.31 < 0.85" tells someone what is wrong but not where to
look. The seeds' GPUs idled for a handful of recurring reasons: augmentation
on CPU workers, too few workers, pin_memory off, AMP configured as a bool so
training ran in FP32, no torch.compile, the loss read back every step. This
module reads the metric and the run's knobs and names the ones that apply::

    data-bound: data_wait_frac 0.62 > 0.05 (augmentation on CPU workers, num_workers=2)

Two rules keep a cause honest on a user's own job:

* a knob is named only when its value is known: perfsuite set it (a reference
  workload), or read it from the user's objects (their DataLoader's
  ``num_workers``). A user's step knobs (amp, compile, log_interval) are not in
  ``Result.knobs``, so no cause is drawn from them; what was *measured* is
  named instead (the sync sites, the forward's dtypes);
* a slowdown is first placed where the time moved, from the raw per-step
  samples of base and head: into the wait for the next batch, or into the
  step's own compute (``time moved into data wait: fetch 3.1 -> 15.4
  ms/step``). Only then are causes named, from that side: the loader's (with
  the loader ledger's metrics when the Result has them), or the step's
  (measured signals that changed: syncs, ops, FLOPs, bytes, AMP, compile).

Pure functions over Verdict and Result; no pytest, no torch at import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfsuite.jobs.script import ran_a_script
from perfsuite.judge.sites import describe, short_path, site_changes
from perfsuite.probes.synckinds import fixes, site_op

if TYPE_CHECKING:
    from perfsuite.core.results import Result
    from perfsuite.judge.verdict import Verdict


@dataclass(frozen=True)
class Cause:
    """A label (``data-bound``) and the knobs or call sites that explain it."""

    label: str
    reasons: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.label}: {', '.join(self.reasons)}" if self.reasons else self.label


def explain(verdict: Verdict, result: Result, base: Result | None = None) -> Cause | None:
    """The likely cause of a failing or regressed verdict, led by the metric's family label.

    The family comes from the metric registry (:mod:`perfsuite.core.metrics`); a
    metric nobody declared gets no cause (None). ``base``: the Result the head
    was compared with, when there is one; timing verdicts then say where the
    time moved before naming causes from that side.
    """
    from perfsuite.core import metrics

    spec = metrics.find(verdict.metric)
    if spec is None:
        return None
    label = spec.family
    knobs = result.knobs
    if base is not None and label in _TIME_FAMILIES:
        moved = where_time_moved(base, result)
        if moved is not None:
            side, lead = moved
            reasons = _moved_loader(base, result) if side == "data" else _moved_step(base, result)
            return Cause(label, tuple(dict.fromkeys([lead, *reasons])))
    if base is not None and verdict.metric == "syncs_per_step":
        name = verdict.metric
        changed = [str(c) for c in site_changes(base.metric(name).detail, result.metric(name).detail)]
        if changed:  # what changed since the base, new and gone sites first, rather than head's busiest sites
            head = result.metric(name).detail
            uneven = _uneven_ranks(head, "syncs/step")  # and which ranks do it
            fix = fixes(head.get("kinds"), base.metric(name).detail.get("kinds"))
            return Cause(label, tuple([*changed[:3], *uneven, *fix]))
    finder = _FINDERS.get(label, lambda k, r: ())
    changed = _changed_knobs(base, result, LOADER_KNOBS) if base is not None and spec.probe == "loader" else []
    return Cause(label, tuple(dict.fromkeys([*changed, *finder(knobs, result)])))


def untuned(knobs: Mapping[str, Any], tuned: Mapping[str, Any]) -> list[str]:
    """Each knob the run no longer has as perfsuite tune chose it: ``num_workers=0 (tuned: 2)``."""
    return [
        f"{name}={knobs.get(name)!r} (perfsuite tune chose {name}={value!r})"
        for name, value in tuned.items()
        if name in knobs and knobs.get(name) != value
    ]


def with_tuning(cause: Cause | None, result: Result, tuned: Mapping[str, Any]) -> Cause | None:
    """The cause, led by the tuned knobs this run undoes (the thresholds' ``tuned`` table), if any."""
    undone = untuned(result.knobs, tuned) if tuned else []
    if not undone:
        return cause
    label = f"undoes the tuning{': ' + cause.label if cause else ''}"
    return Cause(label, (*undone, *(cause.reasons if cause else ())))


def failure_line(verdict: Verdict, cause: Cause | None) -> str:
    """``data-bound: data_wait_frac 0.62 > 0.05 (augmentation on CPU workers, num_workers=2)``."""
    if cause is None:
        return verdict.message
    reasons = f" ({', '.join(cause.reasons)})" if cause.reasons else ""
    return f"{cause.label}: {verdict.message}{reasons}"


# --------------------------------------------------------------------------- finders per family


def _on_cuda(knobs: Mapping[str, Any]) -> bool:
    return str(knobs.get("device", "cpu")).startswith("cuda")


def _data_bound(knobs: Mapping[str, Any], result: Result) -> list[str]:
    """Loader-side reasons (seeds 000 and 002)."""
    out = []
    if knobs.get("aug") == "cpu":
        out.append("augmentation on CPU workers")
    workers = knobs.get("num_workers")
    if workers == 0:
        out.append("num_workers=0: batches decode in the training process")
    elif workers is not None:
        out.append(f"num_workers={workers}")
    if _on_cuda(knobs) and knobs.get("pin_memory") is False:
        out.append("pin_memory=False")
    epochs = result.metric("data_wait_frac").detail.get("epochs_started", 0)
    if workers and knobs.get("persistent_workers") is False and epochs:
        out.append("persistent_workers=False: workers restart every epoch")
    if knobs.get("eval_interval"):
        out.append(f"evaluation every {knobs['eval_interval']} steps")
    return out


def _step_side(knobs: Mapping[str, Any], result: Result) -> list[str]:
    """Device-side reasons (seed 003): precision, compile, syncs. Knobs only where perfsuite set them; a user's
    job gets what was measured (its sync sites), never ``amp=None`` for a setting its code holds."""
    out = []
    if "amp" in knobs and knobs["amp"] is None:
        out.append("amp=None: training runs in FP32")
    if "compile" in knobs and knobs["compile"] is None:
        out.append("compile=None: no torch.compile")
    if knobs.get("log_interval") == 1:
        out.append("loss read back every step")
    if "log_interval" not in knobs:  # a user's job: its reads, where they are
        out += _sync_sites(result.metric("syncs_per_step").detail)[:2]
    return out


def _underfed(knobs: Mapping[str, Any], result: Result) -> list[str]:
    wait = result.value("data_wait_frac")
    loader = _data_bound(knobs, result)
    step = _step_side(knobs, result)
    # The measured wait decides which side to name first; without it, both in seed order.
    if wait is not None and wait < 0.05:
        return [r for r in step if not r.startswith("amp=None")] + loader
    return loader + step


def _slow(knobs: Mapping[str, Any], result: Result) -> list[str]:
    wait = result.value("data_wait_frac")
    if wait is not None and wait >= 0.2:
        return [f"data_wait_frac {wait:.2f}", *_data_bound(knobs, result)]
    return _step_side(knobs, result) + _data_bound(knobs, result)


# --------------------------------------------------------------------------- where the time moved

_TIME_FAMILIES = frozenset({"slow steps", "data-bound", "GPU underfed"})
# The loader ledger's metrics (perfsuite doctor's, issue 20), read by name when a Result has them.
LOADER_KNOBS = ("num_workers", "prefetch_factor", "persistent_workers", "pin_memory", "aug")  # a Result's knobs
LEDGER_METRICS = ("loader_cpu_ms_per_sample", "main_load_ms_per_step", "loader_capacity_samples_per_s")
# Measured signals of the step itself, compared base -> head when the time moved into the step.
STEP_SIGNALS = (
    "syncs_per_step",
    "ops_per_step",
    "flops_per_step",
    "h2d_bytes_per_step",
    "amp_lowp_frac",
    "graph_breaks",
    "recompiles",
    "input_format",
)


def _split_ms(result: Result) -> tuple[float, float] | None:
    """Median per-step (wait for the batch, the rest of the step) in ms, from the window's raw samples."""
    import statistics

    steps, fetches = result.samples.get("step_ms") or [], result.samples.get("fetch_ms") or []
    if not steps or len(steps) != len(fetches):
        return None
    compute = [max(0.0, s - f) for s, f in zip(steps, fetches)]
    return statistics.median(fetches), statistics.median(compute)


def where_time_moved(base: Result, head: Result) -> tuple[str, str] | None:
    """("data" or "step", the sentence saying so) from the per-step split of base and head; None without samples."""
    b, h = _split_ms(base), _split_ms(head)
    if b is None or h is None:
        return None
    d_wait, d_step = h[0] - b[0], h[1] - b[1]
    wait = f"fetch {b[0]:.3g} -> {h[0]:.3g} ms/step ({d_wait:+.3g})"
    step = f"the step's compute {b[1]:.3g} -> {h[1]:.3g} ms/step ({d_step:+.3g})"
    if d_wait >= d_step:
        return "data", f"time moved into data wait: {wait}; {step}"
    return "step", f"time moved into the step: {step}; {wait}"


def _changed_knobs(base: Result, head: Result, names: tuple[str, ...]) -> list[str]:
    """Known knobs of ``names`` whose value differs between base and head (a knob neither run knows is skipped)."""
    out = []
    for name in names:
        if name in base.knobs and name in head.knobs and base.knobs[name] != head.knobs[name]:
            out.append(f"{name} {base.knobs[name]!r} -> {head.knobs[name]!r}")
    return out


def _moved_loader(base: Result, head: Result) -> list[str]:
    """The loader's side of a slowdown: ledger metrics that moved, loader knobs that changed, the loader now."""
    out = []
    for name in LEDGER_METRICS:
        b, h = base.metric(name), head.metric(name)
        if b.available and h.available and b.value != h.value:
            out.append(f"{name} {b.value:.3g} -> {h.value:.3g}")
    out += _changed_knobs(base, head, LOADER_KNOBS)
    out += _changed_knobs(base, head, ("batch_size", "eval_interval", "cutmix", "mixup"))
    return out or _data_bound(head.knobs, head)


def _moved_step(base: Result, head: Result) -> list[str]:
    """The step's side of a slowdown: measured signals that changed, then step knobs perfsuite set that changed."""
    from perfsuite.judge.verdict import format_value

    out = []
    for name in STEP_SIGNALS:
        b, h = base.metric(name), head.metric(name)
        if b.available and h.available and b.value != h.value:
            moved = movers(b.detail, h.detail, top=2)
            out.append(f"{name} {format_value(b.value)} -> {format_value(h.value)}" + (f" ({moved})" if moved else ""))
        elif b.available != h.available:
            out.append(f"{name} {'now unavailable: ' + str(h.reason) if b.available else 'now measured'}")
    step_knobs = ("amp", "compile", "channels_last", "tf32", "cudnn_benchmark", "fused", "log_interval")
    return out + _changed_knobs(base, head, step_knobs)


def _syncs(knobs: Mapping[str, Any], result: Result) -> list[str]:
    detail = result.metric("syncs_per_step").detail
    sites = _sync_sites(detail) + _uneven_ranks(detail, "syncs/step")
    if sites:
        return sites + fixes(detail.get("kinds"))
    out = []
    interval = knobs.get("log_interval") or 0
    if interval:
        every = "once per step" if interval == 1 else f"every {interval} steps"
        out.append(f"loss.item() in the training step, {every}")
    if knobs.get("eval_interval"):
        out.append(f"evaluation reads its loss back every {knobs['eval_interval']} steps")
    return out


def _sync_sites(detail: Mapping[str, Any]) -> list[str]:
    """Call sites from the sync probe's detail, in whatever of its shapes: strings or dicts."""
    raw = detail.get("sites") or detail.get("call_sites") or []
    out = []
    for site in raw[:3]:
        if isinstance(site, str):
            out.append(site)
        elif isinstance(site, Mapping):
            where = site.get("where") or site.get("site") or site.get("location") or "?"
            what = site_op(site)
            count = site.get("per_step") or site.get("count")
            per_step = f", {format_count(count)} per step" if count is not None else ""
            every = site.get("every")
            if isinstance(every, int) and every > 1:
                per_step = f", every {every} steps ({format_count(count)} per step)"
            out.append(f"{what} at {short_path(str(where))}{per_step}")
    return out


def own_changes(base_by: Any, head_by: Any, ops: Sequence[str]) -> str:
    """``PIL.Image.Image.resize 3 -> 4 per sample itself``: the callee's own count, from ``by`` (``stage: callable``),
    for each callable a site change names. A site counts every call under its line (a resize's own inner calls
    too), so +24/sample there can be one more resize: its own change is what a reader looks for first."""
    from perfsuite.judge.verdict import format_value

    if not (isinstance(base_by, Mapping) and isinstance(head_by, Mapping)):
        return ""

    def own(by: Mapping[str, Any], op: str) -> float:
        return sum(float(v) for k, v in by.items() if ": " in str(k) and str(k).rsplit(": ", 1)[-1] == op)

    out = []
    for op in dict.fromkeys(o for o in ops if o):
        b, h = own(base_by, op), own(head_by, op)
        if b != h:
            out.append(f"{op} {format_value(b)} -> {format_value(h)} per sample itself")
    return ", ".join(out)


def movers(
    base_detail: Mapping[str, Any], head_detail: Mapping[str, Any], top: int = 3, head_scale: float = 1.0
) -> str:
    """What moved inside a metric: call sites (``sites``: new and gone first, :mod:`perfsuite.judge.sites`)
    or the biggest changes in ``by``.

    ``head_scale`` multiplies head's ``by`` figures: a calibrated metric puts them at the base's speed, as
    its verdict's own figures are.
    """
    from perfsuite.judge.verdict import format_value

    if "by_site" in head_detail or "by_site" in base_detail:  # a count kept by name and by call site
        if all("sites" in d or "by_site" in d for d in (base_detail, head_detail)):
            moved = site_changes(base_detail, head_detail)
            named = describe(moved, top)
            if named:
                own = own_changes(base_detail.get("by"), head_detail.get("by"), [c.op for c in moved[:top]])
                return f"{own}; under the line: {named}" if own else named
        # one side recorded before its sites were kept: what moved by name
        base_detail = {k: v for k, v in base_detail.items() if k not in ("sites", "by_site")}
        head_detail = {k: v for k, v in head_detail.items() if k not in ("sites", "by_site")}
    if "sites" in head_detail or "sites" in base_detail:  # call sites, matched by code, not line
        return describe(site_changes(base_detail, head_detail), top)
    b_by, h_by = base_detail.get("by"), head_detail.get("by")
    if isinstance(b_by, Mapping) and isinstance(h_by, Mapping):
        h_by = {k: float(v) * head_scale for k, v in h_by.items()}
        keys = set(b_by) | set(h_by)
        changes = sorted(
            ((float(h_by.get(k, 0)) - float(b_by.get(k, 0)), k) for k in keys), key=lambda c: (-abs(c[0]), c[1])
        )
        return ", ".join(
            f"{k} {format_value(float(b_by.get(k, 0)))} -> {format_value(float(h_by.get(k, 0)))}"
            for delta, k in changes[:top]
            if delta
        )
    examples = head_detail.get("examples")
    if isinstance(examples, list) and examples:
        return str(examples[0])[:240]
    return ""


def format_count(count: Any) -> str:
    return f"{count:g}" if isinstance(count, float) else str(count)


def _graph_breaks(knobs: Mapping[str, Any], result: Result) -> list[str]:
    reasons = result.metric("graph_breaks").detail.get("reasons") or []
    out = [str(r.get("reason") or r.get("text") or r) if isinstance(r, Mapping) else str(r) for r in reasons[:2]]
    return out or ([f"compile={knobs['compile']!r}"] if "compile" in knobs else [])


def _recompiles(knobs: Mapping[str, Any], result: Result) -> list[str]:
    reasons = result.metric("recompiles").detail.get("reasons") or []
    out = [f"{r.get('frame')}: {r.get('reason')}" for r in reasons[:2] if isinstance(r, Mapping)]
    if out:
        return out
    short = " (drop_last=False leaves a short last batch)" if knobs.get("drop_last") is False else ""
    return [f"shapes or guards change between steps{short}"]


def _amp(knobs: Mapping[str, Any], result: Result) -> list[str]:
    if "amp" not in knobs:  # a user's job: what the forward computed, not a setting perfsuite cannot see
        detail = result.metric("amp_lowp_frac").detail
        dtypes = detail.get("dtypes") or {}
        if not dtypes:
            return []
        shown = ", ".join(f"{k} x{v}" for k, v in sorted(dtypes.items(), key=lambda kv: -kv[1]))
        said = "on" if detail.get("autocast_enabled") else "off"
        return [f"the forward's matmul/conv outputs were {shown} per observed steps, autocast {said}"]
    amp = knobs["amp"]
    if amp is None:
        return ["amp=None: training runs in FP32 (a config 'amp: true' compared with 'bf16' ends here)"]
    return [f"amp={amp!r} is set but few ops ran in low precision: is the forward pass inside autocast?"]


def _memory(knobs: Mapping[str, Any], result: Result) -> list[str]:
    out = []
    if knobs.get("num_workers"):
        out.append(f"num_workers={knobs['num_workers']}: each worker holds its own copy of the dataset state")
    if knobs.get("prefetch_factor"):
        out.append(f"prefetch_factor={knobs['prefetch_factor']}")
    if knobs.get("batch_size"):
        out.append(f"batch_size={knobs['batch_size']}")
    return out


def _labels(knobs: Mapping[str, Any], result: Result) -> list[str]:
    if "aug" in knobs:
        return [f"aug={knobs['aug']!r}: image and target were not transformed with the same parameters"]
    examples = result.metric("label_violations").detail.get("examples") or []
    return [str(examples[0])[:200]] if examples else ["targets outside the declared classes reached the loss"]


def _compile_time(knobs: Mapping[str, Any], result: Result) -> list[str]:
    return [f"compile={knobs['compile']!r}"] if "compile" in knobs else []


def _bytes(knobs: Mapping[str, Any], result: Result) -> list[str]:
    """Which dtypes cross to the device now, largest first: int64 targets or float64 inputs multiply the bytes."""
    by = result.metric("h2d_bytes_per_step").detail.get("by") or {}
    out = []
    if by:
        out.append(
            "bytes by dtype now: " + ", ".join(f"{k} {v:g}" for k, v in sorted(by.items(), key=lambda kv: -kv[1]))
        )
    wide = [d for d in ("float64", "int64") if by.get(d)]
    if wide:
        out.append(
            f"{'/'.join(wide)} tensors cross to the device: ship uint8 (images, masks) and convert on the device"
        )
    return out


def _work(knobs: Mapping[str, Any], result: Result) -> list[str]:
    by = result.metric("ops_per_step").detail.get("by") or {}
    top = ", ".join(f"{name} x{count:g}" for name, count in list(by.items())[:3])
    return [f"most frequent ops now: {top}"] if top else []


def _format(knobs: Mapping[str, Any], result: Result) -> list[str]:
    fmt = result.value("input_format")
    out = [str(fmt)] if fmt else []
    if (
        fmt
        and "input" in str(fmt)
        and "channels_last" in str(fmt).split(";")[0]
        and "channels_last" not in str(fmt).split(";")[-1]
    ):
        out.append("a channels_last input to a contiguous (NCHW) model: every convolution converts it back")
    return out


def _amp_misuse(knobs: Mapping[str, Any], result: Result) -> list[str]:
    return ["GradScaler with bf16 autocast: bf16 needs no loss scaling; drop the scaler (keep it for fp16)"]


def _tail(knobs: Mapping[str, Any], result: Result) -> list[str]:
    out = [f"{result.value('stalls')} stall(s) over 5x the median step"] if result.value("stalls") else []
    if result.value("recompiles"):
        out.append(f"{result.value('recompiles')} recompile(s)")
    return out


def _loader_cost(knobs: Mapping[str, Any], result: Result) -> list[str]:
    """The stage that costs the most now, and the user's callable that runs it."""
    detail = result.metric("loader_cpu_ms_per_sample").detail
    by, code = detail.get("by") or {}, detail.get("code") or {}
    out = []
    if by:
        stage = max(by, key=lambda k: by[k])
        where = f" ({code[stage]})" if code.get(stage) else ""
        out.append(f"costliest stage now: {stage}{where}, {by[stage]:.3g} ms/sample")
    if knobs.get("aug") == "cpu":
        out.append("augmentation on CPU workers")
    return out


def _main_load(knobs: Mapping[str, Any], result: Result) -> list[str]:
    workers = knobs.get("num_workers")
    if workers == 0:
        return ["num_workers=0: the training process decodes every batch itself, between its steps"]
    return [f"num_workers={workers}"] if workers is not None else []


def _capacity(knobs: Mapping[str, Any], result: Result) -> list[str]:
    detail = result.metric("loader_capacity_samples_per_s").detail
    out = []
    if detail.get("processes"):
        out.append(f"{detail['processes']} process(es) load at once ({detail.get('cores', '')})")
    if knobs.get("num_workers") is not None:
        out.append(f"num_workers={knobs['num_workers']}")
    return out


def _uneven_ranks(detail: Mapping[str, Any], unit: str) -> list[str]:
    """On several ranks: which ranks do it, when they differ (rank 0 only: the others wait for it)."""
    by_rank = detail.get("by_rank")
    if not isinstance(by_rank, Mapping) or len({repr(v) for v in by_rank.values()}) < 2:
        return []
    shown = ", ".join(f"rank {r} {format_count(v)}" for r, v in by_rank.items())
    return [f"not the same on every rank ({shown} {unit}): the other ranks wait for it at the next collective"]


def _summary(name: str) -> Any:
    def find(knobs: Mapping[str, Any], result: Result) -> list[str]:
        summary = result.metric(name).detail.get("summary")
        return [str(summary)] if summary else []

    return find


def _straggler(knobs: Mapping[str, Any], result: Result) -> list[str]:
    detail = result.metric("straggler_wait_frac").detail
    out = _summary("straggler_wait_frac")(knobs, result)
    lags = detail.get("lag_ms_by_rank")
    if isinstance(lags, Mapping):
        out.append("mean lag per step: " + ", ".join(f"rank {r} {float(v):.1f} ms" for r, v in lags.items()))
    return out


def _scaling(knobs: Mapping[str, Any], result: Result) -> list[str]:
    out = []
    d = result.metric("scaling_efficiency").detail
    if "low" in d:
        out.append(f"{d.get('confidence', 0.95):.0%} CI {d['low']:.2f}..{d['high']:.2f} over {d.get('rounds')} rounds")
    for name in ("straggler_wait_frac", "input_skew_frac"):
        summary = result.metric(name).detail.get("summary")
        if summary and not str(summary).startswith("no "):
            out.append(str(summary))
    over = result.value("cpu_oversubscription")
    if over is not None and over > 1:
        out.append(f"cpu_oversubscription {over:.2f}: ranks x (threads + workers) above the cores")
    return out


def _sharding(knobs: Mapping[str, Any], result: Result) -> list[str]:
    d = result.metric("dataset_passes_per_epoch").detail
    by_rank = d.get("epoch_samples_by_rank") or {}
    out = []
    if by_rank:
        each = ", ".join(f"rank {r} {v}" for r, v in by_rank.items())
        out.append(f"samples per epoch: {each} of a {d.get('dataset_len')}-sample dataset")
    passes = result.value("dataset_passes_per_epoch")
    if passes is not None and passes > 1.0 + 1e-9:
        out.append("every rank reads the whole dataset: give the loader a DistributedSampler")
    return out


def _shuffling(knobs: Mapping[str, Any], result: Result) -> list[str]:
    d = result.metric("repeated_epoch_orders").detail
    out = []
    if d.get("epochs"):
        out.append(f"{d.get('distinct_orders')} distinct order(s) in {d['epochs']} epochs")
    where = "in the script's loop" if ran_a_script(result) else "(Job(epoch_start=sampler.set_epoch))"
    out.append(f"call sampler.set_epoch(epoch) before each epoch {where}")
    return out


def _oversubscribed(knobs: Mapping[str, Any], result: Result) -> list[str]:
    d = result.metric("cpu_oversubscription").detail
    out = [str(d["rule"])] if d.get("rule") else []
    workers = d.get("workers_by_rank") or {}
    if workers:
        out.append("num_workers per rank: " + ", ".join(f"rank {r} {v}" for r, v in workers.items()))
    return out


def _unused_search(knobs: Mapping[str, Any], result: Result) -> list[str]:
    d = result.metric("ddp_unused_search").detail
    steps = d.get("unused_per_observed_step") or []
    return [
        f"find_unused_parameters={d.get('find_unused_parameters')}, unused parameters per observed step: "
        f"{steps}: write DistributedDataParallel(model) without it"
    ]


_FINDERS = {
    "data-bound": _data_bound,
    "GPU underfed": _underfed,
    "slow steps": _slow,
    "host syncs": _syncs,
    "graph breaks": _graph_breaks,
    "recompiles": _recompiles,
    "slow compile": _compile_time,
    "AMP not engaged": _amp,
    "memory": _memory,
    "misaligned targets": _labels,
    "more bytes copied": _bytes,
    "more work per step": _work,
    "input format": _format,
    "AMP misused": _amp_misuse,
    "step-time tail": _tail,
    "loader cost": _loader_cost,
    "loading in the training process": _main_load,
    "loader capacity": _capacity,
    "straggler rank": _straggler,
    "input straggler": _summary("input_skew_frac"),
    "scaling": _scaling,
    "DDP sharding": _sharding,
    "DDP shuffling": _shuffling,
    "CPU oversubscribed": _oversubscribed,
    "DDP unused-parameter search": _unused_search,
}
