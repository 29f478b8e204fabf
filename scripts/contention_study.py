"""The contention guard's study: A/A false alarms and detection of a slower step, with 0, 1 and 3 busy processes.

One command runs the whole study and writes every pair's figures (each run's contention, each metric's verdict
before the guard) to ``docs/data/contention_study.json``, so the bound can be chosen again from the kept data
without running anything (``--table``)::

    python scripts/contention_study.py                                   # the full study: 200 pairs per cell
    python scripts/contention_study.py --pairs 6 --jobs gray_classifier  # a short one
    python scripts/contention_study.py --table                           # the table from the kept data
    python scripts/contention_study.py --resume --minutes 30             # add pairs to the kept cells, up to 200
    python scripts/contention_study.py --data /tmp/pilot.json --busy 0   # a pilot, kept apart from the study

A *cell* is (job, busy processes, variant). Variants: ``aa`` (the same code on both sides), ``slow10`` and
``slow30`` (the head's step sleeps 10% / 30% of the job's quiet median step: the wall clock moves, no exact counter
does), ``threads1`` (the head runs the same ops on one intra-op thread: the training thread's CPU time moves, no
count does; run it with ``--variants threads1``). Busy processes are ``python -c 'while True: pass'`` started by a
subshell that exits, so they are not the run's descendants (until 2026-11-26 13:10 UTC they were a shell's children,
which the probe counted as the run's own tree: the busy cells kept before then understate the foreign load by the
spinners' share). Each run is one in-process ``perfsuite.run`` (warm-up, the window, the speed-of-light steps, the
loader ledger); each pair is judged by the shipped engine with the guard off, and the guard is applied afterwards at
every candidate bound, so one study prices every bound. Each pair also keeps both runs' raw samples (step_ms,
step_cpu_ms and fetch_ms in step order, the loader ledger's loader_cpu_ms and loader_calib_ms) and calibration
kernel readings, so another timing rule can be priced on the kept data.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT / "docs" / "data" / "contention_study.json"
DOCS = ROOT / "docs" / "contention.md"
START, END = "<!-- study-table:start -->\n", "<!-- study-table:end -->"
JUDGED = ("step_ms", "data_wait_frac", "step_cpu_ms", "loader_cpu_ms_per_sample")
KEPT = ("step_ms", "step_cpu_ms", "fetch_ms", "loader_cpu_ms", "loader_calib_ms")
BOUNDS = (0.05, 0.10, 0.15, 0.20, 0.30, 0.40, 0.50, 0.60, 0.70, 0.80, 0.90, 1.01)
VARIANTS = {"aa": 0.0, "slow10": 0.10, "slow30": 0.30, "threads1": 0.0}
ONE_THREAD = ("threads1",)  # the head runs the same ops on one intra-op thread: its CPU time moves, no count does
BUDGET = 0.005  # the false-alarm budget per cell


def spin_elsewhere(n: int) -> list[int]:
    """Start ``n`` spinning processes that are not this process's descendants (a subshell starts each and exits,
    so init adopts it): the run's process tree, which the contention probe counts as its own, is not theirs."""
    spin = f"( {sys.executable} -c 'while True: pass' </dev/null >/dev/null 2>&1 & echo $! ); "
    out = subprocess.run(["/bin/sh", "-c", spin * n], capture_output=True, text=True, timeout=30, check=True)
    return [int(pid) for pid in out.stdout.split()]


def stop_spinners(pids: list[int]) -> None:
    """SIGTERM each spinner this script started, by its id (checked to still be a spinner)."""
    for pid in pids:
        with contextlib.suppress(OSError):
            if b"while True: pass" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGTERM)


@contextlib.contextmanager
def busy(n: int) -> Iterator[None]:
    """``n`` spinning processes, not the run's descendants, for the duration."""
    pids = spin_elsewhere(n) if n > 0 else []
    try:
        time.sleep(0.5 if pids else 0.0)
        yield
    finally:
        stop_spinners(pids)


