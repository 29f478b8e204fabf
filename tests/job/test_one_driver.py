"""One driver: a Job's loop and a script's training DataLoader hand their step boundaries to the same functions.

perfsuite.harness.driver runs the phases; a Job's loop calls ``Driver.next_batch`` from the runner, a script's
loop calls it from its training loader's iterator. A probe written for Jobs therefore sees a script's run the same
way, with no extra code: the same hooks in the same order, the loader iterator in ``RunContext.batches``, the
window's fetch times and the training process's own loading CPU.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import perfsuite
from perfsuite import RunSpec, Script
from perfsuite.harness import driver as driver_mod
from perfsuite.probes.base import Probe, RunContext, WindowTimings
from perfsuite.probes.loader import LoaderProbe

SCRIPT = """
import torch
model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.utils.data.TensorDataset(torch.randn(12, 2))
loader = torch.utils.data.DataLoader(data, batch_size=4)
for epoch in range(100):
    for (batch,) in loader:
        loss = model(batch).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
"""


def job() -> perfsuite.Job:
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(12, 2)), batch_size=4)

    def step(batch: Any) -> Any:
        loss = model(batch[0]).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return perfsuite.Job(step=step, loader=loader, model=model, optimizer=opt, name="tiny")


class Recorder(Probe):
    """A probe written for Jobs: records its hooks in order and what the run handed it."""

    name = "recorder"

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.stream: Any = None
        self.timings: WindowTimings | None = None
        self.iterator: Any = None  # what the stream held at the window's end

    def setup(self, ctx: RunContext) -> None:
        self.calls.append("setup")
        self.stream = ctx.batches

    def start(self) -> None:
        self.calls.append("start")

    def stop(self) -> None:
        self.calls.append("stop")
        self.iterator = getattr(self.stream, "_it", None)

    def after_window(self) -> None:
        self.calls.append("after_window")

    def observe(self) -> Any:
        self.calls.append("observe")
        return super().observe()

    def finish(self) -> None:
        self.calls.append("finish")

    def metrics(self, timings: WindowTimings) -> list[Any]:
        self.timings = timings
        return []


@pytest.fixture
def boundaries(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The class name of the source behind every batch the driver hands out."""
    seen: list[str] = []
    original = driver_mod.Driver._after_fetch

    def counted(self: driver_mod.Driver, *args: Any, **kwargs: Any) -> Any:
        seen.append(type(self.source).__name__)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(driver_mod.Driver, "_after_fetch", counted)
    return seen


def run_both(tmp_path: Any) -> dict[str, tuple[Recorder, perfsuite.Result]]:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    out = {}
    for name, target in (("job", job()), ("script", Script([str(path)]))):
        recorder = Recorder()
        spec = RunSpec(target, steps=4, warmup=2, observe_steps=2, period_steps=0, sol_steps=2)
        out[name] = recorder, perfsuite.run(spec, probes=[recorder])
    return out


def test_a_scripts_batches_pass_through_the_same_driver_functions_as_a_jobs(tmp_path, boundaries):
    runs = run_both(tmp_path)
    # warm-up 2 + window 4 + observed 2 (+ the fetch that ends a script's loop) batches, each through _after_fetch
    assert boundaries.count("JobSource") == 2 + 4 + 2
    assert boundaries.count("_ScriptSource") == 2 + 4 + 2 + 1
    for recorder, result in runs.values():
        order = ["setup", "start", "stop", "after_window", "observe", "observe", "finish"]
        assert recorder.calls == order
        assert recorder.timings is not None
        assert len(recorder.timings.fetch_cpu_s) == len(recorder.timings.fetch_s) == 4
        assert len(recorder.timings.step_start_s) == len(recorder.timings.host_step_s) == 4
        assert recorder.timings.samples == 16
        assert result.steps == 4 and len(result.samples["main_load_ms"]) == 4
        # a Job's speed of light runs its step alone; a script gets none (its loop body cannot be undone)
        assert len(result.samples["sol_step_ms"]) == (2 if result.script is None else 0)
    assert runs["script"][1].script is not None and runs["job"][1].script is None
    # the same phases are timed for both (perfsuite.core.phases); a script has no speed of light
    from perfsuite.core import phases

    for name, (_, result) in runs.items():
        assert result.phases is not None
        sol = [phases.SOL] if name == "job" else []
        assert [p.name for p in result.phases.phases] == [
            phases.SETUP,
            phases.FIRST_BATCH,
            phases.WARMUP,
            phases.WINDOW,
            phases.WINDOW_CLOSE,
            *sol,
            phases.after_window("recorder"),
            phases.OBSERVED,
            phases.TEARDOWN,
            phases.ASSEMBLY,
        ]
    # the stream a probe reads the loader's workers from: the iterator the loop holds (a DataLoader's own)
    for recorder, _ in runs.values():
        assert isinstance(recorder.iterator, torch.utils.data.dataloader._BaseDataLoaderIter)


