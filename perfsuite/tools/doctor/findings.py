"""The doctor's rules: one small function per kind of finding, each reading the evidence and the counterfactuals.

Each rule returns a :class:`Finding` (or None when its evidence is absent): what limits the job, the
evidence, the fix, and the fix's gain predicted beside measured. A measurement is looked up by its
:class:`Fix`, the key its run was stored under. :func:`findings` applies the rules and ranks them: measured
gains first (largest first), then the bottleneck, then by predicted gain; a fix measured but joined to no
rule's finding gets one of its own, so no measurement is left out.
"""

from __future__ import annotations

from perfsuite.harness.runner import input_band
from perfsuite.tools.doctor import predictions as predict
from perfsuite.tools.doctor.evidence import BUSY_PRESSURE, BUSY_RUN_QUEUE, Evidence
from perfsuite.tools.doctor.model import (
    CONFIDENCE,
    Counterfactuals,
    Finding,
    Fix,
    Measured,
    Predicted,
    Tried,
    Unavailable,
    known,
)
from perfsuite.tools.doctor.stats import ci

STAGE_FIXES = {
    "collate_fn": "make {code} cheap: stack arrays (torch.utils.data.default_collate) instead of per-sample Python",
    "transform": "move the random part of {code} to the device, batched (perfsuite: aug='gpu'; Kornia), "
    "or make it cheaper",
    "__getitem__": "{code} reads and decodes: store images at the size you train on, or decode on the GPU "
    "(torchvision.io.decode_jpeg(device='cuda'), DALI)",
    "pin_memory": "pin fewer bytes: ship uint8 from the loader and convert on the device",
    "worker processes": "DataLoader(persistent_workers=True): the workers are forked again at every epoch now",
    "worker processes (persistent)": "a larger batch_size: fewer batches to pass between processes per sample",
}
STAGE_NOT_TRIED = {
    "collate_fn": "a change to {code}, the job's code: perfsuite cannot make it for you",
    "transform": "a change to {code}: moving it to the device needs a CUDA device and the job's code",
    "__getitem__": "a change to the stored data or to {code}: perfsuite cannot make it for you",
    "pin_memory": "a change to the batch's dtype in the job's code",
    "worker processes (persistent)": "the batch size changes what the model trains on: try it with perfsuite ab",
}
STAGE_SHARE = 0.15  # every loader stage costing this share of its CPU or more gets its own finding


def _band(e: Evidence) -> str:
    return e.wait.band or input_band(e.wait.share)


def _share(e: Evidence) -> str:
    w = e.wait
    text = f"data wait {w.share:.1%}{ci(w.low * 100, w.high * 100, '.1f', '%')}"
    if not w.band:
        text += f" (the interval spans the {w.edge or 0:.0%} edge: {w.between}; --rounds narrows it)"
    return text


def input_bound(e: Evidence) -> bool:
    return _band(e) in ("moderately input-bound", "highly input-bound")


def workers_zero(e: Evidence, cf: Counterfactuals) -> Finding | None:
    """num_workers=0 on an input-bound step: the training process loads every batch between its steps."""
    if not input_bound(e) or e.stages.num_workers != 0:
        return None
    tried = cf.tried.get(Fix.MORE_WORKERS)
    k = tried.workers if tried is not None and tried.workers else 2
    return Finding(
        f"{_band(e)}: num_workers=0, the training process loads every batch between its steps",
        f"{_share(e)}; the training process spends {e.stages.main_load_ms_per_step or 0:.3g} ms of CPU per step in "
        "next(loader)",
        f"DataLoader(num_workers={k}, persistent_workers=True)",
        "num_workers",
        predict.predict_workers(e, k, e.last),
        cf.measured(Fix.MORE_WORKERS),
        bottleneck=True,
    )


def stages(e: Evidence, cf: Counterfactuals) -> list[Finding]:
    """One finding per loader stage that costs a share of its CPU, each with its own fix, costliest first."""
    s = e.stages
    band = _band(e)
    reconciled = f"{_share(e)}; {s.reconcile}" if s.reconcile else _share(e)
    lead = input_bound(e) and s.num_workers != 0
    out: list[Finding] = []
    for name, ms in s.by.items():
        part = s.shares.get(name, 0.0)
        if part < STAGE_SHARE and name != s.costliest:
            continue
        code = s.code.get(name, name)
        forked = name == "worker processes" and not s.persistent
        key = "worker processes (persistent)" if name == "worker processes" and s.persistent else name
        measured = (
            cf.measured(Fix.PERSISTENT)
            if forked
            else Unavailable("not tried: " + STAGE_NOT_TRIED.get(key, "a change to {code}").format(code=code))
        )
        label = "the loader's costliest stage" if name == s.costliest else "a loader stage"
        out.append(
            Finding(
                f"{band}: {label} is {name}",
                f"{_share(e) if out else reconciled}; {name} ({code}) costs {ms:.3g} ms of CPU per sample, "
                f"{part:.0%} of the loader's",
                STAGE_FIXES.get(key, "make {code} cheaper").format(code=code),
                f"stage:{name}",
                predict.predict_cut(e, part, name),
                measured,
                bottleneck=lead and not out,
            )
        )
    return out


