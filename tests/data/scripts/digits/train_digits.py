"""Train a digit classifier: the loop lives in main(), an evaluation pass runs every epoch,
the loss is read back every iteration and the predictions every --log-every iterations.

python train_digits.py --data DIR [--epochs 3] [--workers 2] [--log-every 10]
"""

from __future__ import annotations

import argparse

import torch
from digits_data import DigitFolder
from torch import nn
from torch.utils.data import DataLoader


class Net(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(8 * 8 * 8, classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def evaluate(model, loader, device):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for images, labels in loader:
            predicted = model(images.to(device)).argmax(1)
            correct += (predicted == labels.to(device)).sum().item()
            total += len(labels)
    model.train()
    return correct / max(total, 1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)

    train_loader = DataLoader(
        DigitFolder(args.data, "train"),
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.workers,
        drop_last=True,
    )
    val_loader = DataLoader(DigitFolder(args.data, "val"), batch_size=args.batch_size)
    model = Net().to(args.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    criterion = nn.CrossEntropyLoss()
    iteration = 0
    for epoch in range(args.epochs):
        total = 0.0
        for images, labels in train_loader:
            logits = model(images.to(args.device))
            loss = criterion(logits, labels.to(args.device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()  # the loss, read back every iteration
            if iteration % args.log_every == 0:
                predictions = logits.argmax(1).tolist()  # predictions, read back every --log-every iterations
                print(f"iteration {iteration}: predicted {predictions}")
            iteration += 1
        accuracy = evaluate(model, val_loader, args.device)
        print(f"epoch {epoch}: loss {total / len(train_loader):.3f}, val accuracy {accuracy:.2f}")


if __name__ == "__main__":
    main()
