"""Seeded fuzz over interrupt points and file corruptions (issue 26.5), on real plugin sessions.

Interrupts: a Ctrl-C (KeyboardInterrupt, as SIGINT's handler raises it) lands at a drawn point of a
session: in the warm-up, the window, the speed-of-light or the observed steps of a user's job with
DataLoader workers, while a baseline is being saved, or while the reports are written.
Corruptions: the committed exact file or a stored baseline is damaged in a drawn way.

The invariant, every time: the session exits non-zero (an interrupt: 2; a damaged file: the test
fails), no traceback reaches the output, nothing is half-written (no temporary left, every JSON file
parses, the committed exact file is never rewritten by an interrupted session nor touched by a
comparing one), and no process is left behind. Hypothesis draws the cases, derandomized so CI sees
the same ones (scripts/interrupt_trials.py sends real SIGINTs to a real session).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from perfsuite_pytester import FAST

pytest_plugins = ["pytester"]

JOB = """
    import signal

    import torch
    from torch.utils.data import DataLoader, Dataset

    import perfsuite

    INTERRUPT_AT = int(__import__("os").environ.get("FUZZ_INTERRUPT_AT", "0"))
    INTERRUPT_WORKERS = int(__import__("os").environ.get("FUZZ_INTERRUPT_WORKERS", "-1"))


    class Squares(Dataset):
        def __len__(self):
            return 16

        def __getitem__(self, i):
            return torch.full((4,), float(i)), torch.tensor(i % 2)


    def job(num_workers):
        model = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        calls = [0]

        def step(batch):
            calls[0] += 1
            if calls[0] == INTERRUPT_AT and num_workers == INTERRUPT_WORKERS:
                signal.raise_signal(signal.SIGINT)  # Ctrl-C while this step runs
            x, y = batch
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        loader = DataLoader(Squares(), batch_size=4, num_workers=num_workers)
        return perfsuite.Job(step=step, model=model, optimizer=opt, loader=loader, name="squares")


    def test_a(perf_run):
        perf_run(job(2))


    def test_b(perf_run):
        perf_run(job(0))
