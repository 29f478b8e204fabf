"""Every setting a Result records is an exact fact (issue 45 item 2): undoing a seed's fix regresses at its line.

A script's settings are read as the run had them (the AMP dtype its forward ran, whether anything compiled,
its copies' non_blocking, the process's switches), its loader's at the line that built it.
"""

from __future__ import annotations

import inspect
from types import SimpleNamespace
from typing import Any

from fixed_fingerprint import FP
from torch.utils.data import DataLoader

from perfsuite.core.results import Metric, Result
from perfsuite.harness.script.drive import _hooked_loaders
from perfsuite.judge.engine import compare_results
from perfsuite.judge.settings import SETTINGS, read
from perfsuite.judge.verdict import Outcome
from perfsuite.probes.settings import SettingsProbe, read_flags
from perfsuite.probes.sites import built_at

SCRIPT = {"knob_sources": {"amp": "not applied", "compile": "not applied", "non_blocking": "not applied"}}


def script_result(metrics: list[Metric] = (), settings: dict[str, Any] | None = None, **knobs: Any) -> Result:  # type: ignore[assignment]
    return Result(
        workload="python train.py",
        scale="smoke",
        knobs={"num_workers": 2, "pin_memory": True, "persistent_workers": False, "prefetch_factor": 2, **knobs},
        metrics={m.name: m for m in metrics},
        samples={},
        fingerprint=FP,
        batch_size=4,
        steps=6,
        warmup=1,
        knob_sources={**SCRIPT["knob_sources"]},
        environment={"settings": settings} if settings is not None else {},
    )


BUILT = {"loader_built_at": {"site": "train.py:73", "function": "main", "code": "loader = DataLoader("}}


def by_metric(base: Result, head: Result) -> dict[str, Any]:
    names = {s.name for s in SETTINGS}
    return {v.metric: v for v in compare_results(base, head, "t") if v.metric in names}


def test_a_loader_setting_undone_is_named_at_the_dataloader_line_with_the_cost_measured_beside_it():
    load = [Metric("main_load_ms_per_step", 1.5, "ms/step"), Metric("step_ms", 40.0, "ms")]
    head_load = [Metric("main_load_ms_per_step", 45.9, "ms/step"), Metric("step_ms", 90.0, "ms")]
    got = by_metric(script_result(load, BUILT), script_result(head_load, BUILT, num_workers=0, prefetch_factor=None))
    assert list(got) == ["num_workers"]
    verdict = got["num_workers"]
    assert verdict.outcome is Outcome.REGRESSED
    assert verdict.message.startswith("regressed (setting): train.py:73 DataLoader(num_workers=2 -> 0) undoes")
    assert (
        "measured beside it (its own row judges it): main_load_ms_per_step 1.5 -> 45.9 ms/step (x30.6), step_ms "
        "40 -> 90 ms (x2.25)"
    ) in verdict.message
    # why a setting is judged whatever this machine's timing says, and the fix's public source, not an internal name
    assert "judged as a fact, not by this machine's timing: its cost shows on a GPU runner" in verdict.message
    assert "https://pytorch.org/docs/stable/data.html" in verdict.message


def test_a_figure_that_reads_the_wrong_way_beside_a_regressed_setting_says_why():
    """pin_memory off made the CPU step faster (x0.308): printed bare it reads as evidence against the verdict."""
    base = script_result([Metric("step_ms", 68.74, "ms")], BUILT, pin_memory=True)
    head = script_result([Metric("step_ms", 21.14, "ms")], BUILT, pin_memory=False)
    verdict = by_metric(base, head)["pin_memory"]
    assert verdict.outcome is Outcome.REGRESSED
    assert "step_ms 68.74 -> 21.14 ms (x0.308: better on this CPU, where the fix's gain does not show)" in (
        verdict.message
    )


def loaded(result: Result, foreign: float) -> Result:
    """``result`` as a run that read ``foreign`` of the usable CPU taken by other processes in its window."""
    result.environment["contention"] = {"window": {"neighbours": foreign, "steal": 0.0}}
    return result


def test_a_figure_from_runs_of_different_contention_is_named_not_comparable_instead_of_shown():
    base = loaded(script_result([Metric("step_ms", 5462.0, "ms")], BUILT), 0.92)
    head = loaded(script_result([Metric("step_ms", 358.7, "ms")], BUILT, num_workers=0, prefetch_factor=None), 0.03)
    message = by_metric(base, head)["num_workers"].message
    assert "5462" not in message and "x0.0657" not in message
    assert (
        "step_ms not comparable (other processes took a different share of the CPU in the two runs: head run: "
        "neighbours and steal 3% of the usable CPU; base: neighbours and steal 92% of the usable CPU)"
    ) in message


def copies(non_blocking: bool) -> Metric:
    detail = {"copies": [{"site": "train.py:46", "non_blocking": non_blocking, "per_step": 1.0}]}
    return Metric("h2d_bytes_per_step", 100.0, "bytes/step", detail=detail)


def amp(on: bool) -> Metric:
    return Metric(
        "amp_lowp_frac",
        1.0 if on else 0.0,
        "fraction",
        detail={"dtypes": {"bfloat16" if on else "float32": 4}, "autocast_enabled": on},
    )


