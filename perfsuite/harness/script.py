"""Run a user's training script unchanged, its training DataLoader's batches marking the steps (``perfsuite exec``).

The script runs in this process, as ``python train.py ARGS`` would run it
(``sys.argv`` set, its directory first on ``sys.path``, ``__name__ ==
"__main__"``). While it runs, ``DataLoader.__iter__`` hands the *training*
loader's iterator out wrapped (the loader the script iterates first, or the
one ``Script(loader=...)`` names; every other loader is left alone). Each batch
that iterator yields is a step boundary: the step is everything the script does
from one batch to the next (forward, backward, logging, the evaluation at an
epoch's end). From those boundaries the same phases as any run are driven:

1. at the first batch, the script's model, optimizer, GradScaler and loss
   module are found among the objects its frames hold (no argument names
   them), and the probes are set up;
2. warm-up, then the measured window (the runner's clock and passive samplers
   only: no mode, no hook), counted in batches;
3. the speed of light: the same loop fed one cached batch, kept on the device
   (the loader is not advanced);
4. the period scan and the observed steps (:mod:`perfsuite.harness.observation`),
   with every probe's instrumentation around each step; the loader's own fetch
   runs with the probes' modes suspended, so it is never counted as the step's;
5. then the script is stopped: the wrapped iterator raises an exception derived
   from BaseException, so the script's ``finally`` blocks run, its ``except
   Exception`` handlers do not swallow it, and its DataLoader workers shut down.

A batch request that ends an epoch (StopIteration) is not a boundary: the step
goes on through what the script does between epochs, up to the next batch.
The Result is assembled as any other run's (:func:`perfsuite.harness.runner.assemble_result`),
with call sites in the script's own files. A script that raises, exits with a
failure status, ends before the run's steps, or never iterates a DataLoader
gets a :class:`perfsuite.errors.ScriptError` saying so (with the script's own
traceback, perfsuite's frames left out).
"""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.core.knobs import Knobs
from perfsuite.errors import PerfsuiteError, RunTimeout, ScriptError
from perfsuite.harness.batches import batch_samples
from perfsuite.harness.clock import StepClock as _StepClock
from perfsuite.harness.clock import clone_batch as _clone
from perfsuite.harness.clock import mode_depth as _mode_depth
from perfsuite.harness.clock import on_device as _on_device
from perfsuite.harness.clock import paired_ms
from perfsuite.harness.clock import synchronize as _synchronize
from perfsuite.harness.observation import ObservationPlan, period_steps_for
from perfsuite.harness.script_objects import Found, LossPick, find_objects, ignore_index_of
from perfsuite.harness.watchdog import Watchdog
from perfsuite.jobs.script import LoaderChoice, Script
from perfsuite.probes.base import Probe, RunContext, WindowTimings, unobserved

_PACKAGE = str(Path(__file__).resolve().parents[1]) + os.sep


class _Stop(BaseException):
    """Raised from the training loader's iterator once the run has its steps: it ends the script."""


_FETCH = object()  # a boundary that takes the next batch from the loader (not a speed-of-light copy)


def _script_frames(frame: Any) -> list[Any]:
    """The frames of the script's own call stack, from the innermost up to (not including) runpy."""
    out = []
    while frame is not None:
        path = frame.f_code.co_filename
        if _is_runpy(path) or path == runpy.__file__:
            break
        if not path.startswith(_PACKAGE):
            out.append(frame)
        frame = frame.f_back
    return out


@contextlib.contextmanager
def _suspended() -> Iterator[None]:
    """The loader's own fetch inside an observed step: every probe's modes off, and CUDA's sync debug mode
    (the sync probe's) too, so loading is never counted as the step's work."""
    import torch

    debug = torch.cuda.get_sync_debug_mode() if torch.cuda.is_available() else 0
    if debug:
        torch.cuda.set_sync_debug_mode(0)
    try:
        with unobserved():
            yield
    finally:
        if debug:
            torch.cuda.set_sync_debug_mode(debug)


class _Marked:
    """The training loader's iterator, as the script sees it: each batch it yields is a step boundary."""

    def __init__(self, it: Any, driver: _Driver) -> None:
        self._it, self._driver = it, driver

    def __iter__(self) -> _Marked:
        return self

    def __next__(self) -> Any:
        return self._driver.next_batch(self._it)

    def __len__(self) -> int:
        return len(self._it)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._it, name)


