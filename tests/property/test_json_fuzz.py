"""Fuzzing the Result/baseline readers and `perfsuite compare` with generated and mutated JSON.

Whatever the bytes, the loader raises ResultError/BaselineError (never anything else), and the
command exits 0, 1 or 2 with no traceback; exit 2 names the file.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from perfsuite.cli.main import main
from perfsuite.core.results import Result, parse_json
from perfsuite.errors import BaselineError, ResultError
from perfsuite.judge.baselines import read_baseline_file

DATA = Path(__file__).resolve().parents[1] / "data" / "results"
BASE_RESULT = json.loads((DATA / "base.json").read_text(encoding="utf-8"))
BASELINE_FILE = json.loads((DATA / "baseline_file.json").read_text(encoding="utf-8"))
HUGE = "__HUGE_INT__"  # replaced by a 5,000-digit integer in the text (json.dumps refuses to write one)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.just(HUGE)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a node of a JSON tree, the root included."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            found += _paths(child, (*prefix, i))
    return found


@st.composite
def mutated(draw: st.DrawFn, valid: dict[str, Any]) -> Any:
    """A valid document with one node replaced, deleted or given an extra key."""
    doc = copy.deepcopy(valid)
    path = draw(st.sampled_from(_paths(doc)))
    if not path:
        return draw(json_values)
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    action = draw(st.sampled_from(["replace", "delete", "extra"]))
    if action == "replace":
        parent[path[-1]] = draw(json_values)
    elif action == "delete":
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[draw(st.text(max_size=6))] = draw(json_values)
    else:
        parent.append(draw(json_values))
    return doc


def _text(doc: Any) -> bytes:
    text = json.dumps(doc, allow_nan=True)
    return text.replace(json.dumps(HUGE), "9" * 5000).encode("utf-8")


@st.composite
def byte_mutated(draw: st.DrawFn, valid: dict[str, Any]) -> bytes:
    """The valid document's bytes, truncated, with bytes overwritten, or with bytes inserted."""
    raw = bytearray(_text(valid))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(raw) - 1))
        kind = draw(st.sampled_from(["truncate", "overwrite", "insert"]))
        if kind == "truncate":
            del raw[at:]
            if not raw:
                break
        elif kind == "overwrite":
            raw[at] = draw(st.integers(0, 255))
        else:
            raw[at:at] = draw(st.binary(min_size=1, max_size=4))
    return bytes(raw)


documents = st.one_of(
    json_values.map(_text),
    mutated(BASE_RESULT).map(_text),
    mutated(BASELINE_FILE).map(_text),
    byte_mutated(BASE_RESULT),
    byte_mutated(BASELINE_FILE),
    st.binary(max_size=64),
)

KNOWN_BAD = [
    b"\x89PNG\r\n\x1a\n\x00\xff\xfe garbage",
    _text({**BASE_RESULT, "samples": {"step_ms": [float("nan"), 1.0]}}),
    _text({**BASE_RESULT, "metrics": {**BASE_RESULT["metrics"], "step_ms": 3.5}}),
    _text({**BASE_RESULT, "batch_size": "32"}),
    _text({**BASE_RESULT, "steps": HUGE}),
    _text({**BASE_RESULT, "metrics": {"syncs_per_step": {"value": math.inf, "unit": "", "reason": None}}}),
]


def _check_loader(raw: bytes) -> None:
    with contextlib.suppress(ResultError):
        Result.from_dict(parse_json(raw, "fuzzed result"))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzzed.json"
        path.write_bytes(raw)
        with contextlib.suppress(BaselineError):
            read_baseline_file(path)


def _compare(base: bytes, head: bytes) -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "base.json").write_bytes(base)
        (Path(tmp) / "head.json").write_bytes(head)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["compare", str(Path(tmp) / "base.json"), str(Path(tmp) / "head.json")])
        return code, err.getvalue()


@pytest.mark.parametrize("raw", KNOWN_BAD, ids=["binary", "nan", "number-for-object", "string", "huge", "inf"])
def test_known_bad_documents_are_refused_naming_the_file_and_field(raw: bytes) -> None:
    code, err = _compare(raw, _text(BASE_RESULT))
    assert code == 2 and "base.json" in err and "Traceback" not in err
    with pytest.raises(ResultError):
        Result.from_dict(parse_json(raw, "x"))


@given(documents)
@example(KNOWN_BAD[0])
@example(KNOWN_BAD[4])
def test_the_loaders_raise_only_their_own_errors(raw: bytes) -> None:
    _check_loader(raw)


@given(documents, st.booleans())
def test_compare_exits_0_1_or_2_and_names_the_file_on_2(raw: bytes, as_head: bool) -> None:
    good = _text(BASE_RESULT)
    code, err = _compare(good, raw) if as_head else _compare(raw, good)
    assert code in (0, 1, 2)
    if code == 2:
        assert ("head.json" if as_head else "base.json") in err
