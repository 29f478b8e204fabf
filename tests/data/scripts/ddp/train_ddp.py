"""A tiny DDP training script as torchrun runs it: gloo, a DistributedSampler, the loss read every step.

``--slow-rank K --delay-ms D``: rank K does D ms more host work per step (a straggler);
``--die-rank K``: rank K raises at its 5th batch; ``--hang-rank K``: rank K blocks at its 5th batch.
Run as plain ``python train_ddp.py`` it is a world of one rank (as many scripts default when RANK is unset).
"""

import argparse
import os
import socket
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--slow-rank", type=int, default=-1)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--die-rank", type=int, default=-1)
    parser.add_argument("--hang-rank", type=int, default=-1)
    args = parser.parse_args()
    if "RANK" not in os.environ:  # not under torchrun: one rank on a free local port
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1")
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    data = TensorDataset(torch.randn(64, 16), torch.randint(0, 4, (64,)))
    sampler = DistributedSampler(data, shuffle=True)
    loader = DataLoader(data, batch_size=4, sampler=sampler)
    model = DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    criterion = torch.nn.CrossEntropyLoss()
    step = 0
    try:
        for epoch in range(args.epochs):
            sampler.set_epoch(epoch)
            for x, y in loader:
                step += 1
                if rank == args.die_rank and step == 5:
                    raise RuntimeError(f"rank {rank} lost its data shard")
                if rank == args.hang_rank and step == 5:
                    time.sleep(3600)
                if rank == args.slow_rank:
                    time.sleep(args.delay_ms / 1e3)
                loss = criterion(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if step % 10 == 0 and rank == 0:
                    print(f"epoch {epoch} step {step} loss {loss.item():.3f} pid {os.getpid()}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
