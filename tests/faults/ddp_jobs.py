"""Users' own jobs for runs on several ranks: each rank imports this module and calls a factory after joining.

Written as a user's torchrun script would be: a DistributedSampler with
set_epoch, and a DistributedDataParallel model used in the step. Tiny, so a
launch spends its time starting processes, not training.
"""

from __future__ import annotations

import signal
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import perfsuite

FAIL_AT_STEP = 3


def tiny_ddp_job(device: str) -> perfsuite.Job:
    """A user's DDP job: 64 samples of 16 features, a linear classifier, one rank's shard each."""
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 16), torch.randint(0, 4, (64,)))
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=8, sampler=sampler, drop_last=True)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()

    def step(batch):
        x, y = batch
        optimizer.zero_grad(set_to_none=True)
        loss = criterion(model(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()
        return loss

    return perfsuite.Job(
        step=step,
        loader=loader,
        model=model,
        optimizer=optimizer,
        criterion=criterion,
        num_classes=4,
        target_kind="label",
        epoch_start=sampler.set_epoch,
        name="tiny_ddp",
    )


def dying_job(device: str) -> perfsuite.Job:
    """Rank 1 raises in its step after a few steps; rank 0 is left waiting in the all-reduce."""
    job = tiny_ddp_job(device)
    inner, calls = job.step, [0]

    def step(batch):
        calls[0] += 1
        if dist.get_rank() == 1 and calls[0] == FAIL_AT_STEP:
            raise RuntimeError("rank 1 broke on purpose")
        return inner(batch)

    job.step = step
    return job


def stuck_job(device: str) -> perfsuite.Job:
    """Rank 1 hangs in its step with SIGALRM blocked, as a rank stuck inside a C call: its own alarm cannot fire."""
    job = tiny_ddp_job(device)
    inner, calls = job.step, [0]

    def step(batch):
        calls[0] += 1
        if dist.get_rank() == 1 and calls[0] == FAIL_AT_STEP:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            time.sleep(3600)
        return inner(batch)

    job.step = step
    return job


def plain_model_job(device: str) -> perfsuite.Job:
    """A job that forgot DistributedDataParallel: refused on several ranks."""
    job = tiny_ddp_job(device)
    job.model = job.model.module
    return job
