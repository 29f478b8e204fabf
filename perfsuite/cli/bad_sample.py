"""A batch torch's ``collate`` could not make: which sample of the user's Dataset broke it, in their terms.

A Dataset whose ``__getitem__`` returns None (or a tuple of another length, a string among tensors) for one
sample fails only when its batch is collated, inside torch's ``default_collate``, in a DataLoader worker: the
traceback then holds torch's frames and perfsuite's, none of the user's, and names neither the sample nor the
batch. :func:`collate_failure` finds the Dataset in the frames the error passed through (the DataLoader
iterator's), reads its samples again in this process, within a small budget, to find the first whose form
differs from sample 0's, and names it with the ``__getitem__`` that made it (the user's file and line).
"""

from __future__ import annotations

import inspect
import os
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

_COLLATE_FILE = os.path.join("torch", "utils", "data", "_utils", "collate.py")
SCAN_SAMPLES = 4096  # the most samples read again to find the odd one
SCAN_S = 5.0  # ... and the most seconds


@dataclass(frozen=True)
class CollateFailure:
    """``sample``: the first sample whose form differs (None: none found in the budget); ``form``: its form (``None``,
    ``a tuple of 3``); ``expected``: sample 0's; ``getitem``: ``Rows.__getitem__ at data.py:12``, the user's frame."""

    sample: int | None
    form: str
    expected: str
    getitem: str
    scanned: int


def is_collate_error(exc: BaseException) -> bool:
    """Whether ``exc`` was raised in torch's collate (in this process, or a worker's text says so)."""
    if _COLLATE_FILE in str(exc):
        return True
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return last is not None and last.endswith(_COLLATE_FILE)


def collate_failure(exc: BaseException) -> CollateFailure | None:
    """The sample that broke the collate ``exc`` reports, read again from the Dataset its frames hold; None when the
    error is no collate's, or no map-style Dataset is found."""
    if not is_collate_error(exc):
        return None
    dataset = _dataset(exc.__traceback__)
    if dataset is None:
        return None
    getitem = _where(type(dataset).__getitem__, type(dataset).__name__)
    expected = _read(dataset, 0)
    deadline = time.monotonic() + SCAN_S
    count = min(len(dataset), SCAN_SAMPLES)
    for i in range(1, count):
        form = _read(dataset, i)
        if form != expected:
            return CollateFailure(i, form, expected, getitem, i + 1)
        if time.monotonic() > deadline:
            return CollateFailure(None, "", expected, getitem, i + 1)
    return CollateFailure(None, "", expected, getitem, count)


def describe_failure(found: CollateFailure, error: str) -> str:
    """The words after ``job 'x'``'s name: what the sample was, where it was made, and what to write."""
    if found.sample is None:
        return (
            f"torch's collate could not batch its Dataset's samples ({error}); the first {found.scanned} read again "
            f"in this process all are {found.expected}, so the odd one is further on or varies between reads; make "
            f"{found.getitem} return one form for every sample, or give the DataLoader a collate_fn that handles it"
        )
    return (
        f"its Dataset's sample {found.sample} is {found.form} where sample 0 is {found.expected}, so torch's collate "
        f"could not batch it ({error}); make {found.getitem} return one form for every sample, or leave such "
        "samples out (a collate_fn that drops them)"
    )


def _dataset(tb: TracebackType | None) -> Any:
    """The map-style Dataset of the DataLoader iterator the error passed through (the innermost one)."""
    found = None
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        data = getattr(owner, "_dataset", None) if owner is not None else None
        if data is not None and hasattr(data, "__getitem__") and hasattr(data, "__len__"):
            found = data
        tb = tb.tb_next
    return found


def _read(dataset: Any, i: int) -> str:
    """The form of ``dataset[i]``, or how reading it failed."""
    try:
        return _form(dataset[i])
    except Exception as exc:  # noqa: BLE001 - the user's Dataset: its failure is a form as well
        return f"an error ({type(exc).__name__})"


def _form(sample: Any) -> str:
    """A sample's form as collate sees it: None, a tuple of N, a dict of keys, or its type's name."""
    if sample is None:
        return "None"
    if isinstance(sample, (tuple, list)):
        return f"a {type(sample).__name__} of {len(sample)} ({', '.join(_form(s) for s in sample)})"
    if isinstance(sample, dict):
        return f"a dict of {sorted(map(str, sample))}"
    name = type(sample).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _where(function: Any, owner: str) -> str:
    try:
        file = inspect.getsourcefile(function) or "?"
        line = inspect.getsourcelines(function)[1]
    except (OSError, TypeError):
        return f"{owner}.__getitem__"  # no source to point at
    shown = os.path.relpath(file)
    return f"{owner}.__getitem__ at {file if shown.startswith('..') else shown}:{line}"
