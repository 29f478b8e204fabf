"""A batch torch's collate could not make is named by its odd sample and the ``__getitem__`` that made it
(perfsuite.cli.bad_sample), in this process here; in a worker, the bad-input table's rows run it."""

from __future__ import annotations

import inspect

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from perfsuite.cli.bad_sample import collate_failure, describe_failure


class Rows(Dataset):
    def __init__(self, odd: object) -> None:
        self.odd = odd

    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> object:
        return self.odd if i == 5 else (torch.zeros(3), 0)


@pytest.mark.parametrize(
    ("odd", "form"),
    [(None, "None"), ((torch.zeros(3), 0, 1), "a tuple of 3 (a Tensor, an int, an int)"), ("x", "a str")],
)
def test_the_odd_sample_and_its_getitem_are_named(odd: object, form: str) -> None:
    with pytest.raises(Exception) as caught:  # torch's collate raises TypeError or RuntimeError
        for _ in DataLoader(Rows(odd), batch_size=4):
            pass
    found = collate_failure(caught.value)
    assert found is not None
    line = inspect.getsourcelines(Rows.__getitem__)[1]
    assert (found.sample, found.form, found.expected) == (5, form, "a tuple of 2 (a Tensor, an int)")
    assert found.getitem.startswith("Rows.__getitem__ at ") and found.getitem.endswith(f"test_bad_sample.py:{line}")
    text = describe_failure(found, "TypeError: x")
    assert text.startswith(f"its Dataset's sample 5 is {form} where sample 0 is a tuple of 2")


def test_an_error_not_raised_in_collate_is_not_one() -> None:
    assert collate_failure(ValueError("row 5 is corrupt")) is None