# Phases of a script run, in order.
SETUP, WARMUP, WINDOW, SOL, AFTER, DONE = "setup", "warm-up", "window", "speed of light", "observe", "done"


class _Driver:
    """The run's phases, driven from the training loader's batch requests (see the module docstring)."""

    def __init__(self, script: Script, spec: Any, probes: list[Probe]) -> None:
        self.script, self.spec, self.probes = script, spec, probes
        self.choice: LoaderChoice = script.choice
        self.loaders: list[Any] = []  # every DataLoader the script iterated, in order (identity)
        self.training: Any = None
        self.phase = SETUP
        self.batches = 0  # real batches handed to the script
        self.epochs = 0
        self.error: BaseException | None = None  # perfsuite's own failure while the script ran
        self.found = Found()
        self._pick: LossPick | None = None  # several candidate loss modules: chosen over the warm-up
        self.job: Any = None
        self.ctx: RunContext | None = None
        self.dog = Watchdog(spec.watchdog)
        self._dog_phase = contextlib.ExitStack()
        self._iter_s = 0.0  # time to create the current epoch's iterator, added to its first fetch
        self._new_epoch = False
        self._last = 0.0  # the previous boundary's time
        self._depth = _mode_depth()
        # the window
        self.clock: _StepClock | None = None
        self.fetch_s: list[float] = []
        self.step_start_s: list[float] = []  # each window step's start (its batch request), for the rank probe
        self.host_s: list[float] = []
        self.epoch_fetch_ms: list[float] = []
        self.delivered = 0
        self.last_batch: Any = None
        self.start = self.end = 0.0
        self.epochs_before = 0
        self.epochs_started = 0
        # the speed of light
        self.sol_ms: list[float] = []
        self._sol_k = 0
        self._resident: Any = None
        self._sol_starts: _StepClock | None = None
        self._sol_ends: _StepClock | None = None
        # after the window
        self.plan: ObservationPlan | None = None
        self._kind: str | None = None
        self._observing = contextlib.ExitStack()
        self._pending: str | None = None  # a boundary's clock mark made before its fetch: "begin" or "mark"

    # -- the loader hook ----------------------------------------------------------------------------------

    def wrap(self, loader: Any, make: Any) -> Any:
        """``DataLoader.__iter__`` while the script runs: the training loader's iterator comes back marked."""
        if self.training is None and self.phase == SETUP and any(known is loader for known in self.loaders):
            self.error = _no_chosen_loader(self, loader)  # an epoch has gone by without it: stop the script now
            raise _Stop
        if not any(known is loader for known in self.loaders):
            if self._same_as_training(loader):
                self.training = loader  # the script builds its loader again (each epoch): still the training one
            else:
                self.loaders.append(loader)
                if self.training is None and self.phase == SETUP and self._chosen(loader):
                    self.training = loader
        if loader is not self.training:
            return make()
        if self.phase == DONE:  # the script caught the stop and iterates again: stop it again, start no workers
            return _Marked(iter(()), self)
        t0 = time.perf_counter()
        it = make()
        self._iter_s, self._new_epoch = time.perf_counter() - t0, True
        self.epochs += 1
        return _Marked(it, self)

    def _same_as_training(self, loader: Any) -> bool:
        """A new DataLoader over the training loader's own dataset object: the same training loader, re-built."""
        dataset = getattr(self.training, "dataset", None)
        return dataset is not None and getattr(loader, "dataset", None) is dataset

    def _chosen(self, loader: Any) -> bool:
        matching = [known for known in self.loaders if self.choice.matches(known)]
        return len(matching) == self.choice.nth and matching[-1] is loader

    # -- one batch request ----------------------------------------------------------------------------------

    def next_batch(self, it: Any) -> Any:
        """The script asks its training loader for a batch: a boundary, if a batch comes (see the module docstring)."""
        if self.phase == DONE:
            raise _Stop
        t_req = time.perf_counter()
        try:
            served = self._before_fetch(t_req)
        except (_Stop, KeyboardInterrupt):
            raise
        except BaseException as exc:  # noqa: BLE001 - perfsuite's own failure: end the script, report it as ours
            self._fail(exc)
        if served is not _FETCH:
            return served
        try:
            with _suspended() if self._kind is not None else contextlib.nullcontext():
                batch = next(it)
        except StopIteration:
            self._undo()
            raise
        fetched = time.perf_counter() - t_req + (self._iter_s if self._new_epoch else 0.0)
        try:
            return self._after_fetch(batch, t_req, fetched)
        except (_Stop, KeyboardInterrupt):
            raise
        except BaseException as exc:  # noqa: BLE001 - as above
            self._fail(exc)

    def _fail(self, exc: BaseException) -> Any:
        self.error, self.phase = exc, DONE
        raise _Stop from None

    def _before_fetch(self, t_req: float) -> Any:
        """The boundary's work that comes before the fetch: a speed-of-light batch is served from here;
        clock marks made here for a boundary are dropped again if the request ends an epoch instead."""
        if self.phase == SETUP:
            self._setup()
        if self.phase == WINDOW and self.batches == self.spec.warmup + self.spec.steps:
            self._end_window(t_req)
        if self.phase == SOL:
            served = self._sol_request()
            if served is not _FETCH:
                return served
        assert self.clock is not None
        if self.phase == WARMUP and self.batches == self.spec.warmup:
            _synchronize(self.job.device)
            self.start = time.perf_counter()
            self.clock.mark()
            self._pending = "begin"
        elif self.phase == WINDOW:
            self.clock.mark()
            self._pending = "mark"
        return _FETCH

    def _undo(self) -> None:
        """The request ended an epoch instead of giving a batch: no boundary, the step goes on."""
        if self._pending is not None and self.clock is not None:
            self.clock.discard_last()
        self._pending = None

    def _after_fetch(self, batch: Any, t_req: float, fetched: float) -> Any:
        """A boundary: the previous step ended at ``t_req``; ``batch`` starts the next one."""
        new_epoch, self._new_epoch = self._new_epoch, False
        pending, self._pending = self._pending, None
        previous, self._last = self._last, t_req
        if pending == "begin":
            self._begin_window()
            self.epochs_before = self.epochs - (1 if new_epoch else 0)
        elif pending == "mark":
            self.host_s.append(t_req - previous)
        elif self.phase == WARMUP and self.batches > 0:
            self.dog.record_step(t_req - previous)
        if self.phase == WINDOW:
            self.fetch_s.append(fetched)
            self.step_start_s.append(t_req)
            if new_epoch:
                self.epoch_fetch_ms.append(fetched * 1e3)
            self.delivered += batch_samples(batch)
            self.last_batch = batch
        elif self.phase == AFTER:
            self._close_step()
            assert self.plan is not None
            self._kind = self.plan.next_kind()
            if self._kind is None:
                self._finish()
                raise _Stop
            for watcher in self.plan.watchers(self._kind):
                self._observing.enter_context(watcher)
        self.batches += 1
        return batch

    # -- phases ----------------------------------------------------------------------------------------------

    def _setup(self) -> None:
        """The first batch: find what the probes hook, bind the job, set the probes up, start the warm-up."""
        from perfsuite.jobs.contract import Job, bind
        from perfsuite.jobs.workload import Scale

        frames = _script_frames(sys._getframe(1))
        self.found = find_objects(frames, self.script.criterion)
        criterion = self.found.criterion
        if criterion is None and len(self.found.losses) > 1:
            self._pick = LossPick(self.found, named=self.script.criterion is not None)
        ignore = self.script.ignore_index
        if ignore is None and criterion is not None:
            ignore = ignore_index_of(criterion)
        job = Job(
            step=_not_called,
            loader=self.training,
            model=self.found.model,
            optimizer=self.found.optimizer,
            criterion=criterion,
            num_classes=self.script.num_classes,
            ignore_index=ignore,
            target_kind=self.script.target_kind,
            flip_pairs=self.script.flip_pairs,
            name=self.script.label,
        )
        self.job = bind(job)
        scale = Scale(self.spec.scale, (0, 0), num_samples=0, batch_size=self.job.batch_size)
        device = str(self.job.device)
        self.ctx = RunContext(
            self.job.info,
            scale,
            Knobs(device=device),
            device,
            self.job,
            self.job.batch_size,
            self.spec.observe_steps,
            self.job,
        )
        self.clock = _StepClock(self.job.device)
        for probe in self.probes:
            probe.setup(self.ctx)
        self.phase = WARMUP
        self._show("warm-up", 0, self.spec.warmup)
        self._dog_phase.enter_context(self.dog.phase("warm-up"))

    def _show(self, phase: str, done: int, total: int) -> None:
        """The progress display (RunSpec.progress), at phase boundaries only: never inside the measured window."""
        if self.spec.progress is not None:
            self.spec.progress(phase, done, total)

    def _describe_loader(self) -> str:
        loader = self.training
        dataset = getattr(loader, "dataset", None)
        others = len(self.loaders) - 1
        return (
            f"training loader over {type(dataset).__name__} (batch {getattr(loader, 'batch_size', '?')}, "
            f"{getattr(loader, 'num_workers', '?')} workers)"
            + (f"; {others} other DataLoader(s) iterated, left alone" if others > 0 else "")
        )

    def _begin_window(self) -> None:
        self._dog_phase.close()
        if self._pick is not None:
            self._use_criterion(self._pick.choose())
        self._show("window", 0, self.spec.steps)  # before the probes start: the window is not redrawn
        self.phase = WINDOW
        for probe in self.probes:
            probe.start()
        if _mode_depth() != self._depth:
            raise PerfsuiteError(
                "a torch function or dispatch mode is active where the measured window starts (the script's own, "
                "or a probe's); perfsuite measures the window with none"
            )
        self._dog_phase.enter_context(self.dog.phase("window", steps=self.spec.steps))

    def _use_criterion(self, criterion: Any) -> None:
        """The loss module the warm-up showed receiving the labels becomes the job's criterion."""
        self._pick = None
        self.job.job.criterion = criterion
        if criterion is not None and self.script.ignore_index is None:
            self.job.job.ignore_index = ignore_index_of(criterion)
            if self.ctx is not None:
                info: Any = self.ctx.workload  # the job's JobInfo, which the label probe reads
                info.ignore_index = self.job.job.ignore_index

    def _end_window(self, t_req: float) -> None:
        """The last window step ended: close the window, then the speed of light (or straight to observing)."""
        assert self.clock is not None
        self.clock.mark()
        self.host_s.append(t_req - self._last)
        _synchronize(self.job.device)
        self.end = time.perf_counter()
        self._dog_phase.close()
        for probe in self.probes:
            probe.stop()
        self._show("window", self.spec.steps, self.spec.steps)
        self.epochs_started = self.epochs - self.epochs_before
        if self.spec.sol_steps > 0 and self.last_batch is not None:
            self.phase = SOL
            self._resident = _on_device(self.last_batch, self.job.device)
            self._sol_starts, self._sol_ends = _StepClock(self.job.device), _StepClock(self.job.device)
            self._show("speed of light", 0, self.spec.sol_steps)
            self._dog_phase.enter_context(self.dog.phase("speed of light", steps=self.spec.sol_steps + 1))
        else:
            self._start_observing()

    def _sol_request(self) -> Any:
        """A speed-of-light boundary: the loop gets a fresh copy of the cached device batch (one untimed step
        first, as :func:`perfsuite.harness.runner.speed_of_light`); after the last, observing starts."""
        assert self._sol_starts is not None and self._sol_ends is not None
        k, self._sol_k = self._sol_k, self._sol_k + 1
        if k >= 2:
            self._sol_ends.mark()
        if k == 1 or k > self.spec.sol_steps:
            _synchronize(self.job.device)
        if k > self.spec.sol_steps:
            self.sol_ms = paired_ms(self._sol_starts, self._sol_ends)
            self._dog_phase.close()
            self._start_observing()
            return _FETCH
        fresh = _clone(self._resident)
        if k >= 1:
            self._sol_starts.mark()
        return fresh

    def _start_observing(self) -> None:
        self.phase = AFTER
        self._show("observe", 0, self.spec.observe_steps)
        self.plan = ObservationPlan(
            self.spec.observe_steps, period_steps_for(self.spec.period_steps, self.job), self.probes
        )
        self._dog_phase.enter_context(self.dog.phase("observe", steps=self.plan.most_steps))

    def _close_step(self) -> None:
        if self._kind is not None:
            kind, self._kind = self._kind, None
            self._observing.close()
            assert self.plan is not None
            self.plan.record(kind)

    def _finish(self) -> None:
        _synchronize(self.job.device)
        self._dog_phase.close()
        self.phase = DONE

    def close(self) -> None:
        """However the script ended: leave no mode, hook or deadline behind."""
        self._kind = None
        if self._pick is not None:
            self._pick.close()
        try:
            self._observing.close()
        finally:
            self._dog_phase.close()

    # -- what came of it ----------------------------------------------------------------------------------------

    def timings(self) -> WindowTimings:
        assert self.clock is not None
        return WindowTimings(
            start_s=self.start,
            end_s=self.end,
            steps=self.spec.steps,
            batch_size=self.job.batch_size,
            fetch_s=self.fetch_s,
            step_ms=self.clock.durations_ms(),
            epochs_started=self.epochs_started,
            samples=self.delivered,
            host_step_s=self.host_s,
            epoch_fetch_ms=self.epoch_fetch_ms,
            step_start_s=self.step_start_s,
        )


