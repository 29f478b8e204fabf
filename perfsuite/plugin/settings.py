"""Plugin settings: the command line over ``[tool.perfsuite]`` in pyproject.toml over defaults.

Kept apart from plugin.py so the precedence rules, the per-machine thresholds
and the fault hook can be read and tested without pytest. Importing this is
cheap (tomllib, or tomli on Python 3.10, and the standard library only): it runs on ``pytest --help``.

``[tool.perfsuite]`` keys are the option names without the ``--perfsuite-``
prefix and with ``_`` for ``-`` (``scale``, ``device``, ``steps``,
``baselines``, ``factor``, ...), plus a ``thresholds`` table per machine
class::

    [tool.perfsuite.thresholds.cpu]               # every perf test on a CPU run
    max_syncs_per_step = 0
    [tool.perfsuite.thresholds."NVIDIA H100*"]    # a GPU model, exact or a glob
    min_gpu_util = 0.85
    [tool.perfsuite.thresholds."NVIDIA H100*"."test_tuned*"]   # tests whose name matches
    max_data_wait_frac = 0.05
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfsuite.core import options
from perfsuite.core.toml import tomllib
from perfsuite.errors import PerfsuiteError

if TYPE_CHECKING:
    from perfsuite.core.knobs import Knobs

# The option table (perfsuite/core/options.py) is the one source of names, types, defaults and run lengths.
SCALES = options.SCALES
RUN_LENGTHS = options.RUN_LENGTHS
DEFAULT_FACTOR = options.DEFAULT_FACTOR
DEFAULT_ALPHA = options.DEFAULT_ALPHA
_KEYS = options.pyproject_keys()
_KIND_NAMES = options.KIND_NAMES


@dataclass(frozen=True)
class Settings:
    """Everything the plugin was told, resolved. Paths are absolute."""

    scale: str = "smoke"
    device: str = "auto"
    steps: int | None = None
    warmup: int | None = None
    observe_steps: int | None = None
    period_steps: int | None = None
    baselines: Path = Path("baselines")
    baseline_runs: int = 3  # options.BY_NAME["baseline_runs"].default
    save: bool = False
    compare: bool = False
    update_exact: bool = False
    exact_dir: Path = Path("baselines/exact")
    allow_missing_exact: bool = False
    force: bool = False
    factor: float = DEFAULT_FACTOR
    alpha: float = DEFAULT_ALPHA
    report_md: Path | None = None
    report_json: Path | None = None
    png: Path | None = None
    inject: tuple[str, ...] = ()
    knobs: Mapping[str, Any] = field(default_factory=dict)  # --perfsuite-knob: loader knobs over every test's own
    thresholds: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    worker_gpus: str = "auto"
    loader_timeout: float = options.DEFAULT_LOADER_TIMEOUT_S
    deadline_warmup: float = options.DEFAULT_DEADLINE_WARMUP_S
    deadline_floor: float = options.DEFAULT_DEADLINE_FLOOR_S
    deadline_factor: float = options.DEFAULT_DEADLINE_FACTOR

    def run_lengths(self, steps: int | None = None, warmup: int | None = None) -> tuple[int, int, int]:
        """(steps, warmup, observe_steps): command line or pyproject, then the call's own, then the scale's."""
        return options.run_lengths(
            self.scale,
            self.steps if self.steps is not None else steps,
            self.warmup if self.warmup is not None else warmup,
            self.observe_steps,
        )

    def watchdog_config(self) -> Any:
        """The perfsuite.harness.watchdog.WatchdogConfig these settings describe (for the runner)."""
        from perfsuite.harness.watchdog import WatchdogConfig

        return WatchdogConfig(
            loader_timeout_s=self.loader_timeout,
            warmup_s=self.deadline_warmup,
            floor_s=self.deadline_floor,
            factor=self.deadline_factor,
        )


def read_pyproject(rootpath: Path) -> dict[str, Any]:
    """The ``[tool.perfsuite]`` table of ``rootpath/pyproject.toml``, validated; {} if absent."""
    path = Path(rootpath) / "pyproject.toml"
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise PerfsuiteError(f"{path} is not valid TOML ({exc}); fix it so [tool.perfsuite] can be read") from exc
    table = data.get("tool", {}).get("perfsuite", {})
    for key, value in table.items():
        if key not in _KEYS:
            raise PerfsuiteError(
                f"{path}: [tool.perfsuite] has unknown key {key!r}; known keys: {', '.join(sorted(_KEYS))}"
            )
        if isinstance(value, bool) and bool not in _KEYS[key] or not isinstance(value, _KEYS[key]):
            kinds = " or ".join(_KIND_NAMES[t] for t in _KEYS[key])
            raise PerfsuiteError(f"{path}: [tool.perfsuite] {key} = {value!r} must be {kinds}")
    return table


def resolve(cli: Mapping[str, Any], pyproject: Mapping[str, Any], rootpath: Path, invocation_dir: Path) -> Settings:
    """Merge option values (None = not given) over pyproject values over defaults, and check them.

    Paths from the command line are relative to where pytest was started;
    paths from pyproject.toml are relative to the project root.
    """

    def pick(name: str, default: Any = None) -> tuple[Any, Path]:
        if cli.get(name) is not None:
            return cli[name], invocation_dir
        if name in pyproject:
            return pyproject[name], rootpath
        return default, rootpath

    def path(name: str, default: str | None = None) -> Path | None:
        value, base = pick(name, default)
        return None if value is None else (base / Path(value)).resolve()

    scale = pick("scale", "smoke")[0]
    if scale not in SCALES:
        raise PerfsuiteError(f"scale={scale!r}; write --perfsuite-scale smoke or --perfsuite-scale full")
    device = pick("device", "auto")[0]
    try:
        options.check_device_name(device)
    except PerfsuiteError:
        raise PerfsuiteError(f"device={device!r}; write --perfsuite-device auto, cpu, cuda or cuda:N") from None
    for o in options.OPTIONS:
        value: Any = pick(o.name)[0]
        if o.minimum is None or value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < o.minimum:
            raise PerfsuiteError(f"{o.name}={value!r} must be {options.KIND_NAMES[o.kind]} >= {o.minimum:g}")
        if o.maximum is not None and value > o.maximum:
            raise PerfsuiteError(f"{o.name}={value!r}: {options.above_maximum(o, value)}")
    factor, alpha = float(pick("factor", DEFAULT_FACTOR)[0]), float(pick("alpha", DEFAULT_ALPHA)[0])
    if not factor > 1.0:
        raise PerfsuiteError(f"factor={factor} must be above 1; write e.g. --perfsuite-factor 1.05 for a 5% margin")
    if not 0.0 < alpha < 0.5:
        raise PerfsuiteError(f"alpha={alpha} must lie between 0 and 0.5; write e.g. --perfsuite-alpha 0.01")
    inject = pick("inject")[0] or ()
    return Settings(
        scale=scale,
        device=device,
        steps=pick("steps")[0],
        warmup=pick("warmup")[0],
        observe_steps=pick("observe_steps")[0],
        period_steps=pick("period_steps")[0],
        baselines=path("baselines", "baselines") or Path("baselines"),
        save=bool(cli.get("save")),
        compare=bool(cli.get("compare")),
        update_exact=bool(cli.get("update_exact")),
        exact_dir=path("exact_dir", options.BY_NAME["exact_dir"].default) or Path("baselines/exact"),
        allow_missing_exact=bool(pick("allow_missing_exact", False)[0]),
        force=bool(pick("force", False)[0]),
        factor=factor,
        alpha=alpha,
        report_md=path("report_md"),
        report_json=path("report_json"),
        png=path("png"),
        inject=(inject,) if isinstance(inject, str) else tuple(inject),
        knobs=parse_knob_overrides(cli.get("knob") or ()),
        thresholds=_check_threshold_tables(pyproject.get("thresholds", {})),
        worker_gpus=str(pick("worker_gpus", "auto")[0]),
        baseline_runs=int(pick("baseline_runs", options.BY_NAME["baseline_runs"].default)[0]),
        **{
            name: float(pick(name, options.BY_NAME[name].default)[0])
            for name in ("loader_timeout", "deadline_warmup", "deadline_floor", "deadline_factor")
        },
    )


def check_output_paths(settings: Settings) -> None:
    """Refuse report paths that cannot be written, at start-up rather than after every test has run.

    The rule every command applies (perfsuite.core.outputs): not a directory or a device, in a writable
    directory. The plugin's reports are rewritten by each session and their missing directories are
    created (as documented for --perfsuite-report-md), so those two are allowed here.
    """
    from perfsuite.core.outputs import output_problem

    for option, path in (
        ("--perfsuite-report-md", settings.report_md),
        ("--perfsuite-report-json", settings.report_json),
        ("--perfsuite-png", settings.png),
    ):
        if path is not None:
            problem = output_problem(path, overwrite=True, parents=True)
            if problem:
                raise PerfsuiteError(f"{option} {path}: {problem}; write a file path in a directory you can write")


# The loader knobs --perfsuite-knob may set, and how each value is written.
_KNOB_KINDS = {
    "num_workers": "int",
    "batch_size": "int",
    "prefetch_factor": "int or none",
    "pin_memory": "bool",
    "persistent_workers": "bool",
    "drop_last": "bool",
}


def parse_knob_overrides(items: Any) -> dict[str, Any]:
    """``["num_workers=4", "pin_memory=true"]`` -> ``{"num_workers": 4, "pin_memory": True}``.

    Only loader knobs: they are the ones a user's Job can have set for it (perfsuite.jobs.contract.bind), and
    the ones perfsuite tune searches. Values are checked here; the knob's own rules (prefetch_factor needs
    workers) are checked when the run's knobs are built.
    """
    out: dict[str, Any] = {}
    for item in [items] if isinstance(items, str) else list(items):
        name, sep, text = str(item).partition("=")
        name, text = name.strip(), text.strip().lower()
        if not sep or name not in _KNOB_KINDS:
            raise PerfsuiteError(
                f"--perfsuite-knob {item!r}: write NAME=VALUE with NAME one of {', '.join(_KNOB_KINDS)}, "
                "e.g. --perfsuite-knob num_workers=4"
            )
        kind = _KNOB_KINDS[name]
        if kind == "bool" and text in ("true", "false"):
            out[name] = text == "true"
        elif kind != "bool" and text.isdigit():
            out[name] = int(text)
        elif kind == "int or none" and text in ("none", "default"):
            out[name] = None
        else:
            raise PerfsuiteError(f"--perfsuite-knob {item!r}: {name} takes {kind.replace('bool', 'true or false')}")
    return out


# A machine or per-test thresholds table may hold the loader knobs perfsuite tune chose, under this key: they are
# not bounds, but when a bound fails the failure names each knob the run no longer has (perfsuite.judge.causes).
TUNED_KEY = "tuned"


def _check_threshold_tables(tables: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    for machine, table in tables.items():
        if not isinstance(table, dict):
            raise PerfsuiteError(
                f"[tool.perfsuite.thresholds] {machine} = {table!r} must be a table of bounds, e.g. "
                f'[tool.perfsuite.thresholds."{machine}"] then min_gpu_util = 0.85'
            )
        for key, value in table.items():
            for name, tuned in [(key, value)] + (list(value.items()) if isinstance(value, dict) else []):
                if name == TUNED_KEY and not (
                    isinstance(tuned, dict) and all(isinstance(v, (bool, int, float, str)) for v in tuned.values())
                ):
                    raise PerfsuiteError(
                        f"[tool.perfsuite.thresholds.{machine}] {TUNED_KEY} = {tuned!r} must be a table of knob "
                        "values, e.g. tuned = {{ num_workers = 4, persistent_workers = true }} (perfsuite tune "
                        "writes it)"
                    )
    return {machine: dict(table) for machine, table in tables.items()}


def _matches(pattern: str, text: str) -> bool:
    return pattern == text or fnmatch.fnmatchcase(text.lower(), pattern.lower())


def machine_thresholds(settings: Settings, machine: str, test_name: str, nodeid: str) -> dict[str, Any]:
    """Bounds from pyproject for this machine class and test, the more specific winning.

    Order: machine-wide bounds, then sub-tables whose key (a glob) matches the
    test's name or node id. Tables are applied in file order, so of two
    matching machine patterns the later one wins.
    """
    bounds = _machine_entries(settings, machine, test_name, nodeid)
    bounds.pop(TUNED_KEY, None)
    return bounds


def machine_tuned(settings: Settings, machine: str, test_name: str, nodeid: str) -> dict[str, Any]:
    """The knobs perfsuite tune chose for this machine class and test (the ``tuned`` table); {} if none."""
    return dict(_machine_entries(settings, machine, test_name, nodeid).get(TUNED_KEY) or {})


def _machine_entries(settings: Settings, machine: str, test_name: str, nodeid: str) -> dict[str, Any]:
    bounds: dict[str, Any] = {}
    per_test: dict[str, Any] = {}
    for pattern, table in settings.thresholds.items():
        if not _matches(pattern, machine):
            continue
        for key, value in table.items():
            if isinstance(value, dict) and key != TUNED_KEY:
                if _matches(key, test_name) or _matches(key, nodeid):
                    per_test.update(value)
            else:
                bounds[key] = value
    bounds.update(per_test)
    return bounds


def all_threshold_bounds(settings: Settings) -> dict[str, Any]:
    """Every bound named anywhere in the tables, for validating them once at session start."""
    found: dict[str, Any] = {}
    for table in settings.thresholds.values():
        for key, value in table.items():
            found.update(value if isinstance(value, dict) and key != TUNED_KEY else {key: value})
    found.pop(TUNED_KEY, None)
    return found


KnobTransform = Callable[["Knobs"], "Knobs"]


def fault_transform(names: tuple[str, ...]) -> KnobTransform:
    """The knob transformation ``--perfsuite-inject`` asks for; the identity when none is named.

    The fault catalog lives in ``perfsuite.harness.faults.catalog``: a ``FAULTS`` mapping of
    name -> callable(Knobs) -> Knobs (or an object with ``.apply(knobs)``).
    Naming a fault without a catalog, or an unknown fault, is an error: a
    requested fault that silently did nothing would make every check pass.
    """
    if not names:
        return lambda knobs: knobs
    import importlib

    try:
        faults = importlib.import_module("perfsuite.harness.faults.catalog")
    except ModuleNotFoundError as exc:
        if exc.name != "perfsuite.harness.faults.catalog":
            raise
        raise PerfsuiteError(
            f"--perfsuite-inject {names[0]}: this perfsuite has no fault catalog "
            "(perfsuite/harness/faults/catalog.py) yet; drop the option"
        ) from None
    catalog = getattr(faults, "FAULTS", {})
    steps = []
    for name in names:
        if name not in catalog:
            raise PerfsuiteError(
                f"--perfsuite-inject {name}: unknown fault; write one of {', '.join(sorted(catalog)) or '(none)'}"
            )
        fault = catalog[name]
        steps.append(fault.apply if hasattr(fault, "apply") else fault)

    def transform(knobs: Knobs) -> Knobs:
        for step in steps:
            knobs = step(knobs)
        return knobs

    return transform


def fault_mutation(names: tuple[str, ...]) -> Callable[[Any], None] | None:
    """The in-place Pipeline change of the named code-level faults (``RunSpec.mutate``); None if none.

    Knob faults go through :func:`fault_transform`; faults that live in code
    (a label-corrupting augmentation) change the built pipeline instead.
    """
    if not names:
        return None
    import importlib

    return importlib.import_module("perfsuite.harness.faults.catalog").mutation(names)
