"""How many samples a batch holds: what ``samples_per_s`` must count.

A loader with ``drop_last=False`` (or a dataset smaller than ``batch_size``)
delivers short batches; throughput computed as ``steps x batch_size`` then
counts samples that never existed (a 96-sample dataset with batch size 100,000
reported 220,459 samples/s). The runner sums :func:`batch_samples` over the
window's batches instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfsuite.errors import PerfsuiteError


def batch_samples(batch: Any) -> int:
    """The leading dimension of the first tensor (or array) in ``batch``.

    ``batch`` is a tensor, or a tuple/list/dict of them, nested in any way a
    ``collate_fn`` builds; dicts are searched in insertion order. A
    zero-dimensional first tensor is one sample. Raises PerfsuiteError when the
    batch holds no tensor or array at all.
    """
    found = _first_shaped(batch, depth=0)
    if found is None:
        raise PerfsuiteError(
            f"cannot count the samples of a {type(batch).__name__} batch: it holds no tensor or array; "
            "make the collate_fn return tensors (a tuple, list or dict of them)"
        )
    shape = tuple(found.shape)
    return int(shape[0]) if shape else 1


def _first_shaped(obj: Any, depth: int) -> Any:
    if depth > 32:
        return None
    if hasattr(obj, "shape") and not isinstance(obj, (str, bytes, type)):
        return obj
    if isinstance(obj, Mapping):
        items: Any = obj.values()
    elif isinstance(obj, (tuple, list)):
        items = obj
    else:
        return None
    for item in items:
        found = _first_shaped(item, depth + 1)
        if found is not None:
            return found
    return None
