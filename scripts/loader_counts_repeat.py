"""Are the loader's exact counters exact? Count the same loader in N fresh processes and compare.

    PYTHONPATH=. python scripts/loader_counts_repeat.py --runs 20                 # quiet
    PYTHONPATH=. python scripts/loader_counts_repeat.py --runs 20 --busy          # beside one busy process

Loaders: gray_classifier's (``loader`` reference: a grayscale PNG and a label), face_parsing's with its CPU
augmentation (seeded random transforms: an RGB JPEG and a PNG mask), and ``examples/own_pipeline``'s
(a user's Dataset with PIL transforms, 12 images). Each run is a fresh interpreter (its own hash seed, its
own import order) that counts the loader twice (in-process repeat) and prints its counters; the script
prints, per loader and metric, how many distinct values the runs gave (1: exact) and the range of the
noisy ones. Exits 1 when an exact counter moved.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = r"""
import json, sys
sys.path.insert(0, {root!r})
from perfsuite.probes.loadercount import count, library_versions, to_metrics

def loader(which):
    if which == "own_pipeline":
        sys.path.insert(0, {example!r})
        import perf_jobs
        return perf_jobs.face_job({data!r}, "cpu", "cpu", workers=0).loader
    from perfsuite.core.knobs import Knobs
    from perfsuite.harness.pipeline import build_pipeline
    from perfsuite.jobs.registry import get_workload
    name, aug = which.split(":")
    w = get_workload(name)
    return build_pipeline(w, w.scale("smoke"), Knobs.from_flat(aug=aug, num_workers=0, device="cpu"), seed=0).loader

out = []
the_loader = loader({which!r})
for _ in range(2):
    ms = to_metrics(count(the_loader, 0), library_versions())
    out.append({{m.name: [m.value, m.detail.get("by")] for m in ms}})
print(json.dumps(out, sort_keys=True))
"""
LOADERS = ("gray_classifier:none", "face_parsing:cpu", "own_pipeline")


def busy() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main(argv: list[str] | None = None) -> int:
    from perfsuite.core import metrics

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--busy", action="store_true", help="one process spinning on a core throughout")
    parser.add_argument("--loaders", nargs="*", default=list(LOADERS))
    args = parser.parse_args(argv)
    example = ROOT / "examples" / "own_pipeline"
    data = Path(tempfile.mkdtemp(prefix="perfsuite-faces-"))
    sys.path.insert(0, str(example))
    import make_data  # type: ignore[import-not-found]

    make_data.write_dataset(data, count=12, size=128)
    spinner = busy() if args.busy else None
    moved = False
    try:
        for which in args.loaders:
            script = CHILD.format(root=str(ROOT), example=str(example), data=str(data), which=which)
            runs = []
            for _ in range(args.runs):
                done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
                runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"{which}: {args.runs} fresh processes x 2 counts each{' (busy)' if args.busy else ''}")
            for name in runs[0][0]:
                seen = [json.dumps(r[name], sort_keys=True) for run in runs for r in run]
                distinct = len(set(seen))
                spec = metrics.get(name)
                if spec.exact:
                    moved = moved or distinct > 1
                    value = runs[0][0][name][0]
                    print(f"  {name:36s} exact  {distinct} distinct value(s) (value {value})")
                else:
                    values = [float(r[name][0]) for run in runs for r in run]
                    print(f"  {name:36s} noisy  {min(values):.6g} .. {max(values):.6g}")
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    return 1 if moved else 0


if __name__ == "__main__":
    raise SystemExit(main())
