"""Torch's intra-op threads against the usable cores: set for reference workloads, noted for any run."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from perfsuite.core.results import Fingerprint, Metric, Result
from perfsuite.harness import threads
from perfsuite.report.summary import format_people, oversubscription_note


def _job(workers: int, device: str = "cpu") -> SimpleNamespace:
    return SimpleNamespace(loader=SimpleNamespace(num_workers=workers), device=device)


@pytest.fixture
def two_cores(monkeypatch):
    from perfsuite.core import cores

    monkeypatch.setattr(cores, "usable_cores", lambda: cores.Cores(2, 2, None, "affinity"))
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_a_reference_workload_on_a_cpu_runs_one_thread_and_gets_it_back(two_cores) -> None:
    torch.set_num_threads(2)
    plan = threads.fit_threads(_job(0), reference=True)
    assert torch.get_num_threads() == 1 and plan.changed and plan.notes == []
    plan.restore()
    assert torch.get_num_threads() == 2


def test_on_cuda_threads_fill_the_cores_the_workers_leave(two_cores) -> None:
    torch.set_num_threads(2)
    plan = threads.fit_threads(_job(1, "cuda"), reference=True)
    assert plan.threads == 1 and torch.get_num_threads() == 1 and not plan.notes
    plan.restore()


def test_workers_that_fill_the_cores_leave_the_step_none_and_say_so(two_cores) -> None:
    plan = threads.fit_threads(_job(2), reference=True)
    (note,) = plan.notes
    assert note.startswith("oversubscribed: 1 intra-op thread(s) in the training process + 2 loader worker(s)")
    plan.restore()


def test_a_users_job_keeps_its_threads_and_is_told_what_to_write(two_cores) -> None:
    torch.set_num_threads(2)
    plan = threads.fit_threads(_job(2), reference=False)
    assert torch.get_num_threads() == 2 and not plan.changed
    assert "call torch.set_num_threads(1) in the job, or use fewer workers" in plan.notes[0]


def _result(notes: tuple[str, ...]) -> Result:
    return Result(
        "w",
        "smoke",
        {},
        {"loader_cpu_ms_per_sample": Metric("loader_cpu_ms_per_sample", 1.25)},
        {},
        Fingerprint.collect("cpu"),
        8,
        2,
        0,
        notes=notes,
    )


def test_the_summary_notes_oversubscribed_runs_and_shows_the_loader_cost() -> None:
    results = {"t::a": _result(("oversubscribed: 2 intra-op thread(s) ...",)), "t::b": _result(())}
    note = oversubscription_note(results)
    assert note and note.startswith("note: 1 of 2 run(s) oversubscribed the cores") and "t::a" in note
    assert oversubscription_note({"t::b": results["t::b"]}) is None
    table = format_people(results, {})
    assert "loader CPU/sample" in table and "1.25 ms" in table