"""
# With --perfsuite-warmup 1 --perfsuite-steps 5 --perfsuite-observe-steps 1: per test 1 warm-up call, 5 window
# calls, 6 speed-of-light calls (one untimed) and 1 observed call: 13 step calls.
STEP_POINTS = {"warm-up": 1, "window": 2, "speed of light": 7, "observe": 13}
RUN = (*FAST, "--perfsuite-warmup", "1", "--perfsuite-observe-steps", "1", "-p", "no:randomly", "-W", "ignore")
FUZZ = settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def assert_nothing_half_written(root: Path) -> None:
    for path in root.rglob("*"):
        assert ".tmp-" not in path.name, f"a temporary was left behind: {path}"
        if path.suffix == ".json" and path.is_file():
            json.loads(path.read_text(encoding="utf-8"))  # whole, or not there at all


def fresh(project: pytest.Pytester, name: str) -> Path:
    out = project.path / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    return out


@pytest.mark.slow
@FUZZ
@example(point="save", which_test="test_a", offset=0)  # every point at least once, whatever is drawn
@example(point="report", which_test="test_a", offset=1)
@example(point="observe", which_test="test_b", offset=0)
@example(point="speed of light", which_test="test_a", offset=2)
@given(
    point=st.sampled_from([*STEP_POINTS, "save", "report"]),
    which_test=st.sampled_from(["test_a", "test_b"]),
    offset=st.integers(0, 3),
)
def test_an_interrupt_anywhere_exits_non_zero_with_nothing_half_written_and_no_process_left(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, point: str, which_test: str, offset: int
) -> None:
    project.makepyfile(test_fuzz=JOB)
    out_dir = fresh(project, "out")
    exact = fresh(project, "exact")
    (exact / "cpu__torch-2.13.json").write_text('{"schema_version": 2, "tests": {}}\n', encoding="utf-8")
    committed = (exact / "cpu__torch-2.13.json").read_bytes()
    before = children()
    monkeypatch.delenv("FUZZ_INTERRUPT_AT", raising=False)
    if point in STEP_POINTS:
        window = {"warm-up": 0, "window": 4, "speed of light": 5, "observe": 0}[point]
        at = STEP_POINTS[point] + min(offset, window)  # each job counts its own step calls
        monkeypatch.setenv("FUZZ_INTERRUPT_AT", str(at))
        monkeypatch.setenv("FUZZ_INTERRUPT_WORKERS", "2" if which_test == "test_a" else "0")
    else:
        import perfsuite.core.tmpfiles as tmpfiles

        real_fsync, hits = os.fsync, [0]
        target = str(out_dir / "baselines") if point == "save" else str(out_dir / ".report")

        def interrupted_fsync(fd: int) -> None:
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/self/fd/{fd}").startswith(target):
                    hits[0] += 1
                    if hits[0] == 1 + offset % 2:
                        signal.raise_signal(signal.SIGINT)  # Ctrl-C while the file is being written
            real_fsync(fd)

        monkeypatch.setattr(tmpfiles.os, "fsync", interrupted_fsync)
    result = project.runpytest_inprocess(
        *RUN,
        "test_fuzz.py",
        f"--perfsuite-baselines={out_dir / 'baselines'}",
        f"--perfsuite-exact-dir={exact}",
        "--perfsuite-update-exact",
        "--perfsuite-save",
        f"--perfsuite-report-json={out_dir / 'report.json'}",
        f"--perfsuite-report-md={out_dir / 'report.md'}",
        no_reraise_ctrlc=True,
    )
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, text  # non-zero: 2, as pytest reports an interrupt
    assert "Traceback" not in result.stdout.str().split("= perfsuite =")[-1]
    assert_nothing_half_written(project.path)
    if point != "report":  # every test had finished before the reports: the exact file may be rewritten whole
        assert (exact / "cpu__torch-2.13.json").read_bytes() == committed  # never from part of a session
    report = out_dir / "report.json"
    if report.exists():
        assert json.loads(report.read_text())["status"] in ("partial", "complete")
        if point != "report":
            assert json.loads(report.read_text())["status"] == "partial"
    assert children() == before


CORRUPTIONS = ("truncate", "flip-byte", "nan", "string-count", "negative", "drop-entry", "not-an-object")


def corrupt(path: Path, how: str, at: int) -> None:
    text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    if how == "truncate":
        path.write_text(text[: at % max(len(text) - 1, 1)], encoding="utf-8")
        return
    if how == "flip-byte":
        raw = bytearray(path.read_bytes())
        raw[at % len(raw)] ^= 0xFF
        path.write_bytes(bytes(raw))
        return
    tests = data.get("tests")
    if tests is not None:  # the committed exact file
        test_id = sorted(tests)[at % len(tests)]
        if how == "drop-entry":
            del tests[test_id]
        elif how == "not-an-object":
            tests[test_id] = [1, 2]
        else:
            value = {"nan": float("nan"), "string-count": "12", "negative": -4}[how]
            tests[test_id]["ops_per_step"] = value
    else:  # a stored timing baseline
        metrics = data["result"]["metrics"]
        name = sorted(metrics)[at % len(metrics)]
        if how == "drop-entry":
            del data["result"]
        elif how == "not-an-object":
            metrics[name] = [1, 2]
        else:
            metrics[name]["value"] = {"nan": float("nan"), "string-count": "12", "negative": -4}[how]
    path.write_text(json.dumps(data), encoding="utf-8")  # json.dumps writes NaN as the bare word NaN


@pytest.mark.slow
@FUZZ
@example(target="exact", how="nan", at=0)
@example(target="baseline", how="truncate", at=5)
@given(target=st.sampled_from(["exact", "baseline"]), how=st.sampled_from(CORRUPTIONS), at=st.integers(0, 10_000))
def test_a_damaged_file_fails_with_a_message_and_is_left_as_it_was(
    project: pytest.Pytester, target: str, how: str, at: int
) -> None:
    project.makepyfile(
        test_fuzz="""
        def test_a(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True)


        def test_b(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True, batch_size=2)
        """
    )
    root = fresh(project, "stored")
    paths = (f"--perfsuite-baselines={root / 'baselines'}", f"--perfsuite-exact-dir={root / 'exact'}")
    made = project.runpytest_inprocess(*RUN, "test_fuzz.py", *paths, "--perfsuite-update-exact", "--perfsuite-save")
    made.assert_outcomes(passed=2)
    files = (
        sorted((root / "exact").glob("*.json")) if target == "exact" else sorted((root / "baselines").rglob("*.json"))
    )
    victim = files[at % len(files)]
    corrupt(victim, how, at)
    damaged = victim.read_bytes()
    before = children()
    result = project.runpytest_inprocess(
        *RUN, "test_fuzz.py", *paths, "--perfsuite-compare", "--perfsuite-factor", "50"
    )
    text = result.stdout.str()
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), text
    assert "Traceback" not in text and "INTERNALERROR" not in text
    if result.ret == pytest.ExitCode.OK:  # only a damage that left the same values can pass
        assert how == "flip-byte", text
    else:
        assert "baseline error" in text or "no committed exact values" in text or "exact" in text, text
    assert victim.read_bytes() == damaged  # comparing never rewrites what it read
    assert children() == before