def worker_count(e: Evidence, cf: Counterfactuals) -> Finding | None:
    """An input-bound step with workers: the count tried (more below the cores, fewer when they fill them)."""
    nw = e.stages.num_workers
    if not input_bound(e) or not nw:
        return None
    fix = Fix.MORE_WORKERS if Fix.MORE_WORKERS in cf.tried else Fix.FEWER_WORKERS
    tried = cf.tried.get(fix)
    k = tried.workers if tried is not None else None
    why = cf.not_tried.get(Fix.MORE_WORKERS) or cf.not_tried.get(Fix.FEWER_WORKERS) or cf.none
    s = e.stages
    return Finding(
        f"num_workers {nw} -> {k}" if k is not None else "the number of workers",
        f"loader capacity {s.capacity or 0:.4g} samples/s from the stages"
        + (f", headroom x{s.headroom:.2f}" if s.headroom else "")
        + (f"; {why}" if k is None and why else ""),
        f"DataLoader(num_workers={k})" if k is not None else "cut the loader's cost per sample (above)",
        "num_workers",
        predict.predict_workers(e, k, e.last) if k is not None else Unavailable(why or "no other count to try"),
        cf.measured(fix),
    )


def _best(cf: Counterfactuals, *fixes: Fix) -> Measured | Unavailable:
    got: list[Measured] = []
    for f in fixes:
        m = cf.tried[f].measured if f in cf.tried else None
        if isinstance(m, Measured):
            got.append(m)
    return max(got, key=lambda m: m.ratio) if got else cf.measured(fixes[0])


def busy(e: Evidence, cf: Counterfactuals) -> Finding | None:
    """The noisy neighbour: the machine's load, or the loader's own use of the cores, slows the step."""
    c = e.contention
    if not c.busy:
        return None
    figures = list(c.reasons)
    rest = e.ledger.rest
    if rest is not None:
        figures.append(
            f"the step's work beyond the same step fed a cached batch with the loader idle ('the rest') is "
            f"{rest:.3g} ms/step, {e.ledger.share(rest):.0%} of it"
        )
    nw = e.stages.num_workers
    fixes = []
    fewer = cf.tried.get(Fix.FEWER_WORKERS)
    if nw:
        fixes.append(fewer.change if fewer is not None else f"fewer workers (num_workers<{nw})")
    threads = cf.tried.get(Fix.THREADS)
    fixes.append(threads.change if threads is not None else "fewer intra-op threads (torch.set_num_threads)")
    fixes.append("decode moved off the CPU (torchvision.io.decode_jpeg on the GPU, DALI)")
    pressure, queue = known(c.cpu_pressure) or 0.0, known(c.runqueue_per_core) or 0.0
    if pressure >= BUSY_PRESSURE or queue > BUSY_RUN_QUEUE:
        fixes.append("on a shared CI runner, a dedicated one: wall-clock figures from this machine mix in its load")
    return Finding(
        "busy machine (noisy neighbour): the step waits for a core",
        "; ".join(figures) + f" (read from {c.source})",
        "; ".join(fixes),
        "busy",
        predict.predict_busy(e),
        _best(cf, Fix.FEWER_WORKERS, Fix.THREADS),
    )


def step(e: Evidence) -> Finding | None:
    """Not input-bound: the step itself is the bottleneck."""
    if input_bound(e):
        return None
    evidence = _share(e)
    c = known(e.ledger.compute)
    if c is not None:
        evidence += f"; compute {c:.3g} of {e.ledger.step_ms:.3g} ms per step"
    knobs = e.last.knobs
    fixes = [f for f, k in (("amp='bf16'", "amp"), ("compile='default'", "compile")) if k in knobs and knobs[k] is None]
    fix = (
        "speed up the step: " + ", ".join(fixes)
        if fixes
        else "speed up the step itself (mixed precision, torch.compile, a cheaper model); the input keeps up"
    )
    return Finding(
        "not input-bound: the step itself is the bottleneck",
        evidence,
        fix,
        "step",
        Unavailable("the gain of mixed precision or compile depends on the model: measure it with perfsuite ab"),
        Unavailable("not tried: a change to the step"),
        bottleneck=True,
    )


def oversubscribed(e: Evidence, cf: Counterfactuals) -> list[Finding]:
    """The harness's note that threads and workers exceed the cores, where no busy-machine finding says it."""
    if e.contention.busy:
        return []
    out = []
    for note in sorted({n for n in e.last.notes if n.startswith("oversubscribed:")}):
        what, _, advice = note.removeprefix("oversubscribed: ").rpartition(" (")
        out.append(
            Finding(
                "oversubscribed cores",
                what,
                advice.rstrip(")"),
                "cores",
                Unavailable("no model"),
                cf.measured(Fix.THREADS),
            )
        )
    return out


