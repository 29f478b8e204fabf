"""batch_samples counts the samples a batch really holds (what samples_per_s must count)."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest
import torch

from perfsuite.core.knobs import Knobs
from perfsuite.errors import PerfsuiteError
from perfsuite.harness.batches import batch_samples
from perfsuite.harness.pipeline import build_loader

Pair = namedtuple("Pair", "image target")


@pytest.mark.parametrize(
    ("batch", "expected"),
    [
        pytest.param(torch.zeros(5, 3, 4, 4), 5, id="tensor"),
        pytest.param((torch.zeros(7, 3), torch.zeros(7)), 7, id="tuple"),
        pytest.param([torch.zeros(2, 1), torch.zeros(2)], 2, id="list"),
        pytest.param({"image": torch.zeros(3, 8), "label": torch.zeros(3)}, 3, id="dict"),
        pytest.param({"meta": ["a", "b"], "x": (torch.zeros(4, 2),)}, 4, id="nested-first-tensor"),
        pytest.param(Pair(np.zeros((6, 2)), np.zeros(6)), 6, id="namedtuple-of-arrays"),
        pytest.param(torch.tensor(1.0), 1, id="zero-dim"),
        pytest.param((torch.zeros(0, 3),), 0, id="empty"),
    ],
)
def test_counts_the_leading_dimension_of_the_first_tensor(batch: object, expected: int) -> None:
    assert batch_samples(batch) == expected


@pytest.mark.parametrize("batch", [(), {"a": "text"}, ["x", 1], None, "abc"])
def test_a_batch_without_tensors_is_refused_with_the_fix(batch: object) -> None:
    with pytest.raises(PerfsuiteError, match="holds no tensor or array"):
        batch_samples(batch)


def test_a_short_last_batch_counts_what_was_delivered() -> None:
    """96 samples with batch size 100,000 and drop_last=False: one batch of 96, not 100,000."""
    dataset = torch.utils.data.TensorDataset(torch.zeros(96, 2), torch.zeros(96))
    loader = build_loader(
        dataset,
        Knobs.from_flat(num_workers=0, drop_last=False, batch_size=100_000, device="cpu"),
        batch_size=100_000,
        seed=0,
    )
    assert [batch_samples(b) for b in loader] == [96]