def _not_called(batch: Any) -> Any:
    raise PerfsuiteError("a script's step is its own loop: perfsuite never calls a Job step for it")


@contextlib.contextmanager
def _hooked_loaders(driver: _Driver) -> Iterator[None]:
    """``DataLoader.__iter__`` routes through the driver while the script runs (the class, not a global hook:
    nothing else in torch sees it, and it is put back however the script ends)."""
    from torch.utils.data import DataLoader

    original = DataLoader.__iter__

    def marked_iter(loader: Any) -> Any:
        return driver.wrap(loader, lambda: original(loader))

    DataLoader.__iter__ = marked_iter  # type: ignore[method-assign]
    try:
        yield
    finally:
        DataLoader.__iter__ = original  # type: ignore[method-assign]


@contextlib.contextmanager
def _as_main(script: Script) -> Iterator[None]:
    """``sys.argv``, ``sys.path`` and ``sys.modules`` as ``python train.py ARGS`` would have them, then as they were.

    Modules the script imported from its own directory are forgotten afterwards, so a second script with a
    ``model.py`` of its own gets its own.
    """
    home = script.path.parent if script.path is not None else Path.cwd()
    argv, path, modules = sys.argv[:], sys.path[:], set(sys.modules)
    sys.argv = [str(script.path) if script.path is not None else str(script.module), *script.argv[1:]]
    sys.path.insert(0, str(home))
    try:
        yield
    finally:
        sys.argv, sys.path[:] = argv, path
        root = str(home.resolve()) + os.sep
        for name in set(sys.modules) - modules:
            where = getattr(sys.modules.get(name), "__file__", None) or ""
            if where and os.path.abspath(where).startswith(root):
                del sys.modules[name]


