"""One table of perfsuite's options: the pytest options, ``perfsuite run``'s flags, the ``[tool.perfsuite]``
keys, their defaults and the run lengths are all generated from it, and the device is resolved in one place.

Each :class:`Option` is one setting under one name: ``--perfsuite-<name>`` in
pytest (``_`` written ``-``), ``<name>`` in ``[tool.perfsuite]``, and, where
``cli`` is set, that flag of ``perfsuite run``. Cheap to import (standard
library only): it runs on ``pytest --help``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from perfsuite.errors import DeviceError, PerfsuiteError

SCALES = ("smoke", "full")
# (steps, warmup, observe_steps) per scale when neither the command line, the call nor pyproject says; the same
# for `perfsuite run` and the plugin. Smoke fits the reference suite into a few minutes on 2 CPU cores and still
# gives the timing verdict the 5 samples it needs; full gives it enough samples for small effects on a GPU. One
# observed step suffices: the counts it feeds (syncs, dtypes) are exact per step.
RUN_LENGTHS: dict[str, tuple[int, int, int]] = {"smoke": (6, 1, 1), "full": (60, 10, 4)}
# Keep in step with perfsuite.judge.verdict (not imported here: it pulls in numpy on `pytest --help`).
DEFAULT_FACTOR = 1.05
DEFAULT_ALPHA = 0.01
# Keep in step with perfsuite.harness.watchdog (tests/unit/test_options.py checks it).
DEFAULT_LOADER_TIMEOUT_S = 300.0
DEFAULT_DEADLINE_WARMUP_S = 1800.0
DEFAULT_DEADLINE_FLOOR_S = 120.0
DEFAULT_DEADLINE_FACTOR = 20.0

# The most steps any phase of a run may be asked for: ten million steps at a millisecond each is close to three
# hours. More is a typo (--steps 999999999999) that would run until a CI limit, or overflow a timer.
MAX_STEPS = 10**7

KIND_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    list: "a list",
    dict: "a table",
}


@dataclass(frozen=True)
class Option:
    """One setting. ``kind`` is its type in pyproject (``float`` also takes integers, ``list`` also one string).

    ``default`` None means "decided later" (run lengths come from the scale).
    ``pytest``/``pyproject``: whether it is a pytest option / a pyproject key;
    ``cli``: its ``perfsuite run`` flag, if it has one.
    """

    name: str
    kind: type
    default: Any
    help: str
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None  # refused above it before any work (a step count no run can finish)
    pytest: bool = True
    pyproject: bool = True
    cli: str | None = None

    @property
    def flag(self) -> str:
        return "--perfsuite-" + self.name.replace("_", "-")

    @property
    def types(self) -> tuple[type, ...]:
        """What pyproject may hold for it."""
        return {float: (int, float), list: (str, list)}.get(self.kind, (self.kind,))

    def help_text(self) -> str:
        shown = self.default if not isinstance(self.default, bool) else None
        return self.help + (f". Default: {shown}" if shown not in (None, (), {}) else "")


OPTIONS: tuple[Option, ...] = (
    Option(
        "scale",
        str,
        "smoke",
        "workload sizes: smoke (CPU, seconds) or full (the sizes of the jobs they model, for a GPU)",
        choices=SCALES,
        cli="--scale",
    ),
    Option(
        "device",
        str,
        "auto",
        "auto, cpu, cuda or cuda:N (auto: CUDA if torch sees one)",
        metavar="DEVICE",
        cli="--device",
    ),
    Option(
        "steps",
        int,
        None,
        "measured steps per run, overriding every test's own (default per scale: "
        + ", ".join(f"{s} {n[0]}" for s, n in RUN_LENGTHS.items())
        + ")",
        metavar="N",
        minimum=2,
        maximum=MAX_STEPS,
        cli="--steps",
    ),
    Option(
        "warmup",
        int,
        None,
        "warm-up steps per run, excluded from every metric (default per scale: "
        + ", ".join(f"{s} {n[1]}" for s, n in RUN_LENGTHS.items())
        + ")",
        metavar="N",
        minimum=0,
        maximum=MAX_STEPS,
        cli="--warmup",
    ),
    Option(
        "observe_steps",
        int,
        None,
        "steps watched by the sync and AMP probes (default per scale: "
        + ", ".join(f"{s} {n[2]}" for s, n in RUN_LENGTHS.items())
        + ")",
        metavar="N",
        minimum=0,
        maximum=MAX_STEPS,
        cli="--observe-steps",
    ),
    Option(
        "period_steps",
        int,
        None,
        "steps watched for work done every N steps (a read-back every 10 steps) before the observed ones "
        "(default: 20 for a user's job or script, none for a reference workload without log/eval intervals; "
        "0 when observe steps are given alone)",
        metavar="N",
        minimum=0,
        maximum=MAX_STEPS,
        cli="--period-steps",
    ),
    Option(
        "save",
        bool,
        False,
        "save each test's Results as this machine's baselines (replacing stored ones)",
        pyproject=False,
    ),
    Option(
        "compare",
        bool,
        False,
        "check exact metrics against the committed exact file (--perfsuite-exact-dir) and timings against this "
        "machine's stored baseline; a regression fails the test, a test with no committed exact values fails, a "
        "missing timing baseline is reported as new",
        pyproject=False,
    ),
    Option(
        "update_exact",
        bool,
        False,
        "rewrite the committed exact values (EXACT_DIR/DEVICE__torch-MINOR.json) from this run, dropping the "
        "entries of tests that no longer exist; never from an interrupted session",
        pyproject=False,
    ),
    Option(
        "exact_dir",
        str,
        "baselines/exact",
        "directory of the committed exact files, relative to the rootdir (in pyproject) or to where pytest "
        "was started (on the command line); --perfsuite-baselines never moves it",
        metavar="DIR",
    ),
    Option(
        "allow_missing_exact",
        bool,
        False,
        "under --perfsuite-compare, report a test with no committed exact values as new instead of failing it",
    ),
    Option(
        "baselines",
        str,
        "baselines",
        "directory of this machine's timing baselines (<dir>/<fingerprint>/), relative to the rootdir",
        metavar="DIR",
    ),
    Option(
        "baseline_runs",
        int,
        3,
        "runs kept per test in each saved baseline (the newest replaces the oldest), and the base runs a "
        "wall-clock verdict needs: from fewer it is inconclusive unless the change exceeds the run's own spread; "
        "with 3 or more, step-time verdicts use the variance between them",
        metavar="N",
        minimum=1,
    ),
    Option("force", bool, False, "compare with baselines recorded on another machine fingerprint"),
    Option(
        "factor",
        float,
        DEFAULT_FACTOR,
        "timing change needed before a comparison counts (a metric with a wider margin of its own keeps it)",
        metavar="X",
    ),
    Option("alpha", float, DEFAULT_ALPHA, "significance level of timing comparisons", metavar="P"),
    Option("report_md", str, None, "write the verdicts as markdown (for PR comments)", metavar="FILE"),
    Option("report_json", str, None, "write the verdicts as JSON", metavar="FILE"),
    Option("png", str, None, "write a chart of baseline ratios (needs matplotlib)", metavar="FILE"),
    Option(
        "inject",
        list,
        (),
        "inject a known fault (perfsuite.harness.faults.catalog) into every run's knobs or step code; repeatable",
        metavar="FAULT",
    ),
    Option(
        "knob",
        list,
        (),
        "set a loader knob in every perf_run of the session, over the test's own: NAME=VALUE with NAME one of "
        "num_workers, prefetch_factor, pin_memory, persistent_workers, batch_size, drop_last (perfsuite tune runs "
        "a perf test this way); repeatable",
        metavar="NAME=VALUE",
        pyproject=False,
    ),
    Option(
        "worker_gpus",
        str,
        "auto",
        "under pytest-xdist, the GPU of worker k (CUDA_VISIBLE_DEVICES): auto "
        "(the k-th visible GPU), a list such as 0,1,2,3, or off",
        metavar="LIST",
    ),
    Option(
        "loader_timeout",
        float,
        DEFAULT_LOADER_TIMEOUT_S,
        "seconds a DataLoader worker may take for one batch before the run fails, naming the worker (0: no limit)",
        metavar="S",
        minimum=0,
    ),
    Option(
        "deadline_warmup",
        float,
        DEFAULT_DEADLINE_WARMUP_S,
        "seconds the warm-up phase may take (compilation happens there) before the run fails with the stacks",
        metavar="S",
        minimum=0,
    ),
    Option(
        "deadline_floor",
        float,
        DEFAULT_DEADLINE_FLOOR_S,
        "the least a later phase is allowed, in seconds; phases get max(floor, factor x slowest warm-up step x steps)",
        metavar="S",
        minimum=0,
    ),
    Option(
        "deadline_factor",
        float,
        DEFAULT_DEADLINE_FACTOR,
        "how many times slower than the slowest warm-up step a phase may run before it is declared hung",
        metavar="X",
        minimum=1,
    ),
    Option("thresholds", dict, {}, "bounds per machine class (see docs/plugin.md)", pytest=False),
    Option(
        "labels",
        dict,
        {},
        "the targets' labels for perfsuite check: num_classes, ignore_index, flip_pairs (docs/properties.md)",
        pytest=False,
    ),
)
BY_NAME = {o.name: o for o in OPTIONS}


def pytest_options() -> Iterator[Option]:
    return (o for o in OPTIONS if o.pytest)


def pyproject_keys() -> dict[str, tuple[type, ...]]:
    """``[tool.perfsuite]`` key -> the types it may hold."""
    return {o.name: o.types for o in OPTIONS if o.pyproject}


def add_pytest_options(add: Callable[..., Any]) -> None:
    """Register every pytest option with ``add`` (``parser.getgroup(...).addoption``); defaults stay None so
    settings.resolve can tell "not given" from a value, and apply pyproject in between."""
    for o in pytest_options():
        kwargs: dict[str, Any] = {"help": o.help_text()}
        if o.kind is bool:
            kwargs.update(action="store_true", default=None)
        elif o.kind is list:
            kwargs.update(action="append", metavar=o.metavar)
        else:
            kwargs.update(type=o.kind, metavar=o.metavar, choices=o.choices)
            if o.choices:
                kwargs.pop("metavar")
        add(o.flag, **kwargs)


def add_cli_arguments(parser: argparse.ArgumentParser, names: Sequence[str] | None = None) -> None:
    """``perfsuite run``'s flags for the options that have one (or those of ``names``); defaults None, resolved by
    :func:`run_lengths` and :func:`resolve_device` as the plugin resolves them."""
    for o in OPTIONS:
        if o.cli is None or (names is not None and o.name not in names):
            continue
        parser.add_argument(
            o.cli,
            type=_checked(o),
            default=None,
            metavar=o.metavar,
            choices=o.choices,
            help=o.help_text().replace("overriding every test's own ", ""),
        )


def _checked(o: Option) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            value = o.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {KIND_NAMES[o.kind]}") from None
        if o.minimum is not None and value < o.minimum:
            raise argparse.ArgumentTypeError(f"{value} is below {o.minimum:g}; write a value >= {o.minimum:g}")
        if o.maximum is not None and value > o.maximum:
            raise argparse.ArgumentTypeError(above_maximum(o, value))
        return value

    convert.__name__ = o.kind.__name__
    return convert


def above_maximum(o: Option, value: Any) -> str:
    """Why ``value`` is refused for ``o``: above its maximum, and what to write."""
    return (
        f"{value} is above {o.maximum:.0f}, the most a run takes (ten million steps are hours even at 1 ms a step); "
        f"write {o.maximum:.0f} or less"
    )


def run_lengths(
    scale: str, steps: int | None = None, warmup: int | None = None, observe_steps: int | None = None
) -> tuple[int, int, int]:
    """(steps, warmup, observe_steps): the values given, else the scale's defaults (:data:`RUN_LENGTHS`)."""
    if scale not in RUN_LENGTHS:
        raise PerfsuiteError(f"scale={scale!r}; write one of {', '.join(SCALES)}")
    default = RUN_LENGTHS[scale]
    return (
        steps if steps is not None else default[0],
        warmup if warmup is not None else default[1],
        observe_steps if observe_steps is not None else default[2],
    )


