"""False alarms and detection of the loader ledger's rules beside today's wall-clock rules, on single run pairs.

    python scripts/loader_power.py --pairs 100                  # quiet, then under one busy process
    python scripts/loader_power.py --pairs 3 --conditions quiet # a quick check that it runs

For each condition (``quiet``; ``busy``: one extra process spinning on a core the whole time) it runs
``--pairs`` A/A pairs (the reference twice) and ``--pairs`` A/B pairs (the reference, then the reference whose
Dataset does 20% more CPU work per sample), alternating A/A and A/B, each run a fresh pipeline in this process,
and judges every pair through the one engine (perfsuite.judge.engine.compare_results), as `perfsuite compare`
would. A false alarm is a failing verdict (regressed or improved) in an A/A pair; a detection is a regressed
verdict in an A/B pair. It prints one markdown table per condition and writes every verdict's outcome to
``--out`` (JSON), with the load average before and after.

The +20% is real work, not a sleep or a busy loop on the CPU clock: ``zlib.compress`` of a fixed buffer sized
at the start so that it costs 20% of the reference's replayed loader CPU per sample, so that it slows down
under load as the loader's own work does. The reference is a catch-table reference
(perfsuite.harness.faults.REFERENCES), ``loader`` by default: seed 002's fixed loader, whose per-sample cost
(~0.15 ms) is the smallest of the suite, so the hardest to judge.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perfsuite.core.tmpfiles import write_json_atomic
from perfsuite.harness.faults import REFERENCES
from perfsuite.harness.runner import run
from perfsuite.judge.engine import compare_results
from perfsuite.tools.catch import run_reference, spec_for

LOADER_RULES = ("loader_cpu_ms_per_sample", "loader_capacity_samples_per_s", "main_load_ms_per_step")
WALL_RULES = ("step_ms", "data_wait_frac", "epoch_fetch_ms", "input_efficiency")
EXTRA = 0.20


class ExtraWork:
    """Dataset.load, then ``size`` bytes compressed: CPU work that a loaded machine slows like the loader's."""

    def __init__(self, load: Any, size: int) -> None:
        self.load, self.size = load, size
        self.buffer = os.urandom(size)

    def __call__(self, index: int) -> Any:
        zlib.compress(self.buffer, 6)
        return self.load(index)


def _zlib_ms(size: int, repeats: int = 20) -> float:
    buffer = os.urandom(size)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.thread_time()
        zlib.compress(buffer, 6)
        best = min(best, time.thread_time() - t0)
    return best * 1e3


def extra_size(target_ms: float) -> int:
    """Bytes whose zlib.compress costs ``target_ms`` of CPU on this machine now."""
    size = 4096
    while _zlib_ms(size) < target_ms and size < 1 << 26:
        size *= 2
    lo, hi = size // 2, size
    for _ in range(12):
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _zlib_ms(mid) < target_ms else (lo, mid)
    return hi


def _load() -> float:
    return os.getloadavg()[0]


def run_condition(reference: str, pairs: int, size: int, log: Any) -> dict[str, Any]:
    ref = REFERENCES[reference]

    def planted(pipeline: Any) -> None:
        dataset = pipeline.loader.dataset
        dataset.load = ExtraWork(dataset.load, size)

    outcomes: dict[str, dict[str, Counter[str]]] = {"aa": {}, "ab": {}}
    load_before = _load()
    for i in range(pairs):
        for kind in ("aa", "ab"):
            base = run_reference(ref)
            head = run_reference(ref) if kind == "aa" else run(dataclasses.replace(spec_for(ref), mutate=planted))
            for v in compare_results(base, head, f"{kind}{i}", force=True):
                if v.metric in LOADER_RULES + WALL_RULES:
                    outcomes[kind].setdefault(v.metric, Counter())[str(v.outcome)] += 1
        log(f"pair {i + 1}/{pairs}, load {_load():.2f}")
    return {
        "reference": reference,
        "pairs": pairs,
        "extra_bytes": size,
        "load_before": load_before,
        "load_after": _load(),
        "outcomes": {k: {m: dict(c) for m, c in v.items()} for k, v in outcomes.items()},
    }


def table(record: dict[str, Any], condition: str) -> str:
    n = record["pairs"]
    lines = [
        f"{condition}: {n} A/A and {n} A/B (+{EXTRA:.0%} loader CPU) single-run pairs of `{record['reference']}`, "
        f"load average {record['load_before']:.2f} -> {record['load_after']:.2f}",
        "",
        "| rule | metric | false alarms (A/A) | detected (A/B) | A/B inconclusive |",
        "|---|---|---:|---:|---:|",
    ]
    for metric in LOADER_RULES + WALL_RULES:
        aa = record["outcomes"]["aa"].get(metric, {})
        ab = record["outcomes"]["ab"].get(metric, {})
        if not aa and not ab:
            continue
        alarms = aa.get("regressed", 0) + aa.get("improved", 0)
        rule = "loader ledger (CPU time)" if metric in LOADER_RULES else "wall clock"
        lines.append(
            f"| {rule} | `{metric}` | {alarms}/{sum(aa.values())} ({alarms / max(1, sum(aa.values())):.0%}) | "
            f"{ab.get('regressed', 0)}/{sum(ab.values())} ({ab.get('regressed', 0) / max(1, sum(ab.values())):.0%}) | "
            f"{ab.get('inconclusive', 0)} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=100, help="A/A pairs and A/B pairs per condition (default 100)")
    parser.add_argument("--conditions", nargs="+", default=["quiet", "busy"], choices=["quiet", "busy"])
    parser.add_argument("--reference", default="loader", choices=sorted(REFERENCES))
    parser.add_argument("--out", type=Path, default=Path("docs/data/loader_power"), help="where the JSON goes")
    args = parser.parse_args(argv)
    if args.pairs < 1:
        parser.error("--pairs must be 1 or more")

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    base = run_reference(args.reference)
    per_sample = base.value("loader_cpu_ms_per_sample")
    if per_sample is None:
        print(f"the reference's loader ledger is unavailable: {base.metric('loader_cpu_ms_per_sample').reason}")
        return 1
    size = extra_size(EXTRA * float(per_sample))
    log(f"{args.reference}: {per_sample:.4g} ms/sample replayed; +{EXTRA:.0%} = zlib.compress of {size} bytes")
    for condition in args.conditions:
        busy = None
        if condition == "busy":
            busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            record = run_condition(args.reference, args.pairs, size, lambda s, c=condition: log(f"{c}: {s}"))
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
        record["condition"] = condition
        write_json_atomic(args.out / f"{args.reference}-{condition}.json", record)
        print(table(record, condition), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
