"""Lock the result in: a reviewable tune file keyed by the machine fingerprint, and thresholds in pyproject.toml.

**The tune file** (``perfsuite-tuned/<fingerprint key>/<target>.json``) holds the chosen knobs, where
the search started, every trial with its runs, its ratio and interval and its verdict, every
setting that was not tried and why, the rule, and the fingerprint. It is written atomically and never
replaces an existing file unless asked (a hard link, which refuses to overwrite, publishes it).

**The thresholds** go into ``[tool.perfsuite.thresholds.<machine class>."<test>"]``, the per-machine
bounds the plugin already applies over each test's marker (perfsuite.plugin.settings), from the runs
of the chosen setting:

* ``min_samples_per_s``: the lower one-sided :data:`PREDICTION` prediction bound for *one* run's
  samples/s (a t-bound on the logs of the runs, ``mean - t * sd * sqrt(1 + 1/n)``), not the
  interval of the mean, because the gate judges one run at a time;
* ``max_data_wait_frac``: the upper bound of the same kind for the share of the window spent waiting
  for batches, written only when it is below 1 (a bound of 1 can never fail);
* ``tuned``: the knobs chosen, so a failing bound names each one a later change undid.

pyproject.toml is rewritten with tomlkit, so every other line, comment and table stays as it was;
bounds already there for that test are replaced only when asked.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfsuite.core.tmpfiles import write_json_atomic, write_text_atomic
from perfsuite.core.toml import tomllib
from perfsuite.tools.tune.records import RunRecord
from perfsuite.tools.tune.targets import TuneError

PREDICTION = 0.99
MIN_RUNS = 3
TUNED_KEY = "tuned"  # the key perfsuite.plugin.settings reads (TUNED_KEY there; checked by tests/unit/test_tune*.py)


def _prediction_half_width(values: Sequence[float], confidence: float) -> tuple[float, float]:
    """(mean, t * sd * sqrt(1 + 1/n)): a one-sided ``confidence`` prediction bound's distance from the mean."""
    from scipy.stats import t

    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, float(t.ppf(confidence, n - 1)) * sd * math.sqrt(1.0 + 1.0 / n)


def _floor(x: float, digits: int = 4) -> float:
    scale = 10 ** (digits - 1 - math.floor(math.log10(abs(x)))) if x else 1
    return math.floor(x * scale) / scale


def _ceil(x: float, digits: int = 3) -> float:
    scale = 10 ** (digits - 1 - math.floor(math.log10(abs(x)))) if x else 1
    return math.ceil(x * scale) / scale


def thresholds_from(runs: Sequence[RunRecord], confidence: float = PREDICTION) -> tuple[dict[str, float], list[str]]:
    """The bounds the chosen setting's runs support, and a note for each bound not written."""
    notes: list[str] = []
    speeds = [float(r.samples_per_s) for r in runs if r.ok and r.samples_per_s]
    if len(speeds) < MIN_RUNS:
        return {}, [f"no thresholds: {len(speeds)} successful run(s) of the chosen setting, {MIN_RUNS} needed"]
    bounds: dict[str, float] = {}
    mean, half = _prediction_half_width([math.log(x) for x in speeds], confidence)
    bounds["min_samples_per_s"] = _floor(math.exp(mean - half))
    waits = [float(r.data_wait_frac) for r in runs if r.ok and r.data_wait_frac is not None]
    if len(waits) >= MIN_RUNS:
        mean_w, half_w = _prediction_half_width(waits, confidence)
        upper = max(mean_w + half_w, max(waits))
        if upper < 1.0:
            bounds["max_data_wait_frac"] = min(1.0, _ceil(upper))
        else:
            notes.append(
                f"max_data_wait_frac not written: its {confidence:.0%} bound ({upper:.2f}) reaches 1, which no run "
                "can exceed"
            )
    else:
        notes.append("max_data_wait_frac not written: the runs did not measure data wait")
    return bounds, notes


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:120] or "target"


def tune_file_path(root: Path, fingerprint_key: str, target: str) -> Path:
    return Path(root) / fingerprint_key / f"{slug(target)}.json"


def write_tune_file(path: Path, payload: Mapping[str, Any], overwrite: bool) -> Path:
    """Atomically; an existing file is replaced only when ``overwrite``."""
    if path.exists() and not overwrite:
        raise TuneError(f"{path} exists (an earlier tuning of this target on this machine); pass --force to replace it")
    try:
        return write_json_atomic(path, dict(payload), publish=os.replace if overwrite else os.link)
    except FileExistsError:
        raise TuneError(f"{path} appeared while tuning; pass --force to replace it") from None


def write_thresholds(
    pyproject: Path,
    machine: str,
    test_key: str,
    bounds: Mapping[str, float],
    tuned: Mapping[str, Any],
    source: str,
    overwrite: bool,
) -> str:
    """Set the test's bounds and tuned knobs under ``[tool.perfsuite.thresholds.<machine>]``; the rest stays."""
    import tomlkit

    text = pyproject.read_text(encoding="utf-8") if pyproject.is_file() else ""
    try:
        doc = tomlkit.parse(text)
    except Exception as exc:  # noqa: BLE001 - tomlkit's parse errors have no common base but Exception
        raise TuneError(f"{pyproject} is not valid TOML ({exc}); fix it, or pass --no-thresholds") from None
    tables = [("tool", True), ("perfsuite", False), ("thresholds", True), (machine, True), (test_key, False)]
    node: Any = doc
    for name, super_table in tables:
        if name not in node:
            node[name] = tomlkit.table(is_super_table=super_table)
        node = node[name]
        if not isinstance(node, dict):
            raise TuneError(f"{pyproject}: {name} is not a table; the thresholds go in a table there")
    values: dict[str, Any] = {**bounds, TUNED_KEY: {k: v for k, v in tuned.items() if v is not None}}
    clashes = [f"{k} = {node[k]!r}" for k, v in values.items() if k in node and _plain(node[k]) != v]
    if clashes and not overwrite:
        raise TuneError(
            f"{pyproject} already bounds {test_key!r} on {machine!r} ({'; '.join(clashes)}); pass --force to "
            "replace those values, or --no-thresholds to leave pyproject.toml alone"
        )
    node.comment(f"perfsuite tune: {source}")
    for key, value in values.items():
        if key == TUNED_KEY:
            inline = tomlkit.inline_table()
            inline.update(value)
            node[key] = inline
        else:
            node[key] = value
    out = tomlkit.dumps(doc)
    tomllib.loads(out)  # what the plugin will read must parse
    write_text_atomic(pyproject, out)
    return f"[tool.perfsuite.thresholds.{_key(machine)}.{_key(test_key)}] in {pyproject}"


def _plain(value: Any) -> Any:
    return value.unwrap() if hasattr(value, "unwrap") else value


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else f'"{name}"'
