"""How much do perfsuite's probes cost the measured step? (A benchmark, not a test.)

Runs the same workload with every probe attached and with none, interleaved
in one process (on/off, then off/on, ...) so that drift in machine load falls
on both sides, and reports the ratio of median step times per pair with its
spread. Target: a median ratio <= 1.01 at smoke scale on a CPU machine.

    PERFSUITE_CACHE=/tmp/pcache python scripts/probe_overhead.py --pairs 8 --steps 20
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from perfsuite.core.knobs import Knobs
from perfsuite.harness.runner import RunSpec, run


def _value(text: str) -> object:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"None": None, "True": True, "False": False}.get(text, text)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="face_parsing")
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--observe", type=int, default=4)
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "knobs",
        nargs="*",
        default=["aug=cpu", "num_workers=2", "log_interval=1"],
        help="flat knobs, name=value (default: aug=cpu num_workers=2 log_interval=1)",
    )
    args = parser.parse_args(argv)
    knobs = Knobs.from_flat(**{k: _value(v) for k, v in (kv.split("=", 1) for kv in args.knobs)})
    spec = RunSpec(args.workload, knobs=knobs, steps=args.steps, warmup=args.warmup, observe_steps=args.observe)

    run(spec, probes=[])  # materialise the dataset, warm imports and caches: not counted
    on: list[float] = []
    off: list[float] = []
    for i in range(args.pairs):
        order = ("on", "off") if i % 2 == 0 else ("off", "on")
        for which in order:
            result = run(spec, probes=None if which == "on" else [])
            (on if which == "on" else off).append(result.value("step_ms"))
        print(
            f"pair {i + 1}/{args.pairs}: on {on[-1]:8.2f} ms  off {off[-1]:8.2f} ms  ratio {on[-1] / off[-1]:.4f}",
            flush=True,
        )

    ratios = [a / b for a, b in zip(on, off)]
    figures = {
        "workload": args.workload,
        "knobs": knobs.flat(),
        "pairs": args.pairs,
        "steps": args.steps,
        "median_step_ms_on": statistics.median(on),
        "median_step_ms_off": statistics.median(off),
        "ratio_median": statistics.median(ratios),
        "ratio_p10": _quantile(ratios, 0.1),
        "ratio_p90": _quantile(ratios, 0.9),
        "ratio_iqr": _quantile(ratios, 0.75) - _quantile(ratios, 0.25),
        "ratio_of_medians": statistics.median(on) / statistics.median(off),
        "load_avg_1m": os.getloadavg()[0],
        "cpus": os.cpu_count(),
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(figures, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
