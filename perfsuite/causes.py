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

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfsuite.results import Result
    from perfsuite.verdicts import Verdict

# Which family a metric's failure belongs to, and the label that family gets.
_LABELS = {
    "data_wait_frac": "data-bound",
    "gpu_util": "GPU underfed", "gpu_power_w": "GPU underfed", "sm_clock_mhz": "GPU underfed",
    "samples_per_s": "slow steps", "step_ms": "slow steps",
    "syncs_per_step": "host syncs",
    "graph_breaks": "graph breaks", "recompiles": "recompiles", "compile_s": "slow compile",
    "amp_engaged": "AMP not engaged", "amp_lowp_frac": "AMP not engaged",
    "peak_mem_mb": "memory", "peak_rss_mb": "memory", "gpu_mem_mb": "memory",
    "label_violations": "misaligned targets",
}


@dataclass(frozen=True)
class Cause:
    """A label (``data-bound``) and the knobs or call sites that explain it."""

    label: str
    reasons: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.label}: {', '.join(self.reasons)}" if self.reasons else self.label


def explain(verdict: Verdict, result: Result) -> Cause | None:
    """The likely cause of a failing or regressed verdict; None for metrics we know nothing about."""
    label = _LABELS.get(verdict.metric)
    if label is None:
        return None
    knobs = result.knobs
    finder = _FINDERS.get(label, lambda k, r: ())
    return Cause(label, tuple(dict.fromkeys(finder(knobs, result))))


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
    sites = _sync_sites(result.metric("syncs_per_step").detail)
    if sites:
        return sites
    out = []
    interval = knobs.get("log_interval") or 0
    if interval:
        every = "once per step" if interval == 1 else f"every {interval} steps"
        out.append(f"loss.item() at {pipeline_site('.item()')}, {every}")
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


_FINDERS = {
    "data-bound": _data_bound, "GPU underfed": _underfed, "slow steps": _slow, "host syncs": _syncs,
    "graph breaks": _graph_breaks, "recompiles": _recompiles, "slow compile": _compile_time,
    "AMP not engaged": _amp, "memory": _memory, "misaligned targets": _labels,
}


def pipeline_site(needle: str) -> str:
    """``perfsuite/pipeline.py:144``: where the training step does ``needle`` (for messages)."""
    try:
        from perfsuite import pipeline

        lines, start = inspect.getsourcelines(pipeline.Pipeline.step)
        path = Path(inspect.getsourcefile(pipeline.Pipeline) or "pipeline.py")
    except (ImportError, OSError, TypeError):
        return "perfsuite/pipeline.py"
    where = f"{path.parent.name}/{path.name}"
    for offset, line in enumerate(lines):
        if needle in line:
            return f"{where}:{start + offset}"
    return where
