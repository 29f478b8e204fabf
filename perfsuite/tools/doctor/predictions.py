"""The gains the doctor predicts from one diagnosis's ledger, each with its model, and never above what the input
can give back.

* cutting a share *s* of the loader's CPU cuts *s* of what the loader costs the step (the wait for the batch,
  plus the loader's share of the step's wait for a core), and never more than that stage's own CPU time per
  step, stretched by the runnable tasks per core it waited behind;
* a worker count gives min(the speed of light, the loader's capacity after its overhead scaled to the
  processes that can load at once);
* the rules' own upper bounds (a busy machine's, periodic work's, the reads') live with their rules
  (:mod:`perfsuite.tools.doctor.rules`).

A loader fix's prediction above the input's whole share (the steady step over the step fed a cached batch)
is not printed: it is :class:`Unavailable`, with both figures.
"""

from __future__ import annotations

from perfsuite.core.results import Result
from perfsuite.tools.doctor.evidence import Evidence
from perfsuite.tools.doctor.model import CachedBatch, Predicted, Unavailable, known


def ratio(step: float, new: float) -> float | None:
    return step / new if step > 0 and new > 0 else None


def loader_share_of_cores(e: Evidence) -> float | None:
    """The loader's share of what competed with the training thread for a core: its busy cores among the
    runnable tasks (None without the run's recorded run queue)."""
    busy = known(e.contention.loader_cores_busy) or 0.0
    queue = known(e.contention.runqueue_per_core)
    if queue is None:
        return None
    runnable = queue * e.usable
    return min(1.0, busy / max(busy, runnable - 1.0)) if busy > 0 else 0.0


def input_cost(e: Evidence) -> tuple[float, str]:
    """What the loader costs the step, ms per step, and how it was read: the wait for the batch, plus the
    loader's share of the step's wait for a core ("the rest") where the run's run queue says it."""
    wait, rest = e.ledger.wait_ms, e.ledger.rest
    share = loader_share_of_cores(e)
    if rest is None:
        return wait, f"the wait for the batch, {wait:.3g} ms/step"
    if share is None:
        return wait, f"the wait for the batch, {wait:.3g} ms/step (no run queue recorded to share the rest by)"
    cost = wait + share * rest
    return cost, f"the wait and the loader's {share:.0%} of the rest, {cost:.3g} ms/step"


def input_ceiling(e: Evidence) -> tuple[float, str] | None:
    """The largest gain any loader fix can give: the steady step over the step fed a cached batch, or over the
    step less its wait where no cached-batch step fits; None without a steady step."""
    step = e.steady_ms
    if isinstance(e.cached, CachedBatch) and e.cached.cached_ms > 0:
        r = ratio(step, e.cached.cached_ms)
        return (r, f"the steady step {step:.3g} ms over {e.cached.cached_ms:.3g} ms fed a cached batch") if r else None
    r = ratio(step, step - e.ledger.wait_ms)
    return (r, f"the steady step {step:.3g} ms less its wait for the batch") if r else None


def bounded(e: Evidence, p: Predicted | Unavailable) -> Predicted | Unavailable:
    """The prediction, or unavailable when it claims more than the input's whole share."""
    if isinstance(p, Unavailable):
        return p
    ceiling = input_ceiling(e)
    if ceiling is not None and p.ratio > ceiling[0] * (1 + 1e-9):
        return Unavailable(
            f"not printed: the model's x{p.ratio:.2f} exceeds the input's whole share, x{ceiling[0]:.2f} ({ceiling[1]})"
        )
    return p


def predict_cut(e: Evidence, share: float, stage: str) -> Predicted | Unavailable:
    """Cutting a share of the loader's CPU cuts that share of what the loader costs the step, and no more than the
    stage's own CPU time per step (waiting behind the runnable tasks per core at most)."""
    step = e.steady_ms
    cost, how = input_cost(e)
    cut = share * cost
    basis = f"{stage} is {share:.0%} of the loader's CPU; the loader costs {how}"
    cpu = e.stages.by.get(stage)
    if cpu is not None:
        queue = max(1.0, known(e.contention.runqueue_per_core) or 1.0)
        most = cpu * e.last.batch_size * queue
        if most < cut:
            cut = most
            basis += f"; at most its own {cpu * e.last.batch_size:.3g} ms of CPU per step x{queue:.2g} runnable/core"
    r = ratio(step, step - cut)
    if r is None:
        return Unavailable("no steady step to predict from")
    return bounded(e, Predicted(r, basis))


def predict_workers(e: Evidence, k: int, result: Result) -> Predicted | Unavailable:
    """samples/s = min(the cached-batch step's, the loader's capacity after its overhead with k processes)."""
    from perfsuite.probes.loader import effective_processes

    usable = e.usable
    now = result.knobs.get("num_workers")
    capacity = e.stages.capacity_after_overhead or e.stages.capacity
    own = e.ledger.step_ms - e.ledger.wait_ms - e.ledger.periodic_ms
    # The speed of light: the cached-batch step, or where it is unavailable the window's steps less their wait.
    cached = e.cached.cached_ms if isinstance(e.cached, CachedBatch) else (own if own > 0 else None)
    measured = [float(r.value("samples_per_s") or 0.0) for r in e.results]
    current = sum(measured) / len(measured) if measured else 0.0
    if not isinstance(now, int) or not capacity or not cached or current <= 0:
        return Unavailable("no loader capacity or speed of light to predict from")
    scaled = float(capacity) * effective_processes(k, usable) / effective_processes(now, usable)
    ceiling = result.batch_size * 1e3 / float(cached)
    rest = e.ledger.rest
    if k < now and rest is None:
        return Unavailable(
            "fewer workers give back at most the loader's share of the step's wait for a core, and compute was not "
            "told apart from that wait here (no cached-batch step fit in the window's own work)"
        )
    if k < now and rest is not None:
        # Fewer workers give back, at most, the loader's share of the step's wait for a core ("the rest").
        busy = known(e.contention.loader_cores_busy) or 0.0
        queue = known(e.contention.runqueue_per_core)
        share = loader_share_of_cores(e) or 0.0
        step = e.steady_ms
        fed = ratio(step, step - share * rest) or 1.0
        runnable = (
            f"{max(queue * usable, busy + 1):.2g} runnable tasks" if queue is not None else "an unknown run queue"
        )
        return bounded(
            e,
            Predicted(
                min(fed, scaled / current),
                f"the loader kept {busy:.2f} core(s) busy among {runnable}: its {share:.0%} of the rest "
                f"({rest:.3g} ms/step) given back, within the capacity {scaled:.4g} samples/s of {k} process(es)",
            ),
        )
    return bounded(
        e,
        Predicted(
            min(scaled, ceiling) / current,
            f"min(loader capacity {float(capacity):.4g} samples/s scaled to {k} process(es), the speed of light "
            f"{ceiling:.4g}) over {current:.4g} measured",
        ),
    )


def wait_for_a_core(e: Evidence) -> Predicted | Unavailable:
    """An upper bound for a fix that gives the step its cores back: it takes what it takes fed a cached batch."""
    rest = e.ledger.rest
    if rest is None:
        return Unavailable("compute was not told apart from the rest, so the step's wait for a core is not known")
    if rest <= 0:
        return Predicted(1.0, "the window's steps took no longer than the same step fed a cached batch")
    r = ratio(e.steady_ms, e.steady_ms - rest)
    if r is None:
        return Unavailable("no steady step to predict from")
    return Predicted(r, "an upper bound: the step got its cores back and took what it takes fed a cached batch")
