"""Counts that depend on library versions: compared only between runs made with the same ones.

The loader's exact counters (:mod:`perfsuite.probes.loadercount`) count the calls, decodes and bytes of
the user's code *and* of the libraries it calls: a Pillow upgrade changes them with no change of the
user's. Each such metric carries ``detail["libraries"]`` (and the committed exact file a ``libraries``
header); where the two sides' versions differ the verdict is *inconclusive*, naming the versions, never a
regression.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfsuite.judge.verdict import Outcome, Verdict


def differences(base: Mapping[str, Any], head: Mapping[str, Any]) -> list[str]:
    """``Pillow 12.0.0 -> 13.0.0`` for each library whose version differs (absent: ``none``)."""
    return [
        f"{name} {base.get(name) or 'none'} -> {head.get(name) or 'none'}"
        for name in sorted(set(base) | set(head))
        if base.get(name) != head.get(name)
    ]


def mismatch(
    test_id: str, name: str, base: Mapping[str, Any] | None, head: Mapping[str, Any] | None, where: str
) -> Verdict | None:
    """An inconclusive verdict when the two sides counted with other library versions; None when they agree
    (or the metric does not depend on them: neither side records any)."""
    if base is None and head is None:
        return None
    if base is None or head is None:
        side = "the base" if base is None else "this run"
        why = f"{side} does not say which library versions it counted with"
    else:
        moved = differences(base, head)
        if not moved:
            return None
        why = f"counted with other library versions ({', '.join(moved)})"
    return Verdict(
        test_id,
        name,
        None,
        None,
        None,
        Outcome.INCONCLUSIVE,
        f"{name}: not compared: {why}; these counts depend on the libraries' code, so compare runs made with the "
        f"same versions{where}",
    )
