"""The plugin under faults: no worker outlives its test, a Ctrl-C (even a swallowed one) stops the session with
reports marked partial and no exact file rewritten, OS errors and a worker's DatasetError are one line, marker
errors print once, the summary line counts errors, and skips leave no benchmark warning."""

from __future__ import annotations

import errno

import psutil
import pytest
from perfsuite_pytester import FAST, read_json, run

from perfsuite.core import tmpfiles

pytest_plugins = ["pytester"]

USER_JOB = """
    import os
    import time

    import psutil
    import torch
    from torch.utils.data import DataLoader, Dataset

    import perfsuite


    class Squares(Dataset):
        def __len__(self):
            return 16

        def __getitem__(self, i):
            return torch.full((4,), float(i)), torch.tensor(i % 2)


    def job(hang_step=False, interrupt_at=None):
        model = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        calls = [0]

        def step(batch):
            calls[0] += 1
            if hang_step and calls[0] >= 2:
                while True:
                    time.sleep(3600)
            if interrupt_at is not None and calls[0] == interrupt_at:
                raise KeyboardInterrupt  # what Ctrl-C raises at this point of the run
            x, y = batch
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        loader = DataLoader(Squares(), batch_size=4, num_workers=2)
        return perfsuite.Job(step=step, model=model, optimizer=opt, loader=loader, name="squares")
"""


