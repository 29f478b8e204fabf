"""Likely causes of a failed threshold or a regression, in the seeds' terms.

A bare "gpu_util 0.31 < 0.85" tells someone what is wrong but not where to
look. The seeds' GPUs idled for a handful of recurring reasons: augmentation
on CPU workers, too few workers, pin_memory off, AMP configured as a bool so
training ran in FP32, no torch.compile, the loss read back every step. This
module reads the metric and the run's knobs and names the ones that apply::

    data-bound: data_wait_frac 0.62 > 0.05 (augmentation on CPU workers, num_workers=2)

Pure functions over Verdict and Result; no pytest, no torch at import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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


def explain(verdict: Verdict, result: Result) -> Cause | None:
    """The likely cause of a failing or regressed verdict, led by the metric's family label.

    The family comes from the metric registry (:mod:`perfsuite.core.metrics`); a
    metric nobody declared gets no cause (None).
    """
    from perfsuite.core import metrics

    spec = metrics.find(verdict.metric)
    if spec is None:
        return None
    label = spec.family
    knobs = result.knobs
    finder = _FINDERS.get(label, lambda k, r: ())
    return Cause(label, tuple(dict.fromkeys(finder(knobs, result))))


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
    if _on_cuda(knobs) and not knobs.get("pin_memory"):
        out.append("pin_memory=False")
    epochs = result.metric("data_wait_frac").detail.get("epochs_started", 0)
    if workers and not knobs.get("persistent_workers") and epochs:
        out.append("persistent_workers=False: workers restart every epoch")
    if knobs.get("eval_interval"):
        out.append(f"evaluation every {knobs['eval_interval']} steps")
    return out


def _step_side(knobs: Mapping[str, Any], result: Result) -> list[str]:
    """Device-side reasons (seed 003): precision, compile, syncs."""
    out = []
    if knobs.get("amp") is None:
        out.append("amp=None: training runs in FP32")
    if knobs.get("compile") is None:
        out.append("compile=None: no torch.compile")
    if knobs.get("log_interval") == 1:
        out.append("loss read back every step")
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


def _syncs(knobs: Mapping[str, Any], result: Result) -> list[str]:
    detail = result.metric("syncs_per_step").detail
    sites = _sync_sites(detail) + _uneven_ranks(detail, "syncs/step")
    if sites:
        return sites
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
            what = site.get("call") or site.get("op") or "sync"
            count = site.get("per_step") or site.get("count")
            per_step = f", {format_count(count)} per step" if count is not None else ""
            out.append(f"{what} at {short_path(str(where))}{per_step}")
    return out


def short_path(where: str) -> str:
    """``.../site-packages/kornia/x.py:98`` -> ``kornia/x.py:98``: the package, not the virtualenv."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in where:
            return where.split(marker, 1)[1]
    return where


def format_count(count: Any) -> str:
    return f"{count:g}" if isinstance(count, float) else str(count)


def _graph_breaks(knobs: Mapping[str, Any], result: Result) -> list[str]:
    reasons = result.metric("graph_breaks").detail.get("reasons") or []
    out = [str(r.get("reason") or r.get("text") or r) if isinstance(r, Mapping) else str(r) for r in reasons[:2]]
    return out or [f"compile={knobs.get('compile')!r}"]


def _recompiles(knobs: Mapping[str, Any], result: Result) -> list[str]:
    reasons = result.metric("recompiles").detail.get("reasons") or []
    out = [f"{r.get('frame')}: {r.get('reason')}" for r in reasons[:2] if isinstance(r, Mapping)]
    return out or ["shapes or guards change between steps (drop_last=False leaves a short last batch)"]


def _amp(knobs: Mapping[str, Any], result: Result) -> list[str]:
    amp = knobs.get("amp")
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
    return [f"aug={knobs.get('aug')!r}: image and target were not transformed with the same parameters"]


def _compile_time(knobs: Mapping[str, Any], result: Result) -> list[str]:
    return [f"compile={knobs.get('compile')!r}"]


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
    out.append("call sampler.set_epoch(epoch) before each epoch (Job(epoch_start=sampler.set_epoch))")
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
    "straggler rank": _straggler,
    "input straggler": _summary("input_skew_frac"),
    "scaling": _scaling,
    "DDP sharding": _sharding,
    "DDP shuffling": _shuffling,
    "CPU oversubscribed": _oversubscribed,
    "DDP unused-parameter search": _unused_search,
}