def _faces() -> Any:
    """examples/own_pipeline's job (2 workers, not persistent), on a dataset written once to a temp dir."""
    sys.path.insert(0, str(ROOT / "examples" / "own_pipeline"))
    from make_data import write_dataset  # type: ignore[import-not-found]
    from perf_jobs import face_job  # type: ignore[import-not-found]

    data = Path(tempfile.gettempdir()) / "perfsuite-contention-study-faces"
    if not (data / "images").is_dir():
        write_dataset(data)
    return lambda device: face_job(str(data), device)


def _slowed(seconds: float) -> Any:
    """A mutate hook: the step sleeps ``seconds`` after its own work (the wall clock moves; no count does)."""

    def mutate(target: Any) -> None:
        if seconds <= 0:
            return
        inner = target.step

        def step(*args: Any, **kwargs: Any) -> Any:
            out = inner(*args, **kwargs)
            time.sleep(seconds)
            return out

        target.step = step

    return mutate


def one_run(job: str, sleep_s: float, steps: int, threads: int | None = None) -> Any:
    from perfsuite.harness.runner import RunSpec, run
    from perfsuite.probes.contention import ContentionProbe
    from perfsuite.probes.datawait import DataWaitProbe
    from perfsuite.probes.loader import LoaderProbe

    workload: Any = _faces() if job == "faces" else job
    spec = RunSpec(
        workload, steps=steps, warmup=2, observe_steps=0, period_steps=0, sol_steps=3, mutate=_slowed(sleep_s)
    )
    if threads is None:
        return run(spec, probes=[ContentionProbe(), DataWaitProbe(), LoaderProbe()])
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return run(spec, probes=[ContentionProbe(), DataWaitProbe(), LoaderProbe()])
    finally:
        torch.set_num_threads(before)


def judge_pair(base: Any, head: Any) -> dict[str, Any]:
    """Each judged metric's raw verdict (no guard) and both runs' foreign loads."""
    from perfsuite.core import metrics as registry
    from perfsuite.judge.contention import load_of
    from perfsuite.judge.engine import judge_metric

    out: dict[str, Any] = {"loads": [load_of(base).foreign, load_of(head).foreign]}
    out["pressure"] = [load_of(base).pressure, load_of(head).pressure]
    out["threads"] = [load_of(base).threads, load_of(head).threads]  # a multi-threaded step_cpu_ms is guarded as wall
    out["samples"] = [kept_samples(base), kept_samples(head)]  # so a rule can be priced again, running nothing
    for name in JUDGED:
        v = judge_metric(registry.get(name), base, head, "study")
        out[name] = {"outcome": v.outcome.value, "ratio": v.ratio}
    return out


def kept_samples(result: Any) -> dict[str, Any]:
    """A run's per-step samples of the timing metrics, in step order, and its calibration kernel's CPU ms before
    and after the window: what a timing rule reads."""
    out: dict[str, Any] = {k: [round(x, 4) for x in result.samples.get(k, [])] for k in KEPT}
    cal = result.environment.get("contention", {}).get("calibration", {})
    out["calibration_cpu_ms"] = [cal.get(side, {}).get("cpu_ms") for side in ("before", "after")]
    return out


