"""Glue: the face-parsing training job as a perfsuite.Job (its own loader, model, SGD, poly schedule, step)."""

import os
from functools import partial

import torch
from facedata import FaceParsingDataset
from model import BiSeNet
from torch.utils.data import DataLoader
from train import IGNORE_INDEX, IMAGE_SIZE, NUM_CLASSES, build_optimizer, poly_schedule, train_step
from transforms import BatchFlipJitter, eval_transforms, train_transforms

import perfsuite


def face_job(data, device, aug="cpu", workers=2):
    """aug="cpu": the PIL transforms in the workers; "gpu": resize there, the random part batched on the device."""
    per_sample = train_transforms(IMAGE_SIZE, IGNORE_INDEX) if aug == "cpu" else eval_transforms(IMAGE_SIZE)
    dataset = FaceParsingDataset(data, per_sample)
    loader = DataLoader(dataset, batch_size=4, shuffle=True, num_workers=workers, drop_last=True, pin_memory=True)
    model, gpu = BiSeNet(NUM_CLASSES).to(device), BatchFlipJitter().to(device) if aug == "gpu" else None
    optimizer, criterion = build_optimizer(model), torch.nn.CrossEntropyLoss(ignore_index=IGNORE_INDEX)
    schedule = poly_schedule(optimizer, max_iter=1000)
    step = partial(train_step, model=model, criterion=criterion, optimizer=optimizer, device=device, scheduler=schedule)
    labels = {"criterion": criterion, "num_classes": NUM_CLASSES, "ignore_index": IGNORE_INDEX}
    step = partial(step, gpu_transform=gpu)
    return perfsuite.Job(step, model, optimizer, loader, aug=aug, gpu_transform=gpu, name=f"faces-{aug}", **labels)


@perfsuite.register_job("faces")
def faces(device):
    """Face parsing, BiSeNet, SGD + poly LR, loss.item() every iteration (data: $FACES_DATA, default ./data)."""
    return face_job(os.environ.get("FACES_DATA", "data"), device)
