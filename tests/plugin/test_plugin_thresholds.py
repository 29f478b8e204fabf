"""The perf marker end to end: passing, failing with the cause in the seeds' terms, skipping what cannot be measured."""

from __future__ import annotations

import textwrap

import pytest
from perfsuite_pytester import run, unfolded

pytest_plugins = ["pytester"]


def test_a_marked_test_within_its_bounds_passes(project):
    project.makepyfile("""
        import pytest

        @pytest.mark.perf(min_samples_per_s=0.001, max_syncs_per_step=0, amp_engaged=False)
        def test_fast_enough(perf_run):
            result = perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True)
            assert result.workload == "plugin_tiny" and result.steps == 5
    """)
    quiet = run(project)
    quiet.assert_outcomes(passed=1)
    quiet.stdout.fnmatch_lines(
        ["*= perfsuite =*", "perfsuite: 3 pass (1 results); 3 pass/unchanged/inconclusive rows not listed*"]
    )
    verbose = run(project, "-v")
    verbose.stdout.fnmatch_lines(  # each row under its test id
        ["*= perfsuite =*", "*test_fast_enough", "  samples_per_s *pass", "perfsuite: 3 pass*"]
    )


@pytest.mark.slow
def test_violations_fail_naming_metric_value_bound_and_cause(project):
    project.makepyfile("""
        import pytest

        @pytest.mark.perf(min_samples_per_s=1e9)
        def test_slow(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True)

        @pytest.mark.perf(max_data_wait_frac=0.0)
        def test_data_bound(perf_run):
            perf_run("plugin_tiny", aug="cpu", num_workers=0, pin_memory=True, non_blocking=True)

        @pytest.mark.perf(max_syncs_per_step=0)
        def test_syncs(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True, log_interval=1)

        @pytest.mark.perf(amp_engaged=True)
        def test_fp32(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True, amp=None)
    """)
    out = run(project)
    out.assert_outcomes(failed=4)
    out.stdout.fnmatch_lines_random(
        [
            "*test_slow: slow steps: samples_per_s * < 1000000000 (*",
            "*test_data_bound: data-bound: data_wait_frac * > 0 (augmentation on CPU workers, num_workers=0*",
            "*test_syncs: host syncs: syncs_per_step 1 > 0 (*item (read) at *pipeline.py:*, 1 per step, fix (read):*",
            "*test_fp32: AMP not engaged: amp_engaged False != True (amp=None: training runs in FP32*",
            "*perfsuite: 4 fail*",
        ]
    )


def test_only_unavailable_thresholds_skip_with_the_reason(project):
    project.makepyfile("""
        import pytest

        @pytest.mark.perf(min_gpu_util=0.85)
        def test_gpu_only(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True, device="cpu")
    """)
    out = run(project, "-rs")
    out.assert_outcomes(skipped=1)
    unfolded(out).fnmatch_lines_random(
        [
            "SKIPPED *.py:*: perfsuite: no threshold could be checked on this machine: "
            "gpu_util unavailable (min_gpu_util): *",
            "unavailable: *test_gpu_only: gpu_util unavailable*",
        ]
    )


def test_unavailable_bounds_are_reported_while_the_others_decide(project):
    project.makepyfile("""
        import pytest

        @pytest.mark.perf(min_gpu_util=0.85, max_syncs_per_step=0)
        def test_mixed_pass(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True, device="cpu")

        @pytest.mark.perf(min_gpu_util=0.85, min_samples_per_s=1e9)
        def test_mixed_fail(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True, device="cpu")
    """)
    out = run(project, "--perfsuite-report-md", "perf.md")
    out.assert_outcomes(passed=1, failed=1)
    unfolded(out).fnmatch_lines_random(
        [
            # the two GPU-only verdicts of a CPU run: one line under the table (each with its reason in it)
            "GPU telemetry: unavailable on a CPU run (1 metric: gpu_util; 2 verdicts, each with its reason above)",
            "*1 fail, 2 unavailable, 1 pass*",
        ]
    )
    markdown = (project.path / "perf.md").read_text()
    assert markdown.count("unavailable <br>gpu_util unavailable (min_gpu_util)") == 2
    assert "**fail** <br>samples_per_s" in markdown and "slow steps" in markdown


