"""pytest plugin (entry point ``pytest11: perfsuite``): options, the ``perf_run`` fixture, the
``perf`` marker and the session summary.

A thin shell: settings.py resolves options, session.py judges results,
report.py renders them. Importing this module must stay cheap (it is loaded
for ``pytest --help``): torch, numpy and the judging code load on first use.
Session state lives in ``config.stash``. User docs: docs/plugin.md.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from perfsuite.errors import PerfsuiteError
from perfsuite.plugin import settings as settings_mod

if TYPE_CHECKING:
    from perfsuite.core.results import Result
    from perfsuite.plugin.session import PerfSession, Recorded

MARKER = (
    "perf(**thresholds): bounds on the Results of this test's perf_run calls, e.g. "
    "perf(min_samples_per_s=500, max_syncs_per_step=0, max_data_wait_frac=0.05, min_gpu_util=0.85, "
    "amp_engaged=True); a bound whose metric is unavailable here is reported, never passed"
)


@dataclass
class PerfState:
    """Per-session state, kept in ``config.stash[STATE]``."""

    settings: settings_mod.Settings
    root: Path = field(default_factory=Path.cwd)  # test ids are relative to it (perfsuite.plugin.invocation)
    update_command: str = "pytest --perfsuite-update-exact"
    pending: dict[str, list[Recorded]] = field(default_factory=dict)
    reports: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    collected: set[str] = field(default_factory=set)  # result ids of every collected test, before -k/-m
    partial_files: set[str] = field(default_factory=set)  # files selected by node id (file.py::test): not whole
    children: dict[str, set[int]] = field(default_factory=dict)  # node id -> child pids alive when it started
    interrupts_before: int = 0  # Ctrl-Cs the process had seen when this session started (sessions can nest)
    _session: PerfSession | None = None
    _device: str | None = None
    # Set by a tool that takes over the runs (perfsuite doctor on a test id, perfsuite.plugin.capture): each
    # perf_run call hands it its RunSpec and returns what it returns; nothing is judged.
    capture: Any = None
    # The session's estimated time and its progress (perfsuite.plugin.estimate); None: no perf test collected here
    estimate: Any = None

    @property
    def judged(self) -> bool:
        """Whether any test reached judging (so there is something to summarise)."""
        return self._session is not None

    @property
    def session(self) -> PerfSession:
        if self._session is None:
            from perfsuite.plugin.session import PerfSession

            self._session = PerfSession(self.settings, self.update_command)
        return self._session

    def device(self) -> str:
        """The session's device; ``auto`` is CUDA when torch sees one, else the CPU."""
        if self._device is None:
            from perfsuite.core.options import resolve_device
            from perfsuite.errors import DeviceError

            try:
                self._device = resolve_device(self.settings.device)
            except DeviceError:
                pytest.fail(
                    f"perfsuite: --perfsuite-device {self.settings.device} but torch sees no CUDA device; "
                    "use --perfsuite-device cpu or auto",
                    pytrace=False,
                )
        return self._device


STATE = pytest.StashKey[PerfState]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup(
        "perfsuite",
        "perfsuite: performance regression tests for training input pipelines "
        "(defaults also from [tool.perfsuite] in pyproject.toml)",
    )
    from perfsuite.core.options import add_pytest_options

    add_pytest_options(group.addoption)  # every option, its help and default, from the one table


