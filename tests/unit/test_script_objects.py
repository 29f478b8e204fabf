"""Which loss module a script's labels reach: nested loss modules, several instances, --criterion by name."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from perfsuite.errors import JobError
from perfsuite.harness.script.objects import LossPick, find_objects, ignore_index_of


class OhemCELoss(nn.Module):
    """As the face-parsing repository's: the labels reach a CrossEntropyLoss inside it."""

    def __init__(self, ignore_lb: int = 255) -> None:
        super().__init__()
        self.criteria = nn.CrossEntropyLoss(ignore_index=ignore_lb, reduction="none")

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.criteria(logits, labels).mean()


class Smooth(nn.Module):
    """A loss-like module called on float targets only (a regulariser): never the criterion."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a - b).abs().mean()


def frame_of(**held):
    """A frame whose names are these, as a script's module-level globals are."""
    names = dict(held)
    exec("import sys\nframe = sys._getframe()", names)  # a module-level frame, as runpy runs a script
    return names.pop("frame")


def script_objects():
    model = nn.Conv2d(3, 4, 1)
    return {
        "net": model,
        "optim": torch.optim.SGD(model.parameters(), lr=0.1),
        "LossP": OhemCELoss(),
        "Loss2": OhemCELoss(),
        "Loss3": OhemCELoss(),
        "smooth_loss": Smooth(),
    }


def step(held, pick_first: str = "LossP") -> None:
    """One training step: the smoothing term first, then the three OHEM losses on the labels."""
    logits, labels = torch.randn(2, 4, 3, 3), torch.randint(0, 4, (2, 3, 3))
    held["smooth_loss"](logits, logits.detach())
    for name in (pick_first, *(n for n in ("LossP", "Loss2", "Loss3") if n != pick_first)):
        held[name](logits, labels)


def test_nested_loss_modules_are_found_with_their_paths():
    held = script_objects()
    found = find_objects([frame_of(**held)])
    listing = found.listing()
    for name in ("LossP", "Loss2", "Loss3"):
        assert f"OhemCELoss at {name}" in listing and f"CrossEntropyLoss at {name}.criteria" in listing
    assert "Smooth at smooth_loss" not in listing  # not a loss by its class (no _Loss, no "Loss" in the name)
    assert found.model is held["net"] and found.criterion is None and len(found.losses) == 6


def test_the_automatic_choice_hooks_the_innermost_module_the_labels_reach():
    held = script_objects()
    found = find_objects([frame_of(**held)])
    pick = LossPick(found, named=False)
    step(held, pick_first="Loss2")
    assert pick.choose() is held["Loss2"].criteria
    assert "CrossEntropyLoss at Loss2.criteria" in found.describe() and "received the labels" in found.describe()
    assert ignore_index_of(found.criterion) == 255
    assert not held["Loss2"].criteria._forward_pre_hooks  # the pick's hooks are gone


def test_criterion_by_class_picks_the_instance_that_receives_the_labels_first():
    held = script_objects()
    found = find_objects([frame_of(**held)], "OhemCELoss")
    assert [found.path(m) for m in found.losses] == ["LossP", "Loss2", "Loss3"]
    pick = LossPick(found, named=True)
    step(held, pick_first="Loss3")
    assert pick.choose() is held["Loss3"]
    assert "OhemCELoss at Loss3" in found.describe() and "named by --criterion" in found.describe()
    assert ignore_index_of(held["Loss3"]) == 255  # from the CrossEntropyLoss inside it


def test_criterion_by_path_is_one_module_at_once():
    held = script_objects()
    found = find_objects([frame_of(**held)], "Loss2.criteria")
    assert found.criterion is held["Loss2"].criteria and found.why == "named by --criterion"


def test_a_loss_called_only_on_float_targets_is_not_taken():
    held = {"a": nn.MSELoss(), "b": nn.L1Loss()}
    found = find_objects([frame_of(**held)])
    pick = LossPick(found, named=False)
    held["a"](torch.zeros(2), torch.ones(2))
    assert pick.choose() is None and "none of them received an integer label tensor" in found.why


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("FocalLoss", ["--criterion FocalLoss matched no module", "OhemCELoss at LossP", "CrossEntropyLoss at"]),
        ("Nope", ["loss modules found:", "OhemCELoss at Loss3"]),
    ],
)
def test_a_criterion_that_matches_nothing_lists_what_was_found(name, words):
    held = script_objects()
    with pytest.raises(JobError) as err:
        find_objects([frame_of(**held)], name)
    assert all(w in str(err.value) for w in words), str(err.value)


def test_no_loss_module_at_all_lists_the_modules_outside_the_model():
    held = {"net": nn.Linear(2, 2), "head": nn.ReLU()}
    with pytest.raises(JobError, match="no loss module found; modules outside the model: ReLU"):
        find_objects([frame_of(**held)], "CrossEntropyLoss")


OHEM = Path(__file__).resolve().parents[1] / "data" / "scripts" / "ohem" / "train_ohem.py"


def test_exec_with_a_criterion_that_matches_nothing_exits_2_listing_what_it_found(capsys):
    from perfsuite.cli.main import main

    assert main(["exec", "--steps", "2", "--criterion", "FocalLoss", "--", "python", str(OHEM)]) == 2
    err = capsys.readouterr().err
    assert "--criterion FocalLoss matched no module" in err
    assert "OhemCELoss at LossP" in err and "CrossEntropyLoss at LossP.criteria" in err
