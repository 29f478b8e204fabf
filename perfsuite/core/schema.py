"""The declared schemas of the files perfsuite reads back: a Result and the committed exact file (pydantic).

:mod:`perfsuite.core.results` reads a Result field by field (types, NaN, huge integers); this module
declares what the values may *be*, so a file that parses but cannot be true is refused too, naming
the field: a negative ``step_ms`` or samples/s, a fraction above 1, a metric name perfsuite does not
know, an exact file whose ``device``/``torch`` header says something other than its file name.
:func:`input_problem` tells apart the inputs that are no JSON file at all: a missing path,
``/dev/null`` (a device), an empty file, a directory where a file was needed.
"""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError

from perfsuite.core import metrics as registry
from perfsuite.errors import ResultError

# A fraction computed as a ratio of two sums may land a rounding error above 1.
FRACTION_SLACK = 1e-9
Number = StrictInt | StrictFloat
NonNegative = Annotated[Number, Field(ge=0)]


class MetricSchema(BaseModel):
    """One metric as a Result stores it; its value's range comes from the metric's declaration."""

    model_config = ConfigDict(extra="forbid")

    value: StrictBool | Number | StrictStr | None
    unit: StrictStr = ""
    reason: StrictStr | None = None
    detail: dict[str, Any] = {}


class FingerprintSchema(BaseModel):
    model_config = ConfigDict(extra="allow")

    device: StrictStr
    gpu_count: Annotated[StrictInt, Field(ge=0)]
    torch: StrictStr


class PhaseSchema(BaseModel):
    """One phase of a run (results.Phase): times cannot be negative."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[StrictStr, Field(min_length=1)]
    wall_s: NonNegative
    cpu_s: NonNegative


class ResultSchema(BaseModel):
    """A Result as ``Result.to_json`` writes it (schema_version 1)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1]
    workload: Annotated[StrictStr, Field(min_length=1)]
    scale: Annotated[StrictStr, Field(min_length=1)]
    created: StrictStr
    batch_size: Annotated[StrictInt, Field(ge=1)]
    steps: Annotated[StrictInt, Field(ge=1)]
    warmup: Annotated[StrictInt, Field(ge=0)]
    knobs: dict[str, StrictBool | Number | StrictStr | None]
    metrics: dict[str, MetricSchema]
    samples: dict[str, list[NonNegative]]
    timeline: dict[str, list[Number]] = {}
    notes: list[StrictStr] = []
    fingerprint: FingerprintSchema
    knob_sources: dict[str, StrictStr] = {}
    ranks: list[dict[str, Any]] = []
    environment: dict[str, Any] = {}  # what the machine was doing: contention (probes/contention.py)
    script: dict[str, Any] | None = None  # where perfsuite stopped a user's script (results.ScriptStop)
    phases: list[PhaseSchema] | None = None  # each phase's wall and CPU time (results.PhaseTimes)


