"""One run of a user's script in a fresh process, for doctor: ``python -m perfsuite.harness.child DIR``.

A script may initialise a process group, seed globals or hold CUDA state, so doctor never runs
it twice in one process. ``DIR/plan.json`` names the script, the run lengths and, for a
counterfactual, the :class:`perfsuite.harness.script.loader_args.Override` to set on the training
loader. The child runs the script under the same phases as ``perfsuite exec`` with every
probe plus the step ledger, and writes ``DIR/result.json`` (the Result), ``DIR/ledger.json``
(the step ledger's summary) and ``DIR/loader.json`` (where the training loader was built, the
arguments the script gave, those perfsuite set, the intra-op threads, one epoch's batches). A failure writes
``DIR/error.json`` (what failed, with the script's own traceback) and exits 1.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

from perfsuite.harness.script.loader_args import LoaderCalls, Override
from perfsuite.probes.base import Probe, RunContext


class TrainingLoaderProbe(Probe):
    """Reads, at setup, how the run's training loader was built (nothing else: no hook, no mode)."""

    name = "training_loader"

    def __init__(self, calls: LoaderCalls) -> None:
        self.calls = calls
        self.record: Any = None
        self.batches: int | None = None  # one epoch's batches (None: the loader has no length)

    def setup(self, ctx: RunContext) -> None:
        loader = ctx.job.loader if ctx.job is not None else None
        self.record = self.calls.of(loader)
        try:
            self.batches = len(loader) if loader is not None else None
        except TypeError:  # an iterable dataset: no length
            self.batches = None


def loader_facts(calls: LoaderCalls, probe: TrainingLoaderProbe) -> dict[str, Any]:
    """What ``DIR/loader.json`` holds (see the module docstring)."""
    import torch

    record = probe.record
    return {
        "site": record.site.to_dict() if record is not None and record.site is not None else None,
        "given": {k: v for k, v in (record.knobs() if record is not None else {}).items()},
        "batch_sampler": record is not None and record.given.get("batch_sampler") is not None,
        "overridden": dict(record.overridden) if record is not None else {},
        "applied": calls.applied,
        "threads": torch.get_num_threads(),
        "batches": probe.batches,
    }


def run_plan(plan: dict[str, Any], out: Path) -> None:
    import torch

    from perfsuite.harness.runner import RunSpec, default_probes
    from perfsuite.harness.runner import run as run_job
    from perfsuite.jobs.script import Script
    from perfsuite.probes.stepledger import StepLedgerProbe

    if plan.get("threads"):
        torch.set_num_threads(int(plan["threads"]))
    raw = plan["script"]
    script = Script(raw["argv"], **{k: v for k, v in raw.items() if k != "argv"})
    spec = RunSpec(script, **plan["spec"])
    calls = LoaderCalls(Override.from_dict(plan["override"]) if plan.get("override") else None)
    ledger, loader = StepLedgerProbe(), TrainingLoaderProbe(calls)
    with calls.installed():
        result = run_job(spec, [*default_probes(), ledger, loader])
    from perfsuite.core.tmpfiles import write_text_atomic

    write_text_atomic(out / "result.json", result.to_json())
    write_text_atomic(out / "ledger.json", json.dumps(ledger.summary()))
    write_text_atomic(out / "loader.json", json.dumps(loader_facts(calls, loader), default=repr))


def main(argv: list[str]) -> int:
    out = Path(argv[1])
    try:
        plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
        for entry in reversed(plan.get("sys_path", [])):
            if entry not in sys.path:
                sys.path.insert(0, entry)
        run_plan(plan, out)
    except BaseException as exc:  # noqa: BLE001 - every failure goes to the parent, which names the run
        error = {
            "type": type(exc).__name__,
            "message": str(exc),
            "script_traceback": getattr(exc, "script_traceback", ""),
            "traceback": traceback.format_exc(),
        }
        (out / "error.json").write_text(json.dumps(error), encoding="utf-8")
        return 130 if isinstance(exc, KeyboardInterrupt) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
