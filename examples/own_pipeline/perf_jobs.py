"""Glue: the face-parsing training job as a perfsuite.Job (its own loader, model, SGD, poly schedule, step)."""
import os
from functools import partial

import torch
from torch.utils.data import DataLoader

import perfsuite
from facedata import FaceParsingDataset
from model import BiSeNet
from train import IGNORE_INDEX, IMAGE_SIZE, NUM_CLASSES, build_optimizer, poly_schedule, train_step
from transforms import BatchFlipJitter, eval_transforms, train_transforms


def face_job(data, device, aug="cpu", workers=2):
    """aug="cpu": the PIL transforms in the workers; "gpu": resize there, the random part batched on the device."""
    per_sample = train_transforms(IMAGE_SIZE, IGNORE_INDEX) if aug == "cpu" else eval_transforms(IMAGE_SIZE)
    loader = DataLoader(FaceParsingDataset(data, per_sample), batch_size=4, shuffle=True, num_workers=workers,
                        drop_last=True)
    model = BiSeNet(NUM_CLASSES).to(device)
    optimizer = build_optimizer(model)
    criterion = torch.nn.CrossEntropyLoss(ignore_index=IGNORE_INDEX)
    gpu = BatchFlipJitter().to(device) if aug == "gpu" else None
    step = partial(train_step, model=model, criterion=criterion, optimizer=optimizer, device=device,
                   scheduler=poly_schedule(optimizer, max_iter=1000), gpu_transform=gpu)
    return perfsuite.Job(step=step, loader=loader, model=model, optimizer=optimizer, criterion=criterion,
                         num_classes=NUM_CLASSES, ignore_index=IGNORE_INDEX, aug=aug, gpu_transform=gpu,
                         name=f"faces-{aug}")


@perfsuite.register_job("faces")
def faces(device):
    """Face parsing, BiSeNet, SGD + poly LR, loss.item() every iteration (data: $FACES_DATA, default ./data)."""
    return face_job(os.environ.get("FACES_DATA", "data"), device)
