"""Numbers for people: ``2.69 s``, ``41.7 ms``, ``1.2 GB``, ``24.3%``, in one place for every report.

Each figure keeps three significant digits and moves to the unit that reads best
(milliseconds past a thousand become seconds, megabytes past a thousand gigabytes),
never an exponent. The units are the metric registry's (``perfsuite.core.metrics``):
``ms``, ``ms/step``, ``s``, ``MB``, ``bytes/step``, ``FLOP/step``, ``fraction``, ``x``
and the counts; an unknown unit is written after the figure as it is.
"""

from __future__ import annotations

import math
from typing import Any

# (threshold, divisor, prefix) from the largest: the first whose threshold the value reaches is used.
_DECIMAL = ((1e12, 1e12, "T"), (1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e3, 1e3, "k"))


def sig(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits without an exponent: 2.69, 41.7, 874, 15273, 0.00131."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    text = f"{round(value, decimals):.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def duration_ms(ms: float) -> str:
    """A duration given in milliseconds: ``41.7 ms``, ``2.69 s``, ``3 min 12 s``, ``850 µs``."""
    if abs(ms) >= 60_000:
        minutes, seconds = divmod(abs(ms) / 1e3, 60)
        return f"{'-' if ms < 0 else ''}{int(minutes)} min {seconds:.0f} s"
    if abs(ms) >= 1e3:
        return f"{sig(ms / 1e3)} s"
    if 0 < abs(ms) < 0.1:
        return f"{sig(ms * 1e3)} µs"
    return f"{sig(ms)} ms"


def _prefixed(value: float, unit: str) -> str:
    for threshold, divisor, prefix in _DECIMAL:
        if abs(value) >= threshold:
            return f"{sig(value / divisor)} {prefix}{unit}"
    return f"{sig(value)} {unit}"


def size_mb(mb: float) -> str:
    """An amount given in megabytes: ``874 MB``, ``1.2 GB``, ``512 kB``."""
    if abs(mb) >= 1e3:
        return f"{sig(mb / 1e3, 2 if abs(mb) < 1e4 else 3)} GB"
    if 0 < abs(mb) < 1:
        return f"{sig(mb * 1e3)} kB"
    return f"{sig(mb)} MB"


def human(value: Any, unit: str = "", counts: bool = True) -> str:
    """``value`` in ``unit`` (a metric registry unit) as people read it; ``-`` for None, yes/no for a flag.

    ``counts=False`` is for a column headed by the metric's name: it leaves a count's unit out (``2``, not
    ``2 syncs/step``) and the ``/step`` or ``/sample`` the name already says (``131 kB``, not ``131 kB/step``).
    """
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, float) and math.isnan(value):
        return "-"
    base, _, per = unit.partition("/")
    suffix = f"/{per}" if per and counts else ""
    if base == "ms":
        return duration_ms(float(value)) + suffix
    if base == "s":
        return duration_ms(float(value) * 1e3) + suffix
    if base == "MB":
        return size_mb(float(value)) + suffix
    if base == "bytes":
        return _prefixed(float(value), "B") + suffix
    if base == "FLOP":
        return _prefixed(float(value), "FLOP") + suffix
    if unit == "fraction":
        return f"{sig(float(value) * 100)}%"
    if unit == "x":
        return f"x{float(value):.2f}"
    if base == "samples" and per == "s":
        text = f"{float(value):,.0f}" if abs(value) >= 100 else sig(float(value))
        return f"{text} samples/s" if counts else text
    if isinstance(value, int) or float(value).is_integer():
        text = f"{int(value):,}" if abs(value) >= 1e4 else str(int(value))
    else:
        text = sig(float(value))
    return f"{text} {unit}".rstrip() if counts else text


def metric_value(name: str, value: Any, counts: bool = True) -> str:
    """A metric's value in its registry unit (:func:`human`); a name the registry does not know, as is."""
    from perfsuite.core import metrics

    spec = metrics.find(name)
    return human(value, spec.unit if spec is not None else "", counts)
