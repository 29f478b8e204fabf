"""The rank probe records without changing what runs: the same batches, the same gradients, exact phases.

A one-rank gloo process group in this process is enough to exercise DDP's
communication hook: DDP calls it whatever the world size.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from perfsuite.harness.pipeline import BatchStream
from perfsuite.probes.base import WindowTimings
from perfsuite.probes.ranks import PHASE_KEYS, EpochRecord, RankProbe, install_recorder, step_phases


@pytest.fixture
def one_rank_group():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _loader(sampler=None, shuffle=True):
    data = TensorDataset(torch.arange(40).float().unsqueeze(1), torch.arange(40))
    gen = torch.Generator().manual_seed(3)
    return DataLoader(data, batch_size=8, sampler=sampler, shuffle=shuffle if sampler is None else False, generator=gen)


def _indices(loader, epochs, on_epoch=None, extra=0):
    stream = BatchStream(loader, on_epoch=on_epoch)
    return [next(stream)[1].tolist() for _ in range(5 * epochs + extra)]


def test_the_recorder_passes_every_batch_through_unchanged_and_records_each_epoch() -> None:
    plain = _indices(_loader(), epochs=3)
    loader, epochs = _loader(), []
    why, undo = install_recorder(loader, epochs)
    assert why is None
    assert _indices(loader, epochs=3) == plain and len(loader) == 5
    assert [e.count for e in epochs[:2]] == [40, 40] and all(e.complete for e in epochs[:2])
    assert len({e.digest for e in epochs[:3]}) == 3  # RandomSampler: a new order each epoch
    undo()
    assert type(loader.batch_sampler).__name__ == "BatchSampler"


def test_a_distributed_sampler_without_set_epoch_repeats_its_order(one_rank_group) -> None:
    for call_set_epoch, distinct in ((True, 3), (False, 1)):
        data = TensorDataset(torch.arange(40).float().unsqueeze(1), torch.arange(40))
        sampler = DistributedSampler(data, shuffle=True, seed=0)
        loader, epochs = DataLoader(data, batch_size=8, sampler=sampler), []
        install_recorder(loader, epochs)
        # One batch into a fourth epoch: the third epoch's sampler pass has run out by then.
        _indices(loader, epochs=3, on_epoch=sampler.set_epoch if call_set_epoch else None, extra=1)
        assert sum(e.complete for e in epochs) == 3
        assert len({e.digest for e in epochs if e.complete}) == distinct


def test_batch_stream_calls_epoch_start_with_each_epoch_number() -> None:
    seen = []
    _indices(_loader(), epochs=3, on_epoch=seen.append)
    assert seen == [0, 1, 2]


def test_step_phases_split_each_step_by_one_ranks_own_clock() -> None:
    t = WindowTimings(
        start_s=0.0,
        end_s=0.3,
        steps=2,
        batch_size=8,
        fetch_s=[0.010, 0.020],
        host_step_s=[0.100, 0.100],
        step_start_s=[0.0, 0.1],
    )
    events = {
        "fwd_enter": [0.015, 0.125],
        "fwd_inner": [0.020, 0.130],
        "bucket_first": [0.050, 0.160],
        "bucket_last": [0.060, 0.170],
        "done": [0.080, 0.185],
    }
    phases, why = step_phases(t, events, sync_forward=True)
    assert why is None
    assert phases[PHASE_KEYS["loader"]] == pytest.approx([10.0, 20.0])
    assert phases[PHASE_KEYS["host prep"]] == pytest.approx([5.0, 5.0])
    assert phases[PHASE_KEYS["forward+backward"]] == pytest.approx([40.0, 40.0])  # to the last bucket
    assert phases[PHASE_KEYS["after backward"]] == pytest.approx([0.0, 20.0])  # step 0's tail delays step 1
    assert phases["wait_forward_ms"] == pytest.approx([5.0, 5.0])
    no_sync, _ = step_phases(t, events, sync_forward=False)
    assert no_sync[PHASE_KEYS["forward+backward"]] == pytest.approx([45.0, 45.0])  # from the forward's entry


def test_step_phases_refuse_steps_with_two_backwards() -> None:
    t = WindowTimings(0.0, 0.2, 1, 8, fetch_s=[0.01], host_step_s=[0.2], step_start_s=[0.0])
    events = {k: [0.05, 0.1] for k in ("fwd_enter", "fwd_inner", "bucket_first", "bucket_last", "done")}
    phases, why = step_phases(t, events, sync_forward=True)
    assert phases == {} and "gradient accumulation" in why


def _train(steps: int, find_unused: bool = False) -> tuple[list[torch.Tensor], RankProbe]:
    from perfsuite.probes.base import RunContext

    torch.manual_seed(0)
    model = DistributedDataParallel(
        nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2)), find_unused_parameters=find_unused
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = _loader()

    class Job:
        pass

    job = Job()
    job.model, job.loader = model, loader
    probe = RankProbe()
    probe.setup(RunContext(None, None, None, "cpu", None, 8, 1, job))  # type: ignore[arg-type]
    x = torch.randn(steps, 16, 4, generator=torch.Generator().manual_seed(1))
    for i in range(steps):
        with probe.observe():
            opt.zero_grad(set_to_none=True)
            model(x[i]).square().mean().backward()
            opt.step()
    probe.finish()
    return [p.detach().clone() for p in model.parameters()], probe


def test_the_timestamping_comm_hook_trains_bit_for_bit_like_ddps_own(one_rank_group) -> None:
    """The window's integrity: the same parameters after training with and without the probe's hooks."""
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(3, 16, 4, generator=torch.Generator().manual_seed(1))
    for i in range(3):
        opt.zero_grad(set_to_none=True)
        model(x[i]).square().mean().backward()
        opt.step()
    plain = [p.detach().clone() for p in model.parameters()]
    probed, probe = _train(3)
    assert all(torch.equal(a, b) for a, b in zip(plain, probed))
    assert probe.sync_forward is True  # BatchNorm buffers: DDP broadcasts them at each forward
    assert {k: len(v) for k, v in probe._events.items()} == dict.fromkeys(probe._events, 3)


def test_find_unused_parameters_with_nothing_unused_is_flagged(one_rank_group) -> None:
    from perfsuite.probes.base import WindowTimings

    timings = WindowTimings(0.0, 1.0, 2, 8)
    _, needless = _train(2, find_unused=True)
    _, fine = _train(2, find_unused=False)
    flags = {p.name: p for p in needless.metrics(timings)}, {p.name: p for p in fine.metrics(timings)}
    assert flags[0]["ddp_unused_search"].value is True
    assert flags[1]["ddp_unused_search"].value is False
    assert flags[0]["ddp_unused_search"].detail["unused_per_observed_step"] == [0, 0]


def test_a_model_without_ddp_is_measured_and_says_why_it_has_no_straggler() -> None:
    from perfsuite.probes.base import RunContext

    class Job:
        model = nn.Linear(2, 2)
        loader = _loader()

    probe = RankProbe()
    probe.setup(RunContext(None, None, None, "cpu", None, 8, 1, Job()))  # type: ignore[arg-type]
    probe.finish()
    assert "not a DistributedDataParallel module" in (probe.straggler_reason or "")
    metrics = {m.name: m for m in probe.metrics(WindowTimings(0.0, 1.0, 2, 8))}
    assert not metrics["ddp_unused_search"].available


def test_epoch_record_counts_samples_in_batches_and_singles() -> None:
    record = EpochRecord()
    record.add([1, 2, 3])
    record.add(7)
    assert record.count == 4 and len(record.digest) == 32
