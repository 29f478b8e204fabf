"""Measure how often the step_ms verdict raises false alarms and how often it catches slowdowns.

On real timings from this machine: a small conv net, forward + backward +
SGD on CPU, timed per step. Each round runs four interleaved runs (in random
order, so drift hits all alike): two of the plain workload (A, A') and two
with real extra work inside each timed step, calibrated to +10% and +20% of
the plain step time. Compared per round:

* A/A      A vs A'                  -> any "regressed" is a false alarm
* real     A vs slowed runs         -> detection of a real 10% / 20% slowdown
* scaled   A vs A' x 1.10 / x 1.20  -> detection of an exact injected slowdown

Each comparison is judged by perfsuite's rule (verdicts.compare_timing) and by
pytest-benchmark's ``--benchmark-compare-fail`` rules ``mean:5%`` and
``median:10%``: fail when ``head/base * 100 - 100 > threshold`` for that
statistic of the raw samples (PercentageRegressionCheck).

    python scripts/verdict_power.py --rounds 120 --out power.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from perfsuite.judge.timing import compare_timing
from perfsuite.judge.verdict import DEFAULT_ALPHA, DEFAULT_FACTOR, Outcome


def build_step(batch: int):
    """A few conv layers, forward + backward + optimizer step: one training step on CPU."""
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 32, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))
    loss_fn = nn.CrossEntropyLoss()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    return step


def build_extra():
    """One unit of extra work: a small matmul chain (real CPU work, not a sleep)."""
    a, b = torch.randn(96, 96), torch.randn(96, 96)

    def extra(units: int) -> None:
        c = a
        for _ in range(units):
            c = torch.tanh(c @ b)

    return extra


def time_run(step, extra, units: int, steps: int, warmup: int) -> list[float]:
    samples = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        step()
        if units:
            extra(units)
        dt = (time.perf_counter() - t0) * 1e3
        if i >= warmup:
            samples.append(dt)
    return samples


def calibrate(step, extra, fraction: float, pairs: int = 40, rounds: int = 3) -> int:
    """Units of extra work that make a step ``fraction`` slower, by feedback on measured steps.

    Plain and slowed steps alternate, so a busy neighbour slows both alike
    and the measured ratio holds even when absolute times do not.
    """
    units = 10
    for _ in range(rounds):
        plain, slowed = [], []
        for _ in range(pairs):
            plain += time_run(step, extra, 0, 1, 0)
            slowed += time_run(step, extra, units, 1, 0)
        achieved = statistics.median(slowed) / statistics.median(plain) - 1.0
        units = max(1, round(units * fraction / max(achieved, 0.01)))
    return units


def pytest_benchmark_fails(base: list[float], head: list[float], field: str, percent: int) -> bool:
    stat = statistics.fmean if field == "mean" else statistics.median
    b = stat(base)
    change = float("inf") if not b else stat(head) / b * 100 - 100
    return change > percent


RULES = {
    "perfsuite (default rule)": lambda b, h: compare_timing(b, h).outcome is Outcome.REGRESSED,
    "perfsuite without drift gate": lambda b, h: compare_timing(b, h, blocks=1).outcome is Outcome.REGRESSED,
    "pytest-benchmark mean:5%": lambda b, h: pytest_benchmark_fails(b, h, "mean", 5),
    "pytest-benchmark median:10%": lambda b, h: pytest_benchmark_fails(b, h, "median", 10),
}
SCENARIOS = ("A/A (false alarm)", "real +10%", "real +20%", "scaled x1.10", "scaled x1.20")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=120, help="rounds of four runs (default 120)")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per run (default 30)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=540.0,
        help="stop measuring after this long and report the rounds done (default 540)",
    )
    parser.add_argument("--out", type=Path, help="write the counts and settings as JSON here")
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    step, extra = build_step(args.batch), build_extra()
    time_run(step, extra, 0, 20, 0)  # first-touch allocations, lazy init
    units = {0.10: calibrate(step, extra, 0.10), 0.20: calibrate(step, extra, 0.20)}

    flagged = {rule: {s: 0 for s in SCENARIOS} for rule in RULES}
    aa_outcomes: dict[str, int] = {o.value: 0 for o in Outcome}
    plain_medians, achieved, all_runs = [], {0.10: [], 0.20: []}, []
    record: list[dict[str, list[float]]] = []
    started = time.perf_counter()
    done = 0
    for done in range(1, args.rounds + 1):
        kinds = ["a", "a2", 0.10, 0.20]
        rng.shuffle(kinds)
        runs = {k: time_run(step, extra, 0 if k in ("a", "a2") else units[k], args.steps, args.warmup) for k in kinds}
        a, a2 = runs["a"], runs["a2"]
        all_runs.append(a)
        record.append({str(k): v for k, v in runs.items()})
        plain_medians.append(statistics.median(a))
        for frac in (0.10, 0.20):
            achieved[frac].append(statistics.median(runs[frac]) / statistics.median(a))
        pairs = {
            "A/A (false alarm)": a2,
            "real +10%": runs[0.10],
            "real +20%": runs[0.20],
            "scaled x1.10": [x * 1.10 for x in a2],
            "scaled x1.20": [x * 1.20 for x in a2],
        }
        for rule, fails in RULES.items():
            for scenario, head in pairs.items():
                flagged[rule][scenario] += bool(fails(a, head))
        aa_outcomes[compare_timing(a, a2).outcome.value] += 1
        if done % 10 == 0:
            print(f"round {done}/{args.rounds}, {time.perf_counter() - started:.0f} s", file=sys.stderr)
        if time.perf_counter() - started > args.max_seconds:
            print(f"stopping after {done} rounds: --max-seconds {args.max_seconds:g} reached", file=sys.stderr)
            break
    elapsed = time.perf_counter() - started

    n = done
    cv = statistics.pstdev(plain_medians) / statistics.fmean(plain_medians)
    spread = statistics.median((q[2] - q[0]) / q[1] for q in (statistics.quantiles(r, n=4) for r in all_runs))
    lines = [
        f"Real CPU timings: conv net fwd+bwd+SGD, batch {args.batch}, {args.threads} thread(s), "
        f"{args.steps} steps/run, {n} rounds; plain step median {statistics.median(plain_medians):.2f} ms "
        f"(run-to-run CV of run medians {cv:.1%}, within-run IQR/median {spread:.1%}); real slowdowns achieved "
        f"x{statistics.median(achieved[0.10]):.3f} and x{statistics.median(achieved[0.20]):.3f} (median over rounds).",
        "",
        "| rule | " + " | ".join(SCENARIOS) + " |",
        "|---|" + "---:|" * len(SCENARIOS),
    ]
    for rule in RULES:
        cells = [f"{flagged[rule][s]}/{n} ({flagged[rule][s] / n:.0%})" for s in SCENARIOS]
        lines.append(f"| {rule} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "perfsuite A/A outcomes: " + ", ".join(f"{k} {v}" for k, v in aa_outcomes.items() if v),
        f"({elapsed:.0f} s of measurement)",
    ]
    print("\n".join(lines))
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "settings": {
                        **{k: v for k, v in vars(args).items() if k != "out"},
                        "factor": DEFAULT_FACTOR,
                        "alpha": DEFAULT_ALPHA,
                        "extra_units": {str(k): v for k, v in units.items()},
                    },
                    "rounds": n,
                    "flagged": flagged,
                    "aa_outcomes": aa_outcomes,
                    "plain_median_ms": statistics.median(plain_medians),
                    "achieved_slowdown": {str(k): statistics.median(v) for k, v in achieved.items()},
                    "seconds": elapsed,
                    "runs": record,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
