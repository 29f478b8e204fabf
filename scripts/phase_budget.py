"""Where each run's time went, and whether its overhead fits the budget: the GPU script's check (issue 54).

    python scripts/phase_budget.py RESULT.json [RESULT.json ...] [--budget 15] [--setup SETUP.json]

For each Result (``perfsuite run ... --json``): its phases' wall and CPU time, each as a ratio to the window's,
and its overhead (the wall time beyond the first batch, warm-up and window steps) against ``--budget`` seconds
(default :data:`perfsuite.core.phases.OVERHEAD_BUDGET_S`). ``--setup`` takes the JSON of
``perfsuite run ... --setup-only --json`` run after the dataset was made: its dataset phase must take under 1 s
(the cache was hit). Exit status 1 when a run is over budget, has no Result or no phases, or the cache was missed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from perfsuite.core.phases import DATASET, OVERHEAD_BUDGET_S, WINDOW, overhead_s
from perfsuite.core.results import PhaseTimes, Result
from perfsuite.errors import PerfsuiteError

CACHE_HIT_S = 1.0  # a dataset found in the cache takes under this in set-up


def table(times: PhaseTimes) -> list[str]:
    """One row per phase: wall and CPU seconds, and each as a ratio to the window's."""
    window = times.get(WINDOW)
    rows = [f"  {'phase':30} {'wall s':>8} {'x window':>8} {'cpu s':>8} {'x window':>8}"]
    for p in times.phases:
        wall_x = f"{p.wall_s / window.wall_s:.2f}" if window and window.wall_s > 0 else "-"
        cpu_x = f"{p.cpu_s / window.cpu_s:.2f}" if window and window.cpu_s > 0 else "-"
        rows.append(f"  {p.name:30} {p.wall_s:8.2f} {wall_x:>8} {p.cpu_s:8.2f} {cpu_x:>8}")
    rows.append(f"  {'in all':30} {times.wall_s:8.2f} {'':8} {times.cpu_s:8.2f}")
    return rows


def check_run(path: Path, budget: float) -> tuple[bool, list[str]]:
    try:
        result = Result.from_json(path.read_bytes())
    except (OSError, PerfsuiteError) as exc:
        return False, [f"{path}: no Result ({exc})"]
    if result.phases is None:
        return False, [f"{path}: the Result records no phases (written by a perfsuite before issue 54)"]
    over = overhead_s(result.phases)
    verdict = "within" if over <= budget else "OVER"
    head = (
        f"{path}: {result.workload}/{result.scale}, {result.steps} steps: overhead {over:.1f} s, {verdict} {budget:g} s"
    )
    return over <= budget, [head, *table(result.phases), where_after_window(result)]


def where_after_window(result: Result) -> str:
    """Where the loader's after-window work ran: its replay's processes (and their CPU), its count's."""
    replay = result.metric("loader_cpu_ms_per_sample").detail
    counted = result.metric("loader_offcpu_ms_per_sample").detail
    shares = replay.get("replay_share_cpu_s") or []
    replay_part = (
        f"replay in {replay.get('replay_processes', 1)} process(es)"
        + (f" (longest share {max(shares):.2f} s CPU)" if shares else "")
        if "replay_cpu_s" in replay
        else "no replay"
    )
    passes = ", ".join(f"{x:.2f}" for x in counted.get("counting_pass_cpu_s") or [])
    count_part = (
        f"count in {counted['counted_in']}" + (f" (passes {passes} s CPU)" if passes else "")
        if "counted_in" in counted
        else "no count recorded"
    )
    return f"  after the window: {replay_part}; {count_part}"


def check_setup(path: Path) -> tuple[bool, list[str]]:
    try:
        data = json.loads(path.read_text())
        times = PhaseTimes.from_list(data["phases"])
    except (OSError, ValueError, KeyError, PerfsuiteError) as exc:
        return False, [f"{path}: no --setup-only record ({exc})"]
    dataset = times.get(DATASET)
    took = dataset.wall_s if dataset is not None else None
    ok = took is not None and took < CACHE_HIT_S
    said = f"{took:.3f} s" if took is not None else "not recorded"
    return ok, [f"{path}: dataset set-up {said} ({'cache hit' if ok else f'NOT under {CACHE_HIT_S:g} s'})"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="*", type=Path)
    parser.add_argument("--budget", type=float, default=OVERHEAD_BUDGET_S)
    parser.add_argument("--setup", type=Path, action="append", default=[])
    args = parser.parse_args(argv)
    checks = [check_setup(p) for p in args.setup] + [check_run(p, args.budget) for p in args.results]
    for _, lines in checks:
        print("\n".join(lines))
    ok = all(passed for passed, _ in checks)
    print(f"phase budget: {'all within' if ok else 'FAILED'} ({len(checks)} checked)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
