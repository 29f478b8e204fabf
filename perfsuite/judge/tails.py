"""The step-time tail (p99, max, stalls), judged relative to each run's own median with exact tests."""

from __future__ import annotations

import math
from collections.abc import Sequence

from perfsuite.judge.stats import median
from perfsuite.judge.timing import TimingComparison, too_few
from perfsuite.judge.verdict import DEFAULT_ALPHA, MIN_SAMPLES, Outcome

STALL_FACTOR = 5.0  # as the runner counts stalls: steps slower than 5x their run's median


def exceedance_p(base: Sequence[float], head: Sequence[float]) -> tuple[int, float]:
    """(k, p): k head samples lie above every base sample; p = C(n_head, k) / C(n, k) is the chance of that
    under "no change" (the top k of both runs pooled all fall in head), an exact, distribution-free tail test."""
    top = max(base)
    k = sum(1 for x in head if x > top)
    if k == 0:
        return 0, 1.0
    return k, math.comb(len(head), k) / math.comb(len(base) + len(head), k)


def compare_tail(
    metric: str,
    base: Sequence[float],
    head: Sequence[float],
    factor: float,
    alpha: float = DEFAULT_ALPHA,
    min_samples: int = MIN_SAMPLES,
) -> TimingComparison:
    """Judge the step-time tail of one run against another, relative to each run's own median.

    Dividing by the run's median leaves the shape of the tail: a uniformly
    slower run (a busy machine, or a real slowdown, which step_ms judges) has
    the same tail, a periodic hiccup or a stall does not.

    * ``step_ms_p99``: regressed when the normalised p99 grew by ``factor``
      AND at least two head steps lie above the slowest base step with exact
      exceedance p < alpha (:func:`exceedance_p`); grew without that:
      inconclusive; improved is the mirror image; else unchanged.
    * ``step_ms_max``: one step is never certain: grown by ``factor`` is
      inconclusive (``recompiles`` is the exact check of a recompile stall),
      else unchanged.
    * ``stalls`` (steps > 5x the median): regressed when the count rose to at
      least twice the base's plus two AND a one-sided Fisher exact test of the
      stall rates gives p < alpha; any other rise of two or more:
      inconclusive; else unchanged (fewer stalls: improved, same test).

    ``log_ratio`` holds log(head / base) of the normalised statistic (for
    stalls: of count + 1). A single run pair is all this sees, so the rule
    asks for large and certain effects; ``perfsuite ab`` judges tails across
    many runs.
    """
    import numpy as np

    if (short := too_few(base, head, min_samples)) is not None:
        return short
    if min(base) <= 0 or min(head) <= 0:
        return TimingComparison.undecided("samples must be positive times")
    b = np.asarray(base, dtype=float) / median(base)
    h = np.asarray(head, dtype=float) / median(head)
    if metric == "stalls":
        from scipy.stats import fisher_exact

        sb, sh = int((b > STALL_FACTOR).sum()), int((h > STALL_FACTOR).sum())
        table = [[sh, len(h) - sh], [sb, len(b) - sb]]
        p_slower = float(fisher_exact(table, alternative="greater").pvalue)
        p_faster = float(fisher_exact(table, alternative="less").pvalue)
        log_ratio = math.log((sh + 1) / (sb + 1))
        if sh >= factor * sb + 2 and p_slower < alpha:
            outcome, reason = Outcome.REGRESSED, f"{sb} -> {sh} stalls, Fisher p={p_slower:.2g}"
        elif sb >= factor * sh + 2 and p_faster < alpha:
            outcome, reason = Outcome.IMPROVED, f"{sb} -> {sh} stalls, Fisher p={p_faster:.2g}"
        elif abs(sh - sb) >= 2:
            outcome, reason = (
                Outcome.INCONCLUSIVE,
                (
                    f"{sb} -> {sh} stalls, not certain from one run each "
                    f"(Fisher p={min(p_slower, p_faster):.2g}); compare with perfsuite ab"
                ),
            )
        else:
            outcome, reason = Outcome.UNCHANGED, f"{sb} -> {sh} stalls"
        return TimingComparison(outcome, float(sb), float(sh), log_ratio, p_slower, p_faster, None, reason)
    if metric == "step_ms_max":
        top_b, top_h = float(b.max()), float(h.max())
        log_ratio = math.log(top_h / top_b)
        if abs(log_ratio) >= math.log(factor):
            outcome, reason = (
                Outcome.INCONCLUSIVE,
                (
                    f"the slowest step moved from x{top_b:.3g} to x{top_h:.3g} the run's "
                    "median; one step cannot be certain (recompiles is the exact check)"
                ),
            )
        else:
            outcome, reason = Outcome.UNCHANGED, f"within x{factor:g} relative to the median"
        return TimingComparison(outcome, top_b, top_h, log_ratio, None, None, None, reason)
    q_b, q_h = float(np.percentile(b, 99)), float(np.percentile(h, 99))
    log_ratio = math.log(q_h / q_b)
    k_up, p_slower = exceedance_p(b.tolist(), h.tolist())
    k_down, p_faster = exceedance_p(h.tolist(), b.tolist())
    log_factor = math.log(factor)
    if log_ratio >= log_factor and k_up >= 2 and p_slower < alpha:
        outcome, reason = (
            Outcome.REGRESSED,
            (
                f"p99 x{q_b:.3g} -> x{q_h:.3g} the run's median; {k_up} steps beyond "
                f"the slowest base step (exact p={p_slower:.2g})"
            ),
        )
    elif log_ratio <= -log_factor and k_down >= 2 and p_faster < alpha:
        outcome, reason = Outcome.IMPROVED, f"p99 x{q_b:.3g} -> x{q_h:.3g} the run's median (exact p={p_faster:.2g})"
    elif abs(log_ratio) >= log_factor:
        outcome, reason = (
            Outcome.INCONCLUSIVE,
            (
                f"p99 x{q_b:.3g} -> x{q_h:.3g} the run's median, not certain from "
                f"one run each (p={min(p_slower, p_faster):.2g}); compare with "
                "perfsuite ab"
            ),
        )
    else:
        outcome, reason = Outcome.UNCHANGED, f"within x{factor:g} relative to the median"
    return TimingComparison(outcome, q_b, q_h, log_ratio, p_slower, p_faster, None, reason)
