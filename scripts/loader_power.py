"""False alarms and detection of the loader ledger's rules beside today's wall-clock rules, on single run pairs.

    python scripts/loader_power.py --pairs 100                  # quiet, then under one busy process
    python scripts/loader_power.py --pairs 3 --conditions quiet # a quick check that it runs

For each condition (``quiet``; ``busy``: one extra process spinning on a core the whole time) it runs
``--pairs`` A/A pairs (the reference twice) and ``--pairs`` A/B pairs (the reference, then the reference whose
Dataset does 20% more CPU work per sample), alternating A/A and A/B, each run a fresh pipeline in this process,
and judges every pair through the one engine (perfsuite.judge.engine.compare_results), as `perfsuite compare`
would. A false alarm is a failing verdict (regressed or improved) in an A/A pair; a detection is a regressed
verdict in an A/B pair. It prints one markdown table per condition and writes every verdict's outcome to
``--out`` (JSON), with the load average before and after.

The +20% is real work, not a sleep or a busy loop on the CPU clock: compressing a fixed buffer with one zlib
compressor kept across samples (:class:`ExtraWork`), sized from its own timing to 20% of the reference's
replayed loader CPU per sample, then rescaled on pilot pairs until the ledger sees +20%, so that it slows down
under load as the loader's own work does. The table gives the change the A/B pairs achieved, pair by pair:
the median and range, and the detection among the pairs whose achieved change lies within +-3% of the target.
The exact loader counters (perfsuite.probes.loadercount) are judged on the same pairs: with ``--slowdown work``
(the default) the B side adds calls (the compressor's), which the counters name; with ``--slowdown same`` both
sides run the same code (the compressor on every sample) and only its input grows on the B side, the same code
become slower, which the counters must not see and only CPU time can. The reference
is a catch-table reference (perfsuite.harness.faults.catalog.REFERENCES), ``loader`` by default: seed 002's fixed
loader, whose per-sample cost (~0.15 ms) is the smallest of the suite, so the hardest to judge.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perfsuite.core.tmpfiles import write_json_atomic
from perfsuite.harness.faults.catalog import REFERENCES
from perfsuite.harness.runner import run
from perfsuite.judge.engine import compare_results
from perfsuite.tools.catch import run_reference, spec_for

LOADER_RULES = ("loader_cpu_ms_per_sample", "loader_capacity_samples_per_s", "main_load_ms_per_step")
EXACT_RULES = (
    "loader_calls_per_sample",
    "loader_decoded_pixels_per_sample",
    "loader_read_bytes_per_sample",
    "loader_blocking_calls_per_sample",
    "loader_output_bytes_per_sample",
    "loader_output_format",
)
SAME_CODE_BYTES = 64  # --slowdown same: what the A side compresses per sample (the B side: the fitted size)
WITHIN = 0.03  # detection is also reported among the A/B pairs whose achieved change is within +-3% of the target
LEDGER_SAMPLES = ("loader_cpu_ms", "loader_calib_ms")
WALL_RULES = ("step_ms", "data_wait_frac", "epoch_fetch_ms", "input_efficiency")
EXTRA = 0.20


class ExtraWork:
    """Dataset.load, then ``size`` bytes compressed: CPU work that a loaded machine slows like the loader's.

    One compressor kept across calls (flushed each time), so the cost grows with ``size`` alone:
    ``zlib.compress`` would set up a new deflate state (hundreds of kB) per call, a fixed cost larger
    than the whole +20% of a 0.2 ms sample.
    """

    def __init__(self, load: Any, size: int) -> None:
        self.load, self.size = load, size
        self.buffer = os.urandom(size)
        self.compressor: Any = None  # made on first use, in the process that uses it

    def work(self) -> None:
        if self.compressor is None:
            self.compressor = zlib.compressobj(6)
        self.compressor.compress(self.buffer)
        self.compressor.flush(zlib.Z_SYNC_FLUSH)

    def __call__(self, index: int) -> Any:
        self.work()
        return self.load(index)


def _zlib_ms(size: int, repeats: int = 20) -> float:
    extra = ExtraWork(None, size)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.thread_time()
        extra.work()
        best = min(best, time.thread_time() - t0)
    return best * 1e3


def extra_size(target_ms: float) -> int:
    """Bytes whose zlib.compress costs ``target_ms`` of CPU on this machine now."""
    size = 256
    while _zlib_ms(size) < target_ms and size < 1 << 26:
        size *= 2
    lo, hi = size // 2, size
    for _ in range(12):
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _zlib_ms(mid) < target_ms else (lo, mid)
    return hi


def _load() -> float:
    return os.getloadavg()[0]


def base_run(reference: str, same_code: bool) -> Any:
    """The A side: the reference, or (``same_code``) the reference compressing a token buffer per sample."""
    return planted_run(reference, SAME_CODE_BYTES) if same_code else run_reference(reference)


def planted_run(reference: str, size: int) -> Any:
    """The reference whose Dataset compresses ``size`` more bytes per sample."""

    def planted(pipeline: Any) -> None:
        dataset = pipeline.loader.dataset
        dataset.load = ExtraWork(dataset.load, size)

    return run(dataclasses.replace(spec_for(REFERENCES[reference]), mutate=planted))


def calibrated_ratio(base: dict[str, list[float]], head: dict[str, list[float]]) -> float:
    """Head's median per-batch CPU over its calibration, against the base's: the change the rule looks at."""
    b = [x / c for x, c in zip(base["loader_cpu_ms"], base["loader_calib_ms"])]
    h = [x / c for x, c in zip(head["loader_cpu_ms"], head["loader_calib_ms"])]
    return statistics.median(h) / statistics.median(b)


def fit_size(reference: str, size: int, log: Any, pilots: int = 3, rounds: int = 2) -> int:
    """Rescale ``size`` until the planted change is +EXTRA as the ledger sees it (zlib alone underestimates it)."""
    for _ in range(rounds):
        ratios = [
            calibrated_ratio(_ledger(run_reference(reference)), _ledger(planted_run(reference, size)))
            for _ in range(pilots)
        ]
        achieved = statistics.median(ratios)
        log(f"{size} bytes: x{achieved:.3f} over {pilots} pilot pairs")
        if achieved > 1.0:
            size = max(256, round(size * EXTRA / (achieved - 1.0)))
    return size


def run_condition(reference: str, pairs: int, size: int, log: Any, same_code: bool = False) -> dict[str, Any]:
    outcomes: dict[str, dict[str, Counter[str]]] = {"aa": {}, "ab": {}}
    raw: list[dict[str, Any]] = []  # the ledger's own samples of every pair, so other rules can be tried on them
    load_before = _load()
    for i in range(pairs):
        for kind in ("aa", "ab"):
            base = base_run(reference, same_code)
            head = base_run(reference, same_code) if kind == "aa" else planted_run(reference, size)
            pair: dict[str, Any] = {"pair": kind, **{side: _ledger(r) for side, r in (("base", base), ("head", head))}}
            for v in compare_results(base, head, f"{kind}{i}", force=True):
                if v.metric in LOADER_RULES + WALL_RULES + EXACT_RULES:
                    outcomes[kind].setdefault(v.metric, Counter())[str(v.outcome)] += 1
                if v.metric == "loader_cpu_ms_per_sample":
                    pair["ledger_outcome"] = str(v.outcome)
            pair["achieved"] = calibrated_ratio(pair["base"], pair["head"])
            raw.append(pair)
        log(f"pair {i + 1}/{pairs}, load {_load():.2f}")
    return {
        "reference": reference,
        "pairs": pairs,
        "extra_bytes": size,
        "slowdown": "same" if same_code else "work",
        "load_before": load_before,
        "load_after": _load(),
        "outcomes": {k: {m: dict(c) for m, c in v.items()} for k, v in outcomes.items()},
        "samples": raw,
        "achieved": statistics.median(calibrated_ratio(r["base"], r["head"]) for r in raw if r["pair"] == "ab"),
    }


def _ledger(result: Any) -> dict[str, list[float]]:
    return {key: [round(x, 6) for x in result.samples.get(key, [])] for key in LEDGER_SAMPLES}


def rejudge(record: dict[str, Any]) -> dict[str, Any]:
    """The record with ``loader_cpu_ms_per_sample`` judged again from its kept samples by today's engine.

    Only that metric's samples are kept, so its rows are the only ones re-judged: the others stay as run.
    """

    outcomes: dict[str, Counter[str]] = {"aa": Counter(), "ab": Counter()}
    for i, pair in enumerate(record["samples"]):
        for v in compare_results(
            _ledger_result(record["reference"], pair["base"]),
            _ledger_result(record["reference"], pair["head"]),
            f"{pair['pair']}{i}",
            force=True,
        ):
            if v.metric == "loader_cpu_ms_per_sample":
                outcomes[pair["pair"]][str(v.outcome)] += 1
    judged = {kind: {**record["outcomes"][kind], "loader_cpu_ms_per_sample": dict(c)} for kind, c in outcomes.items()}
    return {**record, "outcomes": judged}


def _ledger_result(reference: str, ledger: dict[str, list[float]]) -> Any:
    """A Result holding only the ledger's kept samples, as the engine judges ``loader_cpu_ms_per_sample``."""
    from perfsuite.core.results import Metric, Result

    cpu = ledger["loader_cpu_ms"]
    metric = Metric("loader_cpu_ms_per_sample", statistics.median(cpu), "ms/sample")
    samples = {key: list(ledger[key]) for key in LEDGER_SAMPLES}
    return Result(reference, "smoke", {}, {metric.name: metric}, samples, _machine(), 1, len(cpu), 0)


