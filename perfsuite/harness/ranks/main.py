"""What each rank runs under torchrun: ``python -m perfsuite.harness.ranks.main RUN_DIR``.

perfsuite.harness.ranks.launch writes ``RUN_DIR/plan.json`` and launches N of
these through ``torch.distributed.run``. Each one joins the process group
(gloo on CPU, NCCL on CUDA), then for every run of the plan builds the job
(a reference pipeline sharded with a DistributedSampler and wrapped in DDP,
or the user's job factory, called after the process group exists), runs the
runner's phases with every probe plus the rank probe, and sends rank 0 its
figures through ``torch.distributed.gather_object``; rank 0 merges them
into one Result (perfsuite.harness.ranks.merge) and writes it.

For the supervisor each rank keeps ``rank<k>.json`` (its pid and the watchdog
phase it is in, with the phase's deadline) up to date, dumps its Python
stacks to ``rank<k>.stacks`` on SIGUSR1 and on SIGTERM (what torchrun sends
the other ranks when one fails), and writes ``rank<k>.error`` (JSON: the
exception, its traceback, the phase of a RunTimeout) before exiting non-zero.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import IO, Any

_STACK_FILE: IO[str] | None = None  # kept open: faulthandler writes to its descriptor
_PROGRESS: Any = None  # [DDP forwards, gradient all-reduces] reached, in RUN_DIR/rank<k>.progress (two int64)


def _map_progress(path: Path) -> Any:
    """Two int64 counters in a file the supervisor reads while this rank hangs: how far it got."""
    import mmap

    path.write_bytes(bytes(16))
    with open(path, "r+b") as fh:
        mapped = mmap.mmap(fh.fileno(), 16)
    return memoryview(mapped).cast("q")


def write_status(path: Path, payload: dict[str, Any]) -> None:
    """Replace a small JSON file in one step (a temporary, then rename): a reader never sees half of it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(payload), encoding="utf-8")
    os.replace(tmp, path)


def _install_stack_dumps(path: Path) -> None:
    global _STACK_FILE
    _STACK_FILE = open(path, "a", encoding="utf-8")  # noqa: SIM115 - must outlive this function
    for name in ("SIGUSR1", "SIGTERM"):
        signum = getattr(signal, name, None)
        if signum is not None:
            # SIGTERM chains to the default action after the dump: the rank still dies as torchrun asked.
            faulthandler.register(signum, file=_STACK_FILE, all_threads=True, chain=name == "SIGTERM")


def main(argv: list[str]) -> int:
    run_dir = Path(argv[1])
    rank = int(os.environ.get("RANK", "0"))
    status_path = run_dir / f"rank{rank}.json"
    status: dict[str, Any] = {"rank": rank, "pid": os.getpid(), "phase": "start", "limit_s": None, "since": time.time()}
    write_status(status_path, status)
    _install_stack_dumps(run_dir / f"rank{rank}.stacks")
    global _PROGRESS
    _PROGRESS = _map_progress(run_dir / f"rank{rank}.progress")

    from perfsuite.harness import watchdog

    def on_phase(name: str, limit: float | None) -> None:
        status.update(phase=name if limit is not None else f"after {name}", limit_s=limit, since=time.time())
        if limit is not None:
            status["entered"] = name
        write_status(status_path, status)

    watchdog.PHASE_LISTENERS.append(on_phase)
    try:
        plan = json.loads((run_dir / "plan.json").read_text(encoding="utf-8"))
        run_plan(plan, run_dir, rank)
    except BaseException as exc:  # noqa: BLE001 - every failure is reported to the supervisor, then re-raised
        from perfsuite.errors import RunTimeout

        error = {
            "rank": rank,
            "time": time.time(),
            "type": type(exc).__name__,
            "message": str(exc),
            "traceback": traceback.format_exc(),
            # The phase it failed in: a phase's end is reported as the exception leaves it.
            "phase": exc.phase if isinstance(exc, RunTimeout) else status.get("entered", status.get("phase")),
            "deadline_s": exc.deadline_s if isinstance(exc, RunTimeout) else None,
        }
        write_status(run_dir / f"rank{rank}.error", error)
        # Exit now: an orderly exit can block in the process group's teardown while the other ranks wait in a
        # collective, and torchrun stops them only once this rank is gone.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    return 0


def run_plan(plan: dict[str, Any], run_dir: Path, rank: int) -> None:
    """Join the process group, make every run of the plan, write rank 0's merged Results."""
    import torch
    import torch.distributed as dist

    for entry in reversed(plan.get("sys_path", [])):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    if "script" in plan:  # a user's script joins the process group itself (perfsuite.harness.ranks.script)
        from perfsuite.harness.ranks.script import run_rank

        run_rank(plan, run_dir, rank, _PROGRESS)
        return
    from perfsuite.core.cores import usable_cores
    from perfsuite.core.tmpfiles import write_text_atomic
    from perfsuite.harness.ranks.launch import RankRun, import_modules
    from perfsuite.harness.ranks.merge import merge

    import_modules(plan.get("imports", []))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = plan["devices"][local]
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
    dist.init_process_group(plan["backend"])
    world = dist.get_world_size()
    cores = usable_cores().usable
    for i, raw in enumerate(plan["runs"]):
        report = run_one(RankRun.from_dict(raw), rank, world, device)
        gathered: list[Any] | None = [None] * world if rank == 0 else None
        dist.gather_object(report, gathered, dst=0)
        if rank == 0:
            assert gathered is not None
            result = merge(gathered, cores)
            write_text_atomic(run_dir / "results" / f"{i}.json", result.to_json())
    dist.barrier()
    # Only on success: after a failure the other ranks may sit in a collective, and torchrun stops them.
    dist.destroy_process_group()


def run_one(run: Any, rank: int, world: int, device: str) -> Any:
    """One run on this rank: the runner's phases with every probe plus the rank probe; this rank's report."""

    from perfsuite.harness.runner import default_probes
    from perfsuite.harness.runner import run as run_job
    from perfsuite.probes.ranks import RankProbe

    spec = run.spec(rank, world, device)
    probe = RankProbe()
    probe.progress = _PROGRESS
    probes = ([*default_probes()] if run.probes else []) + [probe]
    result = run_job(spec, probes)
    from perfsuite.harness.ranks.merge import rank_report

    return rank_report(rank, result, probe)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
