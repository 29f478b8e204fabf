"""A run under perfsuite changes nothing the user's training computes or saves (issue 48).

``tests/data/scripts/state/train_ckpt.py`` trains 12 batches per epoch with dropout, an Adam optimizer and a
StepLR scheduler, draws from torch's and Python's generators after every step, and saves its optimizer's step
count, learning rate, weights and draws at each epoch's end. Under ``perfsuite exec`` (and the doctor's and
check's runs, which run the script the same way) every file it saves equals a plain run's, byte for byte, up to
the batch where perfsuite stops it, which the Result records. A Job's speed-of-light steps leave its model,
optimizer, the scheduler its step holds and the generators as they were.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import perfsuite
from perfsuite import Job, RunSpec, Script
from perfsuite.cli.main import main

SCRIPT = Path(__file__).resolve().parents[1] / "data" / "scripts" / "state" / "train_ckpt.py"
BATCHES = 12  # per epoch


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `python train_ckpt.py OUT 4` saves with no perfsuite."""
    out = tmp_path_factory.mktemp("plain")
    subprocess.run([sys.executable, str(SCRIPT), str(out), "4"], check=True)
    return out


def saved(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("epoch*.json"))}


def test_exec_saves_what_a_plain_run_saves_up_to_where_it_stops_the_script(plain, tmp_path, capsys):
    # warm-up 2 + window 10 + scan 12 + observed 2 = 26 batches: the script is stopped in its third epoch
    argv = ["exec", "--steps", "10", "--warmup", "2", "--period-steps", "12", "--observe-steps", "2"]
    assert main([*argv, "--out", str(tmp_path / "r.json"), "--", "python", str(SCRIPT), str(tmp_path), "4"]) == 0
    mine, theirs = saved(tmp_path), saved(plain)
    assert sorted(mine) == ["epoch0.json", "epoch1.json"]  # epochs 0 and 1 ended before the stop; epoch 2 did not
    assert all(mine[name] == theirs[name] for name in mine)  # steps 12 and 24, lr, weights, every draw: bit for bit
    assert b'"steps": 12.0' in mine["epoch0.json"] and b'"steps": 24.0' in mine["epoch1.json"]
    result = perfsuite.Result.from_json((tmp_path / "r.json").read_text())
    assert result.script is not None and (result.script.batches, result.script.epochs) == (26, 3)
    assert result.samples["sol_step_ms"] == [] and "speed of light" in result.script.not_run
    assert "stopped: the script was stopped when it asked for training batch 27 (epoch 3)" in capsys.readouterr().out


def test_a_stopped_script_round_trips_its_stop_point(tmp_path):
    result = perfsuite.run(
        RunSpec(Script([str(SCRIPT), str(tmp_path), "1"]), steps=3, warmup=1, observe_steps=1, period_steps=0)
    )
    again = perfsuite.Result.from_json(result.to_json())
    assert again.script == result.script and result.script is not None and result.script.batches == 5


def test_a_jobs_speed_of_light_leaves_its_model_optimizer_scheduler_and_generators_as_they_were():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3)  # held by the step's closure alone: found there
    draws: list[tuple[float, float]] = []
    data = torch.utils.data.TensorDataset(torch.randn(64, 3), torch.randint(0, 2, (64,)))

    def step(batch):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        draws.append((torch.rand(()).item(), random.random()))
        return loss

    job = Job(step=step, model=model, optimizer=opt, loader=torch.utils.data.DataLoader(data, batch_size=4))
    spec = RunSpec(job, steps=3, warmup=1, observe_steps=1, period_steps=0, sol_steps=2)
    torch.manual_seed(1)
    random.seed(1)
    result = perfsuite.run(spec, probes=[])
    real = 1 + 3 + 1  # warm-up, window, observed: the steps on the loader's batches
    assert len(result.samples["sol_step_ms"]) == 2 and len(draws) == real + 2 + 1  # the step ran 3 times more
    assert sched.last_epoch == real  # ... and the scheduler, the optimizer and the generators do not show it
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 * 0.1 ** (real // 3))
    # the observed step starts from the generators' state the speed of light started from: the same draws
    warmup_window = 1 + 3
    assert draws[warmup_window + 3] == draws[warmup_window] != draws[warmup_window + 1]


@pytest.mark.slow
def test_doctors_unchanged_run_of_a_script_saves_what_a_plain_run_saves(plain, tmp_path):
    # the doctor's runs are fresh processes running the script as exec does; its counterfactuals change the
    # script's loader settings on purpose, so they are left out here
    argv = ["doctor", "--rounds", "1", "--no-counterfactuals", "--steps", "10", "--warmup", "2", "--period-steps", "12"]
    argv += ["--observe-steps", "2", "--", "python", str(SCRIPT), str(tmp_path), "4"]
    assert main(argv) == 0
    mine, theirs = saved(tmp_path), saved(plain)
    assert sorted(mine) == ["epoch0.json", "epoch1.json"] and all(mine[name] == theirs[name] for name in mine)
