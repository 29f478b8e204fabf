"""Thresholds ("is this run good enough?"): one small check class per bound.

In the shape of pytest-benchmark's ``compute``/``fails``, parsed from keyword names
``min_<metric>``, ``max_<metric>`` or a flag (``amp_engaged=True``), for any registered
metric, a user's own included; and loader settings pinned by name (``num_workers=2``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perfsuite.core import metrics as registry
from perfsuite.core.results import Metric, Result
from perfsuite.errors import PerfsuiteError
from perfsuite.judge.settings import LOADER_SETTINGS, check_setting, recorded
from perfsuite.judge.verdict import Outcome, Verdict, format_value, value_ratio

# --------------------------------------------------------------------------- thresholds


@dataclass(frozen=True)
class Threshold:
    """A bound on one metric. ``compute`` reads the metric, ``fails`` judges its value."""

    metric: str
    bound: float | bool

    @property
    def name(self) -> str:
        raise NotImplementedError

    def compute(self, result: Result) -> Metric:
        return result.metric(self.metric)

    def fails(self, value: Any) -> bool:
        raise NotImplementedError

    def describe(self, value: Any) -> str:
        raise NotImplementedError

    def check(self, result: Result, test_id: str) -> Verdict:
        metric = self.compute(result)
        if not metric.available:
            return Verdict(
                test_id,
                self.metric,
                self.bound,
                None,
                None,
                Outcome.UNAVAILABLE,
                f"{self.metric} unavailable ({self.name}): {metric.reason}",
            )
        value = metric.value
        failed = self.fails(value)
        ratio = value_ratio(self.bound, value) if not isinstance(self.bound, bool) else None
        return Verdict(
            test_id,
            self.metric,
            self.bound,
            value,
            ratio,
            Outcome.FAIL if failed else Outcome.PASS,
            self.describe(value),
        )


@dataclass(frozen=True)
class AtLeast(Threshold):
    """``min_<metric>=bound``: fails below the bound."""

    @property
    def name(self) -> str:
        return f"min_{self.metric}"

    def fails(self, value: Any) -> bool:
        return float(value) < float(self.bound)

    def describe(self, value: Any) -> str:
        op = "<" if self.fails(value) else ">="
        return f"{self.metric} {format_value(value)} {op} {format_value(self.bound)}"


@dataclass(frozen=True)
class AtMost(Threshold):
    """``max_<metric>=bound``: fails above the bound."""

    @property
    def name(self) -> str:
        return f"max_{self.metric}"

    def fails(self, value: Any) -> bool:
        return float(value) > float(self.bound)

    def describe(self, value: Any) -> str:
        op = ">" if self.fails(value) else "<="
        return f"{self.metric} {format_value(value)} {op} {format_value(self.bound)}"


@dataclass(frozen=True)
class Equals(Threshold):
    """``<bool metric>=True|False``: fails when the metric differs."""

    @property
    def name(self) -> str:
        return self.metric

    def fails(self, value: Any) -> bool:
        return bool(value) is not bool(self.bound)

    def describe(self, value: Any) -> str:
        op = "!=" if self.fails(value) else "=="
        return f"{self.metric} {format_value(bool(value))} {op} {format_value(self.bound)}"


@dataclass(frozen=True)
class SettingPin(Threshold):
    """``num_workers=2``: a loader setting the run must have (:mod:`perfsuite.judge.settings`); fails on any other.

    ``bound`` is the pinned value (``None`` for ``prefetch_factor``'s torch default included).
    """

    bound: Any

    @property
    def name(self) -> str:
        return self.metric

    def check(self, result: Result, test_id: str) -> Verdict:
        known, value = recorded(result, self.metric)  # a value, None included (prefetch_factor's default)
        if not known:
            reason = result.knob_sources.get(self.metric) or "not in the Result's knobs"
            message = f"{self.metric} unavailable (pinned to {self.bound!r}): the run did not record it ({reason})"
            return Verdict(test_id, self.metric, self.bound, None, None, Outcome.UNAVAILABLE, message)
        outcome = Outcome.FAIL if self.fails(value) else Outcome.PASS
        return Verdict(test_id, self.metric, self.bound, value, None, outcome, self.describe(value))

    def fails(self, value: Any) -> bool:
        return bool(value != self.bound or type(value) is not type(self.bound))

    def describe(self, value: Any) -> str:
        if self.fails(value):
            return f"{self.metric} {format_value(self.bound)} -> {format_value(value)}: pinned to {self.bound!r}"
        return f"{self.metric} {format_value(value)} (pinned)"


def _setting_pin(name: str, bound: Any) -> SettingPin:
    """A marker's loader-setting pin, its value checked as the DataLoader argument would be."""
    problem = check_setting(name, bound)
    if problem:
        example = "True" if "True" in problem else "2"
        raise PerfsuiteError(f"{name}={bound!r:.40}: a pinned loader setting {problem}, e.g. {name}={example}")
    return SettingPin(name, bound)


def known_threshold_names() -> tuple[str, ...]:
    """Every bound a marker may name, from the metric registry (a user's registered metrics included)."""
    out: list[str] = []
    for spec in registry.all_specs():
        if spec.boundable == "flag":
            out.append(spec.name)
        elif spec.boundable == "range":
            out += [f"min_{spec.name}", f"max_{spec.name}"]
    return (*out, *LOADER_SETTINGS)


def parse_threshold(name: str, bound: Any) -> Threshold:
    """``parse_threshold("max_data_wait_frac", 0.05)`` -> AtMost("data_wait_frac", 0.05)."""
    if name in LOADER_SETTINGS:
        return _setting_pin(name, bound)
    spec = registry.find(name)
    if spec is not None and spec.boundable == "flag":
        if not isinstance(bound, bool):
            raise PerfsuiteError(f"{name}={bound!r}: {name} is a yes/no metric; write {name}=True or {name}=False")
        return Equals(name, bound)
    kind, _, metric = name.partition("_")
    target = registry.find(metric)
    if kind not in ("min", "max") or target is None or target.boundable != "range":
        raise PerfsuiteError(f"unknown threshold {name!r}; write one of: {', '.join(known_threshold_names())}")
    if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not math.isfinite(bound):
        raise PerfsuiteError(f"{name}={bound!r}: the bound must be a finite number, e.g. {name}=0.05")
    return AtLeast(metric, bound) if kind == "min" else AtMost(metric, bound)


PREDICT_FOR = "predict_for"  # not a bound: the GPU runner an input_efficiency bound speaks of (judge.starvation)


@dataclass(frozen=True)
class Predicted(Threshold):
    """A bound on ``input_efficiency`` for a named GPU runner: on that runner it reads the measured figure, anywhere
    else (a CPU CI run) the efficiency predicted for the runner (``predicted_input_efficiency``), and says so."""

    inner: Threshold = AtLeast("input_efficiency", 0.0)
    runner: str = ""

    @property
    def name(self) -> str:
        return self.inner.name

    def on_runner(self, result: Result) -> bool:
        from perfsuite.judge.starvation import runner_name

        return result.fingerprint.device == "cuda" and runner_name(result) == self.runner

    def compute(self, result: Result) -> Metric:
        return result.metric(self.metric if self.on_runner(result) else "predicted_input_efficiency")

    def fails(self, value: Any) -> bool:
        return self.inner.fails(value)

    def describe(self, value: Any) -> str:
        return self.inner.describe(value)

    def check(self, result: Result, test_id: str) -> Verdict:
        verdict = super().check(result, test_id)
        if self.on_runner(result):
            return verdict
        metric = self.compute(result)
        detail = metric.detail
        said = (
            f"{verdict.message}, predicted for {self.runner} from this run's loader: it feeds "
            f"{float(detail['supply_per_s']):.4g} samples/s there against the {float(detail['demand_per_s']):.4g} the "
            f"step consumes; limited by {detail['limiting']}"
            if metric.available and "supply_per_s" in detail
            else f"{verdict.message} (predicted for {self.runner})"
        )
        return dataclasses.replace(verdict, message=said)


def parse_thresholds(bounds: Mapping[str, Any]) -> tuple[Threshold, ...]:
    """Thresholds from keyword form, e.g. a marker's ``max_syncs_per_step=0, amp_engaged=True``.

    ``predict_for="nvidia-h200"`` is no bound: it makes the ``input_efficiency`` bounds speak of that GPU runner
    (:class:`Predicted`)."""
    runner = bounds.get(PREDICT_FOR)
    if runner is not None and (not isinstance(runner, str) or not runner):
        raise PerfsuiteError(f"{PREDICT_FOR}={runner!r}: name a GPU runner, e.g. {PREDICT_FOR}='nvidia-h200'")
    out = tuple(parse_threshold(name, bound) for name, bound in bounds.items() if name != PREDICT_FOR)
    if runner is None:
        return out
    return tuple(
        Predicted(t.metric, t.bound, inner=t, runner=runner) if t.metric == "input_efficiency" else t for t in out
    )


def check_thresholds(result: Result, test_id: str, thresholds: Sequence[Threshold]) -> list[Verdict]:
    return [t.check(result, test_id) for t in thresholds]
