"""``perfsuite compare BASE HEAD``: verdicts for two stored runs, without pytest or torch.

BASE and HEAD are each a JSON file (a baseline file, or a bare Result as
``Result.to_json`` writes it) or a directory of them, searched recursively
and matched by test id. A bare Result file's test id is its file stem. A base
file holding several runs (``--perfsuite-save``, ``perfsuite run --repeat K
--out``) is judged with all of them: step times between runs from 3 on.
Exit status: 0 nothing regressed, 1 something regressed, 2 bad input.
"""

from __future__ import annotations

from pathlib import Path

from perfsuite.core.results import Result, read_json_file
from perfsuite.errors import PerfsuiteError, ResultError
from perfsuite.jobs.script import ran_a_script
from perfsuite.judge.baselines import parse_baseline, parse_baseline_runs
from perfsuite.judge.engine import compare_results
from perfsuite.judge.verdict import DEFAULT_ALPHA, DEFAULT_FACTOR, Outcome, Verdict


def load_file(path: Path) -> tuple[str, Result]:
    """(test id, Result) from a baseline file or a bare Result file."""
    test_id, runs = load_runs(path)
    return test_id, runs[-1]


def load_runs(path: Path) -> tuple[str, list[Result]]:
    """(test id, every run the file holds, oldest first): a baseline file's ``runs`` (``--perfsuite-save``,
    ``perfsuite run --repeat K --out``), else its one Result."""
    data = read_json_file(path, "file")
    if isinstance(data, dict) and "result" in data and "test_id" in data:
        test_id, _ = parse_baseline(data, path)
        return test_id, parse_baseline_runs(data, path)
    return _bare(path, data)


def _bare(path: Path, data: object) -> tuple[str, list[Result]]:
    try:
        return Path(path).stem, [Result.from_dict(data)]
    except ResultError as exc:
        raise ResultError(f"{path}: {exc}; pass a Result (Result.to_json) or baseline JSON file") from exc


def result_like(data: object) -> bool:
    """Whether decoded JSON is meant to be a Result or a baseline file (damaged or not), by its keys."""
    return isinstance(data, dict) and (
        {"result", "test_id"} & set(data) != set() or {"metrics", "fingerprint"} <= set(data)
    )


def load_side(path: Path, notes: list[str] | None = None) -> dict[str, Result]:
    """Test id -> Result (the newest run) for one side of the comparison (a file or a directory tree)."""
    return {test_id: runs[-1] for test_id, runs in load_side_runs(path, notes).items()}


def load_side_runs(path: Path, notes: list[str] | None = None) -> dict[str, list[Result]]:
    """Test id -> every run held (oldest first) for one side of the comparison (a file or a directory tree).

    In a directory, JSON that is no Result or baseline at all (the committed exact file under
    ``baselines/exact/``, a tool's own file) is skipped with a note in ``notes``; a Result or baseline
    that cannot be read is an error naming the file.
    """
    from perfsuite.core.schema import input_problem

    path = Path(path)
    problem = input_problem(path, directory_ok=True)  # /dev/null, an empty file and a missing path each say so
    if problem:
        raise PerfsuiteError(f"{path} {problem}; pass a Result JSON file or a baselines directory")
    if path.is_file():
        test_id, runs = load_runs(path)
        return {test_id: runs}
    found: dict[str, tuple[Path, list[Result]]] = {}
    for file in sorted(p for p in path.rglob("*.json") if not p.name.startswith(".")):
        data = read_json_file(file, "file")
        if not result_like(data):
            if notes is not None:
                notes.append(f"skipped {file}: not a Result or baseline file")
            continue
        test_id, runs = load_runs(file)
        if test_id in found:
            raise PerfsuiteError(
                f"{path} holds {test_id!r} twice ({found[test_id][0]} and {file}), probably under two "
                f"fingerprints; point at one fingerprint directory instead, e.g. {file.parent}"
            )
        found[test_id] = (file, runs)
    if not found:
        raise PerfsuiteError(f"{path} holds no .json result files; pass a baselines directory or a Result file")
    return {test_id: runs for test_id, (_, runs) in found.items()}


def compare_sides(
    base: dict[str, Result],
    head: dict[str, Result],
    factor: float,
    alpha: float,
    force: bool,
    base_runs: dict[str, list[Result]] | None = None,
) -> list[Verdict]:
    """Verdicts for every test id on either side; one on a single side is new / unavailable. ``base_runs``:
    every run a base file holds, judged between runs where there are enough (judge.engine.compare_results)."""
    verdicts: list[Verdict] = []
    for test_id in sorted(set(base) | set(head)):
        if test_id not in base:
            verdicts.append(Verdict(test_id, "*", None, None, None, Outcome.NEW, "no baseline for this test"))
        elif test_id not in head:
            verdicts.append(
                Verdict(
                    test_id,
                    "*",
                    None,
                    None,
                    None,
                    Outcome.UNAVAILABLE,
                    "in the baseline but not in head: was the test removed or skipped?",
                )
            )
        else:
            runs = (base_runs or {}).get(test_id, [])
            verdicts += compare_results(
                base[test_id], head[test_id], test_id, factor=factor, alpha=alpha, force=force, base_runs=runs
            )
    return verdicts


def compare_paths(
    base: Path, head: Path, factor: float = DEFAULT_FACTOR, alpha: float = DEFAULT_ALPHA, force: bool = False
) -> list[Verdict]:
    """Verdicts of HEAD against BASE; each a Result/baseline JSON file or a directory of them."""
    return judge_paths(Path(base), Path(head), factor, alpha, force)[0]


def judge_paths(
    base: Path, head: Path, factor: float, alpha: float, force: bool, notes: list[str] | None = None
) -> tuple[list[Verdict], dict]:
    """(verdicts, the head Results by test id): for the command, which also charts the heads."""
    if base.exists() and head.exists() and base.is_dir() != head.is_dir():
        raise PerfsuiteError(f"compare a file with a file or a directory with a directory; got {base} and {head}")
    runs, heads = load_side_runs(base, notes), load_side(head, notes)
    bases = {test_id: held[-1] for test_id, held in runs.items()}  # the newest run of each
    if head.is_file():  # two files: the user paired them, whatever their test ids
        (_, b), (test_id, h) = next(iter(bases.items())), next(iter(heads.items()))
        held = next(iter(runs.values()))
        if test_id == head.stem and ran_a_script(h):  # a bare Result of perfsuite exec: named by its command
            test_id = h.workload
        if notes is not None:
            notes += contention_notes({test_id: b}, {test_id: h})
        return compare_results(b, h, test_id, factor=factor, alpha=alpha, force=force, base_runs=held), heads
    if notes is not None:
        notes += contention_notes(bases, heads)
    return compare_sides(bases, heads, factor, alpha, force, runs), heads


def contention_notes(bases: dict[str, Result], heads: dict[str, Result]) -> list[str]:
    """Per test compared, both runs' contention (perfsuite.judge.contention), where either side recorded it."""
    from perfsuite.judge.contention import load_of

    out = []
    for test_id in sorted(set(bases) & set(heads)):
        b, h = load_of(bases[test_id]), load_of(heads[test_id])
        if b.foreign is not None or h.foreign is not None:
            out.append(f"{test_id}: contention: head run: {h.describe()}; base: {b.describe()}")
    return out