def compiled(yes: bool) -> Metric:
    if yes:
        return Metric("compile_s", 3.0, "s")
    return Metric.unavailable("compile_s", "nothing was compiled: no torch.compile'd function or module ran")


def test_a_scripts_measured_settings_regress_when_a_fix_is_undone():
    base = script_result([copies(True), amp(True), compiled(True)], {"cudnn_benchmark": True, "intra_op_threads": 1})
    head = script_result(
        [copies(False), amp(False), compiled(False)], {"cudnn_benchmark": False, "intra_op_threads": 2}
    )
    got = by_metric(base, head)
    assert {k: v.outcome for k, v in got.items()} == {
        "non_blocking": Outcome.REGRESSED,
        "amp": Outcome.REGRESSED,
        "compile": Outcome.REGRESSED,
        "cudnn_benchmark": Outcome.REGRESSED,
        "intra_op_threads": Outcome.CHANGED,
    }
    assert got["non_blocking"].message.startswith("regressed (setting): train.py:46 non_blocking True -> False")
    assert got["amp"].message.startswith("regressed (setting): amp bfloat16 -> - (autocast)")
    assert got["intra_op_threads"].message.startswith("changed (setting): intra_op_threads 1 -> 2")
    back = by_metric(head, base)  # applying the fixes is a change to accept, never a regression
    assert {v.outcome for v in back.values()} == {Outcome.CHANGED}


def test_non_blocking_without_pinned_memory_says_the_copy_still_waits_and_gives_the_fix():
    base = script_result([copies(False)], pin_memory=False)
    head = script_result([copies(True)], pin_memory=False)
    message = by_metric(base, head)["non_blocking"].message
    assert message.startswith("changed (setting): train.py:46 non_blocking False -> True")
    assert "non_blocking=True from pageable (unpinned) memory waits like a blocking copy" in message
    assert "fix (pageable copy): DataLoader(pin_memory=True), or x.pin_memory() before the copy" in message
    pinned = by_metric(script_result([copies(False)]), script_result([copies(True)]))["non_blocking"].message
    assert "pageable" not in pinned  # with pinned memory the copy overlaps: nothing to add


def test_settings_neither_run_knows_are_not_compared():
    assert by_metric(script_result(), script_result(settings={"cudnn_benchmark": False})) == {}
    assert not read(script_result(), "non_blocking").known


def test_the_harness_notes_the_line_that_builds_a_dataloader_and_the_probe_records_it():
    source = SimpleNamespace(wrap=lambda loader, make: make())
    with _hooked_loaders(source):  # type: ignore[arg-type]
        loader = DataLoader(list(range(4)), batch_size=2)
    line = inspect.currentframe().f_lineno - 1  # type: ignore[union-attr]
    where = built_at(loader)
    assert where["site"].endswith(f"test_setting_facts.py:{line}")
    assert where["code"] == "loader = DataLoader(list(range(4)), batch_size=2)"
    outside = DataLoader(list(range(4)))  # built outside a script run: seen too (a ready-made Job's loader)
    assert built_at(outside)["code"] == "outside = DataLoader(list(range(4)))"
    probe = SettingsProbe()
    probe.setup(SimpleNamespace(job=SimpleNamespace(loader=loader)))  # type: ignore[arg-type]
    probe.start()
    env = probe.environment()["settings"]
    assert env["loader_built_at"] == where
    assert {k: env[k] for k in read_flags()} == read_flags()


def _ready_made(workers: int) -> Any:
    from perfsuite.jobs.contract import Job

    loader = DataLoader(list(range(16)), batch_size=4, num_workers=workers)  # the line named
    return Job(step=lambda batch: batch.float().mean().requires_grad_(), loader=loader, name="ready")


def test_a_ready_made_job_s_dataloader_line_is_named_for_its_setting():
    """Issue 56 item 4: a Job built before perfsuite runs it (not a factory), its loader built before too."""
    from perfsuite.harness.runner import RunSpec, run

    base, head = (
        run(RunSpec(_ready_made(w), steps=2, warmup=0, observe_steps=0, sol_steps=0), probes=[SettingsProbe()])
        for w in (2, 0)
    )
    line = next(n for n, text in enumerate(inspect.getsourcelines(_ready_made)[0]) if "the line named" in text)
    site = f"test_setting_facts.py:{inspect.getsourcelines(_ready_made)[1] + line}"
    message = by_metric(base, head)["num_workers"].message
    assert f"{site} DataLoader(num_workers=2 -> 0)" in message, message


def test_a_job_factory_s_dataloader_line_is_noted_too():
    from perfsuite.harness.runner import RunSpec
    from perfsuite.jobs.contract import Job

    def make_job() -> Job:
        loader = DataLoader(list(range(4)), batch_size=2)
        return Job(step=lambda batch: batch, loader=loader)

    job = RunSpec(make_job).resolve()
    line = inspect.getsourcelines(make_job)[1] + 1
    assert built_at(job.loader)["site"].endswith(f"test_setting_facts.py:{line}")
