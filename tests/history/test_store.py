"""The history store: one entry per commit+machine+test, atomic, safe under concurrent writers, and
unreadable entries named and skipped, never lost."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
from pathlib import Path

import pytest

from perfsuite.core import tmpfiles
from perfsuite.core.results import Fingerprint, Metric, Result
from perfsuite.tools.history.store import HistoryError, HistoryStore, commit_info, load_result_files

SHA = "a" * 40


FP = Fingerprint("cpu", None, 0, None, None, "2.13.0", None, "3.11", "Test CPU", 2, "linux")


def result(value: float = 1.0, workload: str = "train.py", step_ms: tuple[float, ...] = (10.0, 11.0, 9.5)) -> Result:
    return Result(
        workload=workload,
        scale="smoke",
        knobs={},
        metrics={"syncs_per_step": Metric("syncs_per_step", value)},
        samples={"step_ms": list(step_ms)},
        fingerprint=FP,
        batch_size=4,
        steps=len(step_ms),
        warmup=1,
    )


def test_a_run_is_recorded_once_per_commit_machine_and_test(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    first = store.record(result(1.0), SHA, 1000.0, "first")
    assert first is not None and first.is_file()
    assert store.record(result(2.0), SHA, 1000.0, "again") is None  # the first is kept
    entries = list(store.entries())
    assert [e.result.metric("syncs_per_step").value for e in entries] == [1.0]
    assert store.record(result(2.0, "other.py"), SHA, 1000.0) is not None  # another test: another entry
    assert len(list(store.entries())) == 2


def _record(root: str, barrier) -> bool:
    barrier.wait()
    return HistoryStore(Path(root)).record(result(), SHA, 1000.0) is not None


def test_two_processes_recording_at_once_leave_one_entry(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(2)
        with ctx.Pool(2) as pool:
            won = pool.starmap(_record, [(str(tmp_path), barrier)] * 2)
    assert sorted(won) == [False, True]
    assert len(list(HistoryStore(tmp_path).entries())) == 1
    assert not [p for p in tmp_path.rglob("*") if ".tmp" in p.name]  # no temporary left behind


def test_a_killed_recording_leaves_no_entry_and_its_temporary_is_swept(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    path = store.path_for(SHA, {"key": "cpu-x"}, "train.py")
    path.parent.mkdir(parents=True)
    # a partial write of a process that is gone (pid 999999999 runs nowhere), on this host
    leftover = path.parent / f".{path.stem}.tmp-{tmpfiles._host()}-999999999-abc.tmp"
    leftover.write_text('{"schema": 1, "commit"')
    assert list(store.entries()) == [] and store.problems == []
    store.record(result(), SHA, 1000.0)
    assert not leftover.exists()  # swept by the next write in that folder
    assert len(list(store.entries())) == 1


def test_a_corrupt_entry_is_named_and_skipped_and_kept(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    store.record(result(), SHA, 1000.0)
    bad = tmp_path / "bb" / ("b" * 40) / "cpu__t.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("{not json")
    entries = list(store.entries())
    assert len(entries) == 1
    assert len(store.problems) == 1 and str(bad) in store.problems[0]
    assert bad.read_text() == "{not json"  # nothing deleted


def test_a_commit_that_is_not_a_sha_is_refused(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="not a git sha"):
        HistoryStore(tmp_path).record(result(), "main", 1000.0)


def test_commit_info_reads_git_and_names_a_bad_revision(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "f").write_text("x")
    git = ["git", "-C", str(tmp_path), "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run([*git, "add", "f"], check=True)
    subprocess.run([*git, "commit", "-qm", "the subject"], check=True)
    sha, when, subject = commit_info(tmp_path)
    assert len(sha) == 40 and when > 0 and subject == "the subject"
    with pytest.raises(HistoryError, match="cannot read commit 'nope'"):
        commit_info(tmp_path, "nope")


def test_result_files_are_read_from_folders_and_a_bad_one_is_named(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(result().to_json())
    assert len(load_result_files([tmp_path])) == 1
    (tmp_path / "b.json").write_text(json.dumps({"schema_version": 1}))
    with pytest.raises(HistoryError, match="b.json: not a perfsuite Result"):
        load_result_files([tmp_path])
