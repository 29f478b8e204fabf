"""Starvation predicted on a CPU against what a GPU measured: the tables of docs/gpu.md and the GPU script's check.

    python scripts/starvation.py cpu [--out docs/data/starvation]           # the CPU side: loader-only runs, kept
    python scripts/starvation.py table CPU_DIR GPU_RESULT...                # predicted (CPU) against measured (GPU)
    python scripts/starvation.py check GPU_RESULT...                        # a GPU run's own figures, 3 repeats

``cpu`` runs each case's loader alone at full scale (``perfsuite run ... --loader-only``) and keeps the Results:
they are committed before a GPU loan, so the loan checks predictions made without it. ``table`` matches each GPU
Result with the CPU Result of the same workload and settings, predicts from the CPU one against the demand the GPU
Result itself measured (its speed of light and its host's calibration), and prints predicted against measured with
the ratio. ``check`` prints each GPU Result's input efficiency (device clock), GPU idle time against NVML, and
whether input efficiency stays within 5% over the repeats of one case (issue 53's bar).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from perfsuite.core.results import Result
from perfsuite.judge.starvation import DemandFile, demand_of, predict

# The two settings of each case: the seed documents' own, and their fix (the H200 Results in shared/data used these).
SETTINGS = {
    "seed": ["--aug", "cpu", "--workers", "2"],
    "fix": [
        *("--aug", "gpu", "--amp", "bf16", "--workers", "8", "--pin-memory", "--persistent-workers"),
        *("--prefetch", "4", "--non-blocking"),
    ],
}
WORKLOADS = ("face_parsing", "captcha_slider")
SPREAD = 0.05  # input efficiency within ±5% over repeats of one case


def case_of(result: Result) -> str:
    return f"{result.workload}-{'fix' if result.knobs.get('aug') == 'gpu' else 'seed'}"


def run_cpu(out: Path, steps: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for workload in WORKLOADS:
        for name, flags in SETTINGS.items():
            path = out / f"{workload}-{name}.json"
            cmd = [sys.executable, "-m", "perfsuite.cli", "run", workload, "--scale", "full", *flags]
            cmd += ["--loader-only", "--steps", str(steps), "--warmup", "2", "--json"]
            print(" ".join(cmd[2:]), flush=True)
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode:
                print(f"  failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
                continue
            path.write_text(done.stdout)
            print(f"  wrote {path}")


def load(paths: list[Path]) -> list[Result]:
    return [Result.from_dict(json.loads(p.read_text())) for p in paths]


def table(cpu_dir: Path, gpu_paths: list[Path]) -> None:
    cpu = {case_of(r): r for r in load(sorted(cpu_dir.glob("*.json")))}
    print("| case | GPU run | predicted efficiency [range] | measured (achieved ÷ speed of light) | ratio |", end="")
    print(" predicted samples/s | measured samples/s | ratio | limited by |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for path, gpu in zip(gpu_paths, load(gpu_paths)):
        base = cpu.get(case_of(gpu))
        if base is None:
            print(f"| {case_of(gpu)} | {path.name} | no CPU Result of this case in {cpu_dir} |")
            continue
        demand = demand_of(gpu)
        p = predict(base, DemandFile(demand.runner, (demand,)))
        achieved = float(gpu.value("samples_per_s"))
        measured = achieved / demand.median
        if not hasattr(p, "efficiency"):
            print(f"| {case_of(gpu)} | {path.name} | unavailable: {p.reason} |")
            continue
        rate = min(p.supply_per_s, p.demand_per_s)
        print(
            f"| {case_of(gpu)} | {path.name} | {p.efficiency:.3f} [{p.low:.2f}..{p.high:.2f}] ({p.verdict}) | "
            f"{measured:.3f} | x{p.efficiency / measured:.3f} | {rate:.1f} | {achieved:.1f} | x{rate / achieved:.3f} | "
            f"{p.limiting} |"
        )


def check(gpu_paths: list[Path]) -> int:
    by_case: dict[str, list[float]] = {}
    for path, r in zip(gpu_paths, load(gpu_paths)):
        eff, idle, util = r.metric("input_efficiency"), r.metric("gpu_idle_frac"), r.metric("gpu_util")
        print(
            f"{path.name}: input_efficiency {eff.value if eff.available else 'unavailable: ' + str(eff.reason)}; "
            f"gpu_idle_frac {idle.value if idle.available else idle.reason} "
            f"(NVML agrees: {idle.detail.get('nvml_agrees')}); gpu_util {util.value}"
        )
        if eff.available:
            by_case.setdefault(case_of(r), []).append(float(eff.value))
    bad = 0
    for case, values in by_case.items():
        mid = statistics.median(values)
        apart = max(abs(v / mid - 1) for v in values)
        ok = len(values) >= 3 and apart <= SPREAD
        bad += not ok
        print(f"{case}: input efficiency {values}: {'within' if ok else 'NOT within'} ±5% over {len(values)} repeats")
    return 1 if bad else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cpu")
    c.add_argument("--out", type=Path, default=Path("docs/data/starvation"))
    c.add_argument("--steps", type=int, default=12)
    t = sub.add_parser("table")
    t.add_argument("cpu_dir", type=Path)
    t.add_argument("gpu", nargs="+", type=Path)
    k = sub.add_parser("check")
    k.add_argument("gpu", nargs="+", type=Path)
    args = p.parse_args()
    if args.cmd == "cpu":
        run_cpu(args.out, args.steps)
        return 0
    if args.cmd == "table":
        table(args.cpu_dir, args.gpu)
        return 0
    return check(args.gpu)


if __name__ == "__main__":
    raise SystemExit(main())
