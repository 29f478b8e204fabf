"""The sync model's ground truth: what a CPU run predicts the host waits for, against what CUDA does, by site.

A CPU run predicts each wait by kind and line (docs/syncs.md). On CUDA the same
runs record the runtime's own synchronisation calls (``cudaStreamSynchronize``
and friends, placed at the step's line from the profiler's Python stacks) and,
for pageable copies (no runtime call: the host stalls on a staging copy), the
real ``Tensor.is_pinned()`` of each copy's source. This script collects both
sides from Result files and compares them site by site; equality is expected.

    python scripts/sync_truth.py runs                      # what is compared: the runs and how they are made
    python scripts/sync_truth.py collect DIR|FILE... --out side.json
    python scripts/sync_truth.py compare cpu.json cuda.json [--markdown table.md]

``scripts/gpu_truth.sh`` makes both on a GPU machine in one call (the CPU side is
committed in docs/data/sync_truth/cpu.json, made here by ``scripts/gpu_truth.sh
--cpu``). ``compare`` exits 1 when a site disagrees.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfsuite.probes.synckinds import KIND_ROW, SyncKind  # noqa: E402

# The runs besides the reference suite (tests/perf, every test): the example script and the planted copies.
SCRIPT_RUNS: dict[str, list[str]] = {
    "own_pipeline": ["examples/own_pipeline/train.py", "--data", "{data}", "--epochs", "40"],
    "copies-pageable": ["tests/data/scripts/copies/train.py", "--non-blocking"],
    "copies-pinned": ["tests/data/scripts/copies/train.py", "--non-blocking", "--pin-memory"],
    "copies-blocking": ["tests/data/scripts/copies/train.py", "--pin-memory"],
    "copies-from-list": ["tests/data/scripts/copies/train.py", "--non-blocking", "--pin-memory", "--tensor-from-list"],
}


@dataclass
class Line:
    """One line of one run: what the rules counted there, by kind, per step."""

    site: str
    kinds: dict[str, float] = field(default_factory=dict)

    def runtime_calls(self) -> float:
        """The waits here that are CUDA runtime calls (every kind but the pageable copy)."""
        return sum(n for kind, n in self.kinds.items() if _is_runtime(kind))


def _is_runtime(kind: str) -> bool:
    try:
        return KIND_ROW[SyncKind(kind)].runtime_call
    except (KeyError, ValueError):
        return False  # "CUDA runtime sync": what CUDA measured beyond the rules, not a prediction


@dataclass
class Run:
    """One run's syncs as the sync probe recorded them; the CUDA-only fields are None on a CPU run."""

    device: str
    total: float | None
    lines: dict[str, Line]
    runtime: float | None = None  # CUDA: the runtime's own sync calls per step (the ground truth)
    runtime_ops: dict[str, float] | None = None  # CUDA: the operations that made them, per step
    beyond_rules: float = 0.0  # CUDA: "CUDA runtime sync" entries: waits no rule predicted

    def runtime_calls(self) -> float:
        """The waits the rules counted that are CUDA runtime calls."""
        return sum(line.runtime_calls() for line in self.lines.values())


def _syncs(result: Mapping[str, Any]) -> Run:
    metric = (result.get("metrics") or {}).get("syncs_per_step") or {}
    detail = metric.get("detail") or {}
    run = Run(str((result.get("fingerprint") or {}).get("device", "?")), metric.get("value"), {})
    for entry in detail.get("sites") or []:
        if entry.get("kind") == SyncKind.RUNTIME.value:
            run.beyond_rules += float(entry["per_step"])
            continue
        where = str(entry["site"])
        line = run.lines.setdefault(where, Line(where))
        kind = str(entry.get("kind") or SyncKind.READ.value)
        line.kinds[kind] = line.kinds.get(kind, 0.0) + float(entry["per_step"])
    if isinstance(detail.get("cuda_runtime_sites"), Mapping):  # recorded before cuda_runtime_per_step was
        run.runtime = sum(float(v) for v in detail["cuda_runtime_sites"].values())
    if isinstance(detail.get("cuda_runtime_per_step"), (int, float)):
        run.runtime = float(detail["cuda_runtime_per_step"])
    if run.runtime is not None:
        run.runtime_ops = {str(k): float(v) for k, v in (detail.get("cuda_runtime_ops") or {}).items()}
    return run


def _results(paths: Iterable[Path]) -> dict[str, Mapping[str, Any]]:
    """run id -> Result JSON, from timing-baseline files (``{"test_id", "result"}``) and plain Result files."""
    out: dict[str, Mapping[str, Any]] = {}
    for path in paths:
        files = sorted(path.rglob("*.json")) if path.is_dir() else [path]
        for file in files:
            try:
                data = json.loads(file.read_text())
            except json.JSONDecodeError:
                print(f"{file}: not a Result (a run that did not finish): left out", file=sys.stderr)
                continue
            if "result" in data and "test_id" in data:
                out[str(data["test_id"])] = data["result"]
            elif "metrics" in data:
                out[file.stem] = data
    return out


