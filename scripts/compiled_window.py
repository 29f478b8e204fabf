"""Compiled vs eager samples/s in one process: does the measured window of a compiled run time compiled code?

    python scripts/compiled_window.py [--pairs 3] [--workload gray_classifier] [--steps 20]

Runs the same workload eager and compiled (inductor), alternately, in one process, with every probe
attached, and prints samples/s of each and their ratio, plus how many compiled-graph calls the
profiler saw inside each compiled window. Before the runner measured first and observed after, the
probes' dispatch mode left every compiled run's window eager (0 compiled calls, ratio ~1).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from perfsuite.core.knobs import Knobs
from perfsuite.harness.runner import RunSpec, run
from perfsuite.probes import all_probes
from perfsuite.testing import CompiledCallsInWindow


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--workload", default="gray_classifier")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also count compiled calls in the window (adds profiler overhead to both arms' windows)",
    )
    args = parser.parse_args()
    eager, compiled, calls = [], [], []
    for i in range(args.pairs):
        for mode in ("eager", "compiled"):
            knobs = Knobs.from_flat(aug="none", num_workers=0, compile="default" if mode == "compiled" else None)
            watch = CompiledCallsInWindow()
            probes = [*all_probes(), watch] if args.profile else all_probes()
            result = run(RunSpec(args.workload, knobs=knobs, steps=args.steps, warmup=3, observe_steps=2), probes)
            rate = float(result.value("samples_per_s"))
            (compiled if mode == "compiled" else eager).append(rate)
            if mode == "compiled":
                calls.append(watch.calls)
            print(
                f"pair {i + 1} {mode:<8} {rate:8.1f} samples/s"
                + (f", {watch.calls} compiled calls in the window" if mode == "compiled" and args.profile else ""),
                flush=True,
            )
    ratio = statistics.median(compiled) / statistics.median(eager)
    print(
        f"median samples/s: eager {statistics.median(eager):.1f}, compiled {statistics.median(compiled):.1f}; "
        f"compiled/eager x{ratio:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
