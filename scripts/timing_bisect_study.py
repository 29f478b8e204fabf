"""The timing bisect's figures in docs/history.md: found / inconclusive / wrong over seeded synthetic runs.

    python scripts/timing_bisect_study.py [--seeds 40] [--max-rounds 20]

A 16-commit repository made in a temporary folder; each run's step time is 10 ms, times the change from
commit 11 on, times lognormal noise (seeded per bisect). Each probe's ABBA/BAAB order is seeded by the
commit's sha, so a new repository moves the counts by a seed or two.
"""

from __future__ import annotations

import argparse
import collections
import random
import subprocess
import tempfile
from pathlib import Path

from perfsuite.core.results import Fingerprint, Result
from perfsuite.judge.adaptive import ABRule
from perfsuite.tools.history.timing_bisect import bisect_timing

FP = Fingerprint("cpu", None, 0, None, None, "study", None, "3", "synthetic", 1, "linux")
CASES = [(1.30, 0.03, 0.05), (1.30, 0.11, 0.05), (1.30, 0.11, 0.10), (1.10, 0.05, 0.05), (1.10, 0.11, 0.05)]
CASES += [(1.0, 0.11, 0.05)]


def _git(repo: Path, *args: str) -> str:
    cmd = ["git", "-C", str(repo), "-c", "user.email=s@s", "-c", "user.name=s", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def make_repo() -> tuple[Path, list[str]]:
    repo = Path(tempfile.mkdtemp(prefix="timing-bisect-study-"))
    _git(repo, "init", "-q")
    shas = []
    for i in range(1, 17):
        (repo / "f").write_text(str(i))
        _git(repo, "add", "f")
        _git(repo, "commit", "-qm", f"commit {i}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    return repo, shas


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=40)
    p.add_argument("--max-rounds", type=int, default=20)
    args = p.parse_args()
    repo, shas = make_repo()
    index = {sha: i + 1 for i, sha in enumerate(shas)}
    print("| change at commit 11 | noise per run | delta | commit 11 found | same | inconclusive | wrong |", end="")
    print(" runs (median) |")
    print("|---|---|---|---|---|---|---|---|")
    for step, noise, delta in CASES:
        counts: collections.Counter[str] = collections.Counter()
        runs = []
        for seed in range(args.seeds):
            rng = random.Random(seed)

            def measure(sha: str, rng: random.Random = rng, step: float = step, noise: float = noise) -> Result:
                value = 10.0 * (step if index[sha] >= 11 else 1.0) * rng.lognormvariate(0.0, noise)
                return Result("synthetic", "smoke", {}, {}, {"step_ms": [value]}, FP, 1, 1, 0)

            rule = ABRule(factor=1 + delta, margin=1 + delta)
            out = bisect_timing(
                repo, shas[0], shas[-1], "step_ms", measure, lambda r: r.samples["step_ms"][0], rule, args.max_rounds
            )
            kind = out.status if out.status != "found" else "found" if out.culprit == shas[10] else "wrong"
            counts[kind] += 1
            runs.append(out.runs)
        runs.sort()
        change = f"{step - 1:+.0%}" if step != 1.0 else "none"
        print(
            f"| {change} | {noise:.0%} | {delta:.2f} | {counts['found']} | {counts['same']} | "
            f"{counts['inconclusive']} | {counts['wrong']} | {runs[len(runs) // 2]} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
