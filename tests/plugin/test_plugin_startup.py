"""Checks at start-up rather than after every test has run; perfsuite without pytest-benchmark."""

from __future__ import annotations

import pytest
from perfsuite_pytester import report_results, run

pytest_plugins = ["pytester"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("--perfsuite-report-md", "."), "--perfsuite-report-md *: is a directory*", id="md-is-a-dir"),
        pytest.param(
            ("--perfsuite-report-json", "afile/v.json"),
            "*afile is a file, so no directory can be made*",
            id="json-under-a-file",
        ),
        pytest.param(("--perfsuite-png", "afile/sub/c.png"), "*afile is a file*", id="png-under-a-file"),
    ],
)
def test_an_unwritable_report_path_is_a_usage_error_before_any_test_runs(pytester, args, message):
    pytester.makepyfile("def test_nothing(): pass")
    pytester.path.joinpath("afile").write_text("")
    out = pytester.runpytest_inprocess("-p", "perfsuite", *args)
    assert out.ret == pytest.ExitCode.USAGE_ERROR  # was: every test ran, then sessionfinish crashed
    out.stderr.fnmatch_lines([f"ERROR: perfsuite: {message}"])
    assert "test_nothing" not in out.stdout.str()


def test_perf_tests_run_and_are_judged_without_pytest_benchmark(project):
    project.makepyfile("""
        import pytest

        @pytest.mark.perf(max_syncs_per_step=0)
        def test_loader(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True)
    """)
    out = run(project, "-p", "no:benchmark", "--perfsuite-report-json", "v.json")
    out.assert_outcomes(passed=1)
    assert [v["outcome"] for v in report_results(project.path / "v.json")] == ["pass"]


def test_a_run_that_times_out_fails_its_test_with_the_stacks_and_the_session_goes_on(project, monkeypatch):
    import perfsuite.harness.runner

    # The inner conftest replaces runner.run in this process; put it back afterwards for the tests that follow.
    monkeypatch.setattr(perfsuite.harness.runner, "run", perfsuite.harness.runner.run)
    project.makeconftest(
        project.path.joinpath("conftest.py").read_text()
        + """

import perfsuite.harness.runner
from perfsuite.errors import RunTimeout

_real_run = perfsuite.harness.runner.run


def _hangs_once(spec, probes=None):
    if spec.knobs.loader.num_workers == 1:
        raise RunTimeout("the window phase passed the deadline of 3.0 s: waiting on DataLoader worker 0 "
                         "(pid 4242).\\nPython stacks at expiry:\\n  File \\"data.py\\", line 9 in __getitem__",
                         "window", 3.0, (4242,), "stacks")
    return _real_run(spec, probes)


perfsuite.harness.runner.run = _hangs_once
"""
    )
    project.makepyfile("""
        def test_hangs(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=1, pin_memory=True, non_blocking=True)

        def test_next(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True)
    """)
    out = run(project, "-p", "no:benchmark")
    out.assert_outcomes(failed=1, passed=1)
    out.stdout.fnmatch_lines(
        ["*perfsuite: the window phase passed the deadline*worker 0 (pid 4242)*", "*line 9 in __getitem__*"]
    )
    assert "Traceback" not in out.stdout.str()


HUNG_JOB = """
    import time

    import torch
    from torch.utils.data import DataLoader, Dataset

    import perfsuite


    class Stuck(Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            if i >= 4:  # the second batch never comes: a worker stuck on storage
                time.sleep(3600)
            return torch.zeros(4), torch.tensor(0)


    def job(workers):
        model = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(batch):
            x, y = batch
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        loader = DataLoader(Stuck(), batch_size=4, num_workers=workers)
        return perfsuite.Job(step=step, model=model, optimizer=opt, loader=loader, name=f"stuck{workers}")


    def test_hung_worker(perf_run):
        perf_run(job(1))


    def test_hung_getitem_in_process(perf_run):
        perf_run(job(0))


    def test_next(perf_run):
        perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True)
"""


@pytest.mark.slow
def test_a_real_hung_worker_fails_within_the_deadline_with_stacks_and_the_session_goes_on(project):
    """The real runner and watchdog (no stand-in): a worker stuck in __getitem__ and the same in-process."""
    project.makepyfile(HUNG_JOB)
    out = run(project, "--perfsuite-deadline-warmup", "3", "--perfsuite-deadline-floor", "3", "-p", "no:randomly")
    out.assert_outcomes(failed=2, passed=1)
    text = out.stdout.str() + out.stderr.str()
    assert "warm-up" in text and "pid" in text  # the phase, and the stuck worker process named
    assert "Stuck.__getitem__" in text or "__getitem__" in text  # the stacks show where it hangs
    assert "test_next PASSED" in text or "1 passed" in text