def check_device_name(device: str) -> str:
    """``device`` if it is ``auto``, ``cpu``, ``cuda`` or ``cuda:N``; else a PerfsuiteError saying what to write."""
    base, _, index = device.partition(":")
    if device == "auto" or (base in ("cpu", "cuda") and (not index or (base == "cuda" and index.isdigit()))):
        return device
    raise PerfsuiteError(f"device={device!r}; write auto, cpu, cuda or cuda:N")


def resolve_device(wanted: str | None, cuda_available: bool | None = None) -> str:
    """The one place a device is resolved: ``auto`` (or None) is ``cuda`` when torch sees CUDA, else ``cpu``;
    an explicit ``cuda`` without CUDA is a DeviceError rather than a silent CPU run.

    ``cuda_available`` None asks torch (imported only then).
    """
    wanted = check_device_name(wanted or "auto")
    if wanted == "cpu":
        return wanted
    if cuda_available is None:
        import torch

        cuda_available = torch.cuda.is_available()
    if wanted == "auto":
        return "cuda" if cuda_available else "cpu"
    if not cuda_available:
        raise DeviceError(f"device {wanted!r} asked for, but torch sees no CUDA device; use cpu or auto")
    return wanted


def period_steps(period: int | None, observe_steps: int | None) -> int | None:
    """The period scan asked for: ``period`` when given; 0 when only ``observe_steps`` was (the user fixed how
    many steps to watch); else None, decided per job (perfsuite.harness.observation)."""
    if period is not None:
        return period
    return 0 if observe_steps is not None else None