def test_machine_class_thresholds_from_pyproject_override_the_marker(project):
    project.path.joinpath("pyproject.toml").write_text(
        textwrap.dedent("""
        [tool.perfsuite.thresholds.cpu]
        min_samples_per_s = 1e9

        [tool.perfsuite.thresholds.cpu."test_relaxed*"]
        min_samples_per_s = 0.001

        [tool.perfsuite.thresholds."NVIDIA*"]
        max_syncs_per_step = 0
    """)
    )
    project.makepyfile("""
        import pytest

        @pytest.mark.perf(min_samples_per_s=0.001)
        def test_strict_on_cpu(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True, log_interval=1)

        @pytest.mark.perf(min_samples_per_s=1e9)
        def test_relaxed_on_cpu(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True, log_interval=1)
    """)
    out = run(project)
    out.assert_outcomes(passed=1, failed=1)
    out.stdout.fnmatch_lines(["FAILED *test_strict_on_cpu*"])
    # The NVIDIA table does not apply on a CPU run: log_interval=1 syncs every step, and nothing failed for it.
    assert "syncs_per_step" not in out.stdout.str()


def test_a_misspelt_bound_errors_before_running(project):
    project.makepyfile("""
        import pytest

        @pytest.mark.perf(max_sync_per_step=0)
        def test_typo(perf_run):
            raise AssertionError("must not run")
    """)
    out = run(project)
    out.assert_outcomes(errors=1)
    out.stdout.fnmatch_lines(["*unknown threshold 'max_sync_per_step'; write one of*max_syncs_per_step*"])
    assert "must not run" not in out.stdout.str()


def test_a_marker_without_a_run_fails_instead_of_passing(project):
    project.makepyfile("""
        import pytest

        @pytest.mark.perf(max_syncs_per_step=0)
        def test_forgot_to_run(perf_run):
            pass
    """)
    out = run(project)
    out.assert_outcomes(failed=1)
    out.stdout.fnmatch_lines(["*never called perf_run*"])


def test_knobs_the_device_cannot_run_skip_with_the_reason_and_labels_name_results(project):
    project.makepyfile("""
        import pytest

        def test_fp16_on_cpu(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, amp="fp16", device="cpu")

        @pytest.mark.perf(max_syncs_per_step=0)
        def test_two_runs(perf_run):
            perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True, label="quiet")
            perf_run(
                "plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True, log_interval=1,
                label="logging", check=False,
            )
    """)
    out = run(project, "-rs", "-v")
    out.assert_outcomes(skipped=1, passed=1)
    out.stdout.fnmatch_lines_random(
        [
            "*SKIPPED*amp='fp16' needs CUDA*",
            "*perfsuite: 1 pass (2 results)*",
        ]
    )
    out.stdout.fnmatch_lines(["*test_two_runs#quiet", "  syncs_per_step *pass"])  # the row under its test id


def test_an_injected_fault_is_caught_by_the_same_bounds_and_marked_in_the_result(project):
    project.makepyfile("""
        import pytest

        @pytest.mark.perf(max_syncs_per_step=0)
        def test_quiet_step(perf_run):
            result = perf_run("plugin_tiny", aug="none", num_workers=0, pin_memory=True, non_blocking=True)
            assert result.notes[-1] == "injected fault: host_read_every_step"
    """)
    out = run(project, "--perfsuite-inject", "host_read_every_step")
    out.assert_outcomes(failed=1)
    out.stdout.fnmatch_lines(["*test_quiet_step: host syncs: syncs_per_step 1 > 0 (*"])
