"""Loader settings as exact facts: a change between base and head is named, and fails where it is pinned.

On a UNet trainer under ``perfsuite exec``, ``num_workers 2 -> 0`` was in the
head Result's knobs, yet ``perfsuite compare`` said nothing and exited 0: knobs
were only read to explain a slowdown. Here the loader settings a Result records
(``num_workers``, ``persistent_workers``, ``pin_memory``, ``prefetch_factor``
and the batch size) are compared exactly, every time both runs know them:

* a change is named as its own verdict (``num_workers 2 -> 0``). Changing a
  setting is not by itself a regression (tuning changes them on purpose), so
  it is *inconclusive* there: shown, with what to write to pin it, not failed;
* a setting pinned by a marker (``@pytest.mark.perf(num_workers=2)``, a
  :class:`~perfsuite.judge.thresholds.SettingPin`) fails whenever a run differs.

A setting a user's job did not set or perfsuite could not read (``knob_sources``
"not known"/"not applied") is not compared: nothing is known to have changed.
"""

from __future__ import annotations

from typing import Any

from perfsuite.core.results import Result
from perfsuite.judge.verdict import Outcome, Verdict, format_value

# The DataLoader arguments a Result records, in the order they are reported.
LOADER_SETTINGS = ("num_workers", "persistent_workers", "pin_memory", "prefetch_factor", "batch_size")
_UNKNOWN_SOURCES = ("not known", "not applied")


def recorded(result: Result, name: str) -> tuple[bool, Any]:
    """(known, value) of one loader setting in a Result; batch_size is the batch the run used."""
    source = result.knob_sources.get(name, "")
    if source.startswith(_UNKNOWN_SOURCES):
        return False, None
    if name == "batch_size":
        return True, result.batch_size
    return (name in result.knobs), result.knobs.get(name)


def setting_changes(base: Result, head: Result, test_id: str) -> list[Verdict]:
    """One verdict per loader setting both runs know and that differs, named ``num_workers 2 -> 0``."""
    verdicts = []
    for name in LOADER_SETTINGS:
        (b_known, b), (h_known, h) = recorded(base, name), recorded(head, name)
        if not (b_known and h_known) or b == h:
            continue
        message = (
            f"{name} {format_value(b)} -> {format_value(h)} (loader setting): named, not judged on its own; "
            f"pin it to fail on any change: @pytest.mark.perf({name}={b!r})"
        )
        verdicts.append(Verdict(test_id, name, b, h, None, Outcome.INCONCLUSIVE, message))
    return verdicts