# --------------------------------------------------------------------------- the options table for the docs

TABLE_START, TABLE_END = "<!-- options-table:start -->", "<!-- options-table:end -->"


def render_table() -> str:
    """docs/options.md's table, generated from :data:`OPTIONS` (tests/unit/test_options.py checks the page)."""
    lines = [
        "| pytest option | `[tool.perfsuite]` key | `perfsuite run` flag | default | what it does |",
        "|---|---|---|---|---|",
    ]
    for o in OPTIONS:
        flag = f"`{o.flag} {o.metavar}`" if o.pytest and o.metavar else (f"`{o.flag}`" if o.pytest else "-")
        if o.pytest and o.choices:
            flag = f"`{o.flag} {{{','.join(o.choices)}}}`"
        key = f"`{o.name}`" if o.pyproject else "- (command line only)"
        default = _default_text(o)
        text = o.help.replace("|", "\\|")
        lines.append(f"| {flag} | {key} | {f'`{o.cli}`' if o.cli else '-'} | {default} | {text} |")
    return "\n".join(lines) + "\n"


def _default_text(o: Option) -> str:
    if o.kind is bool:
        return "off" if not o.default else "on"
    if o.default in (None, (), {}):
        return "per scale" if o.name in ("steps", "warmup", "observe_steps") else "-"
    return f"`{o.default:g}`" if isinstance(o.default, float) else f"`{o.default}`"


def splice_table(page: str) -> str:
    """``page`` with the text between the table markers replaced by :func:`render_table`."""
    head, _, rest = page.partition(TABLE_START)
    _, _, tail = rest.partition(TABLE_END)
    return f"{head}{TABLE_START}\n{render_table()}{TABLE_END}{tail}"
