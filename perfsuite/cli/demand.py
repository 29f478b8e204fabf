"""``perfsuite demand add FILE... | show RUNNER``: a GPU runner's demand, what its step consumes, kept for prediction.

A GPU run's speed of light (samples/s of the step fed one batch kept on the device) is what its loader must feed.
``add`` records it from Result or baseline files made on that GPU into ``baselines/demand/<runner>.json`` (runs of
the same step are kept together, a provisional entry is replaced), so that any later run, a CPU CI's included,
predicts that runner's input efficiency with ``perfsuite run ... --predict-for RUNNER`` (docs/gpu.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "record a GPU runner's demand (its step's speed of light) from its Results, or show it"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION", help="add: record a demand; show: list them")
    add = sub.add_parser("add", help="record the demand of Result or baseline files made on a GPU")
    add.add_argument("files", nargs="+", type=Path, metavar="FILE", help="Result (--json) or baseline files")
    add.add_argument("--provenance", default="", help="where the runs came from, kept beside the demand")
    show = sub.add_parser("show", help="list a runner's recorded demands")
    show.add_argument("runner", help="the runner's name, e.g. nvidia-h200")
    for q in (add, show):
        q.add_argument(
            "--demand-dir", type=Path, default=None, metavar="DIR", help="default: baselines/demand in the project"
        )


def run(args: argparse.Namespace) -> int:
    from perfsuite.judge.starvation import add_demands, load_demand

    if args.action == "add":
        from perfsuite.report.compare import load_runs

        results = [run for path in args.files for run in load_runs(path)[1]]  # every run of a baseline file
        for written in dict.fromkeys(add_demands(results, args.demand_dir, args.provenance)):
            print(f"perfsuite demand: wrote {written}")
        return 0
    from perfsuite.report.terminal import folded_note

    demands = load_demand(args.runner, args.demand_dir)
    print(f"{demands.runner}: {len(demands.entries)} demand(s) in {demands.path}")
    for d in demands.entries:
        step = ", ".join(f"{k}={v}" for k, v in d.step.items() if v not in (None, False, 0, 0.0))
        rates = ", ".join(f"{r:.4g}" for r in d.sol_samples_per_s)
        line = f"{d.workload} ({d.scale}; {step}): {rates} samples/s on {d.gpu_model}; {d.provenance}"
        print(folded_note(line, sys.stdout, indent="  "))
    return 0
