"""The training loader's call site and arguments, and the same script run with perfsuite setting them."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler, TensorDataset

from perfsuite.errors import PerfsuiteError
from perfsuite.harness.script.loader_args import LoaderCalls, Override, Site
from perfsuite.tools.doctor.model import Fix
from perfsuite.tools.doctor_script import Counterfactual, choose, in_script_terms

DATA = TensorDataset(torch.arange(8.0))


def here() -> Site:
    """The line after the caller's: where its next statement builds a loader."""
    frame = sys._getframe(1)
    return Site(frame.f_code.co_filename, frame.f_lineno + 1)


def test_each_loader_is_recorded_at_the_users_line_with_the_arguments_it_was_given():
    with LoaderCalls().installed() as calls:
        site = here()
        loader = DataLoader(DATA, 4, shuffle=False, num_workers=0, pin_memory=False)
    record = calls.of(loader)
    assert record is not None and record.site == site
    assert record.knobs() == {"num_workers": 0, "pin_memory": False, "batch_size": 4}  # positional batch_size named
    assert record.call({"num_workers": 2}) == f"{site} DataLoader(num_workers=0)"
    assert DataLoader.__init__ is not calls  # put back: a loader built now is not recorded
    after = DataLoader(DATA, 2)
    assert calls.of(after) is None


def test_the_override_sets_the_arguments_at_its_site_only():
    site = here()
    override = Override(Site(site.file, site.line + 3), {"num_workers": 1, "persistent_workers": True})
    with LoaderCalls(override).installed() as calls:
        other = DataLoader(DATA, 2)
        training = DataLoader(DATA, 4, num_workers=0)
    assert training.num_workers == 1 and training.persistent_workers and calls.applied == 1
    assert other.num_workers == 0 and calls.of(other).overridden == {}
    assert calls.of(training).overridden == {"num_workers": 1, "persistent_workers": True}
    assert calls.of(training).knobs()["num_workers"] == 0  # what the script gave, kept for the report


def test_no_workers_drops_what_torch_refuses_without_them():
    site = here()
    override = Override(Site(site.file, site.line + 2), {"num_workers": 0})
    with LoaderCalls(override).installed() as calls:
        loader = DataLoader(DATA, 4, num_workers=2, persistent_workers=True, prefetch_factor=4)
    assert loader.num_workers == 0 and not loader.persistent_workers and loader.prefetch_factor is None
    assert calls.of(loader).overridden == {"num_workers": 0, "persistent_workers": False, "prefetch_factor": None}


def test_batch_size_is_set_only_where_the_loader_has_no_batch_sampler():
    site = here()
    override = Override(Site(site.file, site.line + 2), {"batch_size": 8})
    with LoaderCalls(override).installed(), pytest.raises(PerfsuiteError, match="takes a batch_sampler"):
        DataLoader(DATA, batch_sampler=BatchSampler(SequentialSampler(DATA), 4, False))
    with pytest.raises(PerfsuiteError, match="cannot set shuffle"):
        Override(site, {"shuffle": False})


def test_the_fix_is_written_at_the_scripts_line_with_what_it_changes():
    site = Site("/abs/train.py", 88)
    given = {"num_workers": 8, "batch_size": 4}
    fix = in_script_terms("DataLoader(num_workers=2, persistent_workers=True)", site, given)
    assert fix == "/abs/train.py:88 DataLoader(num_workers=8 -> 2, persistent_workers=False -> True)"
    assert in_script_terms("speed up the step", site, given) == "speed up the step"
    assert in_script_terms("DataLoader(num_workers=2)", None, given) == "DataLoader(num_workers=2)"
    assert in_script_terms("move it to the device (perfsuite: aug='gpu'; Kornia)", site, given).endswith("(Kornia)")


def run_of(
    workers: int,
    threads: int,
    persistent: bool = False,
    device: str = "cpu",
    site: bool = True,
    environment: dict | None = None,
):
    result = SimpleNamespace(
        knobs={"num_workers": workers, "persistent_workers": persistent, "pin_memory": False},
        fingerprint=SimpleNamespace(device=device),
        environment=environment or {},
    )
    given = {"num_workers": workers}
    return SimpleNamespace(
        result=result,
        loader={"site": {"file": "t.py", "line": 1} if site else None, "given": given, "threads": threads},
    )


def test_free_cores_try_more_workers_and_persistent_ones():
    tried = choose(run_of(0, 1), usable=2)
    assert tried == [
        Counterfactual(
            Fix.MORE_WORKERS, "0 worker(s) on 2 usable core(s)", {"num_workers": 2, "persistent_workers": True}
        )
    ]


def test_full_cores_try_fewer_workers_and_fewer_threads():
    tried = choose(run_of(8, 2), usable=2)
    assert [c.args for c in tried] == [{"persistent_workers": True}, {"num_workers": 1, "persistent_workers": True}, {}]
    assert tried[2].threads == 1 and "fewer intra-op threads" in tried[2].why
    assert "8 worker(s) + 2 intra-op thread(s) on 2 usable core(s)" in tried[1].why


def test_a_machine_under_cpu_pressure_tries_one_intra_op_thread_though_the_cores_are_not_full():
    """Issue 55: at 98% CPU pressure torch.set_num_threads(1) measured x5.55 and was not tried."""
    loaded = {"contention": {"window": {"cpu_pressure_some": 0.98, "runqueue_per_core": 3.5}}}
    tried = choose(run_of(0, 2, environment=loaded), usable=4)
    assert [(c.fix, c.threads) for c in tried] == [(Fix.MORE_WORKERS, None), (Fix.THREADS, 1)]
    assert "the machine under CPU pressure 98%" in tried[1].why
    assert [c.fix for c in choose(run_of(0, 2), usable=4)] == [Fix.MORE_WORKERS]  # no pressure recorded: no


def test_pinned_memory_is_tried_on_a_gpu_and_nothing_without_a_site():
    assert {"pin_memory": True} in [c.args for c in choose(run_of(2, 1, persistent=True, device="cuda:0"), usable=4)]
    assert choose(run_of(0, 1, site=False), usable=2) == []
