"""perfsuite ab's decision loop on synthetic pairs (not a measurement): per-run log-normal noise, a shared
drift per round, optional outliers (10% of runs +0-30%). 400 comparisons per cell, <= 15 rounds.
Run: python scripts/ab_synthetic_power.py"""

import math
import random

from perfsuite.judge.adaptive import ABOutcome, ABRule, RunValues, run_loop


def sim(effect, sigma, alpha, trials=400, max_rounds=15, heavy=False):
    cnt = {o: 0 for o in ABOutcome}
    rounds = 0
    rng = random.Random(1)
    for t in range(trials):

        def measure(order, r):
            vals = []
            level = rng.gauss(0, 0.1)
            for s in order:
                noise = rng.gauss(0, sigma / math.sqrt(2))
                if heavy and rng.random() < 0.1:
                    noise += abs(rng.gauss(0, 0.3))
                vals.append(RunValues(math.exp(level + noise + (effect if s == "B" else 0))))
            return {"t": vals}

        loop = run_loop(measure, ABRule(alpha=alpha), seed=t, max_rounds=max_rounds)
        cnt[loop.tracks["t"].decision.outcome] += 1
        rounds += len(loop.orders)
    return {k.value: v / trials for k, v in cnt.items()}, rounds / trials


for alpha in (0.002, 0.01):
    for sigma in (0.05, 0.1):
        for eff in (0, math.log(1.05), math.log(1.1)):
            print(alpha, sigma, round(math.exp(eff), 2), sim(eff, sigma, alpha), sim(eff, sigma, alpha, heavy=True)[0])
