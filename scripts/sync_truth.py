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
class Site:
    """One site of one run: what the rules counted there by kind, and (CUDA) what the runtime synchronised."""

    site: str
    kinds: dict[str, float] = field(default_factory=dict)
    runtime: float | None = None  # CUDA runtime sync calls per step at this site (None: a CPU run)

    def predicted_runtime(self) -> float:
        """Waits at this site that are runtime calls on CUDA (every kind but the pageable copy)."""
        return sum(n for kind, n in self.kinds.items() if _is_runtime(kind))

    def pageable(self) -> float:
        return self.kinds.get(SyncKind.PAGEABLE_COPY.value, 0.0)


def _is_runtime(kind: str) -> bool:
    try:
        return KIND_ROW[SyncKind(kind)].runtime_call
    except (KeyError, ValueError):
        return False  # "CUDA runtime sync": the runtime count itself, not a prediction


@dataclass
class Run:
    device: str
    total: float | None
    sites: dict[str, Site]
    unattributed: float = 0.0


def _syncs(result: Mapping[str, Any]) -> Run:
    metrics = result.get("metrics") or {}
    metric = metrics.get("syncs_per_step") or {}
    detail = metric.get("detail") or {}
    device = str((result.get("fingerprint") or {}).get("device", "?"))
    sites: dict[str, Site] = {}
    for entry in detail.get("sites") or []:
        if entry.get("kind") == SyncKind.RUNTIME.value:
            continue  # the runtime's figure is read below, whole
        site = sites.setdefault(entry["site"], Site(entry["site"]))
        kind = str(entry.get("kind") or "read")
        site.kinds[kind] = site.kinds.get(kind, 0.0) + float(entry["per_step"])
    runtime = detail.get("cuda_runtime_sites")
    unattributed = 0.0
    if isinstance(runtime, Mapping):
        for where, per_step in runtime.items():
            if where == "<unknown>":
                unattributed = float(per_step)
                continue
            sites.setdefault(where, Site(where)).runtime = float(per_step)
        for site in sites.values():
            site.runtime = site.runtime or 0.0
    return Run(device, metric.get("value"), sites, unattributed)


def _results(paths: Iterable[Path]) -> dict[str, Mapping[str, Any]]:
    """run id -> Result JSON, from timing-baseline files (``{"test_id", "result"}``) and plain Result files."""
    out: dict[str, Mapping[str, Any]] = {}
    for path in paths:
        files = sorted(path.rglob("*.json")) if path.is_dir() else [path]
        for file in files:
            data = json.loads(file.read_text())
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
        rid: Run(r["device"], r["total"], {k: Site(**s) for k, s in r["sites"].items()}, r.get("unattributed", 0.0))
        for rid, r in raw.items()
    }


def _kinds(site: Site | None) -> str:
    if site is None or not site.kinds:
        return "-"
    return ", ".join(f"{n:g} {kind}" for kind, n in sorted(site.kinds.items()))


def compare(cpu_path: Path, cuda_path: Path, markdown: Path | None) -> int:
    """Site by site: the CPU's prediction against CUDA's runtime calls and CUDA's own pageable-copy check."""
    cpu, cuda = _load(cpu_path), _load(cuda_path)
    rows = ["| run | site | CPU predicts /step | CUDA runtime syncs /step | CUDA rules /step | agree |", "|---|---|---|---|---|---|"]
    disagree = 0
    for rid in sorted(set(cpu) | set(cuda)):
        c, g = cpu.get(rid), cuda.get(rid)
        if c is None or g is None:
            rows.append(f"| {rid} | - | {'missing' if c is None else c.total} | {'missing' if g is None else g.total} | | no |")
            disagree += 1
            continue
        for where in sorted(set(c.sites) | set(g.sites)) or ["(none)"]:
            cs, gs = c.sites.get(where), g.sites.get(where)
            predicted = cs.predicted_runtime() if cs else 0.0
            measured = gs.runtime if gs and gs.runtime is not None else 0.0
            ok = predicted == measured and (cs.pageable() if cs else 0.0) == (gs.pageable() if gs else 0.0)
            disagree += not ok
            rows.append(f"| {rid} | {where} | {_kinds(cs)} | {measured:g} | {_kinds(gs)} | {'yes' if ok else '**no**'} |")
        if g.unattributed:
            disagree += 1
            rows.append(f"| {rid} | (no stack) | | {g.unattributed:g} | | **no** |")
    text = "\n".join(rows) + f"\n\n{disagree} site(s) disagree.\n"
    print(text)
    if markdown is not None:
        markdown.write_text(text)
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
    print("compared: per site, the CPU's predicted waits that are runtime calls on CUDA against CUDA's runtime sync")
    print("calls there, and the CPU's pageable copies against CUDA's own pinned-memory check at the copy")


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
    m.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)
    if args.command == "runs":
        runs()
        return 0
    if args.command == "collect":
        collect(args.paths, args.out)
        return 0
    return compare(args.cpu, args.cuda, args.markdown)


if __name__ == "__main__":
    raise SystemExit(main())