def write_atomic(path: Path, text: str) -> None:
    """``text`` into ``path``, replacing it whole (a reader never sees half a page)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.fchmod(fd, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _save(data: dict[str, Any]) -> None:
    DATA.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=DATA.parent, prefix=f".{DATA.stem}.")
    os.fchmod(fd, 0o644)  # mkstemp's 0600 would make the kept data private to whoever ran the study
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=1)
    os.replace(tmp, DATA)


def study(
    jobs: list[str],
    busy_counts: list[int],
    variants: list[str],
    pairs: int,
    steps: int,
    detect_every: int = 1,
    minutes: list[float] | None = None,
    resume: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Rounds of one pair per job (and, every ``detect_every``-th round, one per slowdown variant), per busy
    level: the cells of a level grow together, so a level cut short by ``minutes`` still has balanced cells.
    The slowdowns run only with 0 and 1 busy processes (the issue asks detection quiet and under one).
    ``resume``: the kept data, whose cells are filled up to ``pairs`` (slowdowns: ``pairs / detect_every``)."""
    now = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    data: dict[str, Any] = resume or {"cells": {}, "runs": 0, "started": now}
    command = " ".join(["python", "scripts/contention_study.py", *sys.argv[1:]])
    data["commands"] = [*data.get("commands", [data["command"]] if "command" in data else []), f"{now}: {command}"]
    step_s = dict(data.get("pilot_step_s", {}))
    for job in jobs:  # the quiet-ish median step the slowdowns are a share of, kept across resumed runs
        if job not in step_s:
            step_s[job] = float(one_run(job, 0.0, steps).value("step_ms")) / 1e3
    data["pilot_step_s"] = step_s
    for level, n in enumerate(busy_counts):
        limit = minutes[min(level, len(minutes) - 1)] if minutes else None
        deadline = time.monotonic() + limit * 60 if limit else None
        with busy(n):
            for k in range(pairs):
                if deadline is not None and time.monotonic() > deadline:
                    print(f"busy {n}: stopped after {k} rounds ({limit} min)", file=sys.stderr, flush=True)
                    break
                for job in jobs:
                    for variant in variants:
                        if variant != "aa" and (k % detect_every or n > 1):
                            continue
                        key = f"{job}|{n}|{variant}"
                        cell: list[dict[str, Any]] = data["cells"].setdefault(key, [])
                        if len(cell) >= (pairs if variant == "aa" else -(-pairs // detect_every)):
                            continue
                        sleep_s = VARIANTS[variant] * step_s[job]
                        threads = 1 if variant in ONE_THREAD else None
                        if len(cell) % 2 == 0:  # the order alternates, so a drift in the machine favours neither
                            base = one_run(job, 0.0, steps)
                            head = one_run(job, sleep_s, steps, threads)
                        else:
                            head = one_run(job, sleep_s, steps, threads)
                            base = one_run(job, 0.0, steps)
                        pair = judge_pair(base, head)
                        pair["loadavg"] = os.getloadavg()[0]
                        cell.append(pair)
                        data["runs"] += 2
                        data["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
                        _save(data)
                        print(f"{key} pair {len(cell)}: {pair}", file=sys.stderr, flush=True)
    return data


def rates(
    cell: list[dict[str, Any]], metric: str, bound: float, alarms: bool = False, guarded: bool = True
) -> tuple[int, int, int]:
    """(hits, judged, pairs) at ``bound``: a pair is judged when both runs' foreign load is within it (with
    ``guarded``, as the shipped guard does: a multi-threaded run's ``step_cpu_ms`` within the wall-clock bound too).
    A hit is a *regressed* verdict, or with ``alarms`` (an A/A cell) any failing one: *improved* between identical
    runs is a false alarm too."""
    from perfsuite.core import metrics as registry
    from perfsuite.judge.contention import WALL_BOUND, Guard, Load

    spec = registry.get(metric)
    failing = ("regressed", "improved") if alarms else ("regressed",)
    hits = judged = 0
    for pair in cell:
        base, head = (Load(x, None, None, t) for x, t in zip(pair["loads"], pair.get("threads") or [None, None]))
        spins = guarded and Guard(base, head).spins(spec)
        limit = min(bound, WALL_BOUND) if spins else bound
        if all(x is not None and x <= limit for x in pair["loads"]):
            judged += 1
            hits += pair[metric]["outcome"] in failing
    return hits, judged, len(cell)


def table(data: dict[str, Any]) -> str:
    from perfsuite.judge.contention import CPU_BOUND, WALL_BOUND

    bounds = {"step_ms": WALL_BOUND, "step_cpu_ms": CPU_BOUND, "loader_cpu_ms_per_sample": CPU_BOUND}
    lines = [
        f"Foreign load: the share of the usable cores' time taken by other processes or stolen. Bounds: wall-clock "
        f"{WALL_BOUND:.0%}, CPU time {CPU_BOUND:.0%} (`step_cpu_ms` of a run on more than one intra-op thread: the "
        f"wall-clock bound). Each verdict column: regressed / pairs with no guard, then "
        "regressed / judged under the guard (judged: both runs within the bound); in an `aa` cell a failing verdict "
        "(regressed or improved) is a false alarm, in any other cell a regression is a detection. Ratio: the verdict's "
        "head / base ratio, lowest..highest (step_ms between runs of one shape: the median of the steps' ratios).",
        "",
        "| job | busy | variant | pairs | foreign load | loadavg | step_ms ratio | step_ms | step_cpu_ms ratio | "
        "step_cpu_ms | loader_cpu_ms_per_sample |",
        "|---|---:|---|---:|---:|---:|---|---|---|---|---|",
    ]
    for key, cell in data["cells"].items():
        job, n, variant = key.split("|")
        loads = [x for p in cell for x in p["loads"] if x is not None]
        row = [job, n, variant, str(len(cell)), f"{min(loads):.0%}..{max(loads):.0%}" if loads else "-"]
        row.append(f"{statistics.fmean(p['loadavg'] for p in cell):.1f}")
        for metric in ("step_ms", "step_cpu_ms", "loader_cpu_ms_per_sample"):
            if metric != "loader_cpu_ms_per_sample":
                ratios = [p[metric]["ratio"] for p in cell if p[metric]["ratio"] is not None]
                row.append(f"x{min(ratios):.2f}..x{max(ratios):.2f}" if ratios else "-")
            raw, _, total = rates(cell, metric, 1.01, variant == "aa", guarded=False)
            r, j, _ = rates(cell, metric, bounds[metric], variant == "aa")
            row.append(f"{raw}/{total}; guarded {r}/{j}")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


DETECT = 0.5  # a wall-clock bound must also let the rule see a +30% step in at least half the pairs it judges


def choose(data: dict[str, Any], metric: str) -> tuple[float | None, int]:
    """(bound, A/A pairs judged at it): the highest foreign load measured at which every A/A cell's judged pairs
    alarmed on at most BUDGET of them and, for a wall-clock metric, every ``slow30`` cell's judged pairs were
    detected in at least DETECT of them; (None, 0) when no load measured passes both.

    Only loads the study reached are candidates: a bound above every measured load would be a guess. The
    slowdowns are sleeps (no CPU), so CPU-time metrics are held to the false-alarm budget only.
    """
    aa = [cell for key, cell in data["cells"].items() if key.endswith("|aa")]
    slow = [cell for key, cell in data["cells"].items() if key.endswith("|slow30")]
    wall = metric in ("step_ms", "data_wait_frac")
    candidates = sorted({max(p["loads"]) for cell in aa for p in cell if None not in p["loads"]})
    best: tuple[float | None, int] = (None, 0)
    for bound in candidates:
        judged_all, ok = 0, True
        for cell in aa:
            r, j, _ = rates(cell, metric, bound, alarms=True)
            judged_all += j
            ok = ok and not (j and r / j > BUDGET)
        for cell in slow if wall else []:
            r, j, _ = rates(cell, metric, bound)
            ok = ok and not (j and r / j < DETECT)
        if ok:
            best = (bound, judged_all)
    return best


def main() -> int:
    global DATA
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="faces,gray_classifier,face_parsing", help="comma-separated jobs")
    parser.add_argument("--busy", default="0,1,3", help="busy-process counts, comma-separated")
    parser.add_argument("--variants", default="aa,slow10,slow30", help=f"of {', '.join(VARIANTS)}")
    parser.add_argument("--pairs", type=int, default=200, help="pairs per cell (the issue asks 200)")
    parser.add_argument("--steps", type=int, default=12, help="window steps per run")
    parser.add_argument(
        "--detect-every", type=int, default=1, help="a slowdown pair every N-th round (0 and 1 busy processes only)"
    )
    parser.add_argument(
        "--minutes", help="stop each busy level's rounds after this many minutes (one figure, or one per level)"
    )
    parser.add_argument("--resume", action="store_true", help="add pairs to the kept data's cells, up to --pairs")
    parser.add_argument("--data", type=Path, help=f"the kept data's file (default {DATA.relative_to(ROOT)})")
    parser.add_argument("--table", action="store_true", help="print the table from the kept data; run nothing")
    parser.add_argument(
        "--write-docs", action="store_true", help="with --table: put the table into docs/contention.md's study block"
    )
    args = parser.parse_args()
    if args.data is not None:
        DATA = args.data.resolve()
    if args.write_docs and not args.table:
        print("error: --write-docs goes with --table (it writes the kept data's table)", file=sys.stderr)
        return 2
    if args.table:
        try:
            data = json.loads(DATA.read_text())
        except (OSError, ValueError) as exc:
            print(f"error: cannot read {DATA} ({exc}); run the study first", file=sys.stderr)
            return 2
    else:
        variants = [v for v in args.variants.split(",") if v]
        unknown = [v for v in variants if v not in VARIANTS]
        if unknown or args.pairs < 1 or args.detect_every < 1:
            print(f"error: --variants takes {', '.join(VARIANTS)}; --pairs and --detect-every >= 1", file=sys.stderr)
            return 2
        try:
            busy_counts = [int(x) for x in args.busy.split(",")]
            minutes = [float(x) for x in args.minutes.split(",")] if args.minutes else None
        except ValueError as exc:
            print(f"error: --busy takes whole numbers, --minutes numbers, comma-separated ({exc})", file=sys.stderr)
            return 2
        kept = None
        if args.resume:
            try:
                kept = json.loads(DATA.read_text())
            except (OSError, ValueError) as exc:
                print(f"error: --resume cannot read {DATA} ({exc}); run the study without it first", file=sys.stderr)
                return 2
        try:
            data = study(
                args.jobs.split(","), busy_counts, variants, args.pairs, args.steps, args.detect_every, minutes, kept
            )
        except KeyboardInterrupt:
            print("interrupted: the pairs done so far are kept in", DATA, file=sys.stderr)
            return 130
    lines = chosen(data) + spread(data) + between(data)
    text = table(data) + "\n" + "\n".join(f"- {line}" for line in lines) + "\n"
    print(text)
    rule = shipped(data)
    print(rule)
    if args.table and args.write_docs:
        page = DOCS.read_text(encoding="utf-8")
        for start, end, block in ((START, END, text), (SHIPPED_START, SHIPPED_END, rule)):
            head, found, rest = page.partition(start)
            _, _, tail = rest.partition(end)
            if found:
                page = f"{head}{start}{block}{end}{tail}"
        write_atomic(DOCS, page)
        print(f"wrote {DOCS}", file=sys.stderr)
    return 0


def _judged(cell: list[dict[str, Any]], bound: float) -> list[dict[str, Any]]:
    return [p for p in cell if all(x is not None and x <= bound for x in p["loads"]) and "samples" in p]


def _quiet_aa(data: dict[str, Any]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(job, cell) of each A/A cell with no busy process."""
    for key, cell in data["cells"].items():
        job, n, variant = key.split("|")
        if variant == "aa" and n == "0":
            yield job, cell


def _run_logs(pair: dict[str, Any], metric: str) -> tuple[float, float] | None:
    meds = [statistics.median(s[metric]) for s in pair["samples"] if s.get(metric)]
    return (math.log(meds[0]), math.log(meds[1])) if len(meds) == 2 and min(meds) > 0 else None


def spread(data: dict[str, Any]) -> list[str]:
    """One line per job: how far one run's median step lands from its twin's with the same code (quiet A/A pairs
    within the wall-clock bound: the sd of the log ratio over sqrt 2). The steps' own ratios cannot show this, since
    a whole run lands slower in every step; it is what one run a side cannot tell from a change."""
    from perfsuite.judge.contention import WALL_BOUND

    out = []
    for job, cell in _quiet_aa(data):
        parts = []
        for metric in ("step_ms", "step_cpu_ms"):
            diffs = [h - b for b, h in filter(None, (_run_logs(p, metric) for p in _judged(cell, WALL_BOUND)))]
            if len(diffs) >= 20:
                parts.append(f"`{metric}` x{math.exp(statistics.pstdev(diffs) / math.sqrt(2)):.3f}")
        if parts:
            what = "one run's spread (sd of its log median between identical runs)"
            out.append(f"{what}, `{job}`, quiet: {', '.join(parts)}")
    return out


def between(data: dict[str, Any], ks: tuple[int, ...] = (3, 5)) -> list[str]:
    """The shipped rule for k base runs (``compare_between_runs``), priced on the kept quiet runs: A/A, each group of
    k + 1 consecutive kept runs (k base, the next as head); a slowdown, its slowed run against the k A/A runs kept
    nearest it in recording order. Groups are built from kept runs, not recorded as groups."""
    from perfsuite.judge.contention import WALL_BOUND
    from perfsuite.judge.timing import compare_between_runs
    from perfsuite.judge.verdict import DEFAULT_FACTOR

    out = []
    for job, cell in _quiet_aa(data):
        runs = [s["step_ms"] for p in _judged(cell, WALL_BOUND) for s in p["samples"]]
        for k in ks:
            groups = [runs[g : g + k + 1] for g in range(0, len(runs) - k, k + 1)]
            alarms = sum(
                compare_between_runs(g[:k], g[k], DEFAULT_FACTOR).outcome in ("regressed", "improved") for g in groups
            )
            seen = []
            for slow in ("slow10", "slow30"):
                pairs = _judged(data["cells"].get(f"{job}|0|{slow}", []), WALL_BOUND)
                hits = 0
                for j, p in enumerate(pairs):
                    at = min(max(0, round(j * len(runs) / max(len(pairs), 1)) - k // 2), len(runs) - k)
                    t = compare_between_runs(runs[at : at + k], p["samples"][1]["step_ms"], DEFAULT_FACTOR)
                    hits += t.outcome == "regressed"
                seen.append(f"{slow} {hits}/{len(pairs)}")
            out.append(
                f"`step_ms` against {k} base runs (x{DEFAULT_FACTOR} and their measured spread), `{job}`, quiet: "
                f"A/A {alarms}/{len(groups)} groups, detected {', '.join(seen)}"
            )
    return out


SHIPPED_START, SHIPPED_END = "<!-- shipped-rule:start -->\n", "<!-- shipped-rule:end -->"


def _single(base: list[float], head: list[float]) -> str:
    """One base run's step_ms verdict as shipped: the single-run rule, then the base-run count
    (``perfsuite.judge.baseruns.apply_run_count``: decided only beyond the base run's own spread)."""
    from perfsuite.core import metrics as registry
    from perfsuite.judge.baseruns import apply_run_count
    from perfsuite.judge.timing import MIN_BASE_RUNS, can_pair, compare_paired, compare_timing
    from perfsuite.judge.verdict import Verdict

    factor = registry.SINGLE_PAIR_FACTOR
    t = compare_paired(base, head, factor) if can_pair(base, head) else compare_timing(base, head, factor)
    verdict = Verdict("study", "step_ms", t.base_median, t.head_median, t.ratio, t.outcome, "")
    return apply_run_count(registry.get("step_ms"), verdict, base, 1, MIN_BASE_RUNS).outcome.value


def _rate(hits: int, judged: int) -> str:
    return f"{hits}/{judged}" + (f" ({hits / judged:.1%})" if judged else "")


def shipped(data: dict[str, Any]) -> str:
    """The shipped default priced per cell (job x busy processes) on the kept runs: A/A false alarms and +10% / +30%
    detection of ``step_ms``, (a) against k = MIN_BASE_RUNS base runs (``compare_between_runs``), (b) against one
    base run, decided only beyond its own spread (:func:`_single`). A/A groups for (a): k + 1 consecutive kept runs
    of the cell's A/A pairs (k base, the next as head); a slowdown: its slowed run against the k A/A runs of the same
    busy level kept nearest it in recording order. Each entry: failing / all, then failing / judged under the guard
    (the newest base run and the head within the wall-clock bound, as ``compare_results`` guards)."""
    from perfsuite.judge.contention import WALL_BOUND
    from perfsuite.judge.timing import MIN_BASE_RUNS, compare_between_runs
    from perfsuite.judge.verdict import DEFAULT_FACTOR

    k = MIN_BASE_RUNS

    def within(*loads: float | None) -> bool:
        return all(x is not None and x <= WALL_BOUND for x in loads)

    lines = [
        f"`step_ms` as shipped, on the kept runs: against {k} base runs (the between-run rule at x{DEFAULT_FACTOR}), "
        "and against one base run (the single-run rule, decided only beyond the base run's own spread: "
        "`perfsuite.judge.baseruns`; anything less is *inconclusive*, asking for more base runs). Each entry: "
        "failing / all, then guarded: failing / judged with both compared runs within the wall-clock bound "
        f"({WALL_BOUND:.0%}). A/A counts regressed and improved; +10% / +30% count regressed.",
        "",
        f"| job | busy | A/A, {k} base runs | +10%, {k} base runs | +30%, {k} base runs | A/A, 1 base run | "
        "+10%, 1 base run | +30%, 1 base run |",
        "|---|---:|---|---|---|---|---|---|",
    ]
    levels = sorted({tuple(key.split("|")[:2]) for key in data["cells"]}, key=lambda x: (int(x[1]), x[0]))
    for job, n in levels:
        aa = [p for p in data["cells"].get(f"{job}|{n}|aa", []) if "samples" in p]
        if not aa:
            continue
        runs = [(s["step_ms"], load) for p in aa for s, load in zip(p["samples"], p["loads"])]
        groups = [runs[g : g + k + 1] for g in range(0, len(runs) - k, k + 1)]
        row = [job, n]
        tallies = [[0, 0, 0, 0] for _ in range(6)]  # failing, all, failing guarded, judged
        for g in groups:
            verdict = compare_between_runs([r for r, _ in g[:k]], g[k][0], DEFAULT_FACTOR)
            bad = verdict.outcome in ("regressed", "improved")
            _count(tallies[0], bad, within(g[k - 1][1], g[k][1]))
        for p in aa:
            bad = _single(p["samples"][0]["step_ms"], p["samples"][1]["step_ms"]) in ("regressed", "improved")
            _count(tallies[3], bad, within(*p["loads"]))
        for col, slow in ((1, "slow10"), (2, "slow30")):
            pairs = [p for p in data["cells"].get(f"{job}|{n}|{slow}", []) if "samples" in p]
            for j, p in enumerate(pairs):
                at = min(max(0, round(j * len(runs) / len(pairs)) - k // 2), len(runs) - k)
                base = runs[at : at + k]
                hit = compare_between_runs([r for r, _ in base], p["samples"][1]["step_ms"], DEFAULT_FACTOR)
                _count(tallies[col], hit.outcome == "regressed", within(base[-1][1], p["loads"][1]))
                one = _single(p["samples"][0]["step_ms"], p["samples"][1]["step_ms"]) == "regressed"
                _count(tallies[col + 3], one, within(*p["loads"]))
        for tally in tallies:
            row.append(f"{_rate(tally[0], tally[1])}; guarded {_rate(tally[2], tally[3])}" if tally[1] else "-")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def _count(tally: list[int], hit: bool, judged: bool) -> None:
    tally[0] += hit
    tally[1] += 1
    tally[2] += hit and judged
    tally[3] += judged


def chosen(data: dict[str, Any]) -> list[str]:
    """One line per metric: the bound the study's rule picks from the kept data."""
    out = []
    for metric in ("step_ms", "step_cpu_ms", "loader_cpu_ms_per_sample"):
        bound, judged = choose(data, metric)
        shown = "none of the loads measured" if bound is None else f"{bound:.0%} ({judged} A/A pairs judged)"
        out.append(
            f"highest measured foreign load with A/A false alarms <= {BUDGET:.1%} in every cell"
            + (f" and +30% detected in >= {DETECT:.0%} of the pairs judged" if metric == "step_ms" else "")
            + f", `{metric}`: {shown}"
        )
    return out


if __name__ == "__main__":
    sys.exit(main())
