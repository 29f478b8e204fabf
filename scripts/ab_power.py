"""The power table: four timing rules, side by side, on the same real runs of a reference workload.

Two steps, so that every rule sees exactly the same samples:

1. ``record`` runs face_parsing at smoke scale with 2 DataLoader workers in
   fresh processes, as ``perfsuite ab`` does, in recorded *rounds* of four
   runs (ABBA or BAAB at random). Each round compares the base step with one
   variant, cycling: the base itself (A/A), and the step with real extra work
   inside it (a calibrated number of 256x256 matmuls after the training step,
   inside the timed ``pipeline.step`` call) for +5%, +10% and +20%. With
   ``--load N`` it first starts N busy processes (``python -c "while True:
   pass"``) and stops them at the end. The pool is saved after every round.
2. ``evaluate`` judges the pool with four rules:

   * **perfsuite single run** (``perfsuite.judge.timing.compare_timing``, what
     ``--perfsuite-compare`` does against a stored baseline): the base run of
     one recorded round against the head run of a *different* round (a
     baseline is recorded at another time);
   * **perfsuite ab** (``perfsuite.judge.adaptive.run_loop`` with its defaults):
     rounds of the variant drawn in random order, without replacement within
     a comparison, until decided or ``--max-rounds``; the time per comparison
     is the rounds it used x 4 x the mean recorded run time (process start
     included);
   * **pytest-benchmark mean:5%**: head mean > base mean x 1.05, on the same
     pair as the single-run rule;
   * **asv**: one round, each side's two processes pooled (asv's default
     ``processes = 2``, interleaved), regressed when the ratio of medians
     exceeds 1.1 and Mann-Whitney p < 0.002 (our reading of asv's
     ``statistics.is_different`` plus ``factor``).

   Comparisons are drawn with a fixed seed. Within one comparison no run is
   used twice; across comparisons runs are reused (the pool is finite), which
   the table states with the pool size.

    python scripts/ab_power.py record --rounds 40 --out pool-quiet.json
    python scripts/ab_power.py record --rounds 40 --load 1 --out pool-load1.json
    python scripts/ab_power.py evaluate pool-quiet.json pool-load1.json --comparisons 200
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
VARIANTS = ("A/A", "+5%", "+10%", "+20%")
EFFECT = {"A/A": 0.0, "+5%": 0.05, "+10%": 0.10, "+20%": 0.20}
MATRIX = 256


# --------------------------------------------------------------------------- one run (a fresh process)


def _extra_work(units: int):
    """A ``mutate`` that adds ``units`` matmuls inside the timed step."""
    import torch

    a = torch.randn(MATRIX, MATRIX)

    def mutate(pipeline):
        original = pipeline.step

        def step(batch, index):
            loss = original(batch, index)
            with torch.no_grad():
                x = a
                for _ in range(units):
                    x = torch.mm(a, x).mul_(1e-3)
            return loss

        pipeline.step = step

    return mutate


def _spec(units: int, steps: int, warmup: int):
    from perfsuite.core.knobs import Knobs
    from perfsuite.harness.runner import RunSpec

    knobs = Knobs.from_flat(aug="cpu", num_workers=2, persistent_workers=True, device="cpu")
    return RunSpec(
        "face_parsing",
        scale="smoke",
        knobs=knobs,
        steps=steps,
        warmup=warmup,
        observe_steps=0,
        sol_steps=0,
        mutate=_extra_work(units) if units else None,
    )


def one_run(units: int, steps: int, warmup: int) -> dict:
    from perfsuite.harness.runner import run

    result = run(_spec(units, steps, warmup), probes=[])
    return {"step_ms": result.samples["step_ms"], "samples_per_s": result.value("samples_per_s")}


def calibrate(steps: int, warmup: int) -> tuple[float, float]:
    """(median step ms of the base, ms per matmul unit), measured in this process."""
    import torch

    from perfsuite.harness.runner import run

    base = statistics.median(run(_spec(0, steps, warmup), probes=[]).samples["step_ms"])
    a = torch.randn(MATRIX, MATRIX)
    x = a
    for _ in range(20):
        x = torch.mm(a, x).mul_(1e-3)
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(50):
            x = torch.mm(a, x).mul_(1e-3)
        times.append((time.perf_counter() - t0) * 1e3 / 50)
    return base, statistics.median(times)


# --------------------------------------------------------------------------- record


def _subprocess_run(units: int, steps: int, warmup: int) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "one-run", "--units", str(units), "--steps", str(steps), "--warmup", str(warmup)],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
    )
    if proc.returncode != 0:
        raise SystemExit(f"a run failed:\n{proc.stderr[-2000:]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    data["process_s"] = time.perf_counter() - t0
    return data


def _uptime() -> str:
    try:
        return Path("/proc/loadavg").read_text().split(" ")[0]
    except OSError:
        return "?"


def record(args: argparse.Namespace) -> int:
    out = Path(args.out)
    pool = json.loads(out.read_text()) if out.exists() else None
    busy: list[subprocess.Popen] = []
    try:
        for _ in range(args.load):
            busy.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        if pool is None:
            base_ms, unit_ms = calibrate(args.steps, args.warmup)
            units = {v: round(EFFECT[v] * base_ms / unit_ms) for v in VARIANTS}
            pool = {
                "workload": "face_parsing smoke, aug=cpu, 2 workers, persistent",
                "steps": args.steps,
                "warmup": args.warmup,
                "load": args.load,
                "calibration": {"base_step_ms": base_ms, "unit_ms": unit_ms, "units": units},
                "rounds": [],
                "started": time.strftime("%Y-%m-%d %H:%M"),
            }
        rng = random.Random(args.seed + len(pool["rounds"]))
        for r in range(len(pool["rounds"]), args.rounds):
            variant = VARIANTS[r % len(VARIANTS)]
            order = rng.choice(("ABBA", "BAAB"))
            load_before = _uptime()
            runs = []
            for side in order:
                units = 0 if side == "A" else pool["calibration"]["units"][variant]
                runs.append(_subprocess_run(units, pool["steps"], pool["warmup"]))
            pool["rounds"].append(
                {"variant": variant, "order": order, "runs": runs, "loadavg": [load_before, _uptime()]}
            )
            tmp = out.with_suffix(".tmp")
            tmp.write_text(json.dumps(pool))
            tmp.replace(out)
            print(
                f"round {r + 1}/{args.rounds} {variant} {order}: "
                + " ".join(f"{statistics.median(x['step_ms']):.1f}" for x in runs)
                + f" ms; load {load_before}",
                flush=True,
            )
    finally:
        for p in busy:
            p.kill()
            p.wait()
    return 0


# --------------------------------------------------------------------------- evaluate


def _median(xs):
    return statistics.median(xs)


def _rules(pool: dict, comparisons: int, max_rounds: int, seed: int, statistic: str) -> dict:
    from scipy.stats import mannwhitneyu

    from perfsuite.ab.engine import run_statistic
    from perfsuite.judge.adaptive import ABOutcome, RunValues, run_loop
    from perfsuite.judge.timing import compare_timing
    from perfsuite.judge.verdict import Outcome

    rng = random.Random(seed)
    by_variant: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for rnd in pool["rounds"]:
        by_variant[rnd["variant"]].append(rnd)
    run_s = statistics.mean(x["process_s"] for rnd in pool["rounds"] for x in rnd["runs"])

    def sides(rnd):
        a = [x for s, x in zip(rnd["order"], rnd["runs"]) if s == "A"]
        b = [x for s, x in zip(rnd["order"], rnd["runs"]) if s == "B"]
        return a, b

    out: dict[str, dict] = {}
    for variant, rounds in by_variant.items():
        if len(rounds) < 2:
            continue
        # the effect achieved: within each round's adjacent pairs (rounds of different variants ran at
        # different times, so pooling medians across rounds would mix the machine's drift into it)
        paired = [
            math.log(_median(rnd["runs"][k + (rnd["order"][k] == "A")]["step_ms"]))
            - math.log(_median(rnd["runs"][k + (rnd["order"][k] == "B")]["step_ms"]))
            for rnd in rounds
            for k in (0, 2)
        ]
        counts = {"single": 0, "ab": 0, "pytest-benchmark mean:5%": 0, "asv": 0}
        ab_outcomes: dict[str, int] = {}
        ab_rounds: list[int] = []
        for _ in range(comparisons):
            i, j = rng.sample(range(len(rounds)), 2)
            base_run = rng.choice(sides(rounds[i])[0])["step_ms"]
            head_run = rng.choice(sides(rounds[j])[1])["step_ms"]
            counts["single"] += compare_timing(base_run, head_run).outcome is Outcome.REGRESSED
            counts["pytest-benchmark mean:5%"] += statistics.mean(head_run) > 1.05 * statistics.mean(base_run)
            a, b = sides(rounds[rng.randrange(len(rounds))])
            a_s = [t for x in a for t in x["step_ms"]]
            b_s = [t for x in b for t in x["step_ms"]]
            p = mannwhitneyu(b_s, a_s, alternative="greater").pvalue
            counts["asv"] += _median(b_s) > 1.1 * _median(a_s) and p < 0.002
            draw = rng.sample(rounds, min(max_rounds, len(rounds)))

            def measure(order, r, draw=draw):
                rnd = draw[r]
                a_runs, b_runs = sides(rnd)
                runs = {"A": iter(a_runs), "B": iter(b_runs)}
                return {"t": [RunValues(run_statistic(next(runs[s])["step_ms"], statistic)) for s in order]}

            loop = run_loop(measure, seed=rng.randrange(1 << 30), max_rounds=len(draw))
            outcome = loop.tracks["t"].decision.outcome
            counts["ab"] += outcome is ABOutcome.REGRESSED
            ab_outcomes[outcome.value] = ab_outcomes.get(outcome.value, 0) + 1
            ab_rounds.append(len(loop.orders))
        out[variant] = {
            "rounds_in_pool": len(rounds),
            "achieved": math.exp(_median(paired)),
            "counts": counts,
            "comparisons": comparisons,
            "ab_outcomes": ab_outcomes,
            "ab_rounds_mean": statistics.mean(ab_rounds),
            "ab_seconds_mean": statistics.mean(ab_rounds) * 4 * run_s,
            "run_s": run_s,
        }
    return out


def evaluate(args: argparse.Namespace) -> int:
    tables = []
    for path in args.pools:
        pool = json.loads(Path(path).read_text())
        res = _rules(pool, args.comparisons, args.max_rounds, args.seed, args.statistic)
        loads = [float(x) for rnd in pool["rounds"] for x in rnd["loadavg"] if x != "?"]
        head = (
            f"**{Path(path).name}**: {pool['workload']}, {pool['steps']} steps per run, background load "
            f"{pool['load']} busy process(es); load average during recording {min(loads):.1f}-{max(loads):.1f}; "
            f"{len(pool['rounds'])} recorded rounds; a run takes {next(iter(res.values()))['run_s']:.1f} s "
            "with process start"
        )
        cols = [v for v in VARIANTS if v in res]
        lines = [
            head,
            "",
            "| rule | "
            + " | ".join(
                ("A/A false alarm" if v == "A/A" else f"real {v} (achieved x{res[v]['achieved']:.3f})") for v in cols
            )
            + " |",
            "|---|" + "---:|" * len(cols),
        ]
        names = {
            "single": "perfsuite single run (stored baseline)",
            "ab": f"perfsuite ab (<= {args.max_rounds} rounds, per-run {args.statistic})",
            "pytest-benchmark mean:5%": "pytest-benchmark `mean:5%`",
            "asv": "asv (x1.1, MWU p < 0.002)",
        }
        for key, label in names.items():
            cells = []
            for v in cols:
                n, c = res[v]["comparisons"], res[v]["counts"][key]
                cells.append(f"{c}/{n} ({c / n:.1%})")
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append(
            "| perfsuite ab: mean rounds / time per comparison | "
            + " | ".join(f"{res[v]['ab_rounds_mean']:.1f} / {res[v]['ab_seconds_mean']:.0f} s" for v in cols)
            + " |"
        )
        lines.append(
            "| perfsuite ab: verdicts (regressed / same / improved / unknown) | "
            + " | ".join(
                " / ".join(str(res[v]["ab_outcomes"].get(o, 0)) for o in ("regressed", "same", "improved", "unknown"))
                for v in cols
            )
            + " |"
        )
        lines.append(
            "\nPool sizes (rounds): "
            + ", ".join(f"{v} {res[v]['rounds_in_pool']}" for v in cols)
            + "; comparisons reuse runs across draws, never within one."
        )
        tables.append("\n".join(lines))
    print("\n\n".join(tables))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("record")
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--load", type=int, default=0, help="busy background processes during recording")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p = sub.add_parser("evaluate")
    p.add_argument("pools", nargs="+")
    p.add_argument("--comparisons", type=int, default=200)
    p.add_argument("--max-rounds", type=int, default=15)
    p.add_argument(
        "--statistic", default="p10", help="perfsuite ab's per-run statistic: p10 (its default), median, min"
    )
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("one-run")
    p.add_argument("--units", type=int, default=0)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args(argv)
    if args.cmd == "record":
        return record(args)
    if args.cmd == "evaluate":
        return evaluate(args)
    print(json.dumps(one_run(args.units, args.steps, args.warmup)))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))
    sys.exit(main())
