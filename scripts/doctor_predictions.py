"""perfsuite doctor's predicted gains against measured ones, on planted jobs whose fix is known exactly.

    python scripts/doctor_predictions.py [--pairs 3] [--steps 12] [--out docs/data/doctor_predictions.json]

Each case is a tiny job with one planted cost (a CPU busy loop in the collate, the decode, an evaluation
every 5 steps; workers forked again at each epoch; num_workers=0; a per-step ``.item()``). The doctor
diagnoses it (2 rounds, no counterfactuals) and its finding for that cost gives the predicted samples/s
ratio of the fix; the fix (the planted cost removed, or the knob the finding names) is then measured as
interleaved pairs of single runs against the job as it is (ABBA order), with a 95% t-interval of the
ratio. Prints the markdown table of docs/loader.md with the load average before and after.
"""

from __future__ import annotations

import argparse
import json
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
from perfsuite.tools.doctor import diagnose, ratio_interval


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
    def __init__(self, ms_per_sample: float) -> None:
        self.ms = ms_per_sample

    def __call__(self, samples: list[Any]) -> Any:
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
) -> Job:
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(
        Images(decode_ms, size),
        batch_size=4,
        num_workers=workers,
        persistent_workers=workers > 0 and persistent,
        collate_fn=SlowCollate(collate_ms),
    )
    count = [0]

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


# (case, finding kind, the job as it is, the job fixed, the fix in words)
CASES: list[tuple[str, str, Callable[[], Job], Callable[[], Job], str]] = [
    (
        "collate 3 ms/sample",
        "stage:collate_fn",
        lambda: planted(collate_ms=3.0),
        lambda: planted(),
        "the collate's cost removed",
    ),
    (
        "decode 3 ms/sample",
        "stage:__getitem__",
        lambda: planted(decode_ms=3.0),
        lambda: planted(),
        "the decode's cost removed",
    ),
    (
        "num_workers=0, decode 1 ms",
        "num_workers",
        lambda: planted(decode_ms=1.0, workers=0),
        lambda: planted(decode_ms=1.0, workers=2),
        "num_workers=2, persistent (the finding's fix)",
    ),
    (
        "workers forked at each 2-batch epoch",
        "stage:worker processes",
        lambda: planted(decode_ms=0.5, persistent=False, size=8),
        lambda: planted(decode_ms=0.5, persistent=True, size=8),
        "persistent_workers=True",
    ),
    (
        "evaluation 60 ms every 5 steps",
        "periodic",
        lambda: planted(eval_every=5, eval_ms=60.0),
        lambda: planted(),
        "the evaluation removed",
    ),
]


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
    return ratio_interval(b, h)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--only", default=None, help="run only the cases whose name contains this")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    before = _load()
    for name, kind, base, fixed, fix in CASES:
        if args.only and args.only not in name:
            continue
        d = diagnose(RunSpec(base(), steps=args.steps, warmup=2, observe_steps=1), name, 2, counterfactuals=False)
        finding = next((f for f in d.findings if f["kind"] == kind), None)
        predicted = (finding or {}).get("predicted", {}).get("ratio")
        measured = measure(base, fixed, args.pairs, args.steps)
        rows.append(
            {
                "case": name,
                "finding": kind,
                "named": finding is not None,
                "headline": d.bottleneck,
                "fix": fix,
                "predicted": predicted,
                "measured": measured,
                "load": _load(),
            }
        )
        print(f"{name}: predicted {predicted}, measured {measured}", file=sys.stderr)
    after = _load()
    print(
        f"load average before: {before}; after: {after}; 2-core CPU VM, {args.pairs} interleaved pairs of "
        f"{args.steps}-step runs per case\n"
    )
    print("| planted cost | finding | predicted samples/s | measured [95% CI] | fix measured |")
    print("|---|---|---:|---:|---|")
    for r in rows:
        m = r["measured"]
        ci = f" [{m['low']:.2f}..{m['high']:.2f}]" if m.get("low") is not None else ""
        pred = f"x{r['predicted']:.2f}" if r["predicted"] is not None else "not named"
        print(f"| {r['case']} | `{r['finding']}` | {pred} | x{m['ratio']:.2f}{ci} | {r['fix']} |")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        payload = {"load_before": before, "load_after": after, "pairs": args.pairs, "steps": args.steps, "rows": rows}
        args.out.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
