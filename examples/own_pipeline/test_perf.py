"""The face-parsing training job under perfsuite: its own loader, model, SGD, poly schedule and step."""
from functools import partial

import pytest
import torch
from torch.utils.data import DataLoader

import perfsuite
from facedata import FaceParsingDataset
from model import BiSeNet
from train import IGNORE_INDEX, IMAGE_SIZE, NUM_CLASSES, build_optimizer, poly_schedule, train_step
from transforms import BatchFlipJitter, eval_transforms, train_transforms


def face_job(data, device, aug="cpu", workers=2):
    """aug="cpu": the PIL transforms in the workers; aug="gpu": resize only there, the random part batched on device."""
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


@pytest.mark.perf(max_syncs_per_step=1, max_label_violations=0)  # the per-iteration loss.item(), nothing more
@pytest.mark.parametrize("aug", ["cpu", "gpu"])
def test_face_training(perf_run, face_data, aug):
    perf_run(face_job(face_data, perf_run.device, aug), steps=6, warmup=2)
