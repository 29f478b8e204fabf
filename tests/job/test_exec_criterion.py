"""perfsuite exec on a script with three OhemCELoss heads: the loss module the labels reach is hooked and named."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import perfsuite
from perfsuite import RunSpec, Script

OHEM = Path(__file__).resolve().parents[1] / "data" / "scripts" / "ohem" / "train_ohem.py"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("criterion", "hooked"),
    [(None, "CrossEntropyLoss at LossP.criteria"), ("OhemCELoss", "OhemCELoss at LossP")],
)
def test_the_labels_are_checked_at_the_loss_module_they_reach(criterion, hooked):
    script = Script([str(OHEM)], criterion=criterion, num_classes=5)
    result = perfsuite.run(RunSpec(script, steps=2, warmup=1, observe_steps=1, period_steps=0, sol_steps=2))
    hooks = sys.modules.pop("__ohem_hooks__")
    # The pick hooks every candidate in the warm-up batch only; the window's 2 batches run with none (a script
    # gets no speed of light: issue 48); the observed step has the label probe's one hook on the chosen module.
    assert hooks == [6 if criterion is None else 3, 0, 0, 1], hooks
    note = next(n for n in result.notes if n.startswith("perfsuite exec"))
    assert f"loss {hooked} (" in note and "received the labels first in a warm-up step" in note
    violations = result.metric("label_violations")
    assert violations.value == 0, violations  # checked, with the 255 pixels read as the loss's ignore_index
