"""One table of options: pytest options, `perfsuite run` flags, pyproject keys, defaults and run lengths agree."""

from __future__ import annotations

import argparse

import pytest

from perfsuite.cli.main import build_parser
from perfsuite.core import options
from perfsuite.errors import DeviceError, PerfsuiteError
from perfsuite.harness import watchdog
from perfsuite.judge import verdict as verdicts
from perfsuite.plugin import settings


def _pytest_flags() -> dict[str, dict]:
    seen: dict[str, dict] = {}
    options.add_pytest_options(lambda flag, **kwargs: seen.__setitem__(flag, kwargs))
    return seen


def test_every_pytest_option_is_a_pyproject_key_or_a_run_action() -> None:
    flags = _pytest_flags()
    assert set(flags) == {o.flag for o in options.OPTIONS if o.pytest}
    for o in options.OPTIONS:
        assert o.pyproject == (o.name in settings._KEYS)
    # knob: a session's override of every test's loader knobs (perfsuite tune's), never a project setting
    assert {o.name for o in options.OPTIONS if o.pytest and not o.pyproject} == {
        "save",
        "compare",
        "update_exact",
        "knob",
    }
    assert all(o.help for o in options.OPTIONS)
    assert all(kwargs.get("default") is None for kwargs in flags.values())  # so pyproject can fill in


def test_the_cli_and_the_plugin_share_flags_defaults_and_run_lengths() -> None:
    run = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["run"]
    args = run.parse_args(["gray_classifier"])
    assert (args.scale, args.steps, args.warmup, args.observe_steps) == (None, None, None, None)
    assert options.run_lengths("smoke") == settings.Settings().run_lengths() == (6, 1, 1)  # was 20/3/4 in the CLI
    assert options.run_lengths("full", steps=7) == (7, 10, 4)
    with pytest.raises(SystemExit):
        run.parse_args(["gray_classifier", "--steps", "1"])  # the plugin's minimum, from the same table


def test_defaults_agree_with_the_modules_that_use_them() -> None:
    assert (options.DEFAULT_FACTOR, options.DEFAULT_ALPHA) == (verdicts.DEFAULT_FACTOR, verdicts.DEFAULT_ALPHA)
    config = settings.Settings().watchdog_config()
    assert config == watchdog.WatchdogConfig()


@pytest.mark.parametrize(
    ("wanted", "cuda", "expected"),
    [
        ("auto", True, "cuda"),
        ("auto", False, "cpu"),
        (None, False, "cpu"),
        ("cpu", True, "cpu"),
        ("cuda:1", True, "cuda:1"),
    ],
)
def test_resolve_device(wanted: str | None, cuda: bool, expected: str) -> None:
    assert options.resolve_device(wanted, cuda) == expected


def test_cuda_without_cuda_and_bad_names_are_refused() -> None:
    with pytest.raises(DeviceError, match="sees no CUDA"):
        options.resolve_device("cuda", False)
    for bad in ("tpu", "cuda:x", "cpu:0", ""):
        with pytest.raises(PerfsuiteError, match="write auto, cpu, cuda or cuda:N"):
            options.check_device_name(bad)


def test_watchdog_settings_resolve_from_pyproject(tmp_path) -> None:
    s = settings.resolve({"deadline_floor": 5.0}, {"loader_timeout": 30, "deadline_factor": 4}, tmp_path, tmp_path)
    assert s.watchdog_config() == watchdog.WatchdogConfig(loader_timeout_s=30, floor_s=5, factor=4)
    with pytest.raises(PerfsuiteError, match="deadline_factor=0.5 must be a number >= 1"):
        settings.resolve({"deadline_factor": 0.5}, {}, tmp_path, tmp_path)


def test_docs_options_page_holds_the_generated_table_with_every_option_and_hang_limit() -> None:
    """Before: the hang limits and --perfsuite-observe-steps were in no options table."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "options.md").read_text(encoding="utf-8")
    assert options.splice_table(page) == page, "docs/options.md is stale: run python scripts/options_table.py"
    for o in options.OPTIONS:
        assert (o.flag if o.pytest else f"`{o.name}`") in page
    for limit in ("loader-timeout", "deadline-warmup", "deadline-floor", "deadline-factor", "observe-steps"):
        assert f"--perfsuite-{limit}" in page
