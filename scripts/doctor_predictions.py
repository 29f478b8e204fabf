"""perfsuite doctor's predicted gains against measured ones, on planted jobs whose fix is known exactly.

    python scripts/doctor_predictions.py [--pairs 3] [--steps 12] [--out docs/data/doctor_predictions.json]
    python scripts/doctor_predictions.py --top-fix [--budget 5] [--busy] [--out docs/data/doctor_top_fix.json]

Each case is a tiny job with one planted cost or setting: workers forked again at each epoch (persistent
workers), 2 workers filling 2 cores (fewer workers), 1 worker beside a free core (more workers), 2 intra-op
threads beside a worker (threads), a 3 ms decode (a cheaper decode), a collate that sleeps (its cost is
wall time, not CPU), an evaluation every 5 steps. The doctor diagnoses it (2 rounds, no counterfactuals) and
its finding for that cost (or, for a worker count, its model for that count) gives the predicted samples/s
ratio of the fix; the fix is then measured as interleaved pairs of single runs against the job as it is (ABBA
order), with a 95% t-interval of the ratio. Prints the markdown table of docs/loader.md with the load average
before and after, and the median and worst ratio of predicted to measured.

``--top-fix`` (issue 55) instead diagnoses each of :data:`TOP_FIX_CASES` twice with its counterfactuals, at
``--budget`` minutes (the script default, 5) and with no budget, and tabulates the fix the first named (its
largest measured gain) against the best fix the second measured: a run that ends before its epoch does, a job
whose best fix is not the first rule's, and with ``--busy`` a job beside 2 busy processes (it loads the machine
for minutes: not on a shared one).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, default_collate

from perfsuite.harness.runner import RunSpec, default_probes, run
from perfsuite.jobs.contract import Job
from perfsuite.tools.doctor import Measured, Predicted, diagnose, ratio_interval
from perfsuite.tools.doctor.diagnosis import Diagnosis
from perfsuite.tools.doctor.predictions import predict_workers


def burn(ms: float) -> None:
    end = time.thread_time() + ms / 1e3
    while time.thread_time() < end:
        pass


class Images(Dataset):
    def __init__(self, decode_ms: float, size: int = 32) -> None:
        self.decode_ms, self.size = decode_ms, size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        burn(self.decode_ms)
        return torch.full((3, 8, 8), float(index % 7)), torch.tensor(index % 3)


class SlowCollate:
    def __init__(self, ms_per_sample: float, sleep: bool = False) -> None:
        self.ms, self.sleep = ms_per_sample, sleep

    def __call__(self, samples: list[Any]) -> Any:
        if self.sleep:
            time.sleep(self.ms * len(samples) / 1e3)  # wall time, no CPU: what the loader ledger cannot see
        else:
            burn(self.ms * len(samples))
        return default_collate(samples)


def planted(
    decode_ms: float = 0.0,
    collate_ms: float = 0.0,
    step_ms: float = 2.0,
    workers: int = 1,
    persistent: bool = True,
    item: bool = False,
    eval_every: int = 0,
    eval_ms: float = 0.0,
    size: int = 32,
    sleep_collate_ms: float = 0.0,
    threads: int | None = None,
) -> Job:
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(
        Images(decode_ms, size),
        batch_size=4,
        num_workers=workers,
        persistent_workers=workers > 0 and persistent,
        collate_fn=SlowCollate(sleep_collate_ms, sleep=True) if sleep_collate_ms else SlowCollate(collate_ms),
    )
    count = [0]
    if threads is not None:
        torch.set_num_threads(threads)  # the job's own setting, as a user's script makes it

    def step(batch: Any) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        burn(step_ms)
        count[0] += 1
        if eval_every and count[0] % eval_every == 0:
            burn(eval_ms)
        if item:
            loss.item()
        return loss

    return Job(step, model, optimizer, loader, name="planted", target_kind="label")


Predict = Callable[[Diagnosis], "Predicted | Any"]


def finding(kind: str) -> Predict:
    """The prediction of the doctor's finding of that kind (None where it named none)."""

    def get(d: Diagnosis) -> Any:
        f = next((f for f in d.findings if f.kind == kind), None)
        return None if f is None else f.predicted

    return get


def workers(k: int) -> Predict:
    """The doctor's worker-count model for k workers."""
    return lambda d: predict_workers(d.evidence, k, d.results[-1])


