"""Hand-made Results as the doctor's tests feed them: the probes' own records (contention as the probe writes it,
the loader ledger's metrics), so a key renamed on one side only leaves the doctor reading nothing."""

from __future__ import annotations

from typing import Any


def recorded_contention(
    pressure: float, runqueue: float, neighbours: float = 0.0, cores: int = 2, threads: int = 1
) -> dict[str, Any]:
    """A Result's contention record as the probe writes it (perfsuite.probes.contention.span over two snapshots):
    the producer's own keys, so a key renamed on one side only leaves the doctor reading nothing."""
    from perfsuite.probes.contention import Snapshot, span

    wall = 10.0
    a = Snapshot(0.0, 0, 0, 0.0, 0.0, 0.0, 0)
    b = Snapshot(wall, int(pressure * wall * 1e6), 0, neighbours * wall * cores, wall * cores, 0.0, 0)
    window_span = span(a, b, cores, [round(runqueue * cores)] * 4)
    return {"contention": {"window": window_span, "intra_op_threads": threads}}


def result(
    workers: int = 2,
    persistent: bool = False,
    by: dict[str, float] | None = None,
    process_ms: float = 6.2,
    fetch: list[float] | None = None,
    host: list[float] | None = None,
    sol: list[float] | None = None,
    epoch_fetch: list[float] | None = None,
    samples_per_s: float = 10.0,
    cores_busy: float = 0.5,
    environment: dict[str, Any] | None = None,
) -> Any:
    from fixed_fingerprint import FP

    from perfsuite.core.results import Metric, Result

    by = by if by is not None else {"__getitem__": 0.3, "transform": 0.5, "collate_fn": 0.03}
    replayed = sum(by.values())
    code = {"__getitem__": "Faces.__getitem__", "transform": "Faces.transform", "collate_fn": "default_collate"}
    fetch = fetch if fetch is not None else [200.0, 10.0, 0.0] * 6
    host = host if host is not None else [400.0, 150.0, 140.0] * 6
    epochs = epoch_fetch if epoch_fetch is not None else [f for f in fetch if f >= 200.0]
    metrics = {
        "samples_per_s": Metric("samples_per_s", samples_per_s, "samples/s"),
        "loader_cpu_ms_per_sample": Metric(
            "loader_cpu_ms_per_sample", replayed, "ms/sample", detail={"by": by, "code": code}
        ),
        "loader_process_cpu_ms_per_sample": Metric(
            "loader_process_cpu_ms_per_sample",
            process_ms,
            "ms/sample",
            detail={"epochs_started": len(epochs), "cores_busy": cores_busy},
        ),
        "main_load_ms_per_step": Metric("main_load_ms_per_step", 1.0, "ms/step"),
        "loader_capacity_samples_per_s": Metric(
            "loader_capacity_samples_per_s",
            2e3 / replayed,
            "samples/s",
            detail={"after_overhead": 2e3 / max(process_ms, replayed), "usable_cores": 2},
        ),
        "loader_headroom": Metric(
            "loader_headroom", 30.0, "x", detail={"demand": "the speed of light: the step fed a cached batch"}
        ),
    }
    return Result(
        workload="faces",
        scale="smoke",
        knobs={"num_workers": workers, "persistent_workers": persistent},
        metrics=metrics,
        samples={"fetch_ms": fetch, "host_step_ms": host, "sol_step_ms": sol or [120.0] * 5, "epoch_fetch_ms": epochs},
        fingerprint=FP,
        batch_size=4,
        steps=len(host),
        warmup=2,
        environment=environment if environment is not None else recorded_contention(0.05, 0.5),
    )