def _full(path: object, *args: object, **kwargs: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device", str(path))


def children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def test_no_worker_outlives_a_failed_test(project):
    """Before: a failed test's 2 workers (a hung step's, still sleeping) lived on into the following tests."""
    project.makepyfile(
        USER_JOB
        + """

    def test_hung_step(perf_run):
        perf_run(job(hang_step=True))


    def test_next_sees_no_leftover_worker():
        left = [p for p in psutil.Process().children(recursive=True) if p.pid not in BEFORE]
        assert not left, left
    """.replace("BEFORE", repr(children()))
    )
    out = run(project, "--perfsuite-deadline-warmup", "3", "--perfsuite-deadline-floor", "3", "-p", "no:randomly")
    out.assert_outcomes(failed=1, passed=1)
    out.stdout.fnmatch_lines(["*the hang is in the step, at *test_no_worker_outlives_a_failed_test.py:* in step*"])
    assert "killed by signal" not in out.stdout.str()


def test_a_worker_left_running_by_a_test_is_stopped_and_reported(project):
    project.makepyfile(
        """
        import multiprocessing
        import time


        def test_leaks(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True)
            multiprocessing.get_context("fork").Process(target=time.sleep, args=(600,), daemon=True).start()
        """
    )
    before = children()
    out = run(project)
    assert children() == before
    out.stdout.fnmatch_lines(["*test_leaks: 1 worker process(es) were still running after the test (pids *)*"])


@pytest.mark.parametrize("where", ["warm-up", "window", "speed of light", "observe"])
def test_ctrl_c_in_a_run_stops_the_session_marks_reports_partial_and_rewrites_no_exact_file(project, where):
    """Before: reports read "3 pass" with nothing saying the session was cut short; the JSON was a bare list."""
    # step calls: warm-up 1, window 5, speed of light 1 untimed + 5, observe 1
    at = {"warm-up": 1, "window": 3, "speed of light": 9, "observe": 13}[where]
    project.makepyfile(
        USER_JOB
        + f"""

    def test_first(perf_run):
        perf_run(job())


    def test_interrupted(perf_run):
        perf_run(job(interrupt_at={at}))


    def test_never_reached(perf_run):
        perf_run(job())
    """
    )
    before = children()
    out = project.runpytest_inprocess(
        *FAST,
        "--perfsuite-update-exact",
        "--perfsuite-report-json",
        "v.json",
        "--perfsuite-report-md",
        "v.md",
        "--perfsuite-warmup",
        "1",
        "--perfsuite-observe-steps",
        "1",
        "-p",
        "no:randomly",
        no_reraise_ctrlc=True,  # the inner session's Ctrl-C is its own, not this session's
    )
    assert out.ret == pytest.ExitCode.INTERRUPTED
    report = read_json(project.path / "v.json")
    assert report["status"] == "partial" and report["reason"].startswith("interrupted (Ctrl-C)")
    assert (project.path / "v.md").read_text().startswith("> **PARTIAL REPORT**")
    assert not (project.path / "baselines").exists()  # never rewritten from part of a session
    out.stdout.fnmatch_lines(["*did not rewrite the exact baselines: the session was interrupted*"])
    assert f"interrupted (Ctrl-C) in the {where} phase" in out.stdout.str()
    assert children() == before


def test_a_ctrl_c_swallowed_by_a_del_still_stops_the_session(project):
    """Before: Ctrl-C landing in a __del__ became an "unraisable exception" warning and the session exited 0."""
    project.makepyfile(
        """
        import gc
        import signal


        class Collected:
            def __del__(self):
                signal.raise_signal(signal.SIGINT)  # Ctrl-C arrives while this __del__ runs


        def test_first(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True)
            Collected()
            gc.collect()


        def test_never_reached(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True)
        """
    )
    out = project.runpytest_inprocess(
        *FAST, "--perfsuite-report-json", "v.json", "-p", "no:randomly", "-W", "ignore", no_reraise_ctrlc=True
    )
    assert out.ret == pytest.ExitCode.INTERRUPTED
    assert "test_never_reached" not in out.stdout.str().split("short test summary")[0].split("PASSED")[-1]
    assert read_json(project.path / "v.json")["status"] == "partial"


def test_a_damaged_image_read_by_a_worker_shows_perfsuites_message_first(project, tmp_path, monkeypatch):
    """Before: the first line was torch's "Caught DatasetError in DataLoader worker process 0"."""
    monkeypatch.setenv("PERFSUITE_CACHE", str(tmp_path / "cache"))  # a cache of its own: it gets damaged
    project.makepyfile(
        """
        from perfsuite.jobs.registry import get_workload
        from perfsuite.jobs.workloads.data import materialize


        def test_damaged(perf_run):
            wl = get_workload("plugin_tiny")
            root = materialize(wl, wl.scale("smoke"))
            for image in (root / "images").iterdir():
                image.write_bytes(b"not a png")
            perf_run("plugin_tiny", aug="none", num_workers=1, pin_memory=True, non_blocking=True)
        """
    )
    out = run(project, "-p", "no:randomly")
    out.assert_outcomes(failed=1)
    out.stdout.fnmatch_lines(
        [
            "*perfsuite: dataset file *.png cannot be read (*the dataset cache is damaged*"
            "(raised in DataLoader worker process 0)"
        ]
    )
    assert "Caught DatasetError" not in out.stdout.str() and "Traceback" not in out.stdout.str()


def test_a_full_disk_while_saving_a_baseline_fails_the_test_with_one_line(project, monkeypatch):
    """Before: a raw `OSError: [Errno 28]` traceback in each test."""
    monkeypatch.setattr(tmpfiles, "write_json_atomic", _full)  # the inner session runs in this process
    project.makepyfile("def test_x(perf_run):\n    perf_run('plugin_tiny', aug='none', num_workers=0)\n")
    out = run(project, "--perfsuite-save")
    out.assert_outcomes(failed=1)
    out.stdout.fnmatch_lines(
        ["*baseline error: cannot save *.json: No space left on device; free space or pass --perfsuite-baselines*"]
    )
    assert "Traceback" not in out.stdout.str() and "Errno 28" not in out.stdout.str()
    out.stdout.fnmatch_lines(["perfsuite: 1 error (1 results)"])  # the summary line agrees with the failed test


def test_a_report_that_cannot_be_written_is_one_line_and_a_non_zero_exit(project, monkeypatch):
    monkeypatch.setattr(tmpfiles, "write_text_atomic", _full)  # the inner session runs in this process
    project.makepyfile("def test_x(perf_run):\n    perf_run('plugin_tiny', aug='none', num_workers=0)\n")
    out = run(project, "--perfsuite-report-json", "r.json")
    assert out.ret == pytest.ExitCode.TESTS_FAILED
    out.stdout.fnmatch_lines(["*could not write *r.json: No space left on device; pass a writable path*"])
    assert "Traceback" not in out.stdout.str()


def test_a_marker_error_prints_once(project):
    """Before: twice, chained with "During handling of the above exception"."""
    project.makepyfile(
        """
        import pytest


        @pytest.mark.perf(max_bogus_metric=1)
        def test_a(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True)
        """
    )
    out = run(project, "--tb=long")
    out.assert_outcomes(errors=1)
    # The error section only: the short summary repeats it in full where pytest does not cut lines (CI=true).
    text = out.stdout.str().split("short test summary info")[0]
    assert text.count("unknown threshold 'max_bogus_metric'") == 1
    assert "During handling" not in text


def test_a_skip_before_any_run_leaves_no_benchmark_warning(project):
    """Before: "PytestBenchmarkWarning: Benchmark fixture was not used at all" on every GPU-only skip."""
    pytest.importorskip("pytest_benchmark")
    project.makepyfile(
        """
        import pytest


        def test_gpu_only(perf_run):
            pytest.skip("needs a GPU")
        """
    )
    out = run(project)
    out.assert_outcomes(skipped=1)
    assert "PytestBenchmarkWarning" not in out.stdout.str()


@pytest.mark.slow
def test_summary_line_counts_an_unreadable_baseline_as_an_error(project):
    """Before: "1 new, 1 pass" although the test failed."""
    project.makepyfile("def test_x(perf_run):\n    perf_run('plugin_tiny', aug='none', num_workers=0)\n")
    run(project, "--perfsuite-save").assert_outcomes(passed=1)
    [path] = sorted((project.path / "baselines").rglob("*.json"))
    path.write_text("{", encoding="utf-8")
    out = run(project, "--perfsuite-compare", "--perfsuite-allow-missing-exact")
    out.assert_outcomes(failed=1)
    out.stdout.fnmatch_lines(["perfsuite: 1 error, *"])  # the test's threshold passed, its baseline failed it