# (case, what predicts, the job as it is, the job fixed, the fix in words)
CASES: list[tuple[str, str, Predict, Callable[[], Job], Callable[[], Job], str]] = [
    (
        "workers forked at each 2-batch epoch",
        "stage:worker processes",
        finding("stage:worker processes"),
        lambda: planted(decode_ms=0.5, persistent=False, size=8),
        lambda: planted(decode_ms=0.5, persistent=True, size=8),
        "persistent_workers=True",
    ),
    (
        "2 workers on 2 full cores, decode 1 ms",
        "worker model, 1 worker",
        workers(1),
        lambda: planted(decode_ms=1.0, workers=2, step_ms=4.0),
        lambda: planted(decode_ms=1.0, workers=1, step_ms=4.0),
        "num_workers=1 (fewer workers)",
    ),
    (
        "1 worker beside a free core, decode 2 ms",
        "worker model, 2 workers",
        workers(2),
        lambda: planted(decode_ms=2.0, workers=1),
        lambda: planted(decode_ms=2.0, workers=2),
        "num_workers=2 (more workers)",
    ),
    (
        "2 intra-op threads beside 1 worker",
        "busy",
        finding("busy"),
        lambda: planted(decode_ms=1.0, workers=1, threads=2),
        lambda: planted(decode_ms=1.0, workers=1, threads=1),
        "torch.set_num_threads(1)",
    ),
    (
        "decode 3 ms/sample",
        "stage:__getitem__",
        finding("stage:__getitem__"),
        lambda: planted(decode_ms=3.0),
        lambda: planted(decode_ms=0.5),
        "a cheaper decode (0.5 ms)",
    ),
    (
        "collate sleeping 3 ms/sample",
        "stage:collate_fn",
        finding("stage:collate_fn"),
        lambda: planted(sleep_collate_ms=3.0),
        lambda: planted(),
        "the collate's sleep removed",
    ),
    (
        "evaluation 60 ms every 5 steps",
        "periodic",
        finding("periodic"),
        lambda: planted(eval_every=5, eval_ms=60.0),
        lambda: planted(),
        "the evaluation removed",
    ),
]


# (case, the job as it is, RunSpec lengths, processes kept busy beside it)
TOP_FIX_CASES: list[tuple[str, Callable[[], Job], dict[str, int], int]] = [
    (
        "runs end before the epoch (100 batches, 12 steps), workers not persistent",
        lambda: planted(decode_ms=0.5, workers=1, persistent=False, size=400),
        {"steps": 12, "warmup": 2},
        0,
    ),
    (
        "1 worker beside a free core, decode 2 ms (best: more workers, not the stage rule's decode)",
        lambda: planted(decode_ms=2.0, workers=1),
        {"steps": 12, "warmup": 2},
        0,
    ),
    (
        "2 intra-op threads, 1 worker, beside 2 busy processes",
        lambda: planted(decode_ms=1.0, workers=1, threads=2),
        {"steps": 12, "warmup": 2},
        2,
    ),
]


def _burners(n: int) -> list[Any]:
    import subprocess

    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def top_fix(d: Diagnosis) -> tuple[str, float | None]:
    """The fix a diagnosis names first by measurement (its largest measured gain), or its headline where none."""
    gains = [
        (t.fix.value, t.measured.ratio) for t in d.counterfactuals.tried.values() if isinstance(t.measured, Measured)
    ]
    best = max(gains, key=lambda g: g[1], default=None)
    return (
        (best[0], best[1]) if best is not None and best[1] > 1.0 else (f"none measured above x1 ({d.bottleneck})", None)
    )


