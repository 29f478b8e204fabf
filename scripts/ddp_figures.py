"""The figures docs/distributed.md quotes: scaling efficiency and the straggler analysis, on this machine.

    python scripts/ddp_figures.py [--rounds 3] [--repeats 3] [--sizes 10 25 50 150] [--out FILE]

1. Scaling: ``perfsuite.harness.ranks.launch.scaling`` on face_parsing (smoke, no DataLoader workers, batch 8
   per rank): ``--rounds`` interleaved launches on one rank and on two, each rank with the same threads.
2. Stragglers: one launch of ``--repeats`` unchanged runs and, for each planted size in ``--sizes`` (ms), a sleep
   on rank 1 in its loader (collate_fn), on rank 0 at the start of its backward, and on rank 1 in its optimizer
   step. For each run: straggler_wait_frac, the rank and phase named (or none), each rank's mean lag.

Prints a markdown report with the load (``os.getloadavg``) before and after each part: figures taken on a
loaded machine say so. Run on a quiet machine for figures worth publishing.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIZES_MS = (10, 25, 50, 150)
PLANTS = ("loader", "backward", "optimizer")  # where the sleep goes; its rank: 1, 0, 1


def _plant(where: str, ms: int) -> Any:
    """A module-level mutate function (each rank imports it by name) that plants a sleep of ``ms``."""

    def mutate(pipeline: Any) -> None:
        import time as clock

        import torch.distributed as dist

        rank = dist.get_rank()
        seconds = ms / 1e3
        if where == "loader" and rank == 1:
            from perfsuite.harness.faults.catalog import SlowCollate

            pipeline.loader.collate_fn = SlowCollate(1, seconds)
        elif where == "backward" and rank == 0:

            def sleep(grad: Any) -> Any:
                clock.sleep(seconds)
                return grad

            def on_output(module: Any, args: Any, out: Any) -> None:  # returns None: the output stays as it is
                if out.requires_grad:
                    out.register_hook(sleep)

            pipeline.model.register_forward_hook(on_output)
        elif where == "optimizer" and rank == 1:
            original = pipeline.optimizer.step

            def step(*args: Any, **kwargs: Any) -> Any:
                clock.sleep(seconds)
                return original(*args, **kwargs)

            pipeline.optimizer.step = step

    name = f"plant_{where}_{ms}ms"
    mutate.__name__ = mutate.__qualname__ = name
    return mutate


for _where in PLANTS:
    for _ms in (1, 2, 5, 10, 25, 50, 100, 150, 200):
        globals()[f"plant_{_where}_{_ms}ms"] = _plant(_where, _ms)


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def _spec(steps: int) -> Any:
    from perfsuite.core.knobs import Knobs
    from perfsuite.harness.runner import RunSpec

    cache = os.environ.get("PERFSUITE_CACHE")
    knobs = Knobs.from_flat(device="cpu", aug="none", num_workers=0)
    return RunSpec(
        "face_parsing",
        "smoke",
        knobs,
        steps=steps,
        warmup=2,
        observe_steps=0,
        sol_steps=0,
        cache_dir=Path(cache) if cache else None,
    )


def scaling_part(rounds: int, steps: int) -> list[str]:
    from perfsuite.harness.ranks.launch import scaling

    before = _load()
    started = time.monotonic()
    spec = dataclasses.replace(_spec(steps), observe_steps=1, sol_steps=5)
    result = scaling(spec, 2, rounds, log=lambda s: print(s, file=sys.stderr, flush=True))
    m = result.metric("scaling_efficiency")
    d = m.detail
    lines = [
        "## Scaling: face_parsing smoke, batch 8 per rank, no workers, 2 ranks on 2 cores",
        "",
        f"- before: {before}; after: {_load()}; {time.monotonic() - started:.0f} s",
        f"- OMP_NUM_THREADS per rank: {result.knobs.get('omp_num_threads')}; "
        f"cpu_oversubscription {result.value('cpu_oversubscription')}",
    ]
    if m.available:
        lines.append(
            f"- scaling_efficiency **{m.value:.3f}** ({d['confidence']:.0%} CI {d['low']:.3f}..{d['high']:.3f}, "
            f"{d['rounds']} interleaved rounds)"
        )
    else:
        lines.append(f"- scaling_efficiency unavailable: {m.reason}")
    if d.get("one_rank_samples_per_s"):
        lines.append(
            "- samples/s per round, one rank / two ranks: "
            + ", ".join(f"{a:.1f} / {b:.1f}" for a, b in zip(d["one_rank_samples_per_s"], d["n_rank_samples_per_s"]))
        )
    s = result.metric("straggler_wait_frac")
    lines.append(f"- the 2-rank run's straggler_wait_frac {s.value:.3f}: {s.detail.get('summary')}")
    return lines


def straggler_part(repeats: int, sizes: list[int], steps: int) -> list[str]:
    from perfsuite.harness.ranks.launch import launch, rank_run

    base = _spec(steps)
    keys, runs = [], []
    for i in range(repeats):
        keys.append(("none", 0, i))
        runs.append(rank_run(base))
    for ms in sizes:
        for where in PLANTS:
            keys.append((where, ms, 0))
            runs.append(rank_run(dataclasses.replace(base, mutate=globals()[f"plant_{where}_{ms}ms"])))
    before = _load()
    started = time.monotonic()
    results = launch(runs, 2)
    expected = {"loader": (1, "loader"), "backward": (0, "forward+backward"), "optimizer": (1, "after backward")}
    lines = [
        f"## Stragglers: face_parsing smoke, {steps} measured steps per run, 2 ranks on 2 cores",
        "",
        f"- before: {before}; after: {_load()}; {len(runs)} runs in one launch, {time.monotonic() - started:.0f} s",
        "",
        "| planted | ms | median step ms | straggler_wait_frac | named (rank, phase) | right? | mean lag ms by rank |",
        "|---|---:|---:|---:|---|---|---|",
    ]
    for (where, ms, _), r in zip(keys, results):
        m = r.metric("straggler_wait_frac")
        d = m.detail
        named = (d.get("rank"), d.get("phase"))
        right = named == expected.get(where, (None, None))
        lags = ", ".join(f"{k}: {v:.1f}" for k, v in (d.get("lag_ms_by_rank") or {}).items())
        lines.append(
            f"| {where} | {ms} | {d.get('median_step_ms', 0):.1f} | {m.value:.3f} | "
            f"{named[0] if named[0] is not None else 'none'}, {named[1] or '-'} | {'yes' if right else '**no**'} | "
            f"{lags} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved scaling rounds (default 3)")
    parser.add_argument("--repeats", type=int, default=3, help="unchanged runs in the straggler launch (default 3)")
    parser.add_argument(
        "--sizes", type=int, nargs="*", default=list(SIZES_MS), choices=(1, 2, 5, 10, 25, 50, 100, 150, 200)
    )
    parser.add_argument("--steps", type=int, default=12, help="measured steps per run (default 12)")
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--out", type=Path, help="also write the report to FILE")
    args = parser.parse_args(argv)
    lines = ["# perfsuite DDP figures", ""]
    if not args.skip_scaling:
        lines += scaling_part(args.rounds, args.steps) + [""]
    lines += straggler_part(args.repeats, args.sizes, args.steps)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
