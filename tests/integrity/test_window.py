"""The measured window runs what the workload runs: no probe may change it.

Observed steps come after the window (perfsuite/probes/base.py): a
TorchDispatchMode makes torch.compile run a model eagerly until the next
torch._dynamo.reset(), so observing first timed eager code in every compiled
run. These tests watch the window itself with the profiler (a test-only
probe; the profiler is no torch mode) and fail on the old order.
"""

from __future__ import annotations

import contextlib

import pytest

from perfsuite.core.knobs import Knobs
from perfsuite.errors import PerfsuiteError
from perfsuite.harness.runner import RunSpec, run
from perfsuite.probes import all_probes
from perfsuite.probes.base import Probe
from perfsuite.testing import CompiledCallsInWindow as WindowProfile

STEP_ONLY = {"aug": "none", "num_workers": 0}


@pytest.mark.slow
def test_compiled_window_runs_compiled_graphs_and_a_recompile_shows_in_recompiles_and_the_tail() -> None:
    """gray_classifier smoke: 96 samples, batch 40, drop_last=False -> batches 40, 40, 16 per epoch.

    Warm-up takes the two full batches (one compile); the window's first step
    gets the short batch and recompiles. Every probe runs, the dispatch-mode
    ones included, and the window still calls compiled graphs on each step.
    """
    watch = WindowProfile()
    knobs = Knobs.from_flat(compile="default", batch_size=40, drop_last=False, **STEP_ONLY)
    result = run(
        RunSpec("gray_classifier", knobs=knobs, steps=4, warmup=2, observe_steps=1), probes=[*all_probes(), watch]
    )
    assert watch.calls >= 4, f"the window ran {watch.calls} compiled graph calls for 4 steps"
    recompiles = result.metric("recompiles")
    assert recompiles.value == 1 and recompiles.detail["in_window"] == 1, recompiles
    assert result.metric("step_ms_max").detail["step"] == 0, "the recompiling step must be the window's slowest"
    assert result.metric("samples_per_s").detail["samples"] == 16 + 40 + 40 + 16


@pytest.mark.slow
def test_an_eager_window_calls_no_compiled_graph() -> None:
    """The other side: the instrument does not see compiled graphs where there are none."""
    watch = WindowProfile()
    run(
        RunSpec("gray_classifier", knobs=Knobs.from_flat(**STEP_ONLY), steps=2, warmup=1, observe_steps=1),
        probes=[*all_probes(), watch],
    )
    assert watch.calls == 0


class ModeLeaker(Probe):
    """A broken probe: instruments from start(), i.e. inside the measured window."""

    name = "leaker"

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()

    def start(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        class Noop(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {}))

        self._stack.enter_context(Noop())

    def stop(self) -> None:
        self._stack.close()


def test_a_probe_that_instruments_the_window_is_refused() -> None:
    with pytest.raises(PerfsuiteError, match="mode active in the measured window"):
        run(
            RunSpec("gray_classifier", knobs=Knobs.from_flat(**STEP_ONLY), steps=2, warmup=0, observe_steps=0),
            probes=[ModeLeaker()],
        )


def test_observed_steps_come_after_the_window() -> None:
    """The order the guarantee rests on: setup, start/stop around the window, then observe, then finish."""
    calls: list[str] = []

    class Recorder(Probe):
        def setup(self, ctx):
            calls.append("setup")

        def start(self):
            calls.append("start")

        def stop(self):
            calls.append("stop")

        @contextlib.contextmanager
        def observe(self):
            calls.append("observe")
            yield

        def finish(self):
            calls.append("finish")

    run(
        RunSpec("gray_classifier", knobs=Knobs.from_flat(**STEP_ONLY), steps=2, warmup=1, observe_steps=2),
        probes=[Recorder()],
    )
    assert calls == ["setup", "start", "stop", "observe", "observe", "finish"]