def test_the_loader_ledger_works_for_a_script_with_no_extra_code(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    probe = LoaderProbe(replay_batches=5, replay_repeats=1)
    result = perfsuite.run(
        RunSpec(Script([str(path)]), steps=4, warmup=1, observe_steps=1, period_steps=0), probes=[probe]
    )
    ledger = result.metric("loader_cpu_ms_per_sample")
    assert ledger.available, ledger.reason
    assert set(ledger.detail["by"]) == {"__getitem__", "collate_fn"}
    assert ledger.detail["code"]["__getitem__"].endswith("TensorDataset.__getitem__")
    assert ledger.detail["batches"] == 5
    main = result.metric("main_load_ms_per_step")
    assert main.available and main.detail["num_workers"] == 0
    for name in ("loader_process_cpu_ms_per_sample", "loader_capacity_samples_per_s"):
        assert result.metric(name).available, result.metric(name).reason
    assert result.metric("loader_headroom").value is not None or result.metric("loader_headroom").reason


ITERABLE = """
import torch
from perfsuite.core.cores import usable_cores

class Stream(torch.utils.data.IterableDataset):
    def __init__(self):
        self.rows = (torch.randn(2) for _ in range(1000))  # a generator it holds: no copy can be replayed

    def __iter__(self):
        return self.rows

torch.set_num_threads(usable_cores().usable + 1)  # more intra-op threads than cores: oversubscribed
model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for batch in torch.utils.data.DataLoader(Stream(), batch_size=4):
    loss = model(batch).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
"""


STREAM = """
import torch

class Stream(torch.utils.data.IterableDataset):
    def __iter__(self):
        for _ in range(1000):
            yield torch.randn(2).clamp(-1, 1)

model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for batch in torch.utils.data.DataLoader(Stream(), batch_size=4):
    loss = model(batch).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
"""


def test_a_scripts_stream_is_replayed_and_counted_from_its_start(tmp_path):
    """An IterableDataset that can be deep-copied: its loader figures are measured like a map-style Dataset's."""
    path = tmp_path / "stream.py"
    path.write_text(STREAM)
    result = perfsuite.run(RunSpec(Script([str(path)]), steps=4, warmup=1, observe_steps=1, period_steps=0))
    ledger = result.metric("loader_cpu_ms_per_sample")
    assert ledger.available and ledger.detail["code"]["__getitem__"] == "__main__.Stream.__iter__", ledger.reason
    calls = result.metric("loader_calls_per_sample")
    assert calls.available and calls.detail["by"]["__getitem__: torch.Tensor.clamp"] == 1, calls.reason


def test_a_stage_that_cannot_be_replayed_is_named_and_the_os_figures_are_still_given(tmp_path):
    """A stream over a generator it holds cannot be copied to replay; the window's figures from the OS are measured
    all the same.
    The advice speaks the script's terms: its own code and perfsuite exec's flags, never a Job's fields."""
    path = tmp_path / "stream.py"
    path.write_text(ITERABLE)
    threads = torch.get_num_threads()
    try:
        result = perfsuite.run(RunSpec(Script([str(path)]), steps=4, warmup=1, observe_steps=1, period_steps=0))
    finally:
        torch.set_num_threads(threads)
    ledger = result.metric("loader_cpu_ms_per_sample")
    assert not ledger.available
    assert ledger.reason.startswith("stage __getitem__ not replayed: Stream could not be copied"), ledger.reason
    for name in ("loader_process_cpu_ms_per_sample", "main_load_ms_per_step"):
        assert result.metric(name).available, (name, result.metric(name).reason)
    (over,) = [n for n in result.notes if n.startswith("oversubscribed:")]
    assert "in the script" in over and "Job" not in over
    labels = result.metric("label_violations")
    assert not labels.available and "--criterion" in labels.reason and "Job(" not in labels.reason
    assert "Job(" not in result.knob_sources["aug"]


class Locked(torch.utils.data.Dataset):
    """A Dataset that refuses to be copied (as one holding a lock or an open connection may)."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> Any:
        return torch.zeros(2)

    def __deepcopy__(self, memo: Any) -> Any:
        raise TypeError("cannot pickle '_thread.lock' object")

    def __copy__(self) -> Any:
        raise TypeError("cannot copy a lock")


def test_a_dataset_that_cannot_be_copied_is_not_replayed_and_says_which_stage():
    from perfsuite.probes.stages import replay

    why = replay(torch.utils.data.DataLoader(Locked(), batch_size=4), 4, batches=5, repeats=1)
    assert isinstance(why, str)
    assert why.startswith("stage __getitem__ not replayed: Locked could not be copied (TypeError: cannot copy a lock)")


def test_compare_names_a_scripts_results_by_the_command_not_the_out_file(tmp_path):
    import dataclasses
    from pathlib import Path

    from perfsuite.report.compare import compare_paths

    data = Path(__file__).resolve().parents[1] / "data" / "results"
    command = "python train.py --data data --workers 2"
    for name in ("base", "head_same"):
        result = perfsuite.Result.from_json((data / f"{name}.json").read_text())
        ran = dataclasses.replace(result, workload=command, notes=(f"perfsuite exec {command}: training loader",))
        (tmp_path / f"{name}.json").write_text(ran.to_json())
    verdicts = compare_paths(tmp_path / "base.json", tmp_path / "head_same.json")
    assert verdicts and {v.test_id for v in verdicts} == {command}
    plain = compare_paths(data / "base.json", data / "head_same.json")  # a Job's bare Result: its file's name
    assert {v.test_id for v in plain} == {"head_same"}
