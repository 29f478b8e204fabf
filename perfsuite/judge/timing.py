"""Timing rules on raw per-step samples: step times, between-run variance, per-step shares.

Step times are judged by :func:`compare_timing` (a factor and a one-sided Mann-Whitney test, with
drift blocks), two runs of one shape step by step by :func:`compare_paired`, several baseline runs
by :func:`compare_between_runs`, and per-step data-wait shares by :func:`compare_shares`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from perfsuite.errors import PerfsuiteError
from perfsuite.judge.stats import (
    RatioInterval,
    bootstrap_ratio_ci,
    mann_whitney_u,
    median,
    sign_interval,
    sign_rank,
    wilcoxon_signed_rank,
)
from perfsuite.judge.verdict import DEFAULT_ALPHA, DEFAULT_FACTOR, MIN_SAMPLES, Outcome

DRIFT_BLOCKS = 3


# --------------------------------------------------------------------------- timing rules


@dataclass(frozen=True)
class TimingComparison:
    """Everything :func:`compare_timing` looked at, for messages and tests."""

    outcome: Outcome
    base_median: float | None
    head_median: float | None
    log_ratio: float | None
    p_slower: float | None
    p_faster: float | None
    interval: RatioInterval | None
    reason: str
    paired: bool = False  # judged step by step (compare_paired): the ratio is the median of the steps' ratios

    @property
    def ratio(self) -> float | None:
        return None if self.log_ratio is None else math.exp(self.log_ratio)

    @classmethod
    def undecided(cls, reason: str) -> TimingComparison:
        """Inconclusive before any statistic was formed, with the reason."""
        return cls(Outcome.INCONCLUSIVE, None, None, None, None, None, None, reason)


def too_few(base: Sequence[float], head: Sequence[float], min_samples: int) -> TimingComparison | None:
    if len(base) < min_samples or len(head) < min_samples:
        return TimingComparison.undecided(
            f"too few samples (base n={len(base)}, head n={len(head)}; need {min_samples} or more)"
        )
    return None


def compare_timing(
    base: Sequence[float],
    head: Sequence[float],
    factor: float = DEFAULT_FACTOR,
    alpha: float = DEFAULT_ALPHA,
    min_samples: int = MIN_SAMPLES,
    blocks: int = DRIFT_BLOCKS,
) -> TimingComparison:
    """Judge raw step times (lower is better) of head against base.

    regressed: median ratio > factor AND Mann-Whitney one-sided p < alpha AND
    the (1 - alpha) bootstrap interval of the ratio lies above 1 AND the drift
    gate holds: cut each run into ``blocks`` consecutive blocks, and every
    head block's median must exceed every base block's. improved is the
    mirror image. unchanged: the interval lies within [1/factor, factor].
    Anything else is inconclusive.

    Why the drift gate: both tests treat a run's steps as independent, but
    on a shared machine the level drifts between runs (a neighbour's compile
    job), so they call any two runs different. Drift within a run is the one
    trace of that noise a single base/head pair carries; a real slowdown
    shows in every block, a burst of contention does not. The factor gate
    keeps tiny real differences quiet. Measured rates: scripts/verdict_power.py.
    """
    validate_rule(factor, alpha)
    if (short := too_few(base, head, min_samples)) is not None:
        return short
    if min(base) <= 0 or min(head) <= 0:
        return TimingComparison.undecided("samples must be positive times to form a ratio")
    base_median, head_median = median(base), median(head)
    log_ratio = math.log(head_median) - math.log(base_median)
    p_slower = mann_whitney_u(head, base, "greater").p_value
    p_faster = mann_whitney_u(base, head, "greater").p_value
    interval = bootstrap_ratio_ci(base, head, confidence=1.0 - alpha)
    base_blocks, head_blocks = block_medians(base, blocks), block_medians(head, blocks)
    log_factor = math.log(factor)
    slower = log_ratio > log_factor and p_slower < alpha and interval.log_low > 0.0
    faster = log_ratio < -log_factor and p_faster < alpha and interval.log_high < 0.0
    if slower and min(head_blocks) > max(base_blocks):
        outcome, reason = Outcome.REGRESSED, f"slower by more than x{factor:g}, significant, in every part of the run"
    elif faster and max(head_blocks) < min(base_blocks):
        outcome, reason = Outcome.IMPROVED, f"faster by more than x{factor:g}, significant, in every part of the run"
    elif slower or faster:
        outcome, reason = (
            Outcome.INCONCLUSIVE,
            ("significant, but the runs drift as much as they differ (block medians overlap): a busy machine? re-run"),
        )
    elif interval.log_low >= -log_factor and interval.log_high <= log_factor:
        outcome, reason = Outcome.UNCHANGED, f"interval within x{1 / factor:.3g}..x{factor:g}"
    else:
        outcome, reason = Outcome.INCONCLUSIVE, "too noisy to tell: the interval spans the margin"
    return TimingComparison(outcome, base_median, head_median, log_ratio, p_slower, p_faster, interval, reason)


def can_pair(base: Sequence[float], head: Sequence[float], alpha: float = DEFAULT_ALPHA) -> bool:
    """Whether :func:`compare_paired` can judge these samples: as many on each side, enough for its interval."""
    return len(base) == len(head) and sign_rank(len(base), 1.0 - alpha) >= 0


def compare_paired(
    base: Sequence[float],
    head: Sequence[float],
    factor: float = DEFAULT_FACTOR,
    alpha: float = DEFAULT_ALPHA,
    blocks: int = DRIFT_BLOCKS,
) -> TimingComparison:
    """Judge two runs of one job step by step: head's i-th step against base's i-th (lower is better).

    Why: both runs of a job pass the same steps at the same positions: an epoch start that waits for
    the workers, a periodic evaluation or checkpoint. Judged as two bags of steps, those steps (4-5x
    the median on short runs) make every interval span the margin, and a 30% slower step goes unseen
    (docs/contention.md); paired by position they cancel. Under no change, each step's log ratio is
    as likely above 0 as below, whatever the positions hold, so the tests stay valid when the runs'
    structure differs; they just lose power.

    With d_i = log(head_i / base_i): regressed when the median d exceeds log(factor) AND the
    Wilcoxon signed-rank test gives p < alpha AND the sign test's (1 - alpha) interval of the median
    d lies above 0 AND every one of ``blocks`` consecutive blocks has a median d above 0 (a burst of
    contention in one part of one run moves one block, a slower step moves all). Improved is the
    mirror image; unchanged: the interval lies within [1/factor, factor]; else inconclusive.
    """
    validate_rule(factor, alpha)
    if len(base) != len(head):
        return TimingComparison.undecided(
            f"step by step needs as many steps a side (base {len(base)}, head {len(head)})"
        )
    if min(base, default=0.0) <= 0 or min(head, default=0.0) <= 0:
        return TimingComparison.undecided("samples must be positive times to form a ratio")
    d = [math.log(h) - math.log(b) for b, h in zip(base, head)]
    bounds = sign_interval(d, 1.0 - alpha)
    if bounds is None:
        return TimingComparison.undecided(f"too few steps to pair ({len(d)}) for a {1 - alpha:.0%} interval")
    log_ratio = median(d)
    p_slower, p_faster = wilcoxon_signed_rank(d, "greater"), wilcoxon_signed_rank(d, "less")
    interval = RatioInterval(bounds[0], bounds[1], 1.0 - alpha)
    parts = block_medians(d, blocks)
    log_factor = math.log(factor)
    slower = log_ratio > log_factor and p_slower < alpha and interval.log_low > 0.0
    faster = log_ratio < -log_factor and p_faster < alpha and interval.log_high < 0.0
    if slower and min(parts) > 0.0:
        outcome, reason = Outcome.REGRESSED, f"slower by more than x{factor:g} step by step, in every part of the run"
    elif faster and max(parts) < 0.0:
        outcome, reason = Outcome.IMPROVED, f"faster by more than x{factor:g} step by step, in every part of the run"
    elif slower or faster:
        outcome, reason = (
            Outcome.INCONCLUSIVE,
            "significant step by step, but not in every part of the run (a burst of contention?): re-run",
        )
    elif interval.log_low >= -log_factor and interval.log_high <= log_factor:
        outcome, reason = Outcome.UNCHANGED, f"step by step within x{1 / factor:.3g}..x{factor:g}"
    else:
        outcome, reason = Outcome.INCONCLUSIVE, "too noisy to tell step by step: the interval spans the margin"
    return TimingComparison(
        outcome, median(base), median(head), log_ratio, p_slower, p_faster, interval, reason, paired=True
    )


MIN_BASE_RUNS = 3  # runs a baseline needs before its between-run variance is used


def compare_between_runs(
    base_runs: Sequence[Sequence[float]],
    head: Sequence[float],
    factor: float = DEFAULT_FACTOR,
    alpha: float = DEFAULT_ALPHA,
    min_samples: int = MIN_SAMPLES,
) -> TimingComparison:
    """Judge head's step times against a baseline of several runs, with the variance *between* runs.

    With k >= 3 base runs, let m_i be the log median of base run i, mu and s
    their mean and standard deviation, and h head's log median. Regressed:
    h - mu > log(factor), AND the one-sided prediction-interval test
    t = (h - mu) / (s * sqrt(1 + 1/k)) with k - 1 degrees of freedom gives
    p < alpha (head lies beyond what run-to-run drift produced in the base),
    AND Mann-Whitney of head against the pooled base steps gives p < alpha.
    Improved is the mirror image. Unchanged: |h - mu| <= log(factor) and
    neither test fires. Anything else is inconclusive. When the base runs do
    not vary (s = 0) or fewer than 3 runs are stored, the single-run rule
    (:func:`compare_timing`) judges the newest run.
    """
    from scipy.stats import t as t_dist

    validate_rule(factor, alpha)
    runs = [list(r) for r in base_runs if len(r) >= min_samples and min(r) > 0]
    if len(runs) < MIN_BASE_RUNS or len(head) < min_samples or min(head) <= 0:
        return compare_timing(runs[-1] if runs else [], head, factor, alpha, min_samples)
    logs = [math.log(median(r)) for r in runs]
    k = len(logs)
    mu = sum(logs) / k
    sd = math.sqrt(sum((x - mu) ** 2 for x in logs) / (k - 1))
    if sd == 0.0:
        return compare_timing(runs[-1], head, factor, alpha, min_samples)
    h = math.log(median(head))
    diff = h - mu
    t = diff / (sd * math.sqrt(1 + 1 / k))
    p_slower, p_faster = float(t_dist.sf(t, k - 1)), float(t_dist.cdf(t, k - 1))
    pooled = [x for r in runs for x in r]
    mw_slower = mann_whitney_u(head, pooled, "greater").p_value
    mw_faster = mann_whitney_u(pooled, head, "greater").p_value
    log_factor = math.log(factor)
    spread = f"between-run sd x{math.exp(sd):.3f} over {k} base runs"
    if diff > log_factor and p_slower < alpha and mw_slower < alpha:
        outcome, reason = (
            Outcome.REGRESSED,
            f"slower by more than x{factor:g}, beyond the base runs' drift ({spread}, p={p_slower:.2g})",
        )
    elif diff < -log_factor and p_faster < alpha and mw_faster < alpha:
        outcome, reason = (
            Outcome.IMPROVED,
            f"faster by more than x{factor:g}, beyond the base runs' drift ({spread}, p={p_faster:.2g})",
        )
    elif abs(diff) <= log_factor:
        outcome, reason = Outcome.UNCHANGED, f"within x{1 / factor:.3g}..x{factor:g} of the base runs ({spread})"
    else:
        outcome, reason = (
            Outcome.INCONCLUSIVE,
            (
                f"moved by x{math.exp(diff):.3f}, within what the base runs drift "
                f"({spread}, p={min(p_slower, p_faster):.2g})"
            ),
        )
    return TimingComparison(
        outcome, math.exp(mu), math.exp(h), diff, min(p_slower, 1.0), min(p_faster, 1.0), None, reason
    )


def block_medians(samples: Sequence[float], blocks: int) -> list[float]:
    """Medians of ``blocks`` consecutive, near-equal slices of the samples (in measurement order)."""
    blocks = max(1, min(blocks, len(samples)))
    size, extra = divmod(len(samples), blocks)
    out, start = [], 0
    for i in range(blocks):
        stop = start + size + (1 if i < extra else 0)
        out.append(median(samples[start:stop]))
        start = stop
    return out


def compare_shares(
    base: Sequence[float],
    head: Sequence[float],
    margin: float,
    alpha: float = DEFAULT_ALPHA,
    min_samples: int = MIN_SAMPLES,
    factor: float = 1.0,
) -> TimingComparison:
    """Judge per-step shares (fractions in [0, 1], higher is worse) of head against base.

    regressed: the mean share rose by at least ``margin`` (absolute) AND by
    the session's ``factor`` (ratio of the means) AND Mann-Whitney one-sided
    p < alpha; improved is the mirror image; unchanged: the means differ by
    less than ``margin``, or by less than ``factor``. Shares near 0 make
    ratios meaningless (0.01 -> 0.02 is noise, not a doubling), hence the
    absolute margin; the factor only lets a session ask for larger changes
    (at the default x1.05 any rise of 0.1 clears it). ``log_ratio`` holds the
    difference of the means.
    """
    if (short := too_few(base, head, min_samples)) is not None:
        return short
    b, h = sum(base) / len(base), sum(head) / len(head)
    p_slower = mann_whitney_u(head, base, "greater").p_value
    p_faster = mann_whitney_u(base, head, "greater").p_value
    within_factor = max(b, h) < min(b, h) * factor
    if h - b >= margin and not within_factor and p_slower < alpha:
        outcome, reason = Outcome.REGRESSED, f"rose by {h - b:.2f} (>= {margin:g}), p={p_slower:.2g}"
    elif b - h >= margin and not within_factor and p_faster < alpha:
        outcome, reason = Outcome.IMPROVED, f"fell by {b - h:.2f} (>= {margin:g}), p={p_faster:.2g}"
    elif abs(h - b) < margin:
        outcome, reason = Outcome.UNCHANGED, f"within +-{margin:g}"
    elif within_factor:
        outcome, reason = Outcome.UNCHANGED, f"moved by {h - b:+.2f}, within x{factor:g} (the session's factor)"
    else:
        outcome, reason = Outcome.INCONCLUSIVE, f"moved by {h - b:+.2f} but not significantly (p={p_slower:.2g})"
    return TimingComparison(outcome, b, h, h - b, p_slower, p_faster, None, reason)


def validate_rule(factor: float, alpha: float) -> None:
    if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 1.0):
        raise PerfsuiteError(f"factor={factor!r} must be a number above 1; write e.g. 1.05 for a 5% margin")
    if not (isinstance(alpha, (int, float)) and 0.0 < alpha < 0.5):
        raise PerfsuiteError(f"alpha={alpha!r} must lie between 0 and 0.5; write e.g. 0.01")