def periodic(e: Evidence) -> Finding | None:
    """Work done every N steps (an evaluation, a checkpoint): named with its period, kept out of the input's."""
    p = e.periodic
    if not p.found:
        return None
    reads = "".join(f"; its reads: {s.op} at {s.site}, {s.seen}" for s in e.ledger.periodic_syncs[:3])
    return Finding(
        f"periodic work every {p.every} steps (an evaluation, a checkpoint, logging)",
        f"{p.steps} step(s) of the window took {p.long_step_ms or 0:.3g} ms of their own work against the other "
        f"steps' median; {p.extra_ms_per_step:.3g} ms/step, {p.share:.0%} of the window's time{reads}. "
        "Kept out of input efficiency and the input's cost",
        "run it less often, or asynchronously (a separate process or stream for evaluation and checkpoints)",
        "periodic",
        predict.predict_periodic(e),
        Unavailable("not tried: its interval is the job's choice"),
    )


def syncs(e: Evidence) -> Finding | None:
    """Reads to the host every step, at their sites."""
    led = e.ledger
    if led.syncs_per_step <= 0:
        return None
    top = ", ".join(f"{site} ({t:.3g} ms)" for site, t in list(led.sync_sites.items())[:3])
    beside = (
        "; beside them, every N steps: "
        + ", ".join(f"{s.op} at {s.site} ({s.seen}, {s.per_step:.3g}/step)" for s in led.periodic_syncs[:3])
        if led.periodic_syncs
        else ""
    )
    cpu = (
        "; on this CPU run a read to Python waits for no device queue: the time shown is the op's own; on a GPU "
        "each one stalls until the queued work drains"
        if led.cpu
        else ""
    )
    return Finding(
        f"host syncs: {led.syncs_per_step:g} per step",
        f"{top or 'sites unknown'}{beside}{cpu}",
        "read the value every N steps, or keep it on the device (accumulate the loss; log_interval)",
        "syncs",
        predict.predict_syncs(e),
        Unavailable("not tried: a change to the step's code"),
    )


def _predict_tried(e: Evidence, t: Tried) -> Predicted | Unavailable:
    """A tried fix's prediction by the model of its kind, for a fix no finding's rule named."""
    if t.fix in (Fix.MORE_WORKERS, Fix.FEWER_WORKERS) and t.workers is not None:
        return predict.predict_workers(e, t.workers, e.last)
    if t.fix is Fix.PERSISTENT and "worker processes" in e.stages.by:
        return predict.predict_cut(e, e.stages.shares["worker processes"], "worker processes")
    return Unavailable(f"no model predicts {t.fix.value}")


def unjoined(e: Evidence, cf: Counterfactuals, found: list[Finding]) -> list[Finding]:
    """A finding for each fix measured but joined to no rule's finding: no measurement is left out."""
    joined = {id(f.measured) for f in found}
    out = []
    for t in cf.tried.values():
        if id(t.measured) in joined or not isinstance(t.measured, Measured):
            continue
        m = t.measured
        costs = m.high is not None and m.high < 1
        verdict = "helps" if m.gain else "costs" if costs else "no clear effect"
        fix = t.change if m.gain else f"keep it as it is ({t.change} costs)" if costs else t.change
        out.append(
            Finding(
                f"measured: {t.change} ({verdict})",
                f"{t.why}; samples/s {m.ratio - 1:+.0%}{ci(m.low, m.high, '.2f') if m.low is not None else ''} over "
                f"{m.pairs} interleaved pair(s) ({CONFIDENCE:.0%} interval on the ratio)"
                + ("" if m.gain or costs else "; no clear effect at this length: more --rounds would tell"),
                fix,
                "counterfactual",
                _predict_tried(e, t),
                m,
            )
        )
    return out


def rank(found: list[Finding]) -> list[Finding]:
    """Measured gains first, largest first; then the bottleneck; then by predicted gain (the rules' order kept)."""
    gains = sorted(
        (f for f in found if isinstance(f.measured, Measured) and f.measured.gain),
        key=lambda f: -f.measured.ratio,  # type: ignore[union-attr]
    )
    rest = [f for f in found if f not in gains]
    lead = [f for f in rest if f.bottleneck][:1]
    others = [f for f in rest if f not in lead]
    others.sort(key=lambda f: -(f.predicted.ratio if isinstance(f.predicted, Predicted) else 0.0))
    return gains + lead + others


def findings(e: Evidence, cf: Counterfactuals) -> list[Finding]:
    """Every rule's finding, ranked (:func:`rank`)."""
    found: list[Finding] = []
    busy_first = busy(e, cf)
    rest, c = e.ledger.rest, known(e.ledger.compute)
    lead_busy = busy_first is not None and not input_bound(e) and rest is not None and rest > (c or 0.0)
    if lead_busy and busy_first is not None:
        from dataclasses import replace

        busy_first = replace(busy_first, bottleneck=True)
    for f in (
        busy_first if lead_busy else None,
        workers_zero(e, cf),
        step(e),
        *stages(e, cf),
        worker_count(e, cf),
        None if lead_busy else busy_first,
        *oversubscribed(e, cf),
        periodic(e),
        syncs(e),
    ):
        if f is not None:
            found.append(f)
    return rank(found + unjoined(e, cf, found))
