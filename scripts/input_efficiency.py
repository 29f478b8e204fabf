"""input_efficiency of every reference workload at smoke scale on this machine: one run per row.

    python scripts/input_efficiency.py            # prints the markdown table of docs/metrics.md (check `uptime` first)

Each run: 20 measured steps, 3 warm-up, 5 speed-of-light steps, no probes (the runner's own
measurement only), CPU device; augmentation on the CPU workers or batched on the device; 0 or 2 workers.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perfsuite.core.knobs import Knobs
from perfsuite.harness.runner import RunSpec, run


def _load() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def main() -> int:
    print(
        "| workload | aug | workers | samples/s | speed of light samples/s | input_efficiency | data wait | band "
        "| load avg |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---|---:|")
    for wl in ("face_parsing", "captcha_slider", "super_resolution", "gray_classifier"):
        for aug in ("cpu", "gpu"):
            for workers in (0, 2):
                knobs = Knobs.from_flat(aug=aug, num_workers=workers, device="cpu")
                r = run(RunSpec(wl, knobs=knobs, steps=20, warmup=3, observe_steps=0, sol_steps=5), probes=[])
                m = r.metric("input_efficiency")
                eff = f"{m.value:.2f}" if m.available else "unavailable: the window beat its speed of light"
                print(
                    f"| {wl} | {aug} | {workers} | {r.value('samples_per_s'):.1f} | "
                    f"{m.detail['sol_samples_per_s']:.1f} | {eff} | {m.detail['data_wait']:.3f} | "
                    f"{m.detail['band']} | {_load()} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