@pytest.hookimpl(tryfirst=True)  # before Hypothesis's plugin reads --hypothesis-profile
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    _hypothesis_profiles(config)
    opt = config.getoption
    from perfsuite.core.options import pytest_options

    cli = {o.name: opt(o.flag) for o in pytest_options()}
    from perfsuite.plugin import invocation

    root = invocation.project_root(config)
    try:
        resolved = settings_mod.resolve(cli, settings_mod.read_pyproject(root), root, config.invocation_params.dir)
    except PerfsuiteError as exc:
        raise pytest.UsageError(f"perfsuite: {exc}") from None
    try:
        settings_mod.check_output_paths(resolved)
    except PerfsuiteError as exc:
        raise pytest.UsageError(f"perfsuite: {exc}") from None
    if resolved.save and resolved.inject:
        raise pytest.UsageError(
            "perfsuite: --perfsuite-save with --perfsuite-inject would store a run with an "
            "injected fault as the baseline; drop one of them"
        )
    if resolved.compare and not resolved.baselines.is_dir():
        raise pytest.UsageError(
            f"perfsuite: --perfsuite-compare but the baselines directory {resolved.baselines} does not exist, so "
            "nothing could be compared; pass --perfsuite-baselines DIR with the committed baselines, or record "
            "them first (--perfsuite-update-exact for exact values, --perfsuite-save for timings)"
        )
    state = PerfState(resolved, root, invocation.update_command(config))
    note = invocation.rootdir_note(config, root)
    if note:
        state.notes.append(note)
    config.stash[STATE] = state
    from perfsuite.harness import interrupts

    interrupts.GUARD.install()  # a Ctrl-C swallowed by a __del__ or an at-fork hook still stops the session
    state.interrupts_before = interrupts.GUARD.received
    from perfsuite.plugin import xdist

    try:
        gpus = resolved.worker_gpus
        xdist.check_worker_gpus(config, gpus)
        xdist.assign_worker_gpu(config, gpus)
    except PerfsuiteError as exc:
        raise pytest.UsageError(f"perfsuite: {exc}") from None


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.stash.get(STATE, None) is not None:
        from perfsuite.harness import interrupts

        interrupts.GUARD.uninstall()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Remember every collected test before -k/-m deselect any: the committed entries of tests that are
    gone (stale) are those of collected files that no longer hold them."""
    state = config.stash.get(STATE, None)
    if state is not None:
        from perfsuite.plugin.invocation import partly_selected_files, result_nodeid

        state.collected |= {result_nodeid(item.nodeid, getattr(item, "path", None), state.root) for item in items}
        state.partial_files |= partly_selected_files(config, state.root)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Before the first test: the session's estimated time, from the same tests' runs recorded on this machine
    (else the scale's default per test), so a full-scale session's cost can be planned (perfsuite.plugin.estimate).
    """
    from perfsuite.plugin import estimate, xdist

    state = session.config.stash.get(STATE, None)
    if state is None or state.capture is not None or xdist.is_worker(session.config):
        return
    if session.config.option.collectonly:
        return
    from perfsuite.plugin.invocation import result_nodeid

    tests = [
        result_nodeid(item.nodeid, getattr(item, "path", None), state.root)
        for item in session.items
        if "perf_run" in getattr(item, "fixturenames", ())
    ]
    if not tests:
        return
    scale = state.settings.scale
    from perfsuite.core.options import resolve_device

    try:
        device = resolve_device(state.settings.device)
    except PerfsuiteError:  # no such device here: the first test fails saying so, with nothing to estimate
        return
    recorded = estimate.load(estimate.record_path(), device, scale)
    state.estimate = estimate.estimate(tests, recorded, scale)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(fold(state.estimate.line(), session.config.get_terminal_writer().fullwidth))


def _progress(state: PerfState, config: pytest.Config) -> Any:
    """``progress(phase, done, total)`` for the runs of a long session on a terminal: a line at each phase's start
    with the time left in the session; None otherwise (short sessions, CI, piped output: nothing is printed)."""
    from perfsuite.jobs.workloads.data import show_progress
    from perfsuite.plugin.estimate import LONG_SESSION_S

    plan = state.estimate
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if plan is None or reporter is None or not show_progress() or plan.total_s < LONG_SESSION_S:
        return None
    capture = config.pluginmanager.get_plugin("capturemanager")
    last: list[str] = []

    def show(phase: str, done: int, total: int) -> None:
        if last and last[0] == phase:
            return
        last[:] = [phase]
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            reporter.write_line(plan.progress(phase, done, total))

    return show


def pytest_sessionstart(session: pytest.Session) -> None:
    """Check pyproject thresholds and the fault hook once, before any run spends time."""
    state = session.config.stash.get(STATE, None)
    if state is None:
        return
    try:
        if state.settings.thresholds:
            from perfsuite.judge.thresholds import parse_thresholds

            parse_thresholds(settings_mod.all_threshold_bounds(state.settings))
        settings_mod.fault_transform(state.settings.inject)
    except PerfsuiteError as exc:
        raise pytest.UsageError(f"perfsuite: [tool.perfsuite] or options: {exc}") from None


