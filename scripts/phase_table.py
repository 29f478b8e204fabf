"""The docs' phase table (docs/phases.md): runs of two commits side by side, each phase as a ratio to its window.

    python scripts/phase_table.py --before before-1.json before-2.json --after after-1.json after-2.json

Each cell is the median over the runs given of (phase time / the same run's window time), wall and CPU (the
perfsuite process's own CPU): ratios within one run, so a machine shared with others moves them less than
seconds. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from perfsuite.core.phases import WINDOW
from perfsuite.core.results import PhaseTimes, Result


def ratios(times: PhaseTimes) -> dict[str, tuple[float, float]]:
    window = times.get(WINDOW)
    assert window is not None and window.wall_s > 0 and window.cpu_s > 0, "a run without a window"
    return {p.name: (p.wall_s / window.wall_s, p.cpu_s / window.cpu_s) for p in times.phases}


def medians(paths: list[Path]) -> tuple[dict[str, tuple[float, float]], float, float]:
    runs = []
    for path in paths:
        result = Result.from_json(path.read_bytes())
        assert result.phases is not None, f"{path} records no phases"
        runs.append(result.phases)
    each = [ratios(t) for t in runs]
    names = list(dict.fromkeys(n for r in each for n in r))
    out = {
        n: (statistics.median(r[n][0] for r in each if n in r), statistics.median(r[n][1] for r in each if n in r))
        for n in names
    }
    window = statistics.median(t.get(WINDOW).cpu_s for t in runs)  # type: ignore[union-attr]
    return out, statistics.median(t.wall_s for t in runs), window


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", nargs="+", type=Path, required=True)
    parser.add_argument("--after", nargs="+", type=Path, required=True)
    args = parser.parse_args()
    (before, b_wall, b_win), (after, a_wall, a_win) = medians(args.before), medians(args.after)
    print("| phase | before: wall x window | before: CPU x window | after: wall x window | after: CPU x window |")
    print("|---|---:|---:|---:|---:|")
    for name in dict.fromkeys([*before, *after]):
        b, a = before.get(name), after.get(name)
        cells = [f"{v:.2f}" if v is not None else "-" for v in (*(b or (None, None)), *(a or (None, None)))]
        print(f"| {name} | {' | '.join(cells)} |")
    print(f"\nwall in all (median): before {b_wall:.1f} s, after {a_wall:.1f} s")
    print(f"window CPU (median): before {b_win:.2f} s, after {a_win:.2f} s")


if __name__ == "__main__":
    main()