@functools.cache
def _machine() -> Any:
    """This machine's fingerprint, read once: the re-judged Results differ only in their samples."""
    from perfsuite.core.results import Fingerprint

    return Fingerprint.collect("cpu")


def pooled(record: dict[str, Any], k: int) -> dict[str, tuple[int, int]]:
    """(failing verdicts, groups) per pair kind when ``k`` runs a side are pooled: disjoint groups of k
    consecutive pairs, each side's replayed batches put together, judged once by today's engine."""
    out: dict[str, tuple[int, int]] = {}
    for kind, bad in (("aa", ("regressed", "improved")), ("ab", ("regressed",))):
        pairs = [p for p in record["samples"] if p["pair"] == kind]
        hits = groups = 0
        for g in range(len(pairs) // k):
            chunk = pairs[g * k : (g + 1) * k]
            sides = [
                {key: [x for p in chunk for x in p[side][key]] for key in LEDGER_SAMPLES} for side in ("base", "head")
            ]
            base, head = (_ledger_result(record["reference"], ledger) for ledger in sides)
            for v in compare_results(base, head, f"{kind}{g}", force=True):
                if v.metric == "loader_cpu_ms_per_sample":
                    hits += str(v.outcome) in bad
            groups += 1
        out[kind] = (hits, groups)
    return out


def pooled_table(records: list[tuple[str, dict[str, Any]]], ks: tuple[int, ...] = (1, 2, 3, 4)) -> str:
    """How many runs a side the CPU ledger needs: false alarms and detection of +20% with k runs pooled."""
    lines = [
        "| reference | condition | slowdown | runs a side | false alarms (A/A) | detected (A/B) |",
        "|---|---|---|---:|---:|---:|",
    ]
    for name, record in records:
        for k in ks:
            got = pooled(record, k)
            (fa, na), (hit, nb) = got["aa"], got["ab"]
            lines.append(
                f"| `{record['reference']}` | {record.get('condition', name)} | {record.get('slowdown', 'work')} | "
                f"{k} | {fa}/{na} ({fa / max(1, na):.0%}) | {hit}/{nb} ({hit / max(1, nb):.0%}) |"
            )
    return "\n".join(lines) + "\n"


def table(record: dict[str, Any], condition: str) -> str:
    n = record["pairs"]
    lines = [
        f"{condition}: {n} A/A and {n} A/B (+{EXTRA:.0%} loader CPU; achieved x{record['achieved']:.3f}, the A/B "
        f"pairs' median calibrated ratio) single-run pairs of `{record['reference']}`, "
        f"load average {record['load_before']:.2f} -> {record['load_after']:.2f}",
        "",
        "| rule | metric | false alarms (A/A) | detected (A/B) | A/B inconclusive |",
        "|---|---|---:|---:|---:|",
    ]
    for metric in LOADER_RULES + EXACT_RULES + WALL_RULES:
        aa = record["outcomes"]["aa"].get(metric, {})
        ab = record["outcomes"]["ab"].get(metric, {})
        if not aa and not ab:
            continue
        alarms = aa.get("regressed", 0) + aa.get("improved", 0)
        rule = (
            "loader ledger (CPU time)"
            if metric in LOADER_RULES
            else "exact loader counters"
            if metric in EXACT_RULES
            else "wall clock"
        )
        lines.append(
            f"| {rule} | `{metric}` | {alarms}/{sum(aa.values())} ({alarms / max(1, sum(aa.values())):.0%}) | "
            f"{ab.get('regressed', 0)}/{sum(ab.values())} ({ab.get('regressed', 0) / max(1, sum(ab.values())):.0%}) | "
            f"{ab.get('inconclusive', 0)} |"
        )
    lines += ["", at_achieved(record)]
    return "\n".join(lines) + "\n"


def at_achieved(record: dict[str, Any]) -> str:
    """Detection by the CPU ledger at the change each A/B pair achieved (pilot sizing does not fix it)."""
    ab = [p for p in record["samples"] if p["pair"] == "ab" and "achieved" in p and "ledger_outcome" in p]
    if not ab:
        return "(no per-pair achieved change kept: a record written before it was)"
    achieved = sorted(p["achieved"] for p in ab)
    near = [p for p in ab if abs(p["achieved"] - (1 + EXTRA)) <= WITHIN * (1 + EXTRA)]
    hit = sum(p["ledger_outcome"] == "regressed" for p in near)
    rate = f"{hit}/{len(near)} ({hit / len(near):.0%})" if near else "no pair"
    return (
        f"`loader_cpu_ms_per_sample` at the achieved change: A/B pairs achieved x{achieved[0]:.3f} .. "
        f"x{achieved[-1]:.3f} (median x{statistics.median(achieved):.3f}); detected among the pairs within "
        f"+-{WITHIN:.0%} of x{1 + EXTRA:.2f}: {rate}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=100, help="A/A pairs and A/B pairs per condition (default 100)")
    parser.add_argument("--conditions", nargs="+", default=["quiet", "busy"], choices=["quiet", "busy"])
    parser.add_argument("--reference", default="loader", choices=sorted(REFERENCES))
    parser.add_argument(
        "--slowdown",
        choices=["work", "same"],
        default="work",
        help="work: B adds CPU work (new calls); same: both sides run the same code, B's input is larger",
    )
    parser.add_argument("--out", type=Path, default=Path("docs/data/loader_power"), help="where the JSON goes")
    parser.add_argument(
        "--rejudge",
        nargs="+",
        type=Path,
        metavar="JSON",
        help="run nothing: judge these records' kept loader samples again with today's rule, rewrite them, print",
    )
    parser.add_argument(
        "--pooled",
        nargs="+",
        type=Path,
        metavar="JSON",
        help="run nothing: from these records, false alarms and detection with 1-4 runs a side pooled",
    )
    args = parser.parse_args(argv)
    if args.pooled:
        records = []
        for path in args.pooled:
            try:
                records.append((path.stem, json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, ValueError) as exc:
                parser.error(f"--pooled {path}: cannot be read as JSON ({exc}); give a file this script wrote")
        print(pooled_table(records), flush=True)
        return 0
    if args.rejudge:
        for path in args.rejudge:
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                parser.error(f"--rejudge {path}: cannot be read as JSON ({exc}); give a file this script wrote")
            if not isinstance(record, dict) or "samples" not in record:
                parser.error(f"--rejudge {path}: holds no kept samples; give a record written by this script")
            record = rejudge(record)
            write_json_atomic(path, record)
            print(table(record, record.get("condition", path.stem)), flush=True)
        return 0
    if args.pairs < 1:
        parser.error("--pairs must be 1 or more")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so `finally` stops the busy process on a kill too

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    base = run_reference(args.reference)
    per_sample = base.value("loader_cpu_ms_per_sample")
    if per_sample is None:
        print(f"the reference's loader ledger is unavailable: {base.metric('loader_cpu_ms_per_sample').reason}")
        return 1
    size = fit_size(args.reference, extra_size(EXTRA * float(per_sample)), log)
    log(f"{args.reference}: {per_sample:.4g} ms/sample replayed; +{EXTRA:.0%} = zlib.compress of {size} bytes")
    for condition in args.conditions:
        busy = None
        if condition == "busy":
            busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            record = run_condition(
                args.reference, args.pairs, size, lambda s, c=condition: log(f"{c}: {s}"), args.slowdown == "same"
            )
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
        record["condition"] = condition
        suffix = "" if args.slowdown == "work" else "-same-code"
        write_json_atomic(args.out / f"{args.reference}-{condition}{suffix}.json", record)
        print(table(record, condition), flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # `finally` has stopped the busy process; a partial condition is not written
        print("interrupted: nothing written for the condition under way", file=sys.stderr)
        sys.exit(130)
