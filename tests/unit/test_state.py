"""perfsuite.harness.state: what perfsuite's extra work leaves of the user's state (issue 48)."""

from __future__ import annotations

import random

import numpy as np
import torch

from perfsuite.harness.state import held_by, kept_rng, undone

MODEL = torch.nn.Linear(2, 2)
SCHED_OPT = torch.optim.SGD(MODEL.parameters(), lr=0.1)
SCHED = torch.optim.lr_scheduler.StepLR(SCHED_OPT, step_size=1)
LAYER = torch.nn.Linear  # a class has state_dict too, as an unbound function


def module_step(batch):  # names module globals, as a step in a user's perf_jobs.py does (a class too: skipped)
    SCHED.step()
    return LAYER(2, 2) if batch is None else MODEL(batch)


def test_held_by_finds_the_closure_the_globals_the_step_names_and_a_methods_instance_but_no_loader():
    loader = torch.utils.data.DataLoader(torch.zeros(4, 2))
    ema = torch.optim.swa_utils.AveragedModel(MODEL)

    def step(batch):
        ema.update_parameters(MODEL)
        return next(iter(loader))

    class Trainer:
        def __init__(self) -> None:
            self.scaler = torch.amp.GradScaler("cpu")
            self.note = "text"

        def step(self, batch):
            return batch

    assert [type(o).__name__ for o in held_by(step)] == ["AveragedModel", "Linear"]  # the loader is left alone
    assert {type(o).__name__ for o in held_by(module_step)} == {"StepLR", "Linear"}
    assert [type(o).__name__ for o in held_by(Trainer().step)] == ["GradScaler"]


def test_undone_puts_back_weights_optimizer_scheduler_grads_and_every_generator():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3))
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1)

    def train() -> None:
        opt.zero_grad()
        model(torch.randn(8, 3)).pow(2).mean().backward()
        opt.step()
        sched.step()

    train()
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    grads = [p.grad.clone() for p in model.parameters()]
    steps, lr = opt.state_dict()["state"][0]["step"].item(), sched.get_last_lr()
    torch.manual_seed(1), random.seed(1), np.random.seed(1)
    state = (torch.get_rng_state(), random.getstate(), np.random.get_state())
    with undone([model, opt, sched, None, model]):  # None and a repeat are skipped
        for _ in range(3):
            train()
        random.random(), np.random.rand()
    assert all(torch.equal(weights[k], v) for k, v in model.state_dict().items())  # running stats included
    assert all(torch.equal(g, p.grad) for g, p in zip(grads, model.parameters()))
    assert opt.state_dict()["state"][0]["step"].item() == steps and sched.get_last_lr() == lr
    assert torch.equal(torch.get_rng_state(), state[0]) and random.getstate() == state[1]
    assert np.array_equal(np.random.get_state()[1], state[2][1])


def test_kept_rng_hides_draws_from_the_next_one():
    torch.manual_seed(3), random.seed(3), np.random.seed(3)
    with kept_rng():
        torch.rand(10), random.random(), np.random.rand()
    after = (torch.rand(()).item(), random.random(), float(np.random.rand()))
    torch.manual_seed(3), random.seed(3), np.random.seed(3)
    assert after == (torch.rand(()).item(), random.random(), float(np.random.rand()))
