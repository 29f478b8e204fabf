"""``perfsuite list``: the workloads and jobs that can be named (reference, entry points, ``--import``)."""

from __future__ import annotations

import argparse
import json

from perfsuite.cli.common import add_import_argument, import_modules

HELP = "the workloads and jobs (reference, entry points, --import) and their scales"
DESCRIPTION = (
    "List what `perfsuite run` and perf_run(...) can name: perfsuite's reference workloads with their scales "
    "(image size, samples, batch, model), and the jobs registered by installed packages (entry points) or by "
    "modules given with --import."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    add_import_argument(p)


def run(args: argparse.Namespace) -> int:
    from perfsuite.jobs.registry import get_workload, job_names, job_summary, workload_names

    import_modules(args.imports)
    jobs = [{"name": name, "job": True, "summary": job_summary(name)} for name in job_names()]
    rows = [get_workload(name).describe() for name in workload_names()]
    if args.json:
        print(json.dumps(rows + jobs, indent=2))
        return 0
    for job in jobs:
        print(f"{job['name']:<18} job      {job['summary']}")
    for row in rows:
        print(f"{row['name']:<18} workload {row['summary']}")
        for scale, s in row["scales"].items():
            h, w = s["image_size"]
            print(f"    {scale:<6} {w}x{h}, {s['num_samples']} samples, batch {s['batch_size']}, model {s['model']}")
    return 0