class ExactFileSchema(BaseModel):
    """The committed exact file (``baselines/exact/<device>__torch-<minor>.json``); schema 1 had no header."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1, 2]
    device: StrictStr | None = None
    torch: StrictStr | None = None
    tests: dict[str, dict[str, StrictBool | Number | StrictStr | None]]
    breakdown: dict[str, dict[str, dict[str, Number]]] = {}
    settings: dict[str, dict[str, StrictBool | Number | StrictStr | None]] = {}  # loader settings pinned per test
    libraries: dict[str, StrictStr | None] | None = None  # versions the loader's counters were recorded with


def _where(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("int", "float", "bool", "str", "none") or "[" in str(part) or str(part).startswith("constrained"):
            continue  # pydantic's name of a union member, not a field
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _first_error(exc: ValidationError) -> tuple[str, str, Any]:
    """(field path, what it must be, the value) of the error a reader should fix first."""
    errors = exc.errors(include_url=False)
    # In a union, pydantic reports each member's complaint: keep the first field's most telling one.
    first = errors[0]
    field = _where(tuple(first["loc"]))
    same = [e for e in errors if _where(tuple(e["loc"])) == field]
    ranged = [e for e in same if e["type"] in ("greater_than_equal", "less_than_equal", "greater_than")]
    chosen = ranged[0] if ranged else first
    return field, chosen["msg"].replace("Input should be", "must be").lower(), chosen.get("input")


def _range_problem(name: str, value: Any) -> str | None:
    """What the metric's declaration allows its value to be: >= 0 always (times, rates, counts, bytes, ...),
    within [0, 1] for a fraction."""
    spec = registry.find(name)
    if spec is None or isinstance(value, (bool, str)) or value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return "must be finite"
    if value < 0:
        return f"must be >= 0 ({spec.unit or spec.kind}: a measurement cannot be negative)"
    if spec.unit == "fraction" and value > 1 + FRACTION_SLACK:
        return "must lie within [0, 1] (a fraction)"
    return None


def check_result(data: Any) -> None:
    """Refuse a decoded Result that does not fit :class:`ResultSchema` or whose values cannot be true; the
    ResultError names the field (``metrics.step_ms.value``) and what it must be."""
    try:
        ResultSchema.model_validate(data)
    except ValidationError as exc:
        field, must, value = _first_error(exc)
        raise ResultError(f"field {field!r} is {value!r:.60}; it {must}") from None
    for name, metric in data["metrics"].items():
        if registry.find(name) is None:
            raise ResultError(
                f"field 'metrics.{name}' is not a metric perfsuite knows (a typo, or a metric of a probe of yours: "
                "register it with perfsuite.core.metrics.register before reading); see docs/metrics.md"
            )
        problem = _range_problem(name, metric.get("value"))
        if problem:
            raise ResultError(f"field 'metrics.{name}.value' is {metric.get('value')!r}; it {problem}")
        negative = _negative_count(metric.get("detail") or {}, f"metrics.{name}.detail")
        if negative is not None:
            field, value = negative
            raise ResultError(f"field {field!r} is {value!r}; it must be >= 0 (a count cannot be negative)")


# A metric's detail is free-form, but a field named as a count (of samples, steps, calls...) is never negative.
_COUNT_WORDS = ("count", "samples", "steps", "calls", "batches", "epochs", "examples", "seen")


def _negative_count(detail: Any, where: str, depth: int = 0) -> tuple[str, Any] | None:
    """The first field of ``detail`` (nested tables and lists included) named as a count and holding a negative
    number: (its path, its value); None if there is none."""
    if depth > 6:
        return None
    items = detail.items() if isinstance(detail, dict) else enumerate(detail) if isinstance(detail, list) else ()
    for key, value in items:
        path = f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}"
        named = isinstance(key, str) and (key == "n" or key.startswith("n_") or any(w in key for w in _COUNT_WORDS))
        if named and isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
            return path, value
        found = _negative_count(value, path, depth + 1) if isinstance(value, (dict, list)) else None
        if found is not None:
            return found
    return None


def check_exact_file(data: Any, key: str) -> str | None:
    """What is wrong with a decoded exact file named ``<key>.json`` (None: nothing the schema sees).

    The header says which device and torch minor the values are for; a file copied under another
    machine's name (``cpu__torch-2.13.json`` holding ``cuda``'s values) would gate the wrong runs.
    """
    try:
        exact = ExactFileSchema.model_validate(data)
    except ValidationError as exc:
        field, must, value = _first_error(exc)
        return f"field {field!r} is {value!r:.60}; it {must}"
    device, _, torch = key.partition("__torch-")
    for field, said, named in (("device", exact.device, device), ("torch", exact.torch, torch)):
        if said is not None and said != named:
            return (
                f"field {field!r} is {said!r} but the file's name says {named!r} ({key}.json): a file copied from "
                "another device or torch version? move it to its own name"
            )
    return None


def input_problem(path: Path, *, directory_ok: bool = False) -> str | None:
    """Why ``path`` cannot be read as a JSON input file, in words that tell the cases apart (None: it can)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return "does not exist"
    except NotADirectoryError:
        return "does not exist (a part of its path is a file)"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISDIR(info.st_mode):
        return None if directory_ok else "is a directory, not a file"
    if not stat.S_ISREG(info.st_mode):
        return "is a device or pipe, not a file (/dev/null reads as nothing)"
    if info.st_size == 0:
        return "is empty (0 bytes): was it written by a run that was stopped?"
    if not os.access(path, os.R_OK):
        return "is not readable (permissions)"
    return None


def refuse_input(path: Path, what: str, *, directory_ok: bool = False, error: type = ResultError) -> None:
    problem = input_problem(Path(path), directory_ok=directory_ok)
    if problem:
        raise error(f"{what} {path} {problem}")
