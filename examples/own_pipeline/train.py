"""Train the face parser: SGD with parameter groups, a poly learning-rate schedule, the loss logged every iteration.

python train.py --data DATA_DIR [--epochs 2] [--device cuda]
"""

from __future__ import annotations

import argparse

import torch
from facedata import FaceParsingDataset
from model import BiSeNet
from torch import nn
from torch.utils.data import DataLoader
from transforms import train_transforms

NUM_CLASSES = 11  # background, skin, brows, eyes, nose, lips, hair, ...
IGNORE_INDEX = 255
IMAGE_SIZE = 64


def build_optimizer(model, lr=0.01, momentum=0.9, weight_decay=5e-4):
    """No weight decay on norms and biases; the head learns 10x faster than the backbone."""
    decay, no_decay, head = [], [], []
    for name, p in model.named_parameters():
        if name.startswith("head."):
            head.append(p)
        elif p.ndim == 1:
            no_decay.append(p)
        else:
            decay.append(p)
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
        {"params": head, "lr": lr * 10, "weight_decay": weight_decay},
    ]
    return torch.optim.SGD(groups, lr=lr, momentum=momentum)


def poly_schedule(optimizer, max_iter, power=0.9):
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: (1 - min(it, max_iter - 1) / max_iter) ** power)


def train_step(batch, model, criterion, optimizer, scheduler, device, gpu_transform=None, history=None):
    """One iteration: forward, loss, backward, step, schedule, log."""
    images = batch["image"].to(device, non_blocking=True)
    masks = batch["mask"].to(device, non_blocking=True)
    if gpu_transform is not None:
        with torch.no_grad():
            images, masks = gpu_transform(images, masks)
    logits = model(images)
    loss = criterion(logits, masks)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    scheduler.step()
    value = loss.item()  # logged every iteration
    if history is not None:
        history.append(value)
    return loss


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)

    dataset = FaceParsingDataset(args.data, transform=train_transforms(IMAGE_SIZE, IGNORE_INDEX))
    loader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.workers,
        drop_last=True,
        # pinned batches + non_blocking copies: the one copy the host does not wait for. Not chosen by device:
        # on a CPU torch ignores it (and says so), and a CPU run of the same code stays the GPU run's code.
        pin_memory=True,
    )
    model = BiSeNet(NUM_CLASSES).to(args.device)
    optimizer = build_optimizer(model)
    scheduler = poly_schedule(optimizer, max_iter=args.epochs * len(loader))
    criterion = nn.CrossEntropyLoss(ignore_index=IGNORE_INDEX)
    history = []
    model.train()
    for epoch in range(args.epochs):
        for batch in loader:
            train_step(batch, model, criterion, optimizer, scheduler, args.device, history=history)
        print(f"epoch {epoch}: loss {sum(history[-len(loader) :]) / len(loader):.4f}")
    return history


if __name__ == "__main__":
    main()