def _is_runpy(filename: str) -> bool:
    return filename == "<frozen runpy>" or os.path.basename(filename) == "runpy.py"


def _trimmed_traceback(exc: BaseException) -> str:
    """The script's traceback as Python would print it for ``python train.py``: perfsuite's and runpy's frames out."""
    te = traceback.TracebackException.from_exception(exc)
    todo = [te]
    while todo:
        current = todo.pop()
        kept = [f for f in current.stack if not f.filename.startswith(_PACKAGE) and not _is_runpy(f.filename)]
        current.stack = traceback.StackSummary.from_list(kept)
        todo += [c for c in (current.__cause__, current.__context__) if c is not None]
    return "".join(te.format())


def _run(script: Script) -> None:
    if script.module is not None:
        runpy.run_module(script.module, run_name="__main__", alter_sys=True)
    else:
        assert script.path is not None
        runpy.run_path(str(script.path), run_name="__main__")


@dataclass
class ScriptRun:
    """What a script's phases recorded, for :func:`perfsuite.harness.runner.assemble_result`."""

    job: Any
    timings: WindowTimings
    sol_ms: list[float]
    last_batch: Any
    plan: ObservationPlan


def drive_script(script: Script, spec: Any, probes: Sequence[Probe]) -> ScriptRun:
    """Run ``script`` unchanged under the run's phases (see the module docstring) and return what they recorded.

    ``spec`` is the :class:`perfsuite.harness.runner.RunSpec` (steps, warm-up, observed steps, watchdog).
    """
    if spec.job_knobs:
        raise ScriptError(
            f"knobs {', '.join(sorted(spec.job_knobs))} asked of script {script.label!r}, but a script builds its own "
            "DataLoader and step: set them in the script (or its command-line arguments) and drop them here"
        )
    if spec.mutate is not None:
        raise ScriptError(f"mutate= cannot apply to script {script.label!r}: perfsuite runs the script as it is")
    driver = _Driver(script, spec, list(probes))
    failure: BaseException | None = None
    try:
        with _hooked_loaders(driver), _as_main(script):
            try:
                _run(script)
            except _Stop:
                pass
            except SystemExit as exc:
                if exc.code not in (None, 0):
                    failure = ScriptError(
                        f"{script.command()} exited with status {exc.code!r} after {driver.batches} training batch(es)"
                    )
            except (KeyboardInterrupt, RunTimeout):
                raise
            except Exception as exc:  # noqa: BLE001 - the script's own failure, shown as the script's
                failure = ScriptError(
                    f"{script.command()} raised {type(exc).__name__}: {exc} (its traceback is above; after "
                    f"{driver.batches} training batch(es), in the {driver.phase} phase)",
                    _trimmed_traceback(exc),
                )
    finally:
        driver.close()
        if driver.phase != DONE:
            for probe in probes:
                with contextlib.suppress(Exception):
                    probe.stop()
        for probe in probes:
            probe.finish()
    if driver.error is not None:
        raise driver.error
    timed_out = getattr(driver.dog, "_pending", None)  # off the main thread the deadline lands as an exception
    if isinstance(timed_out, RunTimeout):
        raise timed_out
    if failure is not None:
        raise failure
    if driver.phase != DONE or driver.plan is None:
        raise _ended_early(script, spec, driver)
    driver.job.notes.append(
        f"perfsuite exec {script.command()}: {driver._describe_loader()}; {driver.found.describe()}"
    )
    return ScriptRun(driver.job, driver.timings(), driver.sol_ms, driver.last_batch, driver.plan)


