"""Trains 12 batches per epoch and saves its optimizer's step count at each epoch's end (perfsuite exec must not
change it: tests/job/test_exec_leaves_state.py). Usage: train_ckpt.py OUT_DIR [EPOCHS]"""

import json
import random
import sys
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

out = Path(sys.argv[1])
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 4
torch.manual_seed(0)
random.seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 2))
opt = torch.optim.Adam(model.parameters(), lr=0.01)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5)
data = TensorDataset(torch.randn(48, 4), torch.randint(0, 2, (48,)))
loader = DataLoader(data, batch_size=4, shuffle=True)  # 12 batches per epoch
draws = []
for epoch in range(epochs):
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        draws.append([torch.rand(()).item(), random.random()])  # the script's own draws, after perfsuite's work
    steps = opt.state_dict()["state"][0]["step"].item()
    weight = model[0].weight.detach().flatten().tolist()
    saved = {"epoch": epoch, "steps": steps, "lr": sched.get_last_lr()[0], "weight": weight, "draws": draws}
    (out / f"epoch{epoch}.json").write_text(json.dumps(saved))
