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
  :class:`~perfsuite.judge.thresholds.SettingPin`) or by the committed exact
  file (its ``settings`` section, :func:`pinned_changes`, written by
  ``--perfsuite-update-exact``) fails whenever a run differs.

A setting a user's job did not set or perfsuite could not read (``knob_sources``
"not known"/"not applied") is not compared: nothing is known to have changed.
"""

from __future__ import annotations

from collections.abc import Mapping
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


def check_setting(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be a pinned ``name`` (None: it can), checked as the DataLoader argument would be."""
    if name not in LOADER_SETTINGS:
        return f"is not a loader setting; write one of {', '.join(LOADER_SETTINGS)}"
    if name in ("persistent_workers", "pin_memory"):
        return None if isinstance(value, bool) else "must be True or False"
    if value is None and name == "prefetch_factor":
        return None  # torch's default
    least = 0 if name == "num_workers" else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        return f"must be an integer >= {least}"
    return None


def loader_settings(result: Result) -> dict[str, Any]:
    """The loader settings a Result knows, as the committed exact file pins them."""
    out = {}
    for name in LOADER_SETTINGS:
        known, value = recorded(result, name)
        if known and check_setting(name, value) is None:
            out[name] = value
    return out


def pinned_changes(expected: Mapping[str, Any], head: Result, test_id: str, source: str, update: str) -> list[Verdict]:
    """Each setting ``expected`` pins (the committed file's) that head runs with otherwise: a regression."""
    verdicts = []
    for name, want in expected.items():
        known, got = recorded(head, name)
        if not known:
            message = f"{name} is pinned to {want!r} in {source} but this run did not record it"
            verdicts.append(Verdict(test_id, name, want, None, None, Outcome.UNAVAILABLE, message))
        elif got != want or type(got) is not type(want):
            message = (
                f"{name} {format_value(want)} -> {format_value(got)} (loader setting pinned in {source}); "
                f"if intended, update it: `{update}`"
            )
            verdicts.append(Verdict(test_id, name, want, got, None, Outcome.REGRESSED, message))
    return verdicts