def marker_bounds(item: pytest.Item) -> dict[str, Any]:
    """Bounds of every ``perf`` marker on the item; the closest marker wins per name."""
    bounds: dict[str, Any] = {}
    for mark in reversed(list(item.iter_markers("perf"))):
        if mark.args:
            raise PerfsuiteError(
                f"@pytest.mark.perf takes keyword bounds only, got {mark.args!r}; "
                "write e.g. @pytest.mark.perf(max_syncs_per_step=0)"
            )
        bounds.update(mark.kwargs)
    return bounds


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A misspelt bound fails the test before it runs anything."""
    if item.get_closest_marker("perf") is None:
        return
    from perfsuite.judge.thresholds import parse_thresholds

    try:
        parse_thresholds(marker_bounds(item))
    except PerfsuiteError as exc:
        message = f"perfsuite: {exc}"
    else:
        return
    pytest.fail(message, pytrace=False)  # outside the except: no "During handling of the above exception"


class PerfRun:
    """The ``perf_run`` fixture's value: call it to run a workload and get its Result."""

    def __init__(self, state: PerfState, node: pytest.Item, request: pytest.FixtureRequest | None = None) -> None:
        self._state, self._node, self._request = state, node, request
        self._benchmark: Any = None
        self._ids: set[str] = set()

    @property
    def scale(self) -> str:
        """The session's scale (``smoke`` or ``full``), for tests that size knobs by it."""
        return self._state.settings.scale

    @property
    def device(self) -> str:
        """The session's device (``cpu``, ``cuda``, ``cuda:N``), resolved."""
        return self._state.device()

    def __call__(
        self,
        workload: Any,
        *,
        steps: int | None = None,
        warmup: int | None = None,
        label: str | None = None,
        check: bool = True,
        probes: Any = None,
        mutate: Any = None,
        target_samples_per_s: float | None = None,
        nproc_per_node: int = 1,
        scaling_rounds: int = 0,
        share_gpus: bool = False,
        predict_for: str | None = None,
        **knobs: Any,
    ) -> Result:
        """Run ``workload`` with flat knobs; return its Result.

        ``workload`` is a registered name, a Workload instance, a user's
        :class:`perfsuite.Job`, a user's training script
        (``perfsuite.Script(["train.py", ...])``, run unchanged), or a job
        factory ``factory(device) -> Job`` (called with the session's device). For a Job, loader knobs given here
        are checked against the user's DataLoader (or applied, when the Job
        hands perfsuite a dataset) and step knobs are refused: perfsuite does
        not change a user's step. ``mutate(pipeline_or_job)`` changes what was
        built before it runs (how perfsuite.harness.faults.catalog injects code-level bugs).

        Scale and device come from the session (``device=`` here overrides
        it); ``target_samples_per_s`` is the rate the loader must feed (the
        demand ``loader_headroom`` compares with; default: the step's speed
        of light); ``--perfsuite-steps``/``--perfsuite-warmup`` override ``steps``/
        ``warmup``. ``label`` names this Result when a test runs several
        (its baseline id is ``<node id>#<label>``); ``check=False`` exempts
        it from the marker's thresholds. A knob this device cannot run
        (amp='fp16' on a CPU) skips the test with the reason.

        ``nproc_per_node=N`` runs it on N ranks through torchrun (DDP; a job
        factory and ``mutate`` must then be module-level functions, which each
        rank imports) and returns the merged Result, each rank's figures in
        ``Result.ranks``; ``scaling_rounds=R`` adds scaling_efficiency from R
        interleaved one-rank and N-rank launches (docs/distributed.md).

        ``predict_for="nvidia-h200"`` (or the marker's ``predict_for=``) adds ``predicted_input_efficiency``: this
        run's loader supply against that GPU runner's recorded demand (``baselines/demand/<runner>.json``), and a
        marker's ``input_efficiency`` bounds are then judged on it away from that runner (docs/gpu.md).
        """
        from perfsuite.core.knobs import Knobs
        from perfsuite.core.options import period_steps
        from perfsuite.errors import DatasetError, DeviceError, RankError, RunTimeout, ScriptError
        from perfsuite.harness.runner import RunSpec, run
        from perfsuite.jobs.registry import is_job_target
        from perfsuite.plugin.session import Recorded

        s = self._state.settings
        result_id = self._result_id(label)
        n_steps, n_warmup, n_observe = s.run_lengths(steps, warmup)
        n_period = period_steps(s.period_steps, s.observe_steps)
        mutations = [m for m in (settings_mod.fault_mutation(s.inject), mutate) if m is not None]

        def combined_mutation(built: Any) -> None:
            for mutation in mutations:
                mutation(built)

        combined = combined_mutation if mutations else None
        knobs.update(s.knobs)  # --perfsuite-knob: loader knobs over the test's own (how perfsuite tune runs a test)
        if is_job_target(workload):
            if s.inject:
                raise PerfsuiteError(
                    f"--perfsuite-inject {', '.join(s.inject)} injects faults into perfsuite's "
                    "reference workloads; a user's own Job runs its own code: drop the option"
                )
            spec = RunSpec(
                workload,
                s.scale,
                Knobs(device=knobs.pop("device", self._state.device())),
                n_steps,
                n_warmup,
                n_observe,
                mutate=combined,
                job_knobs=knobs,
                watchdog=s.watchdog_config(),
                target_samples_per_s=target_samples_per_s,
                period_steps=n_period,
            )
        else:
            knobs.setdefault("device", self._state.device())
            spec_knobs = settings_mod.fault_transform(s.inject)(Knobs.from_flat(**knobs))
            spec = RunSpec(
                workload,
                s.scale,
                spec_knobs,
                n_steps,
                n_warmup,
                n_observe,
                mutate=combined,
                watchdog=s.watchdog_config(),
                target_samples_per_s=target_samples_per_s,
                period_steps=n_period,
            )  # mutate: faults in the step's code
        if self._state.capture is not None:
            return self._state.capture(spec, result_id)
        show = _progress(self._state, self._node.config)
        if show is not None:
            import dataclasses

            spec = dataclasses.replace(spec, progress=show)
        failure = None
        try:
            if nproc_per_node > 1 or scaling_rounds:
                result = self._distributed(spec, mutate, nproc_per_node, scaling_rounds, share_gpus, probes)
            else:
                result = run(spec, probes)
        except ScriptError as exc:  # a user's script that raised or ended early: its own traceback, not ours
            failure = f"perfsuite: {exc.script_traceback}{exc}"
        except DeviceError as exc:
            pytest.skip(f"perfsuite: {exc}")
        except (RunTimeout, RankError, DatasetError) as exc:  # a hang, a failed rank, a damaged cache: this test fails
            failure = f"perfsuite: {exc}"
        except OSError as exc:  # a path perfsuite writes (the dataset cache): one line, not a traceback
            failure = _worker_died(exc) or f"perfsuite: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")
        except RuntimeError as exc:  # torch's, for a DataLoader worker that died (a segfault): one line, not torch's
            failure = _worker_died(exc)
            if failure is None:
                raise
        if failure is not None:  # outside the except block: no "during handling" chain in the report
            pytest.fail(failure, pytrace=False)
        if s.inject or s.knobs:
            import dataclasses

            notes = [f"injected fault: {', '.join(s.inject)}"] if s.inject else []
            if s.knobs:
                notes.append(
                    "loader knobs set by --perfsuite-knob: " + ", ".join(f"{k}={v}" for k, v in s.knobs.items())
                )
            result = dataclasses.replace(result, notes=(*result.notes, *notes))
        runner = predict_for or marker_bounds(self._node).get("predict_for")
        if runner:
            result = self._predicted(result, str(runner))
        first = not self._state.pending.get(self._node.nodeid)
        self._state.pending.setdefault(self._node.nodeid, []).append(Recorded(result_id, result, check))
        self._to_benchmark(result_id, result, first)
        return result

    def _predicted(self, result: Result, runner: str) -> Result:
        """The Result with its input efficiency predicted for ``runner`` (judge.starvation); a runner with no demand
        file fails the test, naming the command that records one."""
        from pathlib import Path

        from perfsuite.judge.starvation import DEMAND_DIR, DemandError, load_demand, predict, with_prediction

        try:
            demands = load_demand(runner, Path(self._state.root) / DEMAND_DIR)
        except DemandError as exc:
            pytest.fail(f"perfsuite: {exc}", pytrace=False)
        return with_prediction(result, predict(result, demands))

    def _distributed(self, spec: Any, mutate: Any, nproc: int, rounds: int, share_gpus: bool, probes: Any) -> Result:
        """The run on ``nproc`` ranks: injected faults travel by name, ``mutate`` by its module and name."""
        import dataclasses

        from perfsuite.harness.faults.catalog import get_fault
        from perfsuite.harness.ranks.launch import scaling

        if probes is not None:
            raise PerfsuiteError(
                "perf_run(probes=...) with nproc_per_node > 1: each rank runs every probe perfsuite has (and the "
                "rank probe); drop probes= or run on one rank"
            )
        faults = [n for n in self._state.settings.inject if get_fault(n).mutation is not None]
        return scaling(dataclasses.replace(spec, mutate=mutate), nproc, rounds, faults=faults, share_gpus=share_gpus)

    def _result_id(self, label: str | None) -> str:
        from perfsuite.plugin.invocation import result_nodeid

        nodeid = result_nodeid(self._node.nodeid, getattr(self._node, "path", None), self._state.root)
        n = len(self._ids) + 1
        result_id = f"{nodeid}#{label}" if label else (nodeid if n == 1 else f"{nodeid}#{n}")
        if result_id in self._ids:
            raise PerfsuiteError(f"perf_run(label={label!r}) twice in {nodeid}; give each run its own label")
        self._ids.add(result_id)
        return result_id

    def _to_benchmark(self, result_id: str, result: Result, first: bool) -> None:
        """Put the Result into pytest-benchmark: step times as its stats, metrics in extra_info.

        pytest-benchmark has no public API for timings measured elsewhere
        (ionelmc/pytest-benchmark#52), so this uses its fixture's
        ``_make_stats``; tests/plugin checks the saved JSON so an upgrade that
        changes it fails loudly there.
        """
        # Asked for here, not when the fixture is set up: a test that skips before its first run then never
        # holds an unused benchmark fixture (pytest-benchmark warns about those)
        request = self._request
        if self._benchmark is None and request is not None and request.config.pluginmanager.hasplugin("benchmark"):
            self._benchmark = request.getfixturevalue("benchmark")
        bench = self._benchmark
        if bench is None:  # pytest-benchmark is not active
            return
        bench.group = bench.group or f"perfsuite:{result.workload}"
        bench.extra_info.setdefault("perfsuite", {})[result_id] = benchmark_info(result)
        if first and not getattr(bench, "_mode", None):
            # used, enabled or not: pytest-benchmark disables itself under xdist and with --benchmark-disable, and
            # then warned at each test that its fixture "was not used at all" (9 warnings made a green run 2 screens)
            bench._mode = "perfsuite.perf_run(...)"
            if bench.enabled:
                stats = bench._make_stats(1)
                for ms in result.samples.get("step_ms", []):
                    stats.update(ms / 1e3)


