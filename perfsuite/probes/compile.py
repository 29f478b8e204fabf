"""graph_breaks, recompiles, compile_s: what torch.compile did during the run.

Compilation happens lazily on the first steps (warm-up), so this probe counts
from setup() to the end of the run, reading torch._dynamo's own counters and
per-frame compilation records (the same numbers ``torch._dynamo.explain`` and
TORCH_LOGS report). Seed 003 never compiled; a compiled model that silently
breaks into many graphs is the next trap, so breaks come with their reasons.
Both counts also keep their sites (``detail["sites"]``): a break at the line
it happened (dynamo compiles the rest of the function as a frame of its own,
``torch_dynamo_resume_in_forward_at_26``, starting there), a recompile at the
first line of the frame compiled again.

Whenever torch._dynamo is loaded, setup() calls torch._dynamo.reset():
compiled code is cached per code object, and a second run of the same model
class in this process would otherwise reuse the first run's graphs and report
no breaks and no compile time; and a model that an earlier run's observed
steps called under a dispatch mode runs eagerly until the next reset.

The counters are read when the measured window ends (``stop()``), before the
observed steps, so the instrumented steps never count; ``recompiles`` counts
every recompilation of the run, and its detail says how many fell inside the
window (a shape change after warm-up, e.g. drop_last=False's short batch).

For a run in which nothing was compiled, all three metrics are unavailable,
not 0: a threshold such as ``graph_breaks <= 0`` must not pass for a model
that was never compiled (seed 003's ``compile_model: false``).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from typing import Any

from perfsuite.core.results import Metric
from perfsuite.probes.base import Probe, RunContext, WindowTimings
from perfsuite.probes.sites import code_site, site_detail

NAMES = ("graph_breaks", "recompiles", "compile_s")
# dynamo compiles what follows a break as a frame of its own, named for the function and the breaking line
_RESUMED = re.compile(r"^torch_dynamo_resume_in_(.+)_at_\d+$")


def _reason(text: str) -> dict[str, str]:
    """Dynamo's multi-line break message, reduced to its headline and explanation."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    explanation = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("Explanation:")), "")
    return {"reason": lines[0] if lines else text, "explanation": explanation}


class CompileProbe(Probe):
    """Counts torch.compile's graphs, breaks (with reasons), recompiles and compile time."""

    name = "compile"

    def __init__(self) -> None:
        self._mode: str | None = None
        self._seen: set[int] = set()
        self._breaks0: Counter[str] = Counter()
        self._graphs0 = 0
        self._result: dict[str, Any] | None = None
        self._before_window: set[int] | None = None
        self._users = False

    def setup(self, ctx: RunContext) -> None:
        self._mode = ctx.knobs.step.compile
        job = getattr(ctx, "job", None)
        self._users = job is not None and not job.reference  # its compile setting is in its code, not a knob
        self._result = None
        self._before_window = None
        self._seen, self._breaks0, self._graphs0 = set(), Counter(), 0
        if self._mode is None and "torch._dynamo" not in sys.modules:
            return  # nothing compiled so far; importing dynamo (seconds) just to read zeros is waste
        import torch._dynamo
        from torch._dynamo.utils import counters, get_compilation_metrics

        torch._dynamo.reset()
        self._seen = {id(r) for r in get_compilation_metrics()}
        self._breaks0 = Counter(counters["graph_break"])
        self._graphs0 = counters["stats"]["unique_graphs"]

    def start(self) -> None:
        if "torch._dynamo" in sys.modules:
            from torch._dynamo.utils import get_compilation_metrics

            self._before_window = {id(r) for r in get_compilation_metrics()}

    def stop(self) -> None:
        """Read the counters once, at the end of the run (compilation happened in warm-up)."""
        if self._result is not None:
            return
        if "torch._dynamo" not in sys.modules:
            self._result = {}
            return
        from torch._dynamo.utils import counters, get_compilation_metrics

        records = [r for r in get_compilation_metrics() if id(r) not in self._seen]
        frames = [r for r in records if r.co_name is not None]  # one per compiled frame; others are backward
        breaks = Counter(counters["graph_break"]) - self._breaks0
        before = self._before_window
        self._result = {
            "frames": frames,
            "in_window": [r for r in frames if before is not None and id(r) not in before],
            "graphs": counters["stats"]["unique_graphs"] - self._graphs0,
            "breaks": breaks,
            "compile_s": sum((r.entire_frame_compile_time_s or 0.0) for r in records)
            + sum((r.backward_cumulative_compile_time_us or 0) for r in records) / 1e6,
        }

    def metrics(self, timings: WindowTimings) -> list[Metric]:
        self.stop()
        res = self._result or {}
        if not res.get("frames"):
            if self._users:
                why = "nothing was compiled: no torch.compile'd function or module ran in this run"
            elif self._mode is None:
                why = "compile=None: nothing compiled"
            else:
                why = f"compile={self._mode!r} but torch.compile compiled no frame in this run"
            return [Metric.unavailable(name, why) for name in NAMES]
        frames = res["frames"]
        breaks: Counter[str] = res["breaks"]
        recompiled = [r for r in frames if r.recompile_reason]

        def sites(found: list[Any]) -> dict[str, Any]:
            """Per line: each compiled frame given (its first line; a resumed frame's is the breaking line)."""
            at: Counter[tuple[str, str, int, str]] = Counter()
            for r in found:
                if r.co_filename and r.co_firstlineno:
                    resumed = _RESUMED.match(str(r.co_name))
                    name = resumed.group(1) if resumed else str(r.co_name)
                    at[(name, str(r.co_filename), int(r.co_firstlineno), name)] += 1
            return site_detail(code_site(*key, n) for key, n in sorted(at.items(), key=lambda kv: (-kv[1], kv[0])))

        return [
            Metric(
                "graph_breaks",
                sum(breaks.values()),
                "breaks",
                detail={
                    "graphs": res["graphs"],
                    "frames": len(frames),
                    "reasons": [{**_reason(text), "count": n} for text, n in breaks.most_common()],
                    **sites([r for r in frames if _RESUMED.match(str(r.co_name)) and not r.recompile_reason]),
                },
            ),
            Metric(
                "recompiles",
                len(recompiled),
                "recompiles",
                detail={
                    "in_window": sum(1 for r in res["in_window"] if r.recompile_reason),
                    "reasons": [
                        {"frame": r.co_name, "compile_id": r.compile_id, "reason": r.recompile_reason.strip()}
                        for r in recompiled
                    ],
                    **sites(recompiled),
                },
            ),
            Metric(
                "compile_s",
                res["compile_s"],
                "s",
                detail={
                    "frames": [
                        {"frame": r.co_name, "compile_id": r.compile_id, "seconds": r.entire_frame_compile_time_s}
                        for r in frames
                    ],
                },
            ),
        ]
