"""Hand the runs of a test to another tool instead of judging them: ``perfsuite doctor tests/x.py::test_y``.

The test runs in this process under pytest, its fixtures alive, and each of its
``perf_run(...)`` calls gives its :class:`~perfsuite.harness.runner.RunSpec` to
``handle(spec, result_id)`` (which runs it as it likes, e.g. several times with
counterfactuals) instead of running and judging it; ``handle`` returns the
Result the test receives. Nothing is judged or saved.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from perfsuite.errors import PerfsuiteError


@dataclass
class Capture:
    """A pytest plugin object: installs ``handle`` as the session's capture and records what happened."""

    handle: Callable[[Any, str], Any]
    collected: list[str] = field(default_factory=list)
    captured: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        from perfsuite.plugin.hooks import STATE

        state = config.stash.get(STATE, None)
        if state is not None:
            state.capture = self._capture

    def _capture(self, spec: Any, result_id: str) -> Any:
        self.captured.append(result_id)
        return self.handle(spec, result_id)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = [item.nodeid for item in session.items]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.failures.append(f"{report.nodeid} ({report.when}): {report.longreprtext.strip().splitlines()[-1:]}")


def _hypothesis_profile() -> str | None:
    try:
        from hypothesis import settings
    except ImportError:
        return None
    return settings.get_current_profile_name()


def looks_like_test_id(target: str) -> bool:
    """``tests/perf/test_x.py::test_y[...]`` or a test file: pytest's node ids, not a workload or job name."""
    return "::" in target or target.endswith(".py")


def capture_test(test_id: str, handle: Callable[[Any, str], Any], args: Sequence[str] = ()) -> Capture:
    """Run the test ``test_id`` with its perf_run calls handed to ``handle``; PerfsuiteError if it ran no job."""
    import importlib.util

    cap = Capture(handle)
    serial = ["-n", "0"] if importlib.util.find_spec("xdist") is not None else []  # this process runs the test
    import contextlib
    import io
    import sys

    path, profile = list(sys.path), _hypothesis_profile()
    output = io.StringIO()  # pytest's own lines ("1 passed, 2 warnings"): shown only when the test failed
    try:
        with contextlib.redirect_stdout(output):
            code = pytest.main([test_id, "-q", "-p", "no:randomly", *serial, *args], plugins=[cap])
        if int(code) not in (0,) or cap.failures:
            sys.stderr.write(output.getvalue())
    finally:  # the session loaded a Hypothesis profile and put the tests' folders on sys.path: put them back
        sys.path[:] = path
        if profile is not None:
            from hypothesis import settings

            settings.load_profile(profile)
    if not cap.collected:
        raise PerfsuiteError(
            f"{test_id} names no test (pytest exit {int(code)}): give a node id such as "
            "tests/perf/test_loader.py::test_loader_settings[gray_classifier-workers0], a file of tests, "
            "or a workload or job name (see `perfsuite list`)"
        )
    if not cap.captured:
        why = f"; it failed: {cap.failures[0]}" if cap.failures else ""
        raise PerfsuiteError(
            f"{test_id} ran no perfsuite job: none of its {len(cap.collected)} test(s) called perf_run(...){why}. "
            "Give a test that calls perf_run, or a workload or job name (see `perfsuite list`)"
        )
    return cap