def benchmark_info(result: Result) -> dict[str, Any]:
    """The JSON-safe summary of a Result stored in pytest-benchmark's extra_info."""
    return {
        "workload": result.workload,
        "scale": result.scale,
        "steps": result.steps,
        "batch_size": result.batch_size,
        "fingerprint": result.fingerprint.key(),
        "knobs": dict(result.knobs),
        "metrics": {n: m.value for n, m in result.metrics.items() if m.available},
        "unavailable": {n: m.reason for n, m in result.metrics.items() if not m.available},
        "notes": list(result.notes),
    }


def _worker_died(exc: BaseException) -> str | None:
    """The one line for a DataLoader worker's death that ``exc`` reports (None: it reports none)."""
    from perfsuite.harness.worker_death import death_in_chain

    death = death_in_chain(exc)
    return None if death is None else f"perfsuite: {death.what()}; {death.fix()}"


@pytest.fixture
def perf_run(request: pytest.FixtureRequest) -> PerfRun:
    """``perf_run(workload, **knobs) -> Result``: run a workload with every probe, under the session's options.

    With pytest-benchmark active, Results also go into its ``benchmark`` fixture; without it
    (not installed, or ``-p no:benchmark``) perfsuite runs and judges just the same.
    """
    state = request.config.stash[STATE]
    state.children.setdefault(request.node.nodeid, _child_pids())
    if state.estimate is not None:  # the session's progress: this test runs now, until its teardown
        from perfsuite.plugin.invocation import result_nodeid

        test = result_nodeid(request.node.nodeid, getattr(request.node, "path", None), state.root)
        state.estimate.start(test)
        request.addfinalizer(lambda: state.estimate.finish(test))
    return PerfRun(state, request.node, request)


