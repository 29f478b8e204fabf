"""A training script whose host-to-device copies are chosen by flags: the planted copies of the sync model.

python train.py [--pin-memory] [--non-blocking] [--tensor-from-list] [--device cuda] [--epochs N]

--pin-memory off with --non-blocking on: the copy is from pageable memory (the host waits on every step).
--tensor-from-list: a per-step torch.tensor(list, device=d), a blocking copy from Python data.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pin-memory", action="store_true")
    parser.add_argument("--non-blocking", action="store_true")
    parser.add_argument("--tensor-from-list", action="store_true")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--epochs", type=int, default=40)
    args = parser.parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    data = TensorDataset(torch.randn(64, 3, 16, 16), torch.randint(0, 4, (64,)))
    loader = DataLoader(data, batch_size=8, shuffle=True, pin_memory=args.pin_memory, drop_last=True)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    criterion = nn.CrossEntropyLoss()
    for _ in range(args.epochs):
        for images, labels in loader:
            images = images.to(device, non_blocking=args.non_blocking)  # the planted copy
            labels = labels.to(device, non_blocking=True)
            if args.tensor_from_list:
                weight = torch.tensor([1.0, 1.0, 2.0, 2.0], device=device)  # planted: built from a list every step
                criterion = nn.CrossEntropyLoss(weight=weight)
            loss = criterion(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