def _no_chosen_loader(driver: _Driver, again: Any) -> ScriptError:
    """``--loader 9`` when the script iterates a loader it iterated before, with no 9th seen: its epoch loop has
    shown every DataLoader it uses, so the run stops here rather than after the script's whole training."""
    seen = ", ".join(f"{type(ld).__name__} over {type(getattr(ld, 'dataset', None)).__name__}" for ld in driver.loaders)
    number = next(i for i, ld in enumerate(driver.loaders, 1) if ld is again)
    return ScriptError(
        f"loader={str(driver.script.loader)!r} matched none of the DataLoaders {driver.script.command()} iterated "
        f"({seen}) before it iterated DataLoader number {number} again (a new epoch); name one of those by the "
        "class of its dataset or loader, or by its number"
    )


def _ended_early(script: Script, spec: Any, driver: _Driver) -> ScriptError:
    """What to say when the script returned before the run had its steps."""
    if driver.training is None:
        if not driver.loaders:
            return ScriptError(
                f"{script.command()} ended without iterating a torch DataLoader, and perfsuite exec marks the steps "
                "by the training DataLoader's batches. A loop over something else (a generator, a list of tensors, "
                "a DataLoader subclass whose __iter__ does not call DataLoader.__iter__) cannot be measured this way: "
                "wrap the training step in a perfsuite.Job instead (docs/own_job.md)"
            )
        seen = ", ".join(
            f"{type(ld).__name__} over {type(getattr(ld, 'dataset', None)).__name__}" for ld in driver.loaders
        )
        return ScriptError(
            f"loader={script.loader!r} matched none of the DataLoaders {script.command()} iterated ({seen}); "
            "name one by the class of its dataset or loader, or leave loader out to take the first"
        )
    plan = driver.plan
    needed = spec.warmup + spec.steps + (plan.period_steps + plan.observe_steps if plan is not None else 0)
    if plan is None:
        needed += spec.observe_steps
    return ScriptError(
        f"{script.command()} ended after {driver.batches} training batch(es) ({driver.epochs} epoch(s)), in the "
        f"{driver.phase} phase; this run needs at least {needed} (warm-up {spec.warmup}, window {spec.steps}, then "
        f"the period scan and {spec.observe_steps} observed step(s)) plus {spec.sol_steps + 1} loop iterations fed a "
        "cached batch: give the script more epochs or data (its own arguments), or ask for fewer steps "
        "(--steps, --warmup, --period-steps)"
    )