def _child_pids() -> set[int]:
    import multiprocessing

    return {p.pid for p in multiprocessing.active_children() if p.pid is not None}


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """No worker outlives its test: the runner stops its workers itself; anything it missed is stopped here."""
    state = item.config.stash.get(STATE, None)
    if state is None or item.nodeid not in state.children:
        return
    import multiprocessing

    before = state.children.pop(item.nodeid)
    left = [p for p in multiprocessing.active_children() if p.pid not in before]
    for proc in left:
        proc.terminate()
    for proc in left:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
    if left:
        state.session.problems.append(
            f"{item.nodeid}: {len(left)} worker process(es) were still running after the test "
            f"(pids {', '.join(str(p.pid) for p in left)}); perfsuite stopped them"
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """After the test body passes, judge its Results; a failing verdict fails the test, naming the cause."""
    state = item.config.stash.get(STATE, None)
    try:
        outcome = yield
    finally:
        records = state.pending.pop(item.nodeid, []) if state else []
    if state is None or state.capture is not None:  # captured runs are another tool's, not judged here
        return outcome
    bounds = marker_bounds(item)
    if not records:
        if bounds:
            pytest.fail(
                "perfsuite: @pytest.mark.perf on a test that never called perf_run: nothing was "
                "measured, so its thresholds cannot pass; call perf_run(...) or drop the marker",
                pytrace=False,
            )
        return outcome
    from perfsuite.harness import interrupts

    interrupts.check()  # a Ctrl-C swallowed during the test (a __del__, an at-fork hook) stops the session here
    judgement = state.session.judge(records, bounds, item.name, item.nodeid)
    funcargs = getattr(item, "funcargs", {})
    bench = getattr(funcargs.get("perf_run"), "_benchmark", None) or funcargs.get("benchmark")
    if bench is not None:
        bench.extra_info["perfsuite_verdicts"] = [v.to_dict() for v in judgement.verdicts]
    if judgement.failures:
        pytest.fail("perfsuite:\n  " + "\n  ".join(judgement.failures), pytrace=False)
    if judgement.skip_reason:
        # Reported at the test's location, not this hook's (as skip markers are).
        raise pytest.skip.Exception(judgement.skip_reason, _use_item_location=True)
    return outcome


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    """Between tests: a Ctrl-C that something swallowed stops the session now (exit 2, reports marked partial)."""
    from perfsuite.harness import interrupts

    if interrupts.GUARD.installed:
        interrupts.check()


def _cut_short(session: pytest.Session, exitstatus: Any) -> str | None:
    """Why the session did not run all it selected (an interrupt, -x/--maxfail), or None."""
    from perfsuite.harness import interrupts

    state = session.config.stash[STATE]
    if int(exitstatus) == int(pytest.ExitCode.INTERRUPTED) or interrupts.GUARD.received > state.interrupts_before:
        perf = state._session
        return "interrupted (Ctrl-C)" + (f" after {len(perf.results)} result(s)" if perf is not None else "")
    if session.shouldstop:
        return f"stopped early: {session.shouldstop}"
    if session.shouldfail:
        return f"stopped early: {session.shouldfail}"
    return None


def pytest_sessionfinish(session: pytest.Session, exitstatus: Any) -> None:
    """Write the committed exact values if asked (never after an interrupt), and the report files asked for,
    marked partial when the session was cut short."""
    state = session.config.stash.get(STATE, None)
    if state is None:
        return
    from perfsuite.plugin import xdist

    reason = _cut_short(session, exitstatus)
    if reason and reason.startswith("interrupted") and int(session.exitstatus) == 0:
        session.exitstatus = pytest.ExitCode.INTERRUPTED  # a Ctrl-C that was swallowed must not end in success
    if state._session is not None:
        if reason and reason.startswith("interrupted"):
            state._session.interrupted = reason
        state._session.find_stale(state.collected, state.root, state.partial_files)
    if xdist.is_worker(session.config):  # the controller gathers every worker's part and writes the reports
        xdist.send_to_controller(session.config, state._session)
        return
    if not state.judged and not reason:
        return
    s, perf = state.settings, state.session
    reason = reason or perf.interrupted
    if reason and reason.startswith("interrupted"):
        perf.interrupted = reason
    from perfsuite.harness import interrupts

    with interrupts.GUARD.deferred():  # a Ctrl-C now lets every file be written whole
        failed = _write_outputs(state, perf, s, reason)
        if state._device is not None and perf.results and state.capture is None:
            from perfsuite.plugin import estimate

            ran = state.estimate.finished if state.estimate is not None else ()
            estimate.save(estimate.record_path(), state._device, s.scale, perf.results, ran)  # the next estimate
    if interrupts.GUARD.pending:  # pressed while writing: the files are whole; the exit status says it
        interrupts.GUARD.delivered()
        session.exitstatus = pytest.ExitCode.INTERRUPTED
    if failed and int(session.exitstatus) == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _write_outputs(state: PerfState, perf: PerfSession, s: settings_mod.Settings, reason: str | None) -> bool:
    """The exact files and reports; True when one could not be written (said in one line each)."""
    from perfsuite.core.tmpfiles import write_text_atomic
    from perfsuite.report import verdicts as report

    failed = False
    try:
        for written in perf.finish():
            state.reports.append(f"wrote exact baselines {written}")
    except OSError as exc:
        failed = True
        perf.problems.append(
            f"could not write the exact baselines: {exc.strerror or exc} ({exc.filename}); free space or make "
            "--perfsuite-exact-dir writable, then run again"
        )
    if perf.interrupted and s.update_exact:
        state.reports.append("did not rewrite the exact baselines: the session was interrupted")
    for path, render in ((s.report_md, report.format_markdown), (s.report_json, report.to_json)):
        if path is not None:
            try:
                write_text_atomic(path, render(perf.verdicts, partial=reason, problems=perf.problems))
                state.reports.append(f"wrote {path}" + (" (marked partial)" if reason else ""))
            except OSError as exc:
                failed = True
                perf.problems.append(f"could not write {path}: {exc.strerror or exc}; pass a writable path")
    if s.png is not None:
        try:
            s.png.parent.mkdir(parents=True, exist_ok=True)
            report.write_png(perf.verdicts, s.png, perf.results)
            state.reports.append(f"wrote {s.png}")
        except ImportError:
            state.reports.append(f"did not write {s.png}: the chart needs matplotlib (pip install perfsuite[charts])")
        except OSError as exc:
            failed = True
            perf.problems.append(f"could not write {s.png}: {exc.strerror or exc}; pass a writable path")
    return failed


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist, in the controller: gather a finished worker's Results and verdicts (see perfsuite.plugin.xdist)."""
    state = node.config.stash.get(STATE, None)
    if state is None:
        return
    from perfsuite.plugin import xdist

    part = xdist.worker_part(getattr(node, "workeroutput", None))
    if part is not None and xdist.has_content(part):
        xdist.merge_worker_part(state.session, part)
    elif part is None and error:
        state.session.problems.append(
            f"xdist worker {node.gateway.id} went down before sending its perfsuite "
            f"results ({error}); its tests are missing from the report"
        )


NOTES_SHOWN = 3  # without -v, the session summary's notes: the most widely shared, and a count of the rest


def fold(text: str, width: int) -> str:
    """``text`` folded to ``width`` columns, later lines indented; a command in backticks is never broken."""
    import textwrap

    return "\n".join(
        textwrap.fill(line, width, subsequent_indent="  ", break_on_hyphens=False, break_long_words=False)
        for line in text.splitlines() or [""]
    )


def skipped_reasons(terminalreporter: Any) -> dict[str, int]:
    """How many tests skipped for each reason, in the order first seen (pytest's ``-rs`` lines, but folded to the
    terminal's width: its own are one line each, 130-180 columns for the reference suite's)."""
    counts: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(report, "longrepr", None)
        reason = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else "skipped"
        reason = reason.removeprefix("Skipped: ")
        counts[reason] = counts.get(reason, 0) + 1
    return counts


# The longest phases a green session's summary names (-v names them all).
SESSION_PHASES_SHOWN = 4


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """perfsuite's summary, last (after pytest-benchmark's wide tables): verdicts that need a look, then
    the few figures that matter per test, then the gate line.

    Rows that need no attention (pass, unchanged) are counted, not listed, unless ``-v`` is given.
    """
    state = config.stash.get(STATE, None)
    if state is None or not state.judged:
        return
    from perfsuite.judge.verdict import Outcome
    from perfsuite.report import summary
    from perfsuite.report import verdicts as report

    perf, tr = state.session, terminalreporter
    width = config.get_terminal_writer().fullwidth

    def say(text: str, **markup: bool) -> None:  # each line folded to the terminal's width, as the tables are
        tr.write_line(fold(text, width), **markup)

    # Rows that need no look are counted, not listed (-v lists them): a pass, an unchanged figure, and one the
    # samples could not decide (on a green run they were most rows, each with its own "to decide" hint)
    quiet = (Outcome.PASS, Outcome.UNCHANGED, Outcome.INCONCLUSIVE)
    verbose = config.get_verbosity() > 0
    shown = perf.verdicts if verbose else [v for v in perf.verdicts if v.outcome not in quiet]
    tr.write_sep("=", "perfsuite")
    if shown or perf.results:  # rich tables: coloured verdicts, wrapped reasons, human units (report.terminal)
        from perfsuite.report.terminal import session_summary

        tr.write_line(session_summary(shown, perf.results, perf.exact_counts, width, bool(tr.hasmarkup), verbose))
    if perf.results:
        # the notes say how to read the per-test figures: where those are one line (a green run of many
        # results), so are they
        from perfsuite.report.terminal import PEOPLE_ROWS

        figures = verbose or len(perf.results) <= PEOPLE_ROWS
        for line in summary.format_notes(perf.results, limit=None if verbose else NOTES_SHOWN if figures else 0):
            say(line)
        note = summary.oversubscription_note(perf.results, named=verbose)
        if note:
            say(note)
        from perfsuite.judge.contention import session_line

        contention = session_line(perf.results)  # how busy the machine was: wall-clock verdicts abstain beyond it
        if contention:
            say(contention)
        from perfsuite.core.results import PhaseTimes

        spent = PhaseTimes.summed(r.phases for r in perf.results.values())  # where the session's time went
        if spent is not None:
            most = None if verbose else SESSION_PHASES_SHOWN
            say(f"perfsuite: phases of {len(perf.results)} run(s), in all: {spent.line(most=most)}")
        tr.write_line("")
        from perfsuite.report.ranks import format_ranks

        for rid, result in perf.results.items():
            if result.ranks:
                tr.write_line(f"{rid}:\n{format_ranks(result)}\n")
    for reason, count in skipped_reasons(tr).items():  # nothing skipped silently, each reason folded like the rest
        say(f"perfsuite: {count} skipped: {reason}")
    hidden = len(perf.verdicts) - len(shown)
    tail = f"; {hidden} pass/unchanged/inconclusive rows not listed (-v lists them)" if hidden else ""
    line = report.summary_line(perf.verdicts, errors=len(perf.problems))
    say(f"perfsuite: {line} ({len(perf.results)} results){tail}")
    if hidden:  # the labels of the rows not listed (the listed ones have their legend under the table)
        from perfsuite.report.hints import legend

        listed = {v.outcome.value for v in shown}
        for text in legend({v.outcome.value for v in perf.verdicts} - listed):
            say(f"perfsuite: {text}")
    s = state.settings
    if perf.interrupted:
        tr.write_line(
            f"perfsuite: PARTIAL: the session was {perf.interrupted}; the figures above cover only what ran", red=True
        )
    if s.compare:
        absent = sorted(str(store.path) for store in perf.exact.values() if not store.loaded and not s.update_exact)
        gate = summary.gate_line(
            perf.exact_counts,
            perf.exact_failed,
            len(perf.timing_new),
            perf.exact_sources,
            missing=len(perf.exact_missing),
            missing_allowed=s.allow_missing_exact,
            absent_files=absent,
        )
        say(f"perfsuite: {gate}")
        if perf.exact_missing or absent:
            tr.write_line(f"perfsuite: record the exact values with `{state.update_command}`")  # a command: whole
    for key, gone in sorted(perf.stale.items()):
        store = perf.exact.get(key)
        where = store.display if store is not None else key
        action = "removed from" if s.update_exact and not perf.interrupted else "still in"
        tr.write_line(  # names a command: whole
            f"perfsuite: {len(gone)} stale entr{'y' if len(gone) == 1 else 'ies'} {action} {where} (tests that no "
            f"longer exist): {', '.join(gone[:5])}{', ...' if len(gone) > 5 else ''}"
            + ("" if s.update_exact else f"; `{state.update_command}` removes them")
        )
    for note in state.notes:
        tr.write_line(f"perfsuite: note: {note}")
    from perfsuite.report.terminal import unavailable_lines

    for line in unavailable_lines(perf.verdicts):  # a CPU run's GPU-only metrics: one line
        say(line)
    for problem in perf.problems:  # errors, paths and commands: whole, as they are searched and copied
        tr.write_line(problem, red=True)
    if perf.saved:
        tr.write_line(f"saved {len(perf.saved)} baseline(s) under {state.settings.baselines}")
    for line in state.reports:
        tr.write_line(line)


def _hypothesis_profiles(config: pytest.Config) -> None:
    """Register perfsuite's ci/dev/nightly profiles and load the chosen one (perfsuite/augment/profiles.py)."""
    try:
        from perfsuite.augment import profiles as hp
    except ImportError:  # pragma: no cover
        return
    hp.register()
    try:
        name = hp.choose(config.getoption("hypothesis_profile", None))
        if name:
            hp.load(name)
    except PerfsuiteError as exc:
        raise pytest.UsageError(f"perfsuite: {exc}") from None
