"""A failing search under the ``ci`` profile reports after a bounded number of shrink calls.

Counts, not seconds: the budget is a number of calls of the user's callable after the first failure, and
these tests assert it from the :class:`~perfsuite.augment.shrinking.ShrinkBudget` the failure carries.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import settings

from perfsuite.augment.checks import PropertyViolation, check_paired_augmentation
from perfsuite.augment.shrinking import CI_SHRINK_CALLS, ShrinkBudget, fingerprint, shrink_calls_for
from perfsuite.errors import PropertyArgumentError


def _flip_forgetting_swap(images, masks):
    """A horizontal flip of both, without swapping the left/right labels 1 and 2."""
    return images.flip(-1), masks.flip(-1)


def _fail(**kwargs) -> PropertyViolation:
    with pytest.raises(PropertyViolation) as info:
        check_paired_augmentation(
            _flip_forgetting_swap, num_classes=4, flip_pairs=[(1, 2)], photometric=False, **kwargs
        )
    return info.value


def test_a_derandomized_search_shrinks_within_the_ci_budget():
    err = _fail(settings=settings(max_examples=30, derandomize=True, database=None))
    budget = err.shrink
    assert isinstance(budget, ShrinkBudget) and budget.limit == CI_SHRINK_CALLS
    assert 0 < budget.calls_after_failure <= CI_SHRINK_CALLS
    assert f"of at most {CI_SHRINK_CALLS} calls" in str(err)


def test_shrink_calls_zero_reports_the_first_failure_unshrunk():
    err = _fail(settings=settings(max_examples=30, derandomize=True, database=None), shrink_calls=0)
    assert err.shrink.calls_after_failure == 0
    assert err.shrink.skipped > 0  # the shrinker asked, and was answered without running the callable


def test_a_random_search_shrinks_fully_unless_asked(monkeypatch):
    from perfsuite.augment import shrinking

    monkeypatch.setattr(shrinking, "SHRINK_S", None)  # no time bound: what it does is not the machine's speed
    err = _fail(settings=settings(max_examples=30, derandomize=False, database=None))
    assert err.shrink.limit is None
    assert "shrunk for" not in str(err)


def test_budget_replays_known_failures_and_skips_new_inputs_once_spent():
    budget = ShrinkBudget(limit=1)

    def fails() -> None:
        raise AssertionError

    with pytest.raises(AssertionError):
        budget.run("a", fails)
    with pytest.raises(AssertionError):
        budget.run("b", fails)  # the one shrink call the budget allows
    budget.run("c", fails)  # spent: a new input is answered as passing, without running
    with pytest.raises(AssertionError):
        budget.run("a", fails)  # a known failure is replayed, so Hypothesis's final run fails again
    assert (budget.calls_after_failure, budget.skipped, budget.exhausted) == (1, 1, True)


def test_fingerprints_tell_arrays_apart_by_content_shape_and_dtype():
    a = np.zeros((2, 3), np.uint8)
    assert fingerprint(1, a) == fingerprint(1, a.copy())
    assert fingerprint(1, a) != fingerprint(2, a)
    assert fingerprint(1, a) != fingerprint(1, a.astype(np.int64))
    assert fingerprint(1, a) != fingerprint(1, a.reshape(3, 2))


@pytest.mark.parametrize("bad", [-1, 1.5, True, "10"])
def test_a_bad_shrink_budget_is_an_argument_error(bad):
    with pytest.raises(PropertyArgumentError, match="shrink_calls="):
        shrink_calls_for(settings(), bad)


class _Clock:
    """Seconds that pass only when the test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_any_search_stops_shrinking_its_seconds_after_the_first_failure():
    """Outside ci (no call budget) the shrink once ran 64-108 s; it now stops SHRINK_S after the first failure."""
    clock = _Clock()
    budget = ShrinkBudget(limit=None, seconds=20.0, clock=clock)

    def fails() -> None:
        raise AssertionError

    budget.run("ok", lambda: None)
    clock.now = 100.0  # the search took long to find it: the bound counts from the first failure
    with pytest.raises(AssertionError):
        budget.run("a", fails)
    clock.now = 119.0
    with pytest.raises(AssertionError):
        budget.run("b", fails)  # a shrink call within the time
    clock.now = 120.0
    budget.run("c", fails)  # out of time: answered as passing, without running
    with pytest.raises(AssertionError):
        budget.run("a", fails)  # the known failure still replays
    assert (budget.calls_after_failure, budget.skipped, budget.exhausted) == (1, 1, True)
    assert budget.describe().startswith("shrunk for 20 s after the first failure (1 shrink calls")


def test_a_random_search_out_of_time_says_how_far_it_shrank(monkeypatch):
    from perfsuite.augment import shrinking

    monkeypatch.setattr(shrinking, "SHRINK_S", 0.0)  # spent as soon as it fails
    err = _fail(settings=settings(max_examples=30, derandomize=False, database=None))
    assert err.shrink.limit is None and err.shrink.calls_after_failure == 0
    assert "shrunk for 0 s after the first failure" in str(err)