def top_fix_table(budget: float, busy: bool, out: Path | None, only: str | None = None) -> int:
    """With ``only``, the cases whose name holds it; their rows replace theirs in ``out``, the others are kept."""
    from perfsuite.tools.doctor import Budget

    kept = json.loads(out.read_text()) if out and only and out.exists() else {"budget_min": budget, "rows": []}
    if kept["budget_min"] != budget:
        raise SystemExit(f"{out} was made at --budget {kept['budget_min']:g}: run with that budget, or without --only")
    rows = []
    before = _load()
    for name, make, lengths, burn_n in TOP_FIX_CASES:
        if only and only not in name:
            continue
        if burn_n and not busy:
            rows.append({"case": name, "skipped": "needs --busy (2 busy processes beside it)"})
            continue
        burners = _burners(burn_n)
        try:
            got = {}
            for label, minutes in (("default", budget), ("unlimited", None)):
                t0 = time.monotonic()
                d = diagnose(RunSpec(make(), observe_steps=1, **lengths), name, 3, budget=Budget.minutes(minutes))
                torch.set_num_threads(1)
                got[label] = {
                    "top": top_fix(d),
                    "tried": {
                        t.fix.value: getattr(t.measured, "ratio", None) for t in d.counterfactuals.tried.values()
                    },
                    "not_tried": {k.value: v for k, v in d.counterfactuals.not_tried.items()},
                    "seconds": round(time.monotonic() - t0, 1),
                }
                print(f"{name} [{label}]: {got[label]}", file=sys.stderr)
        finally:
            for p in burners:
                p.kill()
        rows.append(
            {"case": name, **got, "same": got["default"]["top"][0] == got["unlimited"]["top"][0], "load": _load()}
        )
    print(f"load average before: {before}; after: {_load()}; --budget {budget:g} min against no budget\n")
    print("| case | top fix at --budget | best fix, no budget | same |")
    print("|---|---|---|---|")
    for r in rows:
        if "skipped" in r:
            print(f"| {r['case']} | {r['skipped']} | | |")
            continue
        d, u = r["default"]["top"], r["unlimited"]["top"]
        shown = [f"{fix}" + (f" x{ratio:.2f}" if ratio else "") for fix, ratio in (d, u)]
        print(f"| {r['case']} | {shown[0]} | {shown[1]} | {'yes' if r['same'] else 'no'} |")
    if out:
        fresh = {r["case"] for r in rows}
        merged = [r for r in kept["rows"] if r["case"] not in fresh] + rows
        order = [name for name, *_ in TOP_FIX_CASES]
        merged.sort(key=lambda r: order.index(r["case"]) if r["case"] in order else len(order))
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps({"budget_min": budget, "rows": merged}, indent=2, default=str) + "\n")
        tmp.replace(out)
    return 0


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def measure(base: Callable[[], Job], fixed: Callable[[], Job], pairs: int, steps: int) -> dict[str, Any]:
    b, h = [], []
    for k in range(pairs):
        order = [("b", base), ("h", fixed)] if k % 2 == 0 else [("h", fixed), ("b", base)]
        for side, make in order:
            spec = RunSpec(make(), steps=steps, warmup=2, observe_steps=0, sol_steps=0)
            value = run(spec, default_probes()).value("samples_per_s") or 0.0
            (b if side == "b" else h).append(value)
    torch.set_num_threads(1)
    return ratio_interval(b, h, "fixed / as it is")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--only", default=None, help="run only the cases whose name contains this")
    parser.add_argument("--top-fix", action="store_true", help="the top fix at --budget against no budget")
    parser.add_argument("--budget", type=float, default=5.0, help="with --top-fix: the budget in minutes")
    parser.add_argument("--busy", action="store_true", help="with --top-fix: run the case beside 2 busy processes")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.top_fix:
        return top_fix_table(args.budget, args.busy, args.out, args.only)
    rows = []
    before = _load()
    for name, what, predict, base, fixed, fix in CASES:
        if args.only and args.only not in name:
            continue
        d = diagnose(RunSpec(base(), steps=args.steps, warmup=2, observe_steps=1), name, 2, counterfactuals=False)
        torch.set_num_threads(1)
        p = predict(d)
        measured = measure(base, fixed, args.pairs, args.steps)
        rows.append(
            {
                "case": name,
                "predicts": what,
                "headline": d.bottleneck,
                "fix": fix,
                "predicted": p.ratio if isinstance(p, Predicted) else None,
                "why_not": None if isinstance(p, Predicted) else (getattr(p, "reason", None) or "not named"),
                "measured": measured.__dict__ if isinstance(measured, Measured) else {"reason": measured.reason},
                "load": _load(),
            }
        )
        print(f"{name}: predicted {p}, measured {measured}", file=sys.stderr)
    after = _load()
    print(
        f"load average before: {before}; after: {after}; 2-core CPU VM, {args.pairs} interleaved pairs of "
        f"{args.steps}-step runs per case\n"
    )
    print("| planted case | predicted by | predicted samples/s | measured [95% CI] | fix measured |")
    print("|---|---|---:|---:|---|")
    ratios = []
    for r in rows:
        m = r["measured"]
        shown = f"x{m['ratio']:.2f}" if "ratio" in m else m["reason"]
        shown += f" [{m['low']:.2f}..{m['high']:.2f}]" if m.get("low") is not None else ""
        pred = f"x{r['predicted']:.2f}" if r["predicted"] is not None else f"not printed: {r['why_not']}"
        print(f"| {r['case']} | `{r['predicts']}` | {pred} | {shown} | {r['fix']} |")
        if r["predicted"] is not None and "ratio" in m:
            ratios.append(r["predicted"] / m["ratio"])
    if ratios:
        ratios.sort()
        worst = max(ratios, key=lambda x: abs(math.log(x)))
        print(
            f"\npredicted / measured over {len(ratios)} case(s): median {statistics.median(ratios):.2f}, "
            f"worst {worst:.2f}"
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        payload = {"load_before": before, "load_after": after, "pairs": args.pairs, "steps": args.steps, "rows": rows}
        args.out.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