def collect(paths: list[Path], out: Path) -> None:
    runs = {rid: asdict(_syncs(result)) for rid, result in sorted(_results(paths).items())}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps(runs, indent=1, sort_keys=True) + "\n")
    tmp.replace(out)
    print(f"{len(runs)} runs -> {out}")


def _load(path: Path) -> dict[str, Run]:
    raw = json.loads(path.read_text())
    return {
        rid: Run(
            r["device"],
            r["total"],
            {k: Line(**v) for k, v in r["lines"].items()},
            r.get("runtime"),
            r.get("runtime_ops"),
            r.get("beyond_rules", 0.0),
        )
        for rid, r in raw.items()
    }


def _kinds(line: Line | None) -> str:
    if line is None or not line.kinds:
        return "-"
    return ", ".join(f"{n:g} {kind}" for kind, n in sorted(line.kinds.items()))


def compare(cpu_path: Path, cuda_path: Path, markdown: Path | None, page: Path | None = None) -> int:
    """Per run: each line's kinds (the CPU's prediction against the same rules on CUDA's real devices and pinned
    memory), and the step's waits that are runtime calls against the CUDA runtime's own sync calls in the observed
    steps (the ground truth; the profiler cannot place them by line, so they are compared per step)."""
    cpu, cuda = _load(cpu_path), _load(cuda_path)
    rows = [
        "| run | where | CPU predicts /step | CUDA /step | agree |",
        "|---|---|---|---|---|",
    ]
    disagree = 0

    def row(rid: str, where: str, predicted: str, measured: str, ok: bool) -> None:
        nonlocal disagree
        disagree += not ok
        rows.append(f"| {rid} | {where} | {predicted} | {measured} | {'yes' if ok else '**no**'} |")

    for rid in sorted(set(cpu) | set(cuda)):
        c, g = cpu.get(rid), cuda.get(rid)
        if c is None and g is not None:  # a CUDA-only test (it skips on a CPU): nothing was predicted
            rows.append(f"| {rid} | the run | CUDA only: the test skips on a CPU | {g.total:g} | - |")
            continue
        if c is None or g is None:
            row(rid, "the run", "missing" if c is None else f"{c.total}", "missing", False)
            continue
        for where in sorted(set(c.lines) | set(g.lines)):
            cl, gl = c.lines.get(where), g.lines.get(where)
            row(rid, where, _kinds(cl), f"rules: {_kinds(gl)}", (cl.kinds if cl else {}) == (gl.kinds if gl else {}))
        if g.runtime is None:
            row(rid, "CUDA runtime", f"{c.runtime_calls():g}", "not recorded (no CUDA profiler)", False)
            continue
        ops = ", ".join(f"{op} x{n:g}" for op, n in (g.runtime_ops or {}).items())
        measured = f"{g.runtime:g} sync call(s)" + (f" ({ops})" if ops else "")
        row(
            rid,
            "CUDA runtime, the step",
            f"{c.runtime_calls():g} runtime call(s)",
            measured,
            g.runtime == c.runtime_calls(),
        )
    text = "\n".join(rows) + f"\n\n{disagree} row(s) disagree.\n"
    print(text)
    if markdown is not None:
        markdown.write_text(text)
    if page is not None:
        start, end = "<!-- sync-truth:start -->\n", "<!-- sync-truth:end -->"
        head, _, rest = page.read_text().partition(start)
        if not rest:
            raise SystemExit(f"{page} has no {start.strip()} marker: add the two markers where the table goes")
        page.write_text(f"{head}{start}{text}{end}{rest.partition(end)[2]}")
    return 1 if disagree else 0


def runs() -> None:
    """What ``gpu_truth.sh`` runs on each side, and so what ``compare`` will compare."""
    import subprocess

    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/perf", "-p", "perfsuite", "--collect-only", "-q"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    tests = [line for line in listed.stdout.splitlines() if "::" in line]
    print(f"the reference suite ({len(tests)} tests, every one with --perfsuite-save):")
    for test in tests:
        print(f"  {test}")
    print("scripts under perfsuite exec --steps 4 (the Result's syncs by site):")
    for name, argv in SCRIPT_RUNS.items():
        print(f"  {name}: python {' '.join(argv)}")
    print("compared: at each line, the kinds the CPU run predicts against the same rules on CUDA's real devices and")
    print("pinned memory; per step, the waits that are CUDA runtime calls against the runtime's own sync calls")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("runs", help="list what is compared (the dry run)")
    c = sub.add_parser("collect", help="one side's syncs by site, from Result files or directories of them")
    c.add_argument("paths", nargs="+", type=Path)
    c.add_argument("--out", type=Path, required=True)
    m = sub.add_parser("compare", help="the CPU side against the CUDA side")
    m.add_argument("cpu", type=Path)
    m.add_argument("cuda", type=Path)
    m.add_argument("--markdown", type=Path, help="write the table to this file")
    m.add_argument("--page", type=Path, help="put the table between <!-- sync-truth:start/end --> of this page")
    args = parser.parse_args(argv)
    if args.command == "runs":
        runs()
        return 0
    if args.command == "collect":
        collect(args.paths, args.out)
        return 0
    return compare(args.cpu, args.cuda, args.markdown, args.page)


if __name__ == "__main__":
    raise SystemExit(main())
